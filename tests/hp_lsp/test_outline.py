"""The tolerant line scanner: key paths, ranges and enclosing sections, on valid and half-typed YAML."""

from __future__ import annotations

from engine.positions import Position, Range
from hp_lsp.outline import enclosing, entry_at, scan

TEXT = """\
# a comment
model:
  name: "🦙 llama"  # trailing
  config_overrides:
    num_hidden_layers: 80
training:
  global_batch_size: 128
accelerator:
  tp_size: 4
  pp_
  layers: {"0-9": full}
  note: |
    tp_size: not a key
  pipeline_scheduler: 1f1b
parallelism:
  tp: [1, 2, 4]
  pp:
    - 1
    - 2
"""


def test_paths_and_ranges() -> None:
    entries = scan(TEXT)
    paths = [e.dotted for e in entries]
    assert paths == ["model", "model.name", "model.config_overrides", "model.config_overrides.num_hidden_layers",
                     "training", "training.global_batch_size", "accelerator", "accelerator.tp_size",
                     "accelerator.layers", "accelerator.note", "accelerator.pipeline_scheduler",
                     "parallelism", "parallelism.tp", "parallelism.pp"]
    by = {e.dotted: e for e in entries}
    assert by["model.name"].value == '"🦙 llama"'
    assert by["accelerator.tp_size"].key_range == Range.of(8, 2, 8, 9)
    assert by["accelerator.tp_size"].value_range == Range.of(8, 11, 8, 12)
    assert by["model"].block.end.line == 4
    assert by["parallelism.pp"].block.end.line == 18
    assert by["accelerator"].block.end.line == 13


def test_entry_at() -> None:
    entries = scan(TEXT)
    e = entry_at(entries, Position(8, 11))
    assert e is not None and e.dotted == "accelerator.tp_size"
    assert entry_at(entries, Position(0, 3)) is None


def test_enclosing_for_half_typed_lines() -> None:
    entries = scan(TEXT)
    assert enclosing(entries, 9, 2) == ("accelerator",)
    assert enclosing(entries, 5, 4) == ("model", "config_overrides")
    assert enclosing(entries, 6, 2) == ("training",)
    assert enclosing(entries, 14, 0) == ()


def test_garbage_gives_no_keys_or_only_the_keys_it_can_see() -> None:
    """Lines that are not `key:` lines (sequences, flow mappings, tab-indented or quoted keys) give no entry;
    an unclosed flow value still yields the keys typed so far, with ranges inside the text."""
    for text in ["", ":::", "- a\n- b", "{a: 1}", "\t\tkey: 1", "'unterminated: 1"]:
        assert scan(text) == [], text
    half = scan("a: [\n  b: c")
    assert [(e.dotted, e.value) for e in half] == [("a", "["), ("a.b", "c")]
    assert half[1].key_range == Range.of(1, 2, 1, 3)
