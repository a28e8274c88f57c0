"""The editor on the other end: what it can do (resolved once, at `initialize`) and what the server sends it.

`ClientFeatures` is the one place the client's capabilities are read (like ruff's
`ResolvedClientCapabilities`): every other module asks a typed yes/no question of a frozen value instead of
walking the optional `ClientCapabilities` tree, so a capability is probed once, spelled once and a fake client
in a test is one constructor call. `Client` is the server's outbox: diagnostics, lens refreshes, log lines,
messages, edits and work-done progress go through it, and it sends only what the client said it handles.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from lsprotocol import types

log = logging.getLogger("hp_lsp")


@dataclass(frozen=True, slots=True)
class ClientFeatures:
    """What the client advertised at `initialize`, as the server uses it. The defaults are a client that
    advertised nothing (the server then pushes plain diagnostics and answers requests, nothing more)."""

    configuration: bool = False  # workspace/configuration: pull section hpLsp
    watched_files_registration: bool = False  # dynamic registration of workspace/didChangeWatchedFiles
    code_lens_refresh: bool = False  # workspace/codeLens/refresh once a search lands
    work_done_progress: bool = False  # window/workDoneProgress for long searches
    markdown_hover: bool = True  # hover in Markdown (a client that lists formats without it gets plain text)
    diagnostic_links: bool = False  # Diagnostic.codeDescription (a link to docs/diagnostics.md)
    document_changes: bool = False  # versioned TextDocumentEdits in a WorkspaceEdit
    create_files: bool = False  # CreateFile resource operations in a WorkspaceEdit

    @classmethod
    def resolve(cls, caps: types.ClientCapabilities | None) -> ClientFeatures:
        if caps is None:
            return cls()
        ws, td, window = caps.workspace, caps.text_document, caps.window
        edit = ws.workspace_edit if ws else None
        formats = td.hover.content_format if td and td.hover else None
        publish = td.publish_diagnostics if td else None
        watched = ws.did_change_watched_files if ws else None
        return cls(
            configuration=bool(ws and ws.configuration),
            watched_files_registration=bool(watched and watched.dynamic_registration),
            code_lens_refresh=bool(ws and ws.code_lens and ws.code_lens.refresh_support),
            work_done_progress=bool(window and window.work_done_progress),
            markdown_hover=not formats or types.MarkupKind.Markdown in formats,
            diagnostic_links=bool(publish and publish.code_description_support),
            document_changes=bool(edit and edit.document_changes),
            create_files=bool(edit and edit.document_changes and edit.resource_operations
                              and types.ResourceOperationKind.Create in edit.resource_operations),
        )

    @property
    def hover_kind(self) -> types.MarkupKind:
        return types.MarkupKind.Markdown if self.markdown_hover else types.MarkupKind.PlainText


class Transport(Protocol):
    """The part of pygls' LanguageServer the outbox sends through."""

    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None: ...
    def workspace_code_lens_refresh(self, params: None) -> Any: ...
    def window_log_message(self, params: types.LogMessageParams) -> None: ...
    def window_show_message(self, params: types.ShowMessageParams) -> None: ...
    async def workspace_apply_edit_async(self, params: types.ApplyWorkspaceEditParams
                                         ) -> types.ApplyWorkspaceEditResult: ...


class Client:
    """What the server sends the editor, gated by `features` (set once the client has said what it has)."""

    def __init__(self, transport: Transport) -> None:
        self._out = transport
        self.features = ClientFeatures()

    def publish_diagnostics(self, uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
        self._out.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics))

    def refresh_code_lenses(self) -> None:
        """Ask the client to re-query code lenses, where it supports the refresh request."""
        if self.features.code_lens_refresh:
            self._out.workspace_code_lens_refresh(None)

    def log(self, kind: types.MessageType, message: str) -> None:
        """A line in the client's log (and stderr's at warning and above); never a popup."""
        log.warning("%s", message) if kind <= types.MessageType.Warning else log.info("%s", message)
        with contextlib.suppress(Exception):  # the stream is closed (exit): stderr has it
            self._out.window_log_message(types.LogMessageParams(type=kind, message=message))

    def show(self, kind: types.MessageType, message: str) -> None:
        self._out.window_show_message(types.ShowMessageParams(type=kind, message=message))

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> types.ApplyWorkspaceEditResult:
        return await self._out.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))
