"""Document symbols: one per section, its keys as children (from the tolerant line scanner).

At most MAX_SYMBOLS are sent: an outline of a 5 MB generated file (300,000 keys) is no use to anyone and
its JSON alone is tens of MB; the sections and the first keys are what a reader navigates by."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from hp_lsp.client_units import to_client_range
from hp_lsp.outline import Entry

MAX_SYMBOLS = 5000


def document_symbols(entries: Sequence[Entry], lines: Sequence[str], codec: PositionCodec,
                     max_depth: int = 3, max_symbols: int = MAX_SYMBOLS) -> list[types.DocumentSymbol]:
    roots: list[types.DocumentSymbol] = []
    stack: list[tuple[int, list[types.DocumentSymbol]]] = []  # (depth, the symbol's children)
    count = 0
    for e in entries:
        depth = len(e.path)
        if depth > max_depth:
            continue
        if count >= max_symbols:
            break
        count += 1
        kids: list[types.DocumentSymbol] = []
        sym = types.DocumentSymbol(
            name=e.path[-1],
            detail=e.value or None,
            kind=types.SymbolKind.Namespace if not e.value else types.SymbolKind.Property,
            range=to_client_range(lines, codec, e.block),
            selection_range=to_client_range(lines, codec, e.key_range),
            children=kids,
        )
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack and stack[-1][0] == depth - 1:
            stack[-1][1].append(sym)  # (copying the list per child was quadratic: 12 s for a 5 MB file)
        elif depth == 1:
            roots.append(sym)
        else:
            continue
        stack.append((depth, kids))
    return roots
