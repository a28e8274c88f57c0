"""Engine edits as LSP edits (hp_lsp/edits.py): a line appended after the text's final break goes in as the same
change made before that break, which every client applies alike, and the text comes out the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from engine.edit.text import split_lines
from engine.positions import Position, Range, TextEdit
from hp_lsp.edits import to_lsp_edits

UTF16 = PositionCodec(types.PositionEncodingKind.Utf16)


def apply_lsp_edits(text: str, edits: list[types.TextEdit]) -> str:
    """LSP edits applied as a client counts: lines split at the three LSP breaks, columns in UTF-16 units."""
    lines = split_lines(text)

    def offset(p: types.Position) -> int:
        if p.line >= len(lines):
            return len(text)
        line, units, i = lines[p.line], 0, 0
        while i < len(line.rstrip("\r\n")) and units < p.character:
            units += len(line[i].encode("utf-16-le")) // 2
            i += 1
        return sum(len(x) for x in lines[:p.line]) + i

    for e in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[:offset(e.range.start)] + e.new_text + text[offset(e.range.end):]
    return text


def _apply(text: str, edit: TextEdit) -> str:
    """The engine's edit (code-point columns) applied."""
    lines = split_lines(text)
    start = sum(len(x) for x in lines[:edit.range.start.line]) + edit.range.start.character
    end = sum(len(x) for x in lines[:edit.range.end.line]) + edit.range.end.character
    return text[:start] + edit.new_text + text[end:]


def test_a_line_appended_after_the_final_break_goes_in_before_it() -> None:
    text = "estimator:\n  fp8: false\n"
    lines = split_lines(text)
    end = Position(len(lines), 0)
    (lsp,) = to_lsp_edits([TextEdit(Range(end, end), "  framework_version: main\n")], lines, UTF16)
    assert lsp.range == types.Range(start=types.Position(line=1, character=12), end=types.Position(line=1, character=12))
    assert lsp.new_text == "\n  framework_version: main"
    assert apply_lsp_edits(text, [lsp]) == text + "  framework_version: main\n"


@settings(deadline=None)
@given(st.lists(st.sampled_from(["a: 1", "🦙", " ", "\n", "\r\n", "\r"]), max_size=12),
       st.sampled_from(["k: v\n", "k: v\r\n", "k: v\r", "k: v", "\n", ""]))
def test_an_appended_line_makes_the_text_the_engine_meant(chars: list[str], added: str) -> None:
    text = "".join(chars)
    lines = split_lines(text)
    end = Position(len(lines), 0) if lines and lines[-1].endswith(("\n", "\r")) else \
        Position(max(len(lines) - 1, 0), len(lines[-1]) if lines else 0)
    edit = TextEdit(Range(end, end), added)
    assert apply_lsp_edits(text, to_lsp_edits([edit], lines, UTF16)) == _apply(text, edit)
