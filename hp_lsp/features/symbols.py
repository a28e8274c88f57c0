"""Document symbols: one per section, its keys as children (from the tolerant line scanner)."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from hp_lsp.outline import Entry
from hp_lsp.positions import to_client_range


def document_symbols(entries: Sequence[Entry], lines: Sequence[str], codec: PositionCodec,
                     max_depth: int = 3) -> list[types.DocumentSymbol]:
    roots: list[types.DocumentSymbol] = []
    stack: list[tuple[int, types.DocumentSymbol]] = []  # (depth, symbol)
    for e in entries:
        depth = len(e.path)
        if depth > max_depth:
            continue
        sym = types.DocumentSymbol(
            name=e.path[-1],
            detail=e.value or None,
            kind=types.SymbolKind.Namespace if not e.value else types.SymbolKind.Property,
            range=to_client_range(lines, codec, e.block),
            selection_range=to_client_range(lines, codec, e.key_range),
            children=[],
        )
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack and stack[-1][0] == depth - 1:
            parent = stack[-1][1]
            parent.children = [*(parent.children or ()), sym]
        elif depth == 1:
            roots.append(sym)
        else:
            continue
        stack.append((depth, sym))
    return roots
