"""Engine TextEdits (code points) -> an LSP WorkspaceEdit the client can apply.

With `workspace.workspaceEdit.documentChanges` advertised (ClientFeatures.document_changes), the edit carries the document version so the
client refuses it against a changed buffer; otherwise (Neovim 0.7) it falls back to `changes`, and the
server itself refuses to build edits for text other than the document's current text.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from engine.edit import EditResult
from engine.positions import Position, Range, TextEdit
from hp_lsp.client import ClientFeatures
from hp_lsp.client_units import to_client_range


def to_lsp_edits(edits: Sequence[TextEdit], lines: Sequence[str], codec: PositionCodec) -> list[types.TextEdit]:
    return [types.TextEdit(range=to_client_range(lines, codec, e.range), new_text=e.new_text)
            for e in (_appended_before_final_break(e, lines) for e in edits)]


def _appended_before_final_break(edit: TextEdit, lines: Sequence[str]) -> TextEdit:
    """A line appended after the text's final break (an insertion at the end whose text ends in that same break)
    as the same change made before the break: the break first, then the line. The text comes out the same, and
    every client applies it so; Neovim before 0.12 applies an insertion on the empty line after the final break
    with a stray blank line after it (neovim/neovim#40133)."""
    end = Position(len(lines), 0)
    if not lines or edit.range != Range(end, end):
        return edit
    last = lines[-1]
    brk = last[len(last.rstrip("\r\n")):]
    if not brk or not edit.new_text.endswith(brk) or (brk == "\n" and edit.new_text.endswith("\r\n")):
        return edit
    at = Position(len(lines) - 1, len(last) - len(brk))
    return TextEdit(Range(at, at), brk + edit.new_text[:-len(brk)])


def workspace_edit(features: ClientFeatures, uri: str, version: int | None,
                   edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    if features.document_changes:
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
            edits=list(edits),
        )])
    return types.WorkspaceEdit(changes={uri: list(edits)})


def normalise(out: EditResult) -> tuple[list[TextEdit] | None, str | None]:
    """An engine edit result (engine.edit.EditResult) as (edits, None), or (None, why) when it was refused."""
    return (list(out.edits), None) if out.ok else (None, out.error)
