"""engine.search.stated: the train.yaml a search config states is read on the search config's cluster, and a
budget the search config imposes is a budget, not a statement of the device's memory size."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.check import check_file
from engine.search import stated_source

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llama3-70b"


@pytest.mark.parametrize("limit", [76, 94, 96])
def test_a_search_budget_never_turns_the_device_into_another_part(tmp_path: Path, limit: int) -> None:
    # 94 and 96 GB are the sizes that name the H100 NVL and the H100 96 GB when a file states a device's memory
    # (engine.catalog.devices.memory_variant); as a search config's budget on an 80 GB H100 they name nothing.
    shutil.copy(EXAMPLE / "train.yaml", tmp_path / "train.yaml")
    text = (EXAMPLE / "search.yaml").read_text().replace("device_memory_gb: 80", "device_memory_gb: 120")
    text = text.replace("memory_limit_gb: 76", f"memory_limit_gb: {limit}")
    (tmp_path / "search.yaml").write_text(text)
    config = check_file(str(tmp_path / "search.yaml")).config
    assert config is not None and config.cluster is not None
    source = stated_source(config)
    assert source is not None and source.cluster is not None
    assert source.cluster.device.name == config.cluster.device.name == "H100"
    assert source.budget_gib == pytest.approx(limit)


def test_a_train_yaml_is_priced_and_advised_as_its_search_config_prices_it(tmp_path: Path) -> None:
    """The train.yaml a Megatron search config references: checked on that cluster alone it was priced as
    HyperParallel runs it (11.3 s a step against the search's 8.6 s), so the editor's advice on it read "3.02×
    faster" where `hp-plan search` said 2.30×. Priced as searched, its estimate is the search's, and so is the
    advice."""
    from engine.cost import estimate_config
    from engine.search import compare_stated, priced_as_searched, search, stated_estimate, stated_overrides

    shutil.copy(EXAMPLE / "train.yaml", tmp_path / "train.yaml")
    (tmp_path / "search.yaml").write_text((EXAMPLE / "search.yaml").read_text()
                                          + "\nestimator: {framework: megatron}\n")
    space = check_file(str(tmp_path / "search.yaml"))
    assert space.config is not None and space.config.run.framework == "megatron"
    alone = check_file(str(tmp_path / "train.yaml"), overrides=stated_overrides(space.config))
    assert alone.config is not None and alone.config.run.framework == "megatron"  # the stack's own rules
    loaded = priced_as_searched(alone, space)
    assert loaded.config is not None and loaded.config.run == space.config.run
    priced, _ = estimate_config(loaded.config)
    searched = stated_estimate(space.config)
    assert priced is not None and searched is not None and priced.framework == "megatron"
    assert priced.step_time_s == searched.step_time_s and priced.peak_memory_gib == searched.peak_memory_gib
    result = search(space.config)
    in_editor = compare_stated(loaded.config, result, priced=priced)
    assert in_editor.estimate is priced  # priced once: the check's price is the comparison's
    by_cli = compare_stated(space.config, result)
    assert [(d.code, d.message) for d in in_editor.diagnostics] == [(d.code, d.message) for d in by_cli.diagnostics]
    assert [d.code for d in by_cli.diagnostics] == ["HP611"]
    # A search config with errors gives the train.yaml nothing: it is priced on its own.
    broken = check_file(str(tmp_path / "search.yaml"), text=(tmp_path / "search.yaml").read_text()
                        + "parallelism: {tp: [3]}\n")
    assert any(d.is_error for d in broken.diagnostics) and priced_as_searched(alone, broken) is alone
