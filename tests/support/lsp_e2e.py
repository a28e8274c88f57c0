"""Helpers for the end-to-end tests (tests/e2e): a pytest-lsp client over stdio running `python -m hp_lsp`
with a real editor's capabilities, recording what the server asks of the client. A plain module, not a
conftest: tests import these. The one `client` fixture (tests/e2e/conftest.py) starts a server per test as a
module's `lsp` marker asks and hands the test a `Ctx`."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from tests.support import cli

ROOT = Path(__file__).resolve().parents[2]
# The examples the tests copy (HP_LSP_E2E_EXAMPLES points them at another folder of the same layout).
EXAMPLES = Path(os.environ.get("HP_LSP_E2E_EXAMPLES", ROOT / "examples"))
PROFILES = ["visual-studio-code", "neovim@v0.7.0"]
SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "hp_lsp"])


@dataclass
class Ctx:
    """One end-to-end session, as the `ctx` fixture gives it: the client, the editor profile it speaks as, its
    folder (`root`: a fresh folder or a copy of an example), the server's requests to the client (`seen`), and
    the version and text of the train.yaml in `root` a test edits."""

    client: LanguageClient
    profile: str
    root: Path
    seen: dict[str, list[Any]]
    version: int = 1
    text: str = ""

    @property
    def vscode(self) -> bool:
        return self.profile.startswith("visual")

    @property
    def train(self) -> Path:
        return self.root / "train.yaml"

    @property
    def search(self) -> Path:
        return self.root / "search.yaml"

    @property
    def train_uri(self) -> str:
        return from_fs_path(str(self.train)) or ""

    @property
    def search_uri(self) -> str:
        return from_fs_path(str(self.search)) or ""


def ctx_of(client: LanguageClient) -> Ctx:
    """The Ctx the `client` fixture attached to its client (for helpers that are handed only the client)."""
    return client.hp_ctx  # type: ignore[attr-defined,no-any-return]


async def start(client: LanguageClient, profile: str, root: Path | None = None, *,
                settings: dict[str, Any] | None = None, init: dict[str, Any] | None = None) -> dict[str, list[Any]]:
    """Initialize a session as `profile` (a pytest-lsp client profile) rooted at `root`; `settings` answer
    workspace/configuration (section hpLsp), `init` is the initializationOptions. Returns the recorder of
    the server's requests to the client (record_client_requests)."""
    seen = record_client_requests(client)
    if settings is not None:
        client.set_configuration(settings, section="hpLsp")
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(profile), root_uri=from_fs_path(str(root)) if root else None,
        initialization_options=init))
    return seen


def open_doc(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    """didOpen `path` (its text on disk unless given); returns its URI."""
    uri = from_fs_path(str(path)) or ""
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="yaml", version=version, text=path.read_text() if text is None else text)))
    return uri


def copy_example(name: str, dest: Path) -> Path:
    """A private copy of examples/<name> at dest/<name> (tests write to it); the examples may come from
    HP_LSP_E2E_EXAMPLES."""
    return cli.copy_example(name, dest / name, EXAMPLES)


def record_client_requests(client: LanguageClient) -> dict[str, list[Any]]:
    """Handlers for the server->client requests pytest-lsp does not answer by itself; they record the params."""
    seen: dict[str, list[Any]] = {"applyEdit": [], "register": [], "lensRefresh": []}

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        seen["applyEdit"].append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        seen["register"].append(params)

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params: None) -> None:
        seen["lensRefresh"].append(params)

    return seen


async def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def codes(client: LanguageClient, uri: str) -> set[str]:
    return {str(d.code) for d in client.diagnostics.get(uri, [])}


async def diagnostic(client: LanguageClient, uri: str, code: str, what: str = "") -> types.Diagnostic:
    """The `code` diagnostic `uri` shows, once it shows one (`what` names it in the timeout's message)."""
    await wait_until(lambda: code in codes(client, uri), what=what or f"{code} on {uri}")
    return next(d for d in client.diagnostics[uri] if d.code == code)


async def quick_fix(client: LanguageClient, uri: str, code: str, title: str) -> tuple[types.Diagnostic,
                                                                                      types.CodeAction]:
    """Once `uri` shows a `code` diagnostic: it, and the code action titled `title` the server offers for it."""
    diag = await diagnostic(client, uri, code)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diag.range,
        context=types.CodeActionContext(diagnostics=[diag])))
    fix = next(a for a in actions or [] if isinstance(a, types.CodeAction) and a.title == title)
    return diag, fix


def take_fix(client: LanguageClient, uri: str, text: str, fix: types.CodeAction, version: int = 2) -> str:
    """Apply the quick fix `fix` to `text` as an editor does: its edits for `uri` applied, the whole result sent as
    the document's `version`; the new text."""
    assert fix.edit is not None
    fixed = apply_lsp_edits(text, edits_of(fix.edit, uri)[0])
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)]))
    return fixed


def find_line(text: str, needle: str) -> tuple[int, int]:
    """(line, code-point column) of the first occurrence of `needle`."""
    for n, line in enumerate(text.splitlines()):
        col = line.find(needle)
        if col >= 0:
            return n, col
    raise AssertionError(f"{needle!r} not in text")


def apply_lsp_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits (UTF-16 columns; the examples are ASCII where edits land) to a text."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(p: types.Position) -> int:
        if p.line >= len(lines):
            return len(text)
        return starts[p.line] + p.character

    for e in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[:offset(e.range.start)] + e.new_text + text[offset(e.range.end):]
    return text


def edits_of(edit: types.WorkspaceEdit, uri: str) -> tuple[list[types.TextEdit], int | None]:
    """The text edits for `uri` and the version they were made for (None with `changes`)."""
    if edit.document_changes:
        for dc in edit.document_changes:
            if isinstance(dc, types.TextDocumentEdit) and dc.text_document.uri == uri:
                return [e for e in dc.edits if isinstance(e, types.TextEdit)], dc.text_document.version
    if edit.changes and uri in edit.changes:
        return list(edit.changes[uri]), None
    return [], None
