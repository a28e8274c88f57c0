"""The server's copy of the editor's documents: lines counted as LSP counts them, no disk reads, no leak.

pygls' workspace document (pygls 2.1) has three defects for this server (D-003):

* it splits lines with `str.splitlines`, which also breaks at VT, FF, \\x1c-\\x1e, NEL, U+2028 and U+2029,
  while LSP counts only `\\n`, `\\r\\n` and `\\r`: after one of them every later incremental edit lands a line
  off in the server's copy ([LSP], "Line splitting"). `LspTextDocument` splits with the edit layer's
  `split_lines` (the LSP rule, engine.edit.text) and applies incremental changes by offset;
* an unopened URI reads the whole file from disk on every `.source`, unbounded (`/dev/zero`): here an
  unopened document is empty; linked files are read through engine.files (hp_lsp/linked.py), off the loop;
* its protocol keeps one finished future per handled notification in `_request_futures` for ever (about
  2 KB per `didChange`, [LSP] "Memory per notification"): `HpProtocol` drops each entry once done;
* its protocol writes JSON with Python's defaults, `NaN` and `Infinity` included, which no strict parser
  (VS Code's among them) reads: `HpProtocol` writes strict JSON, a non-finite number as null (engine.jsonout, the project's one rule).

A URI whose path holds a NUL (`%00`) names no file any file system can hold, nor does a URI of another scheme
than `file:` (`untitled:`, `http:`, `git:`; pygls keeps their path, so `http://host/train.yaml` had read and
written beside `/train.yaml`): such a document has no path, and is checked as an unsaved buffer is (`disk_path`;
os calls raised ValueError on a NUL, and it never got diagnostics).

The lines of a document are cached per text (a 5 MB file was split again for every position conversion).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any
from urllib.parse import urlparse

from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument, Workspace

from engine.edit.text import split_lines
from engine.jsonout import strict
from engine.positions import Position
from hp_lsp.client_units import from_client_position

logger = logging.getLogger(__name__)


def disk_path(uri: str) -> str | None:
    """The file a URI names, or None when it names none (another scheme, or a path with a NUL byte)."""
    if not isinstance(uri, str) or urlparse(uri).scheme.lower() != "file":
        return None
    path = to_fs_path(uri)
    return None if path is None or "\x00" in path else path


class LspTextDocument(TextDocument):
    """A pygls TextDocument whose lines end only at `\\n`, `\\r\\n`, `\\r`, that never reads the disk."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.path = disk_path(self.uri)  # type: ignore[assignment]  # pygls keeps any scheme's path (D-003)
        self._lines_of: tuple[str, tuple[str, ...], tuple[int, ...]] | None = None

    @property
    def source(self) -> str:
        return self._source or ""

    def _split(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        text = self.source
        cached = self._lines_of
        if cached is not None and cached[0] is text:
            return cached[1], cached[2]
        lines = tuple(split_lines(text))
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line))
        self._lines_of = (text, lines, tuple(starts))
        return lines, self._lines_of[2]

    @property
    def lines(self) -> Sequence[str]:
        return self._split()[0]

    def offset_of(self, pos: Position) -> int:
        """Code-point offset of a position (clamped to its line's content, then to the text)."""
        lines, starts = self._split()
        if pos.line >= len(lines):
            return len(self.source)
        line = lines[pos.line]
        content = len(line) - (2 if line.endswith("\r\n") else 1 if line.endswith(("\n", "\r")) else 0)
        return starts[pos.line] + min(max(pos.character, 0), content)

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        lines = self.lines
        codec = self.position_codec
        start = self.offset_of(from_client_position(lines, codec, change.range.start))
        end = self.offset_of(from_client_position(lines, codec, change.range.end))
        if change.range.start.line >= len(lines):
            start = len(self.source)
        if change.range.end.line >= len(lines):
            end = len(self.source)
        text = self.source
        self._source = text[:start] + change.text + text[max(start, end):]


class LspWorkspace(Workspace):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._root_path is not None and "\x00" in self._root_path:
            self._root_path = None  # a root URI with %00 names no folder (every check scanned it and failed)

    def _create_text_document(self, doc_uri: str, source: str | None = None, version: int | None = None,
                              language_id: str | None = None) -> TextDocument:
        return LspTextDocument(doc_uri, source=source, version=version, language_id=language_id,
                               sync_kind=self._sync_kind, position_codec=self.position_codec)

    @staticmethod
    def of(ws: Workspace) -> LspWorkspace:
        return LspWorkspace(ws.root_uri, ws._sync_kind, list(ws.folders.values()), ws.position_encoding)


class _Futures(dict[Any, "Future[Any]"]):
    """`_request_futures` whose `items()` is a snapshot: pygls' shutdown cancels every pending future while
    iterating them, and a cancelled future's done callback (`HpProtocol._forget`) removes its entry; over a
    live view that raised "dictionary changed size during iteration" when shutdown arrived mid-request."""

    def items(self) -> Any:
        return list(super().items())


class HpProtocol(LanguageServerProtocol):
    """pygls' protocol with the workspace above and no unbounded `_request_futures`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_futures = _Futures()
        self._writes: set[asyncio.Future[Any]] = set()

    @property  # type: ignore[override]
    def _workspace(self) -> Workspace | None:
        return self.__dict__.get("_hp_workspace")

    @_workspace.setter
    def _workspace(self, ws: Workspace | None) -> None:
        # pygls builds a plain Workspace in its initialize handler: replace it before any document arrives.
        if ws is not None and not isinstance(ws, LspWorkspace):
            ws = LspWorkspace.of(ws)
        self.__dict__["_hp_workspace"] = ws

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any, args: Any = None,
                         kwargs: Any = None) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        fut = self._request_futures.get(msg_id)
        if fut is not None:
            fut.add_done_callback(functools.partial(self._forget, msg_id))

    def _forget(self, key: Any, fut: Future[Any]) -> None:
        if self._request_futures.get(key) is fut:
            del self._request_futures[key]

    def _send_data(self, data: Any) -> None:
        """pygls' writer with strict JSON: a message holding NaN or infinity goes out with null there (and a
        warning in the log naming the method), never as the `Infinity` a strict parser rejects."""
        if not data or self.writer is None:
            return
        try:
            body = json.dumps(data, default=self._serialize_message, allow_nan=False)
        except ValueError:
            loose = json.loads(json.dumps(data, default=self._serialize_message))
            logger.warning("a non-finite number in %s sent as null", loose.get("method") or loose.get("id"))
            body = json.dumps(strict(loose), allow_nan=False)
        payload = body.encode(self.CHARSET)
        if self._include_headers:
            payload = (f"Content-Length: {len(payload)}\r\nContent-Type: {self.CONTENT_TYPE}; "
                       f"charset={self.CHARSET}\r\n\r\n").encode("ascii") + payload
        try:
            res = self.writer.write(payload)
        except BrokenPipeError:
            raise
        except Exception as error:  # a closed stream at exit: pygls' writer reports the same way
            self._server._report_server_error(error, JsonRpcInternalError)
            return
        if inspect.isawaitable(res):  # a WebSocket's send: kept until done, so it is not collected mid-write
            task = asyncio.ensure_future(res)
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
