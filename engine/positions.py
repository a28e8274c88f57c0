"""Source positions shared by every stage, so a diagnostic can point at the key or the value.

Lines and characters are 0-based and count Unicode code points (what PyYAML's node marks give). The
language server converts to the client's UTF-16 units at the edge; the engine never does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class Position:
    line: int
    character: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}


@dataclass(frozen=True, slots=True)
class Range:
    start: Position
    end: Position

    @staticmethod
    def of(line: int, character: int, end_line: int, end_character: int) -> Range:
        return Range(Position(line, character), Position(end_line, end_character))

    @staticmethod
    def point(line: int = 0, character: int = 0) -> Range:
        return Range(Position(line, character), Position(line, character))

    def contains(self, pos: Position) -> bool:
        return self.start <= pos <= self.end

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"start": self.start.to_json(), "end": self.end.to_json()}


DOCUMENT_START = Range.point(0, 0)


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replace `range` of the original text with `new_text` (code-point positions, like every engine range).
    Edits of one change never overlap and all refer to the text before any of them is applied."""

    range: Range
    new_text: str
