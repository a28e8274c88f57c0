"""The stdio half of a minimal LSP client, shared by the benchmarks that drive `python -m hp_lsp` directly
(lsp_latency.py, hostile_inputs.py): start the server, write one framed JSON-RPC message, read messages
until the server closes its stdout. Each benchmark keeps its own bookkeeping (futures and timestamps, or
answers and diagnostics by URI) on top; no pygls on this side, so what is timed is the server alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]


def start_server() -> subprocess.Popen[bytes]:
    """`python -m hp_lsp` with this interpreter in the repository root, unbuffered, stderr dropped."""
    return subprocess.Popen([sys.executable, "-m", "hp_lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def write_message(proc: subprocess.Popen[bytes], msg: dict[str, Any], lock: threading.Lock) -> None:
    """One message with its Content-Length header; `lock` keeps writes from two threads whole."""
    body = json.dumps(msg).encode()
    assert proc.stdin is not None
    with lock:
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()


def read_messages(out: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The messages on the server's stdout, in order, until it closes."""
    while True:
        length = 0
        while True:
            line = out.readline()
            if not line:
                return
            if not line.strip():
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        yield json.loads(out.read(length))


def reply_to_server(msg: dict[str, Any]) -> Any:
    """The client's answer to a request from the server: edits are applied, settings left to defaults."""
    if msg["method"] == "workspace/applyEdit":
        return {"applied": True}
    if msg["method"] == "workspace/configuration":
        return [None for _ in msg["params"]["items"]]
    return None


def start_reader(proc: subprocess.Popen[bytes], handle: Callable[[dict[str, Any]], None]) -> threading.Thread:
    """A daemon thread that passes every message from the server to `handle`."""
    def loop() -> None:
        assert proc.stdout is not None
        for msg in read_messages(proc.stdout):
            handle(msg)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread
