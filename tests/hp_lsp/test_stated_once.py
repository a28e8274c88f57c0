"""One rule for "the train.yaml a search config states" (engine.search.stated, D-007): a search job checks
that train.yaml once and prices the stated plan once, and the language server shows the numbers `hp-plan
search` prints for it."""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import engine.check
import engine.cost
import hp_lsp.search_job
from engine.cli import main
from engine.search import stated_overrides
from hp_lsp.analysis import cluster_from_search_config
from hp_lsp.search_job import SearchRequest, run_search
from tests.support.lsp_services import EXAMPLES, never, no_progress

SEARCH_CONFIGS = [EXAMPLES / "llama3-70b" / "search.yaml", EXAMPLES / "deepseek-v3" / "search.yaml"]


def _spy(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: list[tuple[Any, ...]],
         key: Callable[..., Any]) -> None:
    real = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(key(*args, **kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)


@pytest.mark.parametrize("search", SEARCH_CONFIGS, ids=lambda p: p.parent.name)
def test_a_search_job_checks_the_train_yaml_once_and_prices_the_stated_plan_once(
        search: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    train = str(search.parent / "train.yaml")
    checked: list[tuple[Any, ...]] = []
    priced: list[tuple[Any, ...]] = []
    for owner in (engine.check, hp_lsp.search_job):  # the job's own import and the engine's local one
        _spy(monkeypatch, owner, "check_file", checked, lambda path, **_: (str(path),))
    _spy(monkeypatch, engine.cost, "estimate", priced, lambda model, cluster, run, strategy, *a, **k: (strategy,))
    _spy(monkeypatch, engine.cost, "estimate_config", priced, lambda config, *a, **k: (config.stated,))

    out = run_search(SearchRequest(str(search), None, None), progress=no_progress, cancelled=never)

    assert out.stated is not None and out.result is not None and out.result.best is not None
    # One check of the train.yaml as a file, by the engine's rule (before: the job's own, under other overrides
    # than the CLI's); the search config's own check reads it as its source besides, as `hp-plan search` does.
    assert Counter(p for (p,) in checked)[train] == 1
    assert Counter(s for (s,) in priced)[out.stated.strategy] == 1  # was 2: estimate_config and stated_estimate


@pytest.mark.parametrize("search", SEARCH_CONFIGS, ids=lambda p: p.parent.name)
def test_the_server_states_the_numbers_the_cli_prints(search: Path) -> None:
    out = run_search(SearchRequest(str(search), None, None), progress=no_progress, cancelled=never)
    buf = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(buf):
        assert main(["search", str(search), "--json"]) == 0
    cli = {d["code"]: d for d in json.loads(buf.getvalue())["diagnostics"]}
    server = {d.code: d for d in out.diagnostics}
    assert "HP611" in cli and cli["HP611"]["message"] == server["HP611"].message
    stated = out.stated
    assert stated is not None
    # The hover's "stated" column is the plan HP611 compares with, to the digit.
    assert f"{stated.tokens_per_s:,.0f} tokens/s ({stated.step_time_s:.3g} s per step)" in cli["HP611"]["message"]


def test_the_cluster_a_search_config_gives_its_train_yaml_is_the_engine_rule() -> None:
    from engine.check import check_file

    search = SEARCH_CONFIGS[0]
    config = check_file(str(search)).config
    assert config is not None and config.cluster is not None
    ov = cluster_from_search_config(str(search))
    assert ov == stated_overrides(config)
    assert ov is not None and ov.explicit and ov.memory_gb == config.budget_gib  # the search's budget (76 GiB)
    assert ov.devices == config.cluster.world_size == 1024
