"""The server's document copy (hp_lsp/documents.py): LSP line counting in incremental sync (D-003),
no disk reads for unopened URIs, no per-notification leak in the protocol, and the outline of a huge file
bounded (D-001)."""

from __future__ import annotations

import functools
import json
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from hp_lsp.documents import HpProtocol, LspTextDocument, LspWorkspace
from hp_lsp.features.symbols import MAX_SYMBOLS, document_symbols
from hp_lsp.outline import scan
from hp_lsp.server import create_server

TRAIN = (Path(__file__).resolve().parents[2] / "examples" / "llama3-70b" / "train.yaml").read_text()


def change(doc: LspTextDocument, sl: int, sc: int, el: int, ec: int, text: str) -> None:
    doc.apply_change(types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line=sl, character=sc), end=types.Position(line=el, character=ec)),
        text=text))


@pytest.mark.parametrize("sep", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_incremental_edits_count_lines_as_lsp(sep: str) -> None:
    doc = LspTextDocument("file:///t/train.yaml", source=f"a: x{sep}y\nb: 1\nc: 2\n", version=1)
    assert len(doc.lines) == 3
    change(doc, 1, 3, 1, 4, "7")  # b: 1 -> b: 7
    assert doc.source == f"a: x{sep}y\nb: 7\nc: 2\n"
    change(doc, 3, 0, 3, 0, "d: 3\n")  # append at the very end
    change(doc, 0, 0, 1, 0, "")  # delete the first line
    assert doc.source == "b: 7\nc: 2\nd: 3\n"


def test_crlf_and_utf16_columns() -> None:
    doc = LspTextDocument("file:///t/train.yaml", source="a: 😀x\r\nb: 1\r\n", version=1)
    change(doc, 0, 5, 0, 6, "y")  # UTF-16: the emoji is two units, x is at 5
    change(doc, 1, 3, 1, 4, "2")
    assert doc.source == "a: 😀y\r\nb: 2\r\n"


def test_unopened_document_never_reads_the_disk(tmp_path: Path) -> None:
    f = tmp_path / "train.yaml"
    f.write_text("a: 1\n")
    ws = LspWorkspace(None)
    assert ws.get_text_document(f.as_uri()).source == ""


def test_protocol_forgets_finished_notifications() -> None:
    server = create_server()
    proto = server.protocol
    assert isinstance(proto, HpProtocol)

    def gen_handler() -> object:  # pygls' own didOpen/didChange are generator handlers
        yield from ()
        return None

    for i in range(1000):
        proto._execute_handler(f"n{i}", gen_handler, callback=lambda f: None)
    assert len(proto._request_futures) == 0  # pygls 2.1.1 kept all 1000 for ever


def test_shutdown_cancels_pending_requests_that_forget_themselves() -> None:
    """pygls' shutdown iterates `_request_futures` and cancels each pending one; each cancel runs `_forget`,
    which removes the entry: the iteration must survive it (a shutdown right after start raised)."""
    proto = create_server().protocol
    assert isinstance(proto, HpProtocol)
    for key in ("a", "b", "c"):
        fut: Future[Any] = Future()
        proto._request_futures[key] = fut
        fut.add_done_callback(functools.partial(proto._forget, key))
    for _, fut in proto._request_futures.items():  # what LanguageServerProtocol.lsp_shutdown does
        fut.cancel()
    assert len(proto._request_futures) == 0


def test_every_message_written_is_strict_json() -> None:
    """Python's json writes NaN and Infinity, which VS Code's parser rejects: the protocol writes null there,
    in results and notifications alike, and the Content-Length counts the bytes written."""
    proto = create_server().protocol
    written: list[bytes] = []

    class Writer:
        def write(self, data: bytes) -> None:
            written.append(data)

        def close(self) -> None: ...

    proto.set_writer(Writer())
    proto._send_data({"jsonrpc": "2.0", "id": 1, "result": {"budget_gib": float("inf"), "rows": [float("nan"), 2.0],
                                                            "name": "Ω"}})
    head, _, body = written[0].partition(b"\r\n\r\n")
    assert int(head.split(b"\r\n")[0].split(b":")[1]) == len(body)

    def refuse(name: str) -> Any:
        raise ValueError(name)

    assert json.loads(body, parse_constant=refuse)["result"] == {"budget_gib": None, "rows": [None, 2.0], "name": "Ω"}


def test_outline_with_a_limit_is_the_full_outlines_head() -> None:
    text = TRAIN + "extra:\n  a:\n    b: |\n      text\n  c: 1\nlast: 2\n"
    full = scan(text)
    for k in range(1, len(full) + 1):
        assert scan(text, k) == full[:k]


def test_symbols_of_a_huge_section_are_capped_and_linear() -> None:
    text = "extra:\n" + "".join(f"  key_{i:06d}: {i}\n" for i in range(40_000))
    entries = scan(text)
    doc = LspTextDocument("file:///t/train.yaml", source=text, version=1)
    t0 = time.process_time()
    syms = document_symbols(entries, doc.lines, doc.position_codec, max_symbols=len(entries))
    assert time.process_time() - t0 < 5.0  # the children list was copied per child: quadratic
    assert len(syms[0].children or []) == 40_000
    capped = document_symbols(entries, doc.lines, doc.position_codec)
    assert 1 + len(capped[0].children or []) == MAX_SYMBOLS
