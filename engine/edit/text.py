"""Plain-text plumbing for edits: line splitting as LSP counts lines, offsets <-> positions, applying edits
and turning two versions of a text into the smallest set of non-overlapping edits.

Everything is in code points (Python `str` indices), like every engine range; the language server converts
to UTF-16 at its edge. Lines end at `\\r\\n`, `\\n` or `\\r` only (the LSP rule): `str.splitlines` also
splits at `\\x0b`, `\\x85`, `\\u2028`, ... and would misnumber lines of a YAML file holding them in a string.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.positions import Position, Range, TextEdit

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+$")
_EOL = re.compile(r"\r\n|\n|\r")
# Tokens for the second pass of the diff: a quoted string, a word, a run of blanks, a line break or one other character, so a
# changed value is replaced as a whole token (`16` -> `8`, never `1` deleted and `6` -> `8`).
_TOKEN = re.compile(
    r"\"(?:[^\"\\\r\n]|\\.)*\"|'(?:[^'\r\n]|'')*'|[\w.+-]+|[ \t]+|\r\n|\n|\r|.", re.UNICODE | re.DOTALL
)


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its own line break; the last one may have none."""
    return _LINE.findall(text)


def line_break(text: str) -> str:
    """The file's line-break style (its first break), `\\n` when it has none: inserted lines use it."""
    m = _EOL.search(text)
    return m.group(0) if m else "\n"


@dataclass(frozen=True, slots=True)
class LineIndex:
    """Offsets of line starts, to convert between code-point offsets and (line, character) positions."""

    text: str
    starts: tuple[int, ...]

    @staticmethod
    def of(text: str) -> LineIndex:
        starts = [0]
        for m in _EOL.finditer(text):
            starts.append(m.end())
        return LineIndex(text, tuple(starts))

    def position(self, offset: int) -> Position:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        return Position(line, offset - self.starts[line])

    def offset(self, pos: Position) -> int:
        if pos.line >= len(self.starts):
            return len(self.text)
        start = self.starts[pos.line]
        end = self.starts[pos.line + 1] if pos.line + 1 < len(self.starts) else len(self.text)
        return min(start + pos.character, end)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, max(0, min(offset, len(self.text)))) - 1

    def line_start(self, line: int) -> int:
        return self.starts[line]

    def line_content_end(self, line: int) -> int:
        """Offset of the end of `line` without its line break."""
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        while end > self.starts[line] and self.text[end - 1] in "\r\n":
            end -= 1
        return end

    @property
    def line_count(self) -> int:
        return len(self.starts)


@dataclass(frozen=True, slots=True)
class Splice:
    """An edit in offset space: replace text[start:end] with `new`."""

    start: int
    end: int
    new: str


def apply_splices(text: str, splices: Iterable[Splice]) -> str:
    """Apply non-overlapping splices that all refer to `text`; raises ValueError if two overlap."""
    ordered = sorted(splices, key=lambda s: (s.start, s.end))
    out: list[str] = []
    pos = 0
    for s in ordered:
        if s.start < pos or s.end < s.start:
            raise ValueError(f"overlapping edits at offset {s.start}")
        out.append(text[pos : s.start])
        out.append(s.new)
        pos = s.end
    out.append(text[pos:])
    return "".join(out)


def apply_edits(text: str, edits: Iterable[TextEdit]) -> str:
    """Apply TextEdits (code-point positions, all against `text`), as an editor would."""
    idx = LineIndex.of(text)
    return apply_splices(
        text, (Splice(idx.offset(e.range.start), idx.offset(e.range.end), e.new_text) for e in edits)
    )


def to_text_edits(text: str, splices: Sequence[Splice]) -> list[TextEdit]:
    idx = LineIndex.of(text)
    return [
        TextEdit(Range(idx.position(s.start), idx.position(s.end)), s.new)
        for s in sorted(splices, key=lambda s: (s.start, s.end))
    ]


def diff_splices(old: str, new: str) -> list[Splice]:
    """The edits turning `old` into `new`: a line diff (difflib, no junk heuristic), then inside each changed
    block of lines a token diff, so one changed value is one splice of that token and added lines are one
    insertion at a line start. Splices never overlap and refer to `old`."""
    if old == new:
        return []
    ends = ("\n", "\r")
    if old and new and not old.endswith(ends) and not new.endswith(ends):
        # Without a final line break the last line would differ from its edited copy by its break alone;
        # diff as if both had one, then take it back off.
        eol, n = line_break(old), len(old)
        splices = []
        for s in _diff(old + eol, new + eol):
            if s.end > n:
                if not s.new and s.start >= len(eol) and old[s.start - len(eol) : s.start] == eol:
                    splices.append(Splice(s.start - len(eol), n, ""))  # the last lines, removed
                    continue
                if not s.new.endswith(eol):
                    break
                start = min(s.start, n)
                s = Splice(start, n, (old + eol)[start : s.start] + s.new[: -len(eol)])
            splices.append(s)
        else:
            try:
                if apply_splices(old, splices) == new:
                    return _merge_touching(splices)
            except ValueError:
                pass
    return _diff(old, new)


