"""Code points (engine ranges, PyYAML marks) <-> the client's units (UTF-16 unless negotiated otherwise).

The engine counts characters in code points; LSP counts UTF-16 code units by default, so an emoji before a
key shifts every later column by one. Conversions go through the pygls document's position codec (the
negotiated encoding) and clamp out-of-range positions instead of raising: a diagnostic computed for an
older text must still land somewhere sensible.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from engine.positions import Position, Range


def _line_text(lines: Sequence[str], line: int) -> str:
    text = lines[line]
    return text.rstrip("\r\n")


def _after_final_break(lines: Sequence[str], line: int) -> bool:
    """Whether `line` is at or past the empty line after the text's final line break: that line is a real
    position (the end of the text, where an edit appends a line), and anything past it clamps to it, so a
    range never ends before it starts."""
    return line >= len(lines) and lines[-1].endswith(("\n", "\r"))


def to_client_position(lines: Sequence[str], codec: PositionCodec, pos: Position) -> types.Position:
    if not lines:
        return types.Position(line=0, character=0)
    if _after_final_break(lines, pos.line):
        return types.Position(line=len(lines), character=0)
    if pos.line >= len(lines):
        last = len(lines) - 1
        return types.Position(line=last, character=codec.client_num_units(_line_text(lines, last)))
    line = max(pos.line, 0)
    text = _line_text(lines, line)
    char = min(max(pos.character, 0), len(text))
    head = text[:char]
    # ASCII is one unit per character in every encoding: pygls' codec walks the string a character at a time
    return types.Position(line=line, character=char if head.isascii() else codec.client_num_units(head))


def to_client_range(lines: Sequence[str], codec: PositionCodec, rng: Range) -> types.Range:
    return types.Range(
        start=to_client_position(lines, codec, rng.start), end=to_client_position(lines, codec, rng.end)
    )


def from_client_position(lines: Sequence[str], codec: PositionCodec, pos: types.Position) -> Position:
    """The code-point position of a client position; a column inside a surrogate pair rounds down."""
    if not lines:
        return Position(0, 0)
    if _after_final_break(lines, pos.line):
        return Position(len(lines), 0)
    if pos.line >= len(lines):
        last = len(lines) - 1
        return Position(last, len(_line_text(lines, last)))
    text = _line_text(lines, pos.line)
    units = 0
    for i, ch in enumerate(text):
        step = codec.client_num_units(ch)
        if units + step > pos.character:
            return Position(pos.line, i)
        units += step
    return Position(pos.line, len(text))


def offset_of(lines: Sequence[str], pos: Position) -> int:
    """Code-point offset of a position in the text `"".join(lines)` (clamped)."""
    if pos.line >= len(lines):
        return sum(len(x) for x in lines)
    return sum(len(x) for x in lines[: pos.line]) + min(pos.character, len(_line_text(lines, pos.line)))
