"""Engine TextEdits (code points) -> an LSP WorkspaceEdit the client can apply.

With `workspace.workspaceEdit.documentChanges` advertised, the edit carries the document version so the
client refuses it against a changed buffer; otherwise (Neovim 0.7) it falls back to `changes`, and the
server itself refuses to build edits for text other than the document's current text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from engine.positions import TextEdit
from hp_lsp.positions import to_client_range


def supports_document_changes(caps: types.ClientCapabilities) -> bool:
    ws = caps.workspace
    return bool(ws and ws.workspace_edit and ws.workspace_edit.document_changes)


def supports_create_file(caps: types.ClientCapabilities) -> bool:
    ws = caps.workspace
    we = ws.workspace_edit if ws else None
    return bool(we and we.document_changes and we.resource_operations
                and types.ResourceOperationKind.Create in we.resource_operations)


def to_lsp_edits(edits: Sequence[TextEdit], lines: Sequence[str], codec: PositionCodec) -> list[types.TextEdit]:
    return [types.TextEdit(range=to_client_range(lines, codec, e.range), new_text=e.new_text) for e in edits]


def workspace_edit(caps: types.ClientCapabilities, uri: str, version: int | None,
                   edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    if supports_document_changes(caps):
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
            edits=list(edits),
        )])
    return types.WorkspaceEdit(changes={uri: list(edits)})


def normalise(out: Any) -> tuple[list[TextEdit] | None, str | None]:
    """The engine's edit builders return a list of TextEdits or a result object with `edits` / `error`."""
    if out is None:
        return None, "no edit"
    if isinstance(out, list | tuple):
        return list(out), None
    error = getattr(out, "error", None)
    edits = getattr(out, "edits", None)
    if error:
        return None, str(error)
    return (list(edits), None) if edits is not None else (None, "no edit")