# Above this many element comparisons (len(a) * len(b) of what differs once the common ends are trimmed),
# difflib's matcher (quadratic on repeated elements: a comment of 6,000 ": " took 6.7 s, D-004) is not
# run: the differing middle is replaced as one block instead. A strategy rewrite changes a few tokens of a
# few lines, far below it.
MATCH_BUDGET = 250_000


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes for a -> b in linear time before the matcher: the common prefix and suffix are
    trimmed first (one changed value in a long line or file leaves a tiny middle), and a middle too large
    to match cheaply is one "replace"."""
    n, m = len(a), len(b)
    lo = 0
    while lo < n and lo < m and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < n - lo and hi < m - lo and a[n - 1 - hi] == b[m - 1 - hi]:
        hi += 1
    out: list[tuple[str, int, int, int, int]] = [("equal", 0, lo, 0, lo)] if lo else []
    ma, mb = a[lo : n - hi], b[lo : m - hi]
    if ma or mb:
        if not ma or not mb or len(ma) * len(mb) > MATCH_BUDGET:
            tag = "insert" if not ma else "delete" if not mb else "replace"
            out.append((tag, lo, n - hi, lo, m - hi))
        else:
            matcher = difflib.SequenceMatcher(a=ma, b=mb, autojunk=False)
            out.extend((t, i1 + lo, i2 + lo, j1 + lo, j2 + lo) for t, i1, i2, j1, j2 in matcher.get_opcodes())
    if hi:
        out.append(("equal", n - hi, n, m - hi, m))
    return out


def _diff(old: str, new: str) -> list[Splice]:
    a, b = split_lines(old), split_lines(new)
    starts = [0]
    for line in a:
        starts.append(starts[-1] + len(line))
    out: list[Splice] = []
    for tag, i1, i2, j1, j2 in opcodes(a, b):
        if tag == "equal":
            continue
        if tag != "replace":
            out.append(Splice(starts[i1], starts[i2], "".join(b[j1:j2])))
            continue
        out.extend(_refine(a[i1:i2], b[j1:j2], starts[i1]))
    return _merge_touching(out)


def _signature(line: str) -> str:
    """What pairs an old line with a new one in a changed block: its indentation and key (`  tp_size`),
    or the whole line when it is no `key: value` line."""
    body = line.rstrip("\r\n")
    m = re.match(r"^(\s*(?:- )?[^:#]*?):(?:\s|$)", body)
    return m.group(1) if m else body


def _refine(a: list[str], b: list[str], base: int) -> list[Splice]:
    """Inside a changed block, pair lines that write the same key and diff those by token; other lines are
    replaced, inserted or deleted whole. So a changed value next to a removed entry stays one token."""
    offs = [base]
    for line in a:
        offs.append(offs[-1] + len(line))
    out: list[Splice] = []
    for tag, i1, i2, j1, j2 in opcodes([_signature(x) for x in a], [_signature(x) for x in b]):
        if tag == "equal":
            for k in range(i2 - i1):
                if a[i1 + k] != b[j1 + k]:
                    out.extend(_token_diff(a[i1 + k], b[j1 + k], offs[i1 + k]))
        else:
            out.append(Splice(offs[i1], offs[i2], "".join(b[j1:j2])))
    return out


def _token_diff(old: str, new: str, base: int) -> list[Splice]:
    ta, tb = _TOKEN.findall(old), _TOKEN.findall(new)
    offs = [0]
    for t in ta:
        offs.append(offs[-1] + len(t))
    out: list[Splice] = []
    for tag, i1, i2, j1, j2 in opcodes(ta, tb):
        if tag != "equal":
            out.append(Splice(base + offs[i1], base + offs[i2], "".join(tb[j1:j2])))
    return out


def _merge_touching(splices: list[Splice]) -> list[Splice]:
    """Join splices that start at the same offset (an insertion and a replacement there): clients may order
    such edits differently. Edits that merely touch stay apart, so each stays one token or one line."""
    merged: list[Splice] = []
    for s in sorted(splices, key=lambda s: (s.start, s.end)):
        if merged and (merged[-1].end > s.start or merged[-1].start == s.start):
            last = merged.pop()
            merged.append(Splice(last.start, max(last.end, s.end), last.new + s.new))
        else:
            merged.append(s)
    return merged
