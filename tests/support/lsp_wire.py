"""A byte-level LSP client for the protocol tests (tests/e2e/test_protocol.py): it writes whatever bytes a test
gives (broken headers, bodies that are not JSON-RPC) to `python -m hp_lsp` over stdio or TCP, and reads every
frame back with a strict JSON parser (NaN and Infinity refused, as VS Code's parser refuses them). pytest-lsp
cannot send malformed messages, so these tests speak the wire themselves."""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from tests.support.lsp_e2e import ROOT


def strict_loads(body: bytes) -> Any:
    """json.loads that refuses NaN, Infinity and -Infinity (RFC 8259 has none of them)."""
    def refuse(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(body, parse_constant=refuse)


def frame(msg: dict[str, Any] | bytes) -> bytes:
    body = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frames(stream: IO[bytes], sink: Callable[[Any], None]) -> None:
    """Every frame on `stream` to `sink` (strictly parsed) until it closes; a frame that is not strict JSON
    reaches the sink as the exception."""
    while True:
        length = None
        while True:
            line = stream.readline()
            if not line:
                return
            if not line.strip():
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        assert length is not None, "a frame without Content-Length from the server"
        body = stream.read(length)
        try:
            sink(strict_loads(body))
        except ValueError as exc:
            sink(exc)


class WireClient:
    """One connection to the server: `send` raw bytes or messages, `wait_for` a frame, `closed` at EOF."""

    def __init__(self, out: IO[bytes], write: Callable[[bytes], None]) -> None:
        self.frames: list[Any] = []
        self._new: queue.Queue[Any] = queue.Queue()
        self._write = write
        self.eof = threading.Event()
        threading.Thread(target=self._read, args=(out,), daemon=True).start()

    def _read(self, out: IO[bytes]) -> None:
        try:
            read_frames(out, self._got)
        finally:
            self.eof.set()

    def _got(self, msg: Any) -> None:
        self.frames.append(msg)
        if isinstance(msg, dict) and "method" in msg and "id" in msg:  # a request from the server
            result: Any = [None for _ in msg["params"]["items"]] if msg["method"] == "workspace/configuration" else None
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    def send(self, msg: dict[str, Any] | bytes, *, raw: bool = False) -> None:
        data = msg if raw and isinstance(msg, bytes) else frame(msg)
        with contextlib.suppress(OSError):  # the server closed the connection: the frames say why
            self._write(data)

    def wait_for(self, predicate: Callable[[Any], bool], timeout: float = 30.0, what: str = "a frame") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in list(self.frames):
                if predicate(msg):
                    return msg
            if self.eof.is_set() and not any(predicate(m) for m in self.frames):
                break
            time.sleep(0.02)
        raise AssertionError(f"no {what} within {timeout} s; frames: {self.frames!r:.2000}")

    def answer(self, msg_id: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The response to request `msg_id` (result or error)."""
        return self.wait_for(lambda m: isinstance(m, dict) and m.get("id") == msg_id and "method" not in m
                             and ("result" in m or "error" in m), timeout, f"answer to {msg_id!r}")

    def request(self, msg_id: Any, method: str, params: Any = None, timeout: float = 30.0) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return self.answer(msg_id, timeout)

    def initialize(self, init: dict[str, Any] | None = None, root_uri: str | None = None) -> None:
        self.request("init", "initialize", {"capabilities": {}, "initializationOptions": init, "rootUri": root_uri})
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})


class StdioServer:
    """`python -m hp_lsp` on pipes, with a WireClient on them; stderr kept for the traceback check."""

    def __init__(self, *args: str) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server); a file, not a pipe: a full pipe would stall the server
        self.proc = subprocess.Popen([sys.executable, "-m", "hp_lsp", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, cwd=ROOT)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        stdin = self.proc.stdin

        def write(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        self.client = WireClient(self.proc.stdout, write)

    def finish(self, timeout: float = 30.0) -> tuple[int, str]:
        """Close stdin, wait for the exit; (return code, stderr)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self.stderr.seek(0)
        return self.proc.returncode, self.stderr.read().decode(errors="replace")


def tcp_connect(port: int, timeout: float = 30.0) -> tuple[socket.socket, WireClient]:
    """A connection to `hp-lsp --tcp` on localhost, retried while the server starts."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    sock.settimeout(None)
    return sock, WireClient(sock.makefile("rb"), sock.sendall)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
