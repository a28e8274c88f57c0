"""The wire: base-protocol framing read with bounds, every JSON-RPC request answered, one TCP client.

pygls 2.1's read loop (`pygls.io_.run_async`) trusts its input. A `Content-Length` of 10**20 raised
OverflowError out of the loop and killed the server; a non-numeric or missing one left it alive and silent,
its next message glued to the unread body; a header line without a newline was read whole into memory; and a
message that failed to structure (a negative position, `params: null`, no `jsonrpc`) was logged and never
answered. JSONRPC §5, §5.1 and [LSP-SPEC] ("Base Protocol", "Lifecycle Messages") ask for an answer to
every request, so this module reads frames itself, with these bounds:

* a header line is at most MAX_HEADER_LINE bytes, a header at most MAX_HEADER_LINES lines (a real header is
  two lines of under 80 bytes: Content-Length and Content-Type);
* a body is at most MAX_MESSAGE_BYTES, 64 MiB: a didOpen of a document at the engine's 10 MiB file cap
  (engine.document.DEFAULT_MAX_BYTES) fits even if every character were escaped (6 bytes, `\\u0000`), and
  the server holds a few copies of a message while it decodes it;
* a framing error (no usable `Content-Length`, an oversized header or body) is answered with a ParseError
  whose id is null, then the connection is closed: past a bad header no one knows where the next message
  starts, and guessing would answer someone else's bytes;
* a body that is not JSON gets a ParseError and the next frame is read (the framing held);
* a request that is not valid JSON-RPC, or whose params do not structure, gets InvalidRequest or
  InvalidParams with its id; a request after `shutdown` gets InvalidRequest, one before `initialize`
  ServerNotInitialized ([LSP-SPEC] "Lifecycle Messages"); notifications in those states are dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any, Protocol

from lsprotocol.types import METHOD_TO_TYPES
from pygls.exceptions import JsonRpcException

logger = logging.getLogger(__name__)


class _AnsweredHere(logging.Filter):
    """Drops pygls' "Unable to deserialize message" record, which carries the whole cattrs traceback of a
    malformed message (a FileEvent of type 9, a position of -1) into the editor's log: the Dispatcher answers
    that message itself (InvalidParams, or one line for a notification), so the traceback says nothing more."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unable to deserialize message")


_ANSWERED_HERE = _AnsweredHere()


def _quiet_pygls_deserialize_errors() -> None:
    """Install the filter once on pygls' JSON-RPC logger (the logger is process-wide; a filter added twice
    would only run twice)."""
    rpc = logging.getLogger("pygls.protocol.json_rpc")
    if _ANSWERED_HERE not in rpc.filters:
        rpc.addFilter(_ANSWERED_HERE)

MAX_HEADER_LINE = 8 * 1024
MAX_HEADER_LINES = 32
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_READ_CHUNK = 1024 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002


class FramingError(Exception):
    """The byte stream no longer holds a frame the server can find the end of."""


class ByteSource(Protocol):
    """What the frame reader needs: a bounded line, and up to n bytes (fewer only at the end of input)."""

    def readline(self) -> Awaitable[bytes]: ...

    def read(self, n: int) -> Awaitable[bytes]: ...


class StdinSource:
    """stdin read on a thread (a blocking read never stalls the event loop), every read bounded."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    async def readline(self) -> bytes:
        return await asyncio.to_thread(self.stream.readline, MAX_HEADER_LINE + 1)

    async def read(self, n: int) -> bytes:
        return await asyncio.to_thread(self._read, n)

    def _read(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            part = self.stream.read(min(left, _READ_CHUNK))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)


class StreamSource:
    """An asyncio stream (TCP): its readline raises past its limit, its readexactly at the end of input."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def readline(self) -> bytes:
        try:
            return await self.reader.readline()
        except ValueError as exc:  # LimitOverrunError, re-raised by readline as ValueError
            raise FramingError(f"a header line over {MAX_HEADER_LINE} bytes") from exc

    async def read(self, n: int) -> bytes:
        try:
            return await self.reader.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial


async def read_frame(source: ByteSource) -> bytes | None:
    """The next message body; None at the end of input. Raises FramingError when the header is unusable."""
    length: int | None = None
    lines = 0
    while True:
        line = await source.readline()
        if not line:
            return None
        if len(line) > MAX_HEADER_LINE:
            raise FramingError(f"a header line over {MAX_HEADER_LINE} bytes")
        text = line.rstrip(b"\r\n")
        if not text:
            if lines == 0:
                continue  # a stray line ending between messages
            break
        lines += 1
        if lines > MAX_HEADER_LINES:
            raise FramingError(f"a header of more than {MAX_HEADER_LINES} lines")
        name, sep, value = text.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            length = content_length(value)
    if length is None:
        raise FramingError("a message without a Content-Length header")
    body = await source.read(length)
    return body if len(body) == length else None


def content_length(value: bytes) -> int:
    """The header's value as a byte count within MAX_MESSAGE_BYTES (digits only: no sign, no exponent)."""
    digits = value.strip()
    if not digits.isdigit():
        raise FramingError(f"Content-Length {digits[:40].decode('latin-1')!r} is not a number of bytes")
    if len(digits) > 12 or int(digits) > MAX_MESSAGE_BYTES:
        raise FramingError(f"Content-Length {digits[:40].decode('latin-1')} is over the limit of "
                           f"{MAX_MESSAGE_BYTES // (1024 * 1024)} MiB per message")
    return int(digits)


