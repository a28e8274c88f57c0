"""A tolerant, line-based view of a YAML mapping: which key sits where, and what encloses a position.

The engine's reader parses properly, but symbols, completion and "which key is under the cursor" must
also work on half-typed text that no YAML parser accepts (`  tp_` without its colon). Block-style YAML is
indentation-structured, so scanning lines gives the key paths the editor needs without a parse. Flow
collections are treated as opaque values. Columns are code points.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.edit.text import split_lines
from engine.positions import Position, Range

# `key:` or `key: value`, optionally after `- ` (a mapping inside a list item); quoted keys allowed.
_KEY_RE = re.compile(
    r"""^(?P<indent>[ ]*)(?P<dash>-[ ]+)?(?P<key>"[^"]*"|'[^']*'|[^\s#'"{\[\]}:,&*!|>%@`-][^:#]*?|-[^\s:#][^:#]*?)"""
    r"""[ ]*:(?:[ ]+(?P<value>.*?))?[ ]*$"""
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One `key:` line. `block` runs from the key to the last line of its nested block (inclusive)."""

    path: tuple[str, ...]
    key_range: Range
    value_range: Range | None  # the inline scalar or flow value, without a trailing comment
    value: str  # its text ("" for a block mapping/sequence parent)
    indent: int
    block: Range

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def line(self) -> int:
        return self.key_range.start.line


def _strip_comment(value: str) -> str:
    """Drop a trailing ` # comment` outside quotes."""
    quote = ""
    for i, ch in enumerate(value):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or value[i - 1] in " \t"):
            return value[:i].rstrip()
    return value.rstrip()


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
        return key[1:-1]
    return key


def scan(text: str, limit: int | None = None) -> list[Entry]:
    """Every mapping key of the text with its path, in order (the first `limit` of them). Never raises.

    With a limit, lines after the limit-th key are only looked at for where the open blocks end (a cheap
    indentation test), so an outline of a 5 MB file costs its first keys, not 300,000 entries."""
    lines = [line.rstrip("\r\n") for line in split_lines(text)]  # LSP's lines (not str.splitlines)
    raw: list[tuple[int, int, str, int, int, str, int]] = []  # line, indent, key, kstart, kend, value, vstart
    in_block_scalar: int | None = None  # indent of the key owning a `|`/`>` scalar
    floor: int | None = None  # past the limit: only keys at or left of this indent still matter
    for n, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped in ("---", "..."):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if floor is not None and indent > floor:
            continue
        if in_block_scalar is not None:
            if indent > in_block_scalar:
                continue
            in_block_scalar = None
        m = _KEY_RE.match(line)
        if not m:
            continue
        key_indent = m.end("dash") if m.group("dash") else indent
        key_text = m.group("key").rstrip()
        kstart = m.start("key")
        value = _strip_comment(m.group("value") or "")
        vstart = m.start("value") if m.group("value") is not None else m.end()
        if value.startswith(("|", ">")):
            in_block_scalar = key_indent
        raw.append((n, key_indent, _unquote(key_text), kstart, kstart + len(key_text), value, vstart))
        if floor is not None:
            floor = key_indent - 1  # this key closed the blocks at its indent; outer ones are left
            if floor < 0:
                break
        elif limit is not None and len(raw) >= limit:
            floor = key_indent
    keep = len(raw) if limit is None else min(limit, len(raw))

    # Last line holding content (not blank, not a comment) at or before each line: a block ends there.
    last_content: list[int] = []
    prev = -1
    for n, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            prev = n
        last_content.append(prev)
    # A key's block runs until the next key at the same or a smaller indent (one pass with a stack).
    next_line = [len(lines)] * len(raw)
    open_keys: list[int] = []  # indexes into raw, indents increasing
    for idx, (n, indent, *_rest) in enumerate(raw):
        while open_keys and raw[open_keys[-1]][1] >= indent:
            next_line[open_keys.pop()] = n
        open_keys.append(idx)

    entries: list[Entry] = []
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing keys
    for idx, (n, indent, key, ks, ke, value, vs) in enumerate(raw[:keep]):
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (*(k for _, k in stack), key)
        end_line = max(n, last_content[next_line[idx] - 1])
        vr = Range.of(n, vs, n, vs + len(value)) if value else None
        entries.append(Entry(path, Range.of(n, ks, n, ke), vr, value, indent,
                             Range.of(n, ks, end_line, len(lines[end_line]))))
        stack.append((indent, key))
    return entries


def entry_at(entries: list[Entry], pos: Position) -> Entry | None:
    """The entry whose key or inline value is under `pos`."""
    for e in entries:
        if e.line != pos.line:
            continue
        if e.key_range.contains(pos) or (e.value_range and e.value_range.contains(pos)):
            return e
    return None


def enclosing(entries: list[Entry], line: int, column: int) -> tuple[str, ...]:
    """The mapping path a new key typed at (line, column) would belong to.

    The parent is the nearest key above `line` with a smaller indent whose value is a block (empty inline
    value). Used by completion, where the current line is usually not valid YAML yet.
    """
    chain: list[Entry] = []
    for e in entries:
        if e.line >= line:
            break
        while chain and chain[-1].indent >= e.indent:
            chain.pop()
        chain.append(e)
    parents = [e for e in chain if e.indent < column and not e.value]
    return parents[-1].path if parents else ()
