"""hp_lsp.features.plain_text: the hovers' Markdown as a plain-text client shows it."""

from __future__ import annotations

from hp_lsp.features.hover import plan_table
from hp_lsp.features.plain_text import plain_text


def test_marks_go_and_tables_become_columns() -> None:
    md = ("**16.3 GiB** peak · best plan `dp 8 · tp 1` [docs](https://x/y)\n\n"
          "| | stated | best |\n|---|---|---|\n| step | **2.50 s** | 1.20 s |\n| peak memory | 16.3 | 70.1 ✗ |\n")
    assert plain_text(md).split("\n") == [
        "16.3 GiB peak · best plan dp 8 · tp 1 docs (https://x/y)",
        "",
        "             stated  best",
        "step         2.50 s  1.20 s",
        "peak memory  16.3    70.1 ✗",
        "",
    ]


def test_text_without_marks_is_unchanged() -> None:
    assert plain_text("no marks here\n\nat all") == "no marks here\n\nat all"
    assert plain_text(plan_table(None, None)) == plain_text(plain_text(plan_table(None, None)))