def error_response(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


@dataclass(frozen=True, slots=True)
class Incoming:
    """One decoded message and what kind of JSON-RPC message it claims to be."""

    raw: Any

    @property
    def method(self) -> Any:
        return self.raw.get("method") if isinstance(self.raw, dict) else None

    @property
    def is_request(self) -> bool:
        return isinstance(self.raw, dict) and "method" in self.raw and "id" in self.raw

    @property
    def valid_id(self) -> bool:
        msg_id = self.raw.get("id") if isinstance(self.raw, dict) else None
        return isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))

    def problem(self) -> str | None:
        """Why this is not a JSON-RPC 2.0 message (None when it is one)."""
        if not isinstance(self.raw, dict):
            return "a message must be a JSON object (batches are not part of LSP)"
        if self.raw.get("jsonrpc") != "2.0":
            return 'a message must carry "jsonrpc": "2.0"'
        if "id" in self.raw and not self.valid_id:
            return "a request id must be a string or an integer"
        if "method" in self.raw and not isinstance(self.raw["method"], str):
            return "a method must be a string"
        if "method" not in self.raw and "id" not in self.raw:
            return "a message must have a method or an id"
        return None


def _notification_method(method: Any) -> bool:
    """Whether LSP defines `method` as a notification (`$/cancelRequest`, `initialized`, `exit`, ...): sent with
    an id, it expects an answer that pygls, routing it by its method, never gives."""
    types_of = METHOD_TO_TYPES.get(method) if isinstance(method, str) else None
    return types_of is not None and types_of[0].__name__.endswith("Notification")


class Dispatcher:
    """Hands decoded messages to the pygls protocol, answering every request that pygls would not."""

    def __init__(self, protocol: Any, send: Callable[[dict[str, Any]], None],
                 report: Callable[[str], None]) -> None:
        self.protocol, self.send, self.report = protocol, send, report
        self.initialized = False
        _quiet_pygls_deserialize_errors()

    def body(self, body: bytes) -> None:
        try:
            raw = json.loads(body)
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, or nested beyond the parser
            self.refuse(None, PARSE_ERROR, f"the message is not JSON: {type(exc).__name__}")
            return
        self.message(Incoming(raw))

    def message(self, msg: Incoming) -> None:
        problem = msg.problem()
        if problem is not None:
            self.refuse(msg.raw["id"] if msg.is_request and msg.valid_id else None, INVALID_REQUEST, problem)
            return
        if msg.is_request and _notification_method(msg.method):
            # A notification sent with an id expects an answer pygls never gives: the error answers it, and the
            # notification still runs (`exit` still exits, `initialized` still asks for the settings).
            self.refuse(msg.raw["id"], INVALID_REQUEST, f"{msg.method} is a notification: it carries no id "
                        "(handled as one)")
            msg = Incoming({k: v for k, v in msg.raw.items() if k != "id"})
        if self.lifecycle_refused(msg):
            return
        try:
            structured = self.protocol.structure_message(msg.raw)
        except JsonRpcException as exc:
            if msg.is_request:
                self.refuse(msg.raw["id"], INVALID_PARAMS, f"invalid params for {msg.method}")
            else:
                self.report(f"hp-lsp: dropped a malformed {msg.method or 'response'}: {exc.message}")
            return
        if msg.method == "initialize":
            self.initialized = True  # once it structured: a malformed initialize leaves the server waiting
        try:
            self.protocol.handle_message(structured)
        except Exception as exc:
            logger.exception("Unable to handle message")
            if msg.is_request:
                self.refuse(msg.raw["id"], INTERNAL_ERROR, f"internal error: {exc!r}")

    def lifecycle_refused(self, msg: Incoming) -> bool:
        """[LSP-SPEC] "Lifecycle Messages": nothing but `initialize` (and `exit`) before initialize, nothing but
        `exit` after shutdown, and `initialize` once ("the initialize request may only be sent once"); requests
        are answered with the matching error, notifications dropped. A second `initialize` had been handled: pygls
        built a new workspace, every open document was lost and the next edit failed; after `shutdown` it had
        gone unanswered."""
        method = msg.method
        if method in (None, "exit"):
            return False
        if method == "initialize" and self.initialized:
            if msg.is_request:
                self.send(error_response(msg.raw["id"], INVALID_REQUEST, "initialize: the server is initialized "
                                         "already (initialize is sent once)"))
            return True
        if method == "initialize":
            return False
        if getattr(self.protocol, "_shutdown", False):
            if msg.is_request:
                self.send(error_response(msg.raw["id"], INVALID_REQUEST, f"{method}: the server is shut down"))
            return True
        if not self.initialized:
            if msg.is_request:
                self.send(error_response(msg.raw["id"], SERVER_NOT_INITIALIZED,
                                         f"{method}: the server is not initialized"))
            return True
        return False

    def refuse(self, msg_id: Any, code: int, message: str) -> None:
        """Answer with an error; say it in the client's log too once the session is up (before `initialize`
        LSP lets the server send nothing but answers: stderr has it then)."""
        if self.initialized:
            self.report(f"hp-lsp: {message}")
        else:
            logger.warning("hp-lsp: %s", message)
        self.send(error_response(msg_id, code, message))


async def serve(source: ByteSource, dispatcher: Dispatcher, stop: threading.Event) -> None:
    """Read frames until the end of input, a stop, or a framing error (answered, then the connection ends)."""
    while not stop.is_set():
        try:
            body = await read_frame(source)
        except FramingError as exc:
            dispatcher.refuse(None, PARSE_ERROR, f"{exc}; closing the connection")
            return
        if body is None:
            return
        dispatcher.body(body)
