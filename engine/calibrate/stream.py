"""Streaming the events of a Chrome trace (the Trace Event Format PyTorch's profiler writes, `.json` or
`.json.gz`) in bounded memory: the top-level object is walked key by key and the `traceEvents` list is decoded
a window of text at a time, so a trace of hundreds of MB never sits in memory whole.

Python's own JSON decoder (the C scanner) decodes the events: each window's whole events at once (the window cut
after its last event, the list decoded by one call: a Python call per event costs more than the event's
decoding), else one by one (`json.JSONDecoder.raw_decode`) where the cut does not fall between events. A
streaming JSON library would add a dependency for what this does, since a trace is one flat list of small
objects. A value cut by the window's end is decoded again only once what is pending has doubled, so a value
of n characters costs O(n), not one decode per chunk (quadratic); a decoding error not at the window's end is
refused where it is, not read on to the end of the file.

Bounds: the file (or, for gzip, the uncompressed size its trailer states) at most MAX_TRACE_BYTES, checked
before reading; the decompressed text counted as it is read (the trailer states the size mod 2^32; one stating
more than deflate can reach from the file's bytes is a cut-short file); one event at most MAX_EVENT_CHARS, any
other top-level value at most MAX_VALUE_CHARS. A gzip file is read as one whatever its name (a `.json` that is
gzip-compressed), and a UTF-8 byte order mark before the text is skipped.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import stat
import zlib
from collections.abc import Callable
from typing import Any

MAX_TRACE_BYTES = 1 << 30  # 1 GiB of trace text: a profiling window of a few steps is far below it
GZIP_MAX_RATIO = 1032  # deflate's limit: a trailer stating more than this times the file is not a real one
GZIP_MAGIC = b"\x1f\x8b"
# One event larger than this is refused: a profiler's largest (an op's `Input Dims` over a fused optimizer's
# thousands of tensors) are hundreds of KB; a multi-megabyte event name is no profiler's.
MAX_EVENT_CHARS = 16 << 20
MAX_VALUE_CHARS = 64 << 20  # a top-level value other than traceEvents (metadata) larger than this is refused
CHUNK_CHARS = 1 << 20
_DECODER = json.JSONDecoder()
_TEXT = re.compile(r"[^ \t\r\n]")  # JSON's blanks are these four
# A decoding error this close to the window's end may be a value the window cut (`tru|e`, `1.5e|-3`), not bad JSON.
_CUT_TAIL = 16
_CUT_TRIES = 8  # the `},` looked at from a window's end for the last event's: each a search, not one per event


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


def _is_gzip(path: str) -> bool:
    """Named .gz, or starting with gzip's magic bytes: a compressed trace saved as `.json` is read as one (it
    was refused as "not a Chrome trace ... found '\\x1f'")."""
    if path.endswith(".gz"):
        return True
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def regular_file(path: str, name: str) -> os.stat_result:
    """The stat of the regular file at `path` (links followed), else HP801 naming it as `name`: a FIFO would block
    the read for ever, a link to /dev/zero fill the memory. Every profile file is read only past this."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TraceError("HP801", f"cannot read {name}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TraceError("HP801", f"{name} is not a regular file")
    return st


def open_trace(path: str, max_bytes: int | None = None) -> io.TextIOBase:
    """The trace's text, refused before reading when it is not a regular file or is over `max_bytes`
    (MAX_TRACE_BYTES when not given). A byte order mark before the text is dropped (`utf-8-sig`), as logs'."""
    max_bytes = MAX_TRACE_BYTES if max_bytes is None else max_bytes
    st = regular_file(path, f"the trace {path}")
    try:
        is_gz = _is_gzip(path)
    except OSError as exc:
        raise TraceError("HP801", f"cannot read the trace {path}: {exc.strerror or exc}") from None
    stated = _gzip_size(path) if is_gz else None
    if stated is not None and stated > GZIP_MAX_RATIO * st.st_size:
        raise TraceError("HP820", f"the trace {path} is cut short or corrupt: its last bytes are not a gzip "
                         "trailer (copy the whole file)")
    size = max(st.st_size, stated or 0)
    if size > max_bytes:
        raise TraceError("HP820", f"the trace {path} is {size / 2**20:.0f} MiB, over the {max_bytes / 2**20:.0f} MiB "
                         "limit: profile a few steps (torch.profiler.schedule(active=3)) and calibrate on that")
    raw = gzip.open(path, "rt", encoding="utf-8-sig", errors="replace") if is_gz else open(  # noqa: SIM115
        path, encoding="utf-8-sig", errors="replace")
    return raw  # type: ignore[return-value]


