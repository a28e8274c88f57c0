"""The hover's Markdown as plain text, for a client that reads hovers only as `plaintext` (its
`hover.contentFormat` lists no `markdown`): the asterisks, backticks and table pipes a Markdown client draws
would otherwise reach the user as characters ("**16.3 GiB** peak | | stated | best |").

Only the Markdown the hovers write is read: `**bold**`, `` `code` ``, `[text](url)` links and pipe tables
(a header row, a `|---|` rule, body rows), which become columns padded to their widest cell."""

from __future__ import annotations

import re

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]*)`")
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
_RULE = re.compile(r"^\s*\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*$")


def _inline(text: str) -> str:
    """One line without its inline marks: a link as "text (url)"."""
    text = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})" if m.group(2) else m.group(1), text)
    return _CODE.sub(r"\1", _BOLD.sub(r"\1", text))


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [_inline(c.strip()) for c in inner.split("|")]


def _table(rows: list[list[str]]) -> list[str]:
    """Rows of cells as lines of columns, each padded to its widest cell, two spaces apart."""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    cols = [max(len(r[c]) for r in rows) for c in range(width)]
    return ["  ".join(cell.ljust(cols[c]) for c, cell in enumerate(r)).rstrip() for r in rows]


def plain_text(markdown: str) -> str:
    """`markdown` (the hovers' subset) as text a plain-text client shows as it is."""
    out: list[str] = []
    table: list[list[str]] = []
    for line in markdown.split("\n"):
        if line.lstrip().startswith("|"):
            if not _RULE.match(line):
                table.append(_cells(line))
            continue
        if table:
            out += _table(table)
            table = []
        out.append(_inline(line))
    if table:
        out += _table(table)
    return "\n".join(out)
