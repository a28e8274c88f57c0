"""A file starting with a UTF-8 BOM (D-003) was refused by the strategy writer and every quick
fix as "not valid YAML". Now the edits are computed after the BOM, keep it, and land on the original text."""

from __future__ import annotations

from pathlib import Path

from engine.edit import apply_edits, rename_key, set_value, strategy_edits, widen_list
from engine.specs import Strategy
from tests.engine.edit.helpers import check_edits

ROOT = Path(__file__).resolve().parents[3]
TRAIN = "\ufeff" + (ROOT / "examples" / "llama3-70b" / "train.yaml").read_text()
SEARCH = "\ufeff" + (ROOT / "examples" / "llama3-70b" / "search.yaml").read_text()


def test_strategy_rewrite_keeps_the_bom() -> None:
    res = strategy_edits(TRAIN, Strategy(dp=2, dp_shard=2, tp=4, pp=2, micro_batch_size=1, micro_batch_num=8))
    check_edits(TRAIN, res)
    assert res.new_text.startswith("\ufeff#") and "tp_size: 4" in res.new_text


def test_quick_fixes_work_after_a_bom() -> None:
    for res in (set_value(TRAIN, "accelerator.tp_size", 4), rename_key(TRAIN.replace("tp_size", "tp_sise"),
                "accelerator.tp_sise", "tp_size"), widen_list(SEARCH, "parallelism.tp", [16])):
        assert res.ok, res.error
        assert res.new_text.startswith("\ufeff")


def test_an_edit_on_the_first_line_moves_past_the_bom() -> None:
    text = "\ufefftraining: {global_batch_size: 512}\n"
    res = set_value(text, "training.global_batch_size", 256)
    assert res.ok and apply_edits(text, res.edits) == "\ufefftraining: {global_batch_size: 256}\n"
    assert res.edits[0].range.start.character == text.index("512")
