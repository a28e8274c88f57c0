"""Hostile files against the real server over stdio (D-002): linked train.yaml files that are FIFOs,
/dev/stdin, device nodes or 2 GB sparse files; Apply on unreadable targets; line separators and incremental
sync; a BOM; a huge outline. Device nodes and FIFOs live in the test's temporary folder. Every wait is bounded;
memory is read from the server's /proc status."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.support.lsp_e2e import EXAMPLES, ctx_of, open_doc, wait_until

LLAMA_SEARCH = (EXAMPLES / "llama3-70b" / "search.yaml").read_text()
LLAMA_TRAIN = (EXAMPLES / "llama3-70b" / "train.yaml").read_text()

pytestmark = pytest.mark.lsp(profiles=["visual-studio-code"], example="llama3-70b", settings={"searchOnSave": False},
                              init={"hpLsp": {"searchOnSave": False, "maxFileSizeKb": 8192}})


def rss_kb(client: LanguageClient) -> int:
    pid = client._server.pid  # type: ignore[union-attr]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def alive(client: LanguageClient, uri: str) -> None:
    """The server still answers requests (within 10 s) after whatever it was given."""
    await asyncio.wait_for(client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=uri))), timeout=10)


def linked(client: LanguageClient, name: str, train_yaml: str) -> tuple[Path, str]:
    sub = ctx_of(client).root / name
    sub.mkdir(exist_ok=True)
    path = sub / "search.yaml"
    text = LLAMA_SEARCH.replace("train_yaml: ./train.yaml", f"train_yaml: {train_yaml}")
    path.write_text(text)
    return path, text


def target(sub: Path, kind: str) -> str:
    if kind == "fifo":
        os.mkfifo(sub / "train.yaml")
        return "./train.yaml"
    if kind == "zero":
        try:
            os.mknod(sub / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))
        except OSError:
            (sub / "zero").symlink_to("/dev/zero")
        return "./zero"
    if kind == "urandom":
        try:
            os.mknod(sub / "urandom", stat.S_IFCHR | 0o666, os.makedev(1, 9))
        except OSError:
            (sub / "urandom").symlink_to("/dev/urandom")
        return "./urandom"
    if kind == "sparse":
        with open(sub / "train.yaml", "wb") as f:
            f.truncate(2 * 1024**3)
        return "./train.yaml"
    if kind == "directory":
        (sub / "train.yaml").mkdir()
        return "./train.yaml"
    if kind == "loop":
        (sub / "train.yaml").symlink_to(sub / "train.yaml")
        return "./train.yaml"
    if kind == "missing":
        return "./nowhere.yaml"
    if kind == "url":
        return "https://example.com/train.yaml"
    return kind


def hp009(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if d.code == "HP009"]


@pytest.mark.parametrize("kind", ["fifo", "/dev/stdin", "/proc/self/fd/0"])
async def test_did_open_with_a_blocking_train_yaml_does_not_hang(client: LanguageClient, kind: str) -> None:
    name = "open-" + kind.strip("/").replace("/", "-")
    sub = ctx_of(client).root / name
    sub.mkdir()
    path, text = linked(client, name, target(sub, kind))
    uri = open_doc(client, path, text)
    await wait_until(lambda: hp009(client, uri), timeout=30, what=f"HP009 for train_yaml {kind}")
    assert "regular file" in hp009(client, uri)[0].message
    await alive(client, uri)


@pytest.mark.parametrize("kind", ["zero", "urandom", "sparse"])
async def test_code_action_and_apply_never_read_an_endless_train_yaml(client: LanguageClient, kind: str) -> None:
    name = "read-" + kind
    sub = ctx_of(client).root / name
    sub.mkdir()
    path, text = linked(client, name, target(sub, kind))
    uri = open_doc(client, path, text)
    await wait_until(lambda: hp009(client, uri), timeout=30, what="HP009")
    before = rss_kb(client)
    actions = await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=["source.applyOptimalStrategy"]),
    )), timeout=10)
    assert not actions
    res: Any = await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.applyOptimalStrategy", arguments=[uri])), timeout=10)
    assert res["applied"] is False
    assert ("too large" if kind == "sparse" else "character device") in res["reason"]
    assert rss_kb(client) - before < 50_000  # before the fix: ~300 MB/s of growth until killed


@pytest.mark.parametrize("kind", ["directory", "loop", "missing", "url"])
async def test_apply_on_an_unreadable_train_yaml_answers_not_applied(client: LanguageClient, kind: str) -> None:
    name = "apply-" + kind
    sub = ctx_of(client).root / name
    sub.mkdir()
    path, text = linked(client, name, target(sub, kind))
    uri = open_doc(client, path, text)
    await wait_until(lambda: uri in client.diagnostics, timeout=30, what="diagnostics")
    res: Any = await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.applyOptimalStrategy", arguments=[uri])), timeout=10)
    assert res["applied"] is False and res["reason"]
    want = {"directory": "directory", "loop": "symlink loop", "missing": "does not exist", "url": "URL"}[kind]
    assert want in res["reason"], res["reason"]


async def test_incremental_edits_after_a_line_separator_land_on_the_editors_line(client: LanguageClient) -> None:
    text = LLAMA_TRAIN.replace("accelerator:\n", 'accelerator:\n  note: "x\u2028y\x85z\u2029w"\n', 1)
    path = ctx_of(client).root / "sep" / "train.yaml"
    path.parent.mkdir()
    path.write_text(text)
    uri = open_doc(client, path, text)
    await wait_until(lambda: uri in client.diagnostics, timeout=30, what="first diagnostics")
    line = text.split("\n").index("  tp_size: 8")
    # Rename tp_size -> tp_sise by an incremental edit of one letter (LSP line numbering).
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=line, character=7), end=types.Position(line=line, character=8)),
            text="s")]))

    def typo() -> list[types.Diagnostic]:
        return [d for d in client.diagnostics.get(uri, []) if d.code == "HP101"]

    await wait_until(typo, timeout=30, what="HP101 for tp_sise")
    d = typo()[0]
    assert (d.range.start.line, d.range.start.character) == (line, 2)
    assert not [x for x in client.diagnostics[uri] if x.code == "HP001"]  # the copy is not corrupted


async def test_quick_fix_on_a_file_with_a_bom(client: LanguageClient) -> None:
    text = "\ufeff" + LLAMA_TRAIN.replace("tp_size: 8", "tp_sise: 8")
    path = ctx_of(client).root / "bom" / "train.yaml"
    path.parent.mkdir()
    path.write_text(text)
    uri = open_doc(client, path, text)
    await wait_until(lambda: [d for d in client.diagnostics.get(uri, []) if d.code == "HP101"], timeout=30,
                     what="HP101")
    diag = next(d for d in client.diagnostics[uri] if d.code == "HP101")
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diag.range,
        context=types.CodeActionContext(diagnostics=[diag], only=[types.CodeActionKind.QuickFix])))
    assert actions and any("tp_size" in a.title for a in actions if isinstance(a, types.CodeAction))


async def test_outline_of_a_5mb_file_is_bounded_and_the_server_stays_responsive(client: LanguageClient) -> None:
    text = LLAMA_TRAIN + "extra:\n" + "".join(f"  key_{i:07d}: {i}\n" for i in range(250_000))
    assert len(text) > 5_000_000
    path = ctx_of(client).root / "big" / "train.yaml"
    path.parent.mkdir()
    uri = open_doc(client, path, text)
    syms = await asyncio.wait_for(client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=uri))), timeout=60)
    assert syms and sum(1 + len(s.children or []) for s in syms if isinstance(s, types.DocumentSymbol)) <= 5000
    # Responsive: with the 5 MB document open (its check still running on the checker thread), requests on
    # another document are answered at once from the event loop.
    small_uri = open_doc(client, ctx_of(client).root / "train.yaml")
    small = await asyncio.wait_for(client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=small_uri))), timeout=5)
    assert small and {s.name for s in small if isinstance(s, types.DocumentSymbol)} >= {"model", "accelerator"}