class _Window:
    """A sliding window over a text stream: `buf[pos:]` is what is not yet decoded; `base` the offset of buf[0].
    Each read drops what is decoded and appends at least a chunk, so every character is copied O(1) times."""

    def __init__(self, fh: io.TextIOBase, max_chars: int) -> None:
        self.fh, self.buf, self.pos, self.base, self.eof, self.read = fh, "", 0, 0, False, 0
        self.max_chars = max_chars

    def more(self, want: int = 0) -> bool:
        """Read `want` more characters (at least a chunk); False at the end of the text."""
        if self.eof:
            return False
        try:
            chunk = self.fh.read(max(want, CHUNK_CHARS))
        except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt .gz
            raise TraceError("HP820", f"the trace is cut short or corrupt ({exc})", self.offset) from None
        self.read += len(chunk)
        if self.read > self.max_chars:
            raise TraceError("HP820", f"the trace text is over the {self.max_chars / 2**20:.0f} MiB limit",
                             self.offset)
        if not chunk:
            self.eof = True
            return False
        self.buf, self.base, self.pos = self.buf[self.pos:] + chunk, self.base + self.pos, 0
        return True

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def skip_ws(self) -> str:
        """The next non-blank character ('' at the end), not consumed: a regular-expression search, not a Python
        step per blank (128 MiB of blanks between two events took 17 s)."""
        while True:
            found = _TEXT.search(self.buf, self.pos)
            if found is not None:
                self.pos = found.start()
                return self.buf[self.pos]
            self.pos = len(self.buf)
            if not self.more():
                return ""

    def expect(self, chars: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            raise TraceError("HP820", f"not a Chrome trace: expected one of {chars!r} at character {self.offset}, "
                             f"found {c or 'the end of the file'!r}", self.offset)
        self.pos += 1
        return c

    def value(self, limit: int, what: str = "a top-level value") -> Any:
        """Decode one JSON value (`what`, for messages) of at most `limit` characters, reading on while the
        window cuts it."""
        self.skip_ws()
        while True:
            try:
                val, end = _DECODER.raw_decode(self.buf, self.pos)
            except RecursionError:  # the C decoder's depth limit: no profiler writes an event nested this deep
                raise TraceError("HP820", "not a Chrome trace: a value nested too deeply", self.offset) from None
            except json.JSONDecodeError as exc:
                self._read_on(exc, limit, what)
                continue
            except ValueError as exc:  # an integer of more digits than Python converts
                raise TraceError("HP820", f"not a Chrome trace: {exc} at character {self.offset}",
                                 self.offset) from None
            if end == len(self.buf) and self.more():  # a number may go on in the next chunk
                continue
            if end - self.pos > limit:  # whole at once, read ahead by up to as much again
                raise self._over(limit, what)
            self.pos = end
            return val

    def _over(self, limit: int, what: str) -> TraceError:
        return TraceError("HP820", f"{what} over {limit / 2**20:.0f} MiB at character {self.offset}: no profiler "
                          "writes one this large", self.offset)

    def _read_on(self, exc: json.JSONDecodeError, limit: int, what: str) -> None:
        """After a failed decode: read on, doubling what is pending, when the window's end may have cut the value;
        else refuse it where it is wrong, or as over `limit`, or as cut short at the end of the text."""
        pending = len(self.buf) - self.pos
        if not exc.msg.startswith("Unterminated string") and exc.pos < len(self.buf) - _CUT_TAIL:
            at = self.base + exc.pos
            raise TraceError("HP820", f"not a Chrome trace: {exc.msg} at character {at}", at) from None
        if pending > limit:
            raise self._over(limit, what) from None
        if not self.more(pending):
            raise TraceError("HP820", f"the trace ends inside a value at character {self.offset} "
                             f"({exc.msg}): cut short?", self.offset) from None

    def _cut(self) -> int:
        """Where the window's last whole event ends: its last `}` followed by `,` and `{` (blanks between; a `},`
        inside an event's nested object is followed by a key), of the last few `},`; -1 when none is."""
        end = len(self.buf)
        for _ in range(_CUT_TRIES):
            cut = self.buf.rfind("},", self.pos, end)
            if cut < 0:
                return -1
            after = _TEXT.search(self.buf, cut + 2)
            if after is None or self.buf[after.start()] == "{":  # the next event not read yet: the decode tells
                return cut
            end = cut + 1
        return -1

    def whole_events(self) -> list[Any] | None:
        """The window's whole events decoded by one call, the window cut after its last event (_cut); None when
        it cannot be cut or the cut does not fall between events (a `},{` inside a string: the list then fails to
        decode), to be decoded one by one."""
        if len(self.buf) - self.pos < CHUNK_CHARS:
            self.more()
        cut = self._cut()
        if cut < 0:
            return None
        try:
            events = _DECODER.decode("[" + self.buf[self.pos:cut + 1] + "]")
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
            return None
        self.pos = cut + 1
        return events  # type: ignore[no-any-return]


def _events(w: _Window, on_events: Callable[[list[Any]], None]) -> None:
    """The traceEvents list, window by window. Where a window cannot be cut into whole events its events are
    decoded one by one up to its end before a cut is tried again, so a failed cut costs one pass over its
    window, never one per event."""
    w.expect("[")
    if w.skip_ws() == "]":
        w.pos += 1
        return
    one_by_one_to = 0  # the end of the last window that could not be cut: its events are decoded one at a time
    while True:
        events = None
        if w.offset >= one_by_one_to:
            events = w.whole_events()
            one_by_one_to = w.base + len(w.buf) if events is None else one_by_one_to
        if events is None:
            events = [w.value(MAX_EVENT_CHARS, "an event")]
        try:
            on_events(events)
        except TraceError as exc:  # a bound of the reader's: positioned where reading stopped
            exc.offset = w.offset if exc.offset is None else exc.offset
            raise
        if w.expect(",]") == "]":
            return


def stream_trace(fh: io.TextIOBase, on_events: Callable[[list[Any]], None],
                 max_chars: int | None = None) -> dict[str, Any]:
    """Call `on_events` with the events of the trace in `fh`, a list at a time, in the order written (at most
    `max_chars` of text, MAX_TRACE_BYTES when not given); return the other top-level keys (the JSON Object
    form), or {} for the bare JSON Array form."""
    w = _Window(fh, MAX_TRACE_BYTES if max_chars is None else max_chars)
    first = w.expect("{[")
    if first == "[":
        w.pos -= 1
        _events(w, on_events)
        return {}
    meta: dict[str, Any] = {}
    if w.skip_ws() == "}":
        return meta
    while True:
        key = w.value(MAX_VALUE_CHARS)
        w.expect(":")
        if key == "traceEvents":
            _events(w, on_events)
            meta["traceEvents"] = True
        else:
            meta[str(key)] = w.value(MAX_VALUE_CHARS)
        if w.expect(",}") == "}":
            return meta
