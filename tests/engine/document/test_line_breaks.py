"""Lines are counted as LSP counts them (D-003): only \\n, \\r\\n and \\r break a line. libyaml also
breaks at NEL, U+2028 and U+2029, so before the fix every diagnostic after `note: "x\\u2028y"` pointed one line
low; VT, FF and \\x1c-\\x1e are no YAML characters at all and get an HP001 at the character itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.check import check_file
from engine.document import end_position, parse, split_lines

TRAIN = (Path(__file__).resolve().parents[3] / "examples" / "llama3-70b" / "train.yaml").read_text()


def with_note(sep: str) -> str:
    return TRAIN.replace("accelerator:\n", f'accelerator:\n  note: "x{sep}y"\n', 1).replace("tp_size: 8", "tp_sise: 8")


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n")) if needle in line)


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_diagnostics_after_a_yaml_only_break_keep_the_editors_line(sep: str) -> None:
    text = with_note(sep)
    loaded = check_file("/nowhere/train.yaml", text=text)
    typo = [d for d in loaded.diagnostics if d.code == "HP101"]
    assert typo and typo[0].range.start.line == line_of(text, "tp_sise") and typo[0].range.start.character == 2


@pytest.mark.parametrize("sep", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e"])
def test_control_characters_are_reported_where_they_are(sep: str) -> None:
    text = with_note(sep)
    doc = parse(text)
    assert [d.code for d in doc.diagnostics] == ["HP001"]
    d = doc.diagnostics[0]
    assert (d.range.start.line, d.range.start.character) == (line_of(text, "note:"), 10)
    assert f"U+{ord(sep):04X}" in d.message


def test_positions_on_lines_after_a_separator_inside_a_flow_value_and_with_a_bom() -> None:
    text = '\ufeffa: "\u2028\u2029"\nb: 1\n'
    doc = parse(text)
    assert doc.root is not None
    b = doc.root.key_node("b")  # type: ignore[attr-defined]
    assert (b.range.start.line, b.range.start.character) == (1, 0)
    a = doc.root.key_node("a")  # type: ignore[attr-defined]
    assert (a.range.start.line, a.range.start.character) == (0, 1)  # after the BOM the client holds


def test_split_lines_and_end_follow_lsp() -> None:
    assert split_lines("a\u2028b\x0bc\r\nd\re\nf") == ["a\u2028b\x0bc", "d", "e", "f"]
    assert end_position("x\u2028y\n") == end_position("xzy\n")
