"""Code actions answer from the server's latest results, whatever the client's request carries: overlapping
requests, a `$/cancelRequest` in flight, a search running, and a context composed before the last publish
(no diagnostics in it). In a real VS Code 1 of 14 such requests once came back empty (D-015)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient

from tests.support.lsp_e2e import (
    apply_lsp_edits,
    copy_example,
    edits_of,
    find_line,
    wait_until,
)

ROUNDS = 14

pytestmark = pytest.mark.lsp(profiles=["visual-studio-code"], rooted=False, settings={"searchOnSave": True})


def request(client: LanguageClient, msg_id: str, uri: str, rng: types.Range,
            diagnostics: list[types.Diagnostic]) -> asyncio.Future[Any]:
    fut = client.protocol.send_request(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=rng,
        context=types.CodeActionContext(diagnostics=diagnostics, only=[types.CodeActionKind.QuickFix])),
        msg_id=msg_id)
    return asyncio.wrap_future(fut)


def apply_action(actions: Any, uri: str, text: str) -> str | None:
    for a in actions or []:
        if isinstance(a, types.CodeAction) and a.title.startswith("Apply optimal strategy") and a.edit:
            edits, _ = edits_of(a.edit, uri)
            return apply_lsp_edits(text, edits)
    return None


async def test_overlapping_and_cancelled_code_actions_answer_from_latest_results(
        client: LanguageClient, tmp_path: Path) -> None:
    folder = copy_example("llama3-70b", tmp_path)
    uri, text = from_fs_path(str(folder / "train.yaml")) or "", (folder / "train.yaml").read_text()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="yaml", version=1, text=text)))

    def hp611() -> types.Diagnostic | None:
        return next((d for d in client.diagnostics.get(uri, []) if d.code == "HP611"), None)

    first = await wait_until(hp611, timeout=90, what="HP611 from the search")
    version, answered, cancelled = 1, 0, 0
    for n in range(ROUNDS):
        # Each round: an edit (a new fast check is due), a save (a new search starts), then three requests at
        # once, the first cancelled at once; the contexts are what a client composing them early would send:
        # none of the search's diagnostics, or the very first HP611 (now stale).
        version += 1
        text = text.rstrip("\n") + "\n" + ("\n" if n % 2 else "")
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        if n % 3 == 0:
            client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        ids = [f"r{n}-{k}" for k in range(3)]
        futures = [request(client, ids[0], uri, first.range, []),
                   request(client, ids[1], uri, first.range, []),
                   request(client, ids[2], uri, first.range, [first])]
        client.cancel_request(types.CancelParams(id=ids[0]))
        results = await asyncio.gather(*futures, return_exceptions=True)
        for msg_id, res in zip(ids, results, strict=True):
            if isinstance(res, BaseException):
                # Only the cancelled request may fail, and only as cancelled.
                assert msg_id == ids[0] and "cancel" in str(res).lower(), (msg_id, res)
                cancelled += 1
                continue
            new = apply_action(res, uri, text)
            assert new is not None, f"round {n}, request {msg_id}: no 'Apply optimal strategy' in {res!r}"
            assert new != text and "pp_size: 1" in new, new  # the best plan for this search is pp 1 (by its price)
            answered += 1
    assert answered >= 2 * ROUNDS
    # The server is still answering normally afterwards.
    await wait_until(hp611, timeout=90, what="HP611 after the rounds")


async def test_request_composed_before_the_publish_gets_the_fix_for_the_current_version(
        client: LanguageClient, tmp_path: Path) -> None:
    """A request whose context holds none of the search's diagnostics (composed before they arrived) still
    gets "Apply optimal strategy" on the HP611 range, naming the server's HP611 and the current version."""
    folder = copy_example("llama3-70b", tmp_path)
    uri, text = from_fs_path(str(folder / "train.yaml")) or "", (folder / "train.yaml").read_text()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="yaml", version=1, text=text)))
    diag = await wait_until(lambda: next((d for d in client.diagnostics.get(uri, []) if d.code == "HP611"), None),
                            timeout=90, what="HP611")
    res = await request(client, "only", uri, diag.range, [])
    apply = [a for a in res or [] if isinstance(a, types.CodeAction) and a.title.startswith("Apply optimal strategy")]
    assert len(apply) == 1 and apply[0].diagnostics and apply[0].diagnostics[0].code == "HP611"
    assert apply[0].edit is not None
    _, version = edits_of(apply[0].edit, uri)
    assert version == 1


async def test_one_action_per_distinct_fix(client: LanguageClient, tmp_path: Path) -> None:
    """Two findings on one value that ask for the same edit (HP403 and HP412 on `tp_size: 3`) give one menu
    entry naming both, not the same title twice."""
    folder = copy_example("llama3-70b", tmp_path)
    uri = from_fs_path(str(folder / "train.yaml")) or ""
    text = (folder / "train.yaml").read_text().replace("tp_size: 8", "tp_size: 3")
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="yaml", version=1, text=text)))
    line, _ = find_line(text, "tp_size:")

    def on_tp() -> list[types.Diagnostic] | None:
        found = [d for d in client.diagnostics.get(uri, []) if d.range.start.line == line]
        return found if {"HP403", "HP412"} <= {str(d.code) for d in found} else None

    diags = await wait_until(on_tp, what="HP403 and HP412 on tp_size")
    res = await request(client, "dup", uri, diags[0].range, diags)
    titles = [a.title for a in res or [] if isinstance(a, types.CodeAction)]
    assert titles and len(titles) == len(set(titles)), titles
    shared = [a for a in res or [] if isinstance(a, types.CodeAction) and len(a.diagnostics or []) > 1]
    assert shared, titles
