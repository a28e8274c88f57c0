"""Exit within a second even while a search runs in the worker process."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient

from tests.support.lsp_e2e import copy_example, wait_until

pytestmark = pytest.mark.lsp(rooted=False, shutdown=False)  # each test shuts its server down itself


async def test_exit_mid_search_is_fast(client: LanguageClient, tmp_path) -> None:
    folder = copy_example("deepseek-v3", tmp_path)
    path = folder / "train.yaml"
    uri = from_fs_path(str(path)) or ""
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="yaml", version=1, text=path.read_text())))
    # The fast checks publish at once; the search is then in flight in the worker (the lens says so).
    await wait_until(lambda: uri in client.diagnostics, what="first diagnostics")
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert any(lens.command and lens.command.title.startswith("Searching") for lens in lenses or []), lenses
    t0 = time.monotonic()
    await client.shutdown_async(None)
    client.exit(None)
    server = client._server
    assert server is not None
    await asyncio.wait_for(server.wait(), timeout=5)
    elapsed = time.monotonic() - t0
    assert server.returncode == 0
    assert elapsed < 1.0, f"exit took {elapsed:.2f} s"
