"""`hp-plan search` on the bundled example: the table, the JSON of docs/formats.md §3, exit codes, refusals."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from engine.check import check_file
from engine.cli import build_parser
from engine.cli.search import run
from engine.cost import estimate

ROOT = Path(__file__).resolve().parents[3]
LLAMA = ROOT / "examples" / "llama3-70b" / "search.yaml"


def _run(argv: list[str]) -> tuple[int, str]:
    args = build_parser().parse_args(["search", *argv])
    out = io.StringIO()
    code = run(args, stdout=out, stderr=io.StringIO())
    return code, out.getvalue()


@pytest.fixture(scope="module")
def llama_json() -> dict:
    code, text = _run([str(LLAMA), "--json", "--top", "3"])
    assert code == 0
    return json.loads(text)


def test_json_has_the_formats_keys_and_the_best_is_the_estimate(llama_json: dict) -> None:
    doc = llama_json
    for key in ("best", "top", "evaluated", "feasible", "elapsed_s", "dimensions", "diagnostics"):
        assert key in doc
    assert len(doc["top"]) == 3 and doc["best"] == doc["top"][0]
    assert doc["dimensions"]["tp"] == "searched over [1, 2, 4, 8]"
    assert doc["evaluated"] >= doc["feasible"] > 0
    best = doc["best"]
    assert best["fits"] and best["peak_memory_gib"] <= best["budget_gib"] == 76.0
    # The same digits as pricing the strategy on its own (the path `hp-plan estimate` takes).
    cfg = check_file(str(LLAMA)).config
    assert cfg is not None and cfg.model is not None and cfg.cluster is not None
    from engine.search import search

    res = search(cfg, top=1)
    assert res.best is not None
    again = estimate(cfg.model, cfg.cluster, cfg.run, res.best.strategy, 76.0)
    assert again.to_json() == best == res.best.to_json()
    st = best["strategy"]
    assert st["dp"] * st["tp"] * st["pp"] * st["cp"] == 1024
    assert st["global_batch_size"] == 512


def test_terminal_table(tmp_path: Path) -> None:
    code, text = _run([str(LLAMA), "--top", "4"])
    assert code == 0
    assert "peak GiB" in text and "tokens/s" in text and "MFU" in text
    assert "parallelism resolved:" in text and "tp: searched over [1, 2, 4, 8]" in text
    assert "evaluated" in text and "over the budget" in text
    assert "\n 4  " in text or "\n4  " in text


def test_nothing_fits_exits_1_with_the_refusal() -> None:
    code, text = _run([str(LLAMA), "--json", "--memory-gb", "2"])
    assert code == 1
    doc = json.loads(text)
    assert doc["best"] is None
    assert "HP602" in [d["code"] for d in doc["diagnostics"]]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_and_only_when_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.cli.search as cli

    args = build_parser().parse_args(["search", str(LLAMA), "--top", "1"])
    err = _Tty()
    monkeypatch.setattr(cli, "PROGRESS_AFTER_S", 0.0)
    assert run(args, stdout=io.StringIO(), stderr=err) == 0
    assert "searching [" in err.getvalue() and "100%" in err.getvalue()
    quiet = io.StringIO()  # not a terminal: no bar
    assert run(args, stdout=io.StringIO(), stderr=quiet) == 0
    assert quiet.getvalue() == ""


def test_advice_on_the_train_yaml_a_search_config_references() -> None:
    from engine.search import compare_stated, search

    cfg = check_file(str(LLAMA)).config
    assert cfg is not None
    res = search(cfg, top=1)
    advice = compare_stated(cfg, res).diagnostics
    assert len(advice) == 1 and advice[0].code in ("HP610", "HP611")
    d = advice[0]
    train = str(LLAMA.parent / "train.yaml")
    assert d.file == train and d.path == "accelerator.tp_size"
    assert d.range == check_file(train).config.locations["accelerator.tp_size"].value  # type: ignore[union-attr]
    assert d.data["strategy"] == res.best.strategy.to_json()  # type: ignore[union-attr]
