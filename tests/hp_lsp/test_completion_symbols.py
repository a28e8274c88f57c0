"""Completion of keys per section and enum values; document symbols per section."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from engine.check import check_file
from engine.config.schema import SEARCH as SEARCH_SCHEMA
from engine.config.schema import TRAIN_AUTOMODELS, TRAIN_LEGACY, Section
from hp_lsp.features.completion import BOOLEAN_KEYS, complete
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


def _values(text: str, needle: str) -> list[str]:
    """Labels offered for the value after `needle` (a `key: ` in `text`)."""
    lines = text.splitlines()
    n = next(i for i, line in enumerate(lines) if needle in line)
    col = lines[n].index(needle) + len(needle)
    return labels(complete(scan(text), lines[n], n, col))


def test_boolean_values_for_boolean_keys() -> None:
    train = ("model:\n  name: x\n  config_overrides:\n    tie_word_embeddings: \naccelerator:\n  tp_size: 2\n"
             "  sequence_parallel: \n  tp_comm_overlap: \n  overlap_grad_reduce: \n  overlap_param_gather: \n"
             "fsdp_config:\n  reshard_after_forward: \n")
    for key in ("tie_word_embeddings", "sequence_parallel", "tp_comm_overlap", "overlap_grad_reduce",
                "overlap_param_gather", "reshard_after_forward"):
        assert _values(train, f"{key}: ") == ["true", "false"], key
    assert "true" not in _values(train, "tp_size: ")  # an integer key gets no booleans
    search = ("train_yaml: ./train.yaml\ntp_comm_overlap: \nmodel:\n  use_flash_attention: \n"
              "  use_seq_parallel: \nparallelism:\n  sequence_parallel: \n  tp: \n")
    assert _values(search, "tp_comm_overlap: ") == ["true", "false"]
    assert _values(search, "use_flash_attention: ") == ["true", "false"]
    assert _values(search, "use_seq_parallel: ") == ["true", "false"]
    assert _values(search, "sequence_parallel: ") == ["auto", "true", "false"]
    assert _values(search, "tp: ") == ["auto"]


def _every_key(section: Section, indent: int = 0) -> list[str]:
    """YAML lines setting every key the schema lists to 7 (neither a boolean nor 0/1)."""
    out = [" " * indent + f"{k}: 7" for k in sorted(section.read | section.known)
           if k not in section.children and not k.startswith("_") and k != "train_yaml"]
    for name, child in section.children.items():
        out += [" " * indent + f"{name}:", *_every_key(child, indent + 2)]
    return out


def test_boolean_keys_are_the_ones_the_readers_read_as_booleans(tmp_path: Path) -> None:
    """The schema records no types: ask the readers. Every key of every file kind set to 7; the keys the
    readers refuse with HP104 ("must be true or false") are exactly the ones completion offers booleans for."""
    refused: set[str] = set()
    for name, schema in (("train.yaml", TRAIN_AUTOMODELS), ("legacy_train.yaml", TRAIN_LEGACY),
                         ("search.yaml", SEARCH_SCHEMA)):
        text = "\n".join(_every_key(schema)) + "\n"
        loaded = check_file(str(tmp_path / name), text=text)
        refused |= {str(d.path).rsplit(".", 1)[-1] for d in loaded.diagnostics if d.code == "HP104"}
    assert {"tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather", "sequence_parallel"} <= refused
    assert refused == BOOLEAN_KEYS


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
