"""Code points <-> UTF-16: an emoji before a key shifts the client column by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from engine.edit.text import split_lines
from engine.positions import Position, Range
from hp_lsp.client_units import from_client_position, offset_of, to_client_position, to_client_range

UTF16 = PositionCodec(types.PositionEncodingKind.Utf16)
UTF32 = PositionCodec(types.PositionEncodingKind.Utf32)
LINES = ["model:\n", "  name: \"🦙 llama\"  # 🦙 tp_size\n", "  tp_size: 4\n"]


def test_emoji_shifts_utf16_columns() -> None:
    col = LINES[1].index("tp_size")  # two emoji before it
    assert col == 23
    assert to_client_position(LINES, UTF16, Position(1, col)) == types.Position(line=1, character=25)
    assert to_client_position(LINES, UTF32, Position(1, col)) == types.Position(line=1, character=23)
    assert from_client_position(LINES, UTF16, types.Position(line=1, character=25)) == Position(1, 23)


def test_single_emoji_before_key_is_26() -> None:
    lines = ["🚀 x: 1\n", "a" * 24 + "🚀key: 1\n"]
    col = lines[1].index("key")
    assert col == 25
    assert to_client_position(lines, UTF16, Position(1, col)).character == 26
    assert from_client_position(lines, UTF16, types.Position(line=1, character=26)) == Position(1, 25)


def test_inside_a_surrogate_pair_rounds_down() -> None:
    lines = ["a🦙b\n"]
    assert from_client_position(lines, UTF16, types.Position(line=0, character=2)) == Position(0, 1)
    assert from_client_position(lines, UTF16, types.Position(line=0, character=3)) == Position(0, 2)


def test_out_of_range_positions_are_clamped() -> None:
    assert to_client_position(LINES, UTF16, Position(9, 3)) == types.Position(line=3, character=0)  # the end
    unbroken = [*LINES[:2], "  tp_size: 4"]  # no final break: past the end clamps to the last character
    assert to_client_position(unbroken, UTF16, Position(9, 3)) == types.Position(line=2, character=12)
    assert to_client_position(LINES, UTF16, Position(0, 99)) == types.Position(line=0, character=6)
    assert from_client_position(LINES, UTF16, types.Position(line=0, character=99)) == Position(0, 6)
    assert from_client_position([], UTF16, types.Position(line=3, character=3)) == Position(0, 0)
    rng = to_client_range(LINES, UTF16, Range.of(1, 0, 1, 99))
    assert rng.end == types.Position(line=1, character=len(LINES[1].rstrip("\n")) + 2)


def test_offset_of() -> None:
    text = "".join(LINES)
    off = offset_of(LINES, Position(2, 2))
    assert text[off:off + 7] == "tp_size"


def test_the_line_after_the_final_break_is_the_end_of_the_text_not_clamped() -> None:
    """An edit that appends a key to a file ending in a line break lands at (lines, 0), after that break: clamped
    to the last line's end it went in before the break and glued the new key onto the last value
    (`fp8: false  framework_version: main`, a YAML error). Past that line, or without a final break, positions
    still clamp to the last character."""
    end = Position(len(LINES), 0)
    assert to_client_position(LINES, UTF16, end) == types.Position(line=3, character=0)
    assert from_client_position(LINES, UTF16, types.Position(line=3, character=0)) == end
    unbroken = [*LINES[:-1], "  tp_size: 4"]
    assert to_client_position(unbroken, UTF16, end) == types.Position(line=2, character=12)
    # past the end clamps to the end: a range never ends before it starts
    assert to_client_position(LINES, UTF16, Position(4, 0)) == types.Position(line=3, character=0)
    assert from_client_position(LINES, UTF16, types.Position(line=9, character=2)) == end
    rng = to_client_range(LINES, UTF16, Range.of(3, 0, 4, 0))
    assert (rng.start.line, rng.start.character) <= (rng.end.line, rng.end.character)


@settings(deadline=None)
@given(st.lists(st.sampled_from(["a", "🦙", " ", ":", "\n", "\r\n", "\r"]), max_size=40),
       st.integers(min_value=0, max_value=3))
def test_every_position_of_a_text_round_trips_through_client_units(chars: list[str], past: int) -> None:
    """Each position of a text (every character boundary of every line, and the end of the text) maps to the
    client's units and back to itself, in the text's order, and the last one is where the client's own count of
    the text ends; positions past the end map to that end. An edit made at an engine position lands where the
    engine meant it, whatever the line breaks, and a range never ends before it starts."""
    text = "".join(chars)
    lines = split_lines(text)
    if not lines:
        return
    positions = [Position(i, c) for i, line in enumerate(lines) for c in range(len(line.rstrip("\r\n")) + 1)]
    if lines[-1].endswith(("\n", "\r")):
        positions.append(Position(len(lines), 0))
    client = [to_client_position(lines, UTF16, pos) for pos in positions]
    assert [from_client_position(lines, UTF16, c) for c in client] == positions
    order = [(c.line, c.character) for c in client]
    assert order == sorted(order)
    tail = lines[-1].rstrip("\r\n")
    units = len(tail.encode("utf-16-le")) // 2
    assert order[-1] == ((len(lines), 0) if tail != lines[-1] else (len(lines) - 1, units))
    beyond = to_client_position(lines, UTF16, Position(len(lines) + past, past))
    assert (beyond.line, beyond.character) == order[-1]
