"""End-of-line comments after a rewritten value (docs/editing.md): kept, and marked when they state the old
value, so they do not lie about the new one; a rewrite back removes the mark."""

from __future__ import annotations

from engine.edit import set_value, widen_list

TEXT = """accelerator:
  tp_size: 4          # within a node
  pp_size: 4
  pp_interleave_num: 5          # 80 layers / (4 stages x 5 chunks) = 4 layers per chunk
  scheduler: 1f1b  # plain 1f1b, no interleaving
  dtype: 'bf16'   # bf16 everywhere
parallelism:
  tp: [1, 2, 4]   # keep TP inside one node
"""


def line(text: str, key: str) -> str:
    return next(ln for ln in text.splitlines() if ln.strip().startswith(f"{key}:"))


def test_comment_stating_the_old_value_is_marked_in_place() -> None:
    r = set_value(TEXT, "accelerator.pp_interleave_num", 1)
    assert r.ok, r.error
    assert line(r.new_text, "pp_interleave_num") == (
        "  pp_interleave_num: 1          # was 5: 80 layers / (4 stages x 5 chunks) = 4 layers per chunk")
    # nothing else moved
    assert [ln for ln in r.new_text.splitlines() if "interleave" not in ln] == [
        ln for ln in TEXT.splitlines() if "interleave" not in ln]


def test_comment_that_does_not_name_the_old_value_is_left_alone() -> None:
    r = set_value(TEXT, "accelerator.tp_size", 8)
    assert line(r.new_text, "tp_size") == "  tp_size: 8          # within a node"


def test_words_match_whole_tokens_only() -> None:
    # "1f1b" as the old token is in the comment; "4" inside "40" or "4.5" would not count
    r = set_value(TEXT, "accelerator.scheduler", "interleaved_1f1b")
    assert line(r.new_text, "scheduler").endswith("# was 1f1b: plain 1f1b, no interleaving")
    r2 = set_value("a:\n  b: 4  # 40 layers, 4.5 GB\n", "a.b", 8)
    assert r2.new_text == "a:\n  b: 8  # 40 layers, 4.5 GB\n"


def test_quoted_old_value_is_marked_with_its_spelling() -> None:
    r = set_value(TEXT, "accelerator.dtype", "fp16")
    assert line(r.new_text, "dtype").endswith("# was 'bf16': bf16 everywhere")


def test_marked_comment_keeps_its_first_mark_and_a_change_back_restores_it() -> None:
    once = set_value(TEXT, "accelerator.pp_interleave_num", 1).new_text
    twice = set_value(once, "accelerator.pp_interleave_num", 2).new_text
    assert line(twice, "pp_interleave_num").endswith("# was 5: 80 layers / (4 stages x 5 chunks) = 4 layers per chunk")
    back = set_value(twice, "accelerator.pp_interleave_num", 5).new_text
    assert back == TEXT


def test_widening_a_list_leaves_its_comment() -> None:
    """Widening keeps every old candidate, so the comment is still about values the list holds."""
    r = widen_list(TEXT, "parallelism.tp", [8])
    assert r.ok, r.error
    assert line(r.new_text, "tp") == "  tp: [1, 2, 4, 8]   # keep TP inside one node"


def test_crlf_comment_is_marked_and_keeps_its_line_break() -> None:
    text = "a:\r\n  b: 5  # 5 chunks\r\n  c: 1\r\n"
    r = set_value(text, "a.b", 2)
    assert r.new_text == "a:\r\n  b: 2  # was 5: 5 chunks\r\n  c: 1\r\n"


def test_a_comment_keeps_its_column_after_an_empty_value_or_a_flow_value() -> None:
    """`mode:` with nothing after it but a comment, and a flow list replaced by a scalar: the comment stays in its
    column where the blanks allow (it moved 5 columns right, and 2 left)."""
    text = "ac:\n  mode:                 # safe\n  other: [a, b]        # kept\nz: 1\n"
    r = set_value(text, "ac.mode", "full")
    assert r.ok, r.error
    assert line(r.new_text, "mode").index("#") == line(text, "mode").index("#")
    r = set_value(text, "ac.other", "c")
    assert r.ok, r.error
    assert line(r.new_text, "other").startswith("  other: c ")
    assert line(r.new_text, "other").index("#") == line(text, "other").index("#")
