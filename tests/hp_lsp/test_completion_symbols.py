"""Completion of keys per section and enum values; document symbols per section."""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from hp_lsp.features.completion import complete
from hp_lsp.features.symbols import document_symbols
from hp_lsp.outline import scan

TRAIN = "model:\n  name: x\naccelerator:\n  tp_size: 4\n  pp\n  pipeline_scheduler: \n"
SEARCH = "train_yaml: ./train.yaml\ncluster:\n  device_type: \nparallelism:\n  tp: auto\n  \n"


def labels(items: list[types.CompletionItem]) -> list[str]:
    return [i.label for i in items]


def test_keys_of_the_enclosing_section_without_present_ones() -> None:
    lines = TRAIN.splitlines()
    got = labels(complete(scan(TRAIN), lines[4], 4, 4))
    assert "pp_size" in got and "cp_size" in got and "tp_size" not in got
    assert got.index("pp_size") < len(got)
    top = labels(complete(scan(TRAIN), "", 6, 0))
    assert {"training", "fsdp_config", "activation_checkpoint"} <= set(top) and "accelerator" not in top


def test_enum_values() -> None:
    lines = TRAIN.splitlines()
    got = labels(complete(scan(TRAIN), lines[5], 5, len(lines[5])))
    assert {"1f1b", "interleaved_1f1b"} <= set(got) and "ring" not in got
    sl = SEARCH.splitlines()
    devices = labels(complete(scan(SEARCH), sl[2], 2, len(sl[2])))
    assert "H100" in devices and "B200" in devices


def test_search_config_dimensions() -> None:
    got = labels(complete(scan(SEARCH), "  ", 5, 2))
    assert "pp" in got and "micro_batch_size" in got and "tp" not in got


def test_items_never_use_snippets() -> None:
    for item in complete(scan(TRAIN), "  pp", 4, 4):
        assert item.insert_text_format in (None, types.InsertTextFormat.PlainText)


def test_document_symbols_nest_sections() -> None:
    lines = TRAIN.splitlines(keepends=True)
    syms = document_symbols(scan(TRAIN), lines, PositionCodec())
    assert [s.name for s in syms] == ["model", "accelerator"]
    acc = syms[1]
    assert acc.kind == types.SymbolKind.Namespace
    assert [c.name for c in acc.children or []] == ["tp_size", "pipeline_scheduler"]
    assert acc.range.start.line == 2 and acc.range.end.line == 5
