"""Streaming the events of a Chrome trace (the Trace Event Format PyTorch's profiler writes, `.json` or
`.json.gz`) in bounded memory: the top-level object is walked key by key and the `traceEvents` list is decoded
one event at a time from a window of the text, so a trace of hundreds of MB never sits in memory whole.

Python's own JSON decoder (`json.JSONDecoder.raw_decode`, the C scanner) decodes each event; a streaming JSON
library would add a dependency for what one loop over raw_decode does here, since a trace is one flat list of
small objects. Bounds: the file (or, for .gz, the uncompressed size its trailer states) at most MAX_TRACE_BYTES,
checked before reading; the decompressed text counted as it is read (the trailer states the size mod 2^32; one stating more than
deflate can reach from the file's bytes is a cut-short file); any other top-level
value at most MAX_VALUE_CHARS.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import zlib
from collections.abc import Callable
from typing import Any

MAX_TRACE_BYTES = 1 << 30  # 1 GiB of trace text: a profiling window of a few steps is far below it
GZIP_MAX_RATIO = 1032  # deflate's limit: a trailer stating more than this times the file is not a real one
MAX_VALUE_CHARS = 64 << 20  # a top-level value other than traceEvents (metadata) larger than this is refused
CHUNK_CHARS = 1 << 20
_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


class TraceError(Exception):
    """A trace that cannot be read; `offset` is the character of the (decompressed) text at fault, if known."""

    def __init__(self, code: str, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.offset = offset


def _gzip_size(path: str) -> int | None:
    """The uncompressed size a .gz trailer states (mod 2^32), None when the file is too short to have one."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() < 18:
            return None
        fh.seek(-4, os.SEEK_END)
        return int.from_bytes(fh.read(4), "little")


def open_trace(path: str, max_bytes: int | None = None) -> io.TextIOBase:
    """The trace's text, refused before reading when it is not a regular file or is over `max_bytes`
    (MAX_TRACE_BYTES when not given)."""
    max_bytes = MAX_TRACE_BYTES if max_bytes is None else max_bytes
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TraceError("HP801", f"cannot read the trace {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TraceError("HP801", f"the trace {path} is not a regular file")
    is_gz = path.endswith(".gz")
    stated = _gzip_size(path) if is_gz else None
    if stated is not None and stated > GZIP_MAX_RATIO * st.st_size:
        raise TraceError("HP820", f"the trace {path} is cut short or corrupt: its last bytes are not a gzip "
                         "trailer (copy the whole file)")
    size = max(st.st_size, stated or 0)
    if size > max_bytes:
        raise TraceError("HP820", f"the trace {path} is {size / 2**20:.0f} MiB, over the {max_bytes / 2**20:.0f} MiB "
                         "limit: profile a few steps (torch.profiler.schedule(active=3)) and calibrate on that")
    raw = gzip.open(path, "rt", encoding="utf-8", errors="replace") if is_gz else open(  # noqa: SIM115
        path, encoding="utf-8", errors="replace")
    return raw  # type: ignore[return-value]


class _Window:
    """A sliding window over a text stream: `buf[pos:]` is what is not yet decoded; `base` the offset of buf[0]."""

    def __init__(self, fh: io.TextIOBase, max_chars: int) -> None:
        self.fh, self.buf, self.pos, self.base, self.eof, self.read = fh, "", 0, 0, False, 0
        self.max_chars = max_chars

    def more(self) -> bool:
        if self.eof:
            return False
        try:
            chunk = self.fh.read(CHUNK_CHARS)
        except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt .gz
            raise TraceError("HP820", f"the trace is cut short or corrupt ({exc})", self.offset) from None
        self.read += len(chunk)
        if self.read > self.max_chars:
            raise TraceError("HP820", f"the trace text is over the {self.max_chars / 2**20:.0f} MiB limit",
                             self.offset)
        if not chunk:
            self.eof = True
            return False
        if self.pos > CHUNK_CHARS:
            self.base += self.pos
            self.buf, self.pos = self.buf[self.pos:], 0
        self.buf += chunk
        return True

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def skip_ws(self) -> str:
        """The next non-blank character ('' at the end), not consumed."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            raise TraceError("HP820", f"not a Chrome trace: expected one of {chars!r} at character {self.offset}, "
                             f"found {c or 'the end of the file'!r}", self.offset)
        self.pos += 1
        return c

    def value(self, limit: int | None = None) -> Any:
        """Decode one JSON value, reading more text until it is whole (at most `limit` characters)."""
        self.skip_ws()
        while True:
            try:
                val, end = _DECODER.raw_decode(self.buf, self.pos)
            except RecursionError:  # the C decoder's depth limit: no profiler writes an event nested this deep
                raise TraceError("HP820", "not a Chrome trace: a value nested too deeply", self.offset) from None
            except json.JSONDecodeError as exc:
                if limit is not None and len(self.buf) - self.pos > limit:
                    raise TraceError("HP820", f"a top-level value over {limit / 2**20:.0f} MiB", self.offset) from None
                if not self.more():
                    raise TraceError("HP820", f"the trace ends inside a value at character {self.offset} "
                                     f"({exc.msg}): cut short?", self.offset) from None
                continue
            if end == len(self.buf) and self.more():  # a number may go on in the next chunk
                continue
            self.pos = end
            return val


def _events(w: _Window, on_event: Callable[[dict[str, Any]], None]) -> None:
    w.expect("[")
    if w.skip_ws() == "]":
        w.pos += 1
        return
    while True:
        ev = w.value()
        if isinstance(ev, dict):
            on_event(ev)
        if w.expect(",]") == "]":
            return


def stream_trace(fh: io.TextIOBase, on_event: Callable[[dict[str, Any]], None],
                 max_chars: int | None = None) -> dict[str, Any]:
    """Call `on_event` for every event of the trace in `fh` (at most `max_chars` of text, MAX_TRACE_BYTES when
    not given); return the other top-level keys (the JSON Object form), or {} for the bare JSON Array form."""
    w = _Window(fh, MAX_TRACE_BYTES if max_chars is None else max_chars)
    first = w.expect("{[")
    if first == "[":
        w.pos -= 1
        _events(w, on_event)
        return {}
    meta: dict[str, Any] = {}
    if w.skip_ws() == "}":
        return meta
    while True:
        key = w.value(limit=MAX_VALUE_CHARS)
        w.expect(":")
        if key == "traceEvents":
            _events(w, on_event)
            meta["traceEvents"] = True
        else:
            meta[str(key)] = w.value(limit=MAX_VALUE_CHARS)
        if w.expect(",}") == "}":
            return meta

