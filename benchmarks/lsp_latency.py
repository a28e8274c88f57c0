"""Latency of the language server over stdio, as an editor sees it (D-015's targets).

Runs `python -m hp_lsp` as a subprocess and speaks JSON-RPC to it directly (a minimal client: a reader
thread, futures per request id, timestamps on every notification). Prints:

  * diagnostics after save of examples/llama3-70b/train.yaml: the fast-check publish and the publish with
    the search's results (target <= 500 ms);
  * hover latency (median / p95 / max) idle and while a search runs (target p95 <= 20 ms);
  * didChange while a search runs: time to the debounced re-check's publish (debounce 300 ms + check),
    and a hover sent right after each change (the loop is never blocked);
  * exit time when shutdown + exit arrive mid-search (target < 1 s).

Usage: .venv/bin/python benchmarks/lsp_latency.py [--rounds N] [--examples DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lsp_stdio import reply_to_server, start_reader, start_server, write_message

ROOT = Path(__file__).resolve().parents[1]


class Client:
    """A tiny LSP client: enough for timing, with answers to the server's requests."""

    def __init__(self) -> None:
        self.proc = start_server()
        self._next = 0
        self._pending: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()
        self.notes: list[tuple[float, str, Any]] = []  # (time, method, params)
        self._cv = threading.Condition()
        self._reader = start_reader(self.proc, self._handle)

    def _send(self, msg: dict[str, Any]) -> None:
        write_message(self.proc, msg, self._lock)

    def request(self, method: str, params: Any) -> Future[Any]:
        with self._lock:
            self._next += 1
            mid = self._next
        fut: Future[Any] = Future()
        self._pending[mid] = fut
        self._send({"jsonrpc": "2.0", "id": mid, "method": method, "params": params})
        return fut

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _handle(self, msg: dict[str, Any]) -> None:
        now = time.perf_counter()
        if "method" in msg:  # a notification, or a request from the server (answered first)
            if "id" in msg:
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": reply_to_server(msg)})
            with self._cv:
                self.notes.append((now, msg["method"], msg.get("params")))
                self._cv.notify_all()
        elif "id" in msg:
            fut = self._pending.pop(msg["id"], None)
            if fut is not None:
                fut.set_result(msg.get("result"))

    def wait_note(self, method: str, after: float, pred: Any = None, timeout: float = 120.0) -> tuple[float, Any]:
        deadline = time.perf_counter() + timeout
        with self._cv:
            while True:
                for t, m, p in self.notes:
                    if t >= after and m == method and (pred is None or pred(p)):
                        return t, p
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError(f"no {method} within {timeout} s")
                self._cv.wait(left)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def fmt(xs: list[float]) -> str:
    return (f"median {statistics.median(xs):6.2f} ms · p95 {pct(xs, 0.95):6.2f} ms · max {max(xs):6.2f} ms "
            f"(n={len(xs)})")


CAPS = {
    "window": {"workDoneProgress": True},
    "workspace": {"workspaceEdit": {"documentChanges": True}, "applyEdit": True},
    "textDocument": {"hover": {"contentFormat": ["markdown", "plaintext"]},
                     "synchronization": {"didSave": True}},
}


def start(folder: Path) -> Client:
    c = Client()
    c.request("initialize", {"processId": os.getpid(), "rootUri": folder.as_uri(), "capabilities": CAPS}).result(30)
    c.notify("initialized", {})
    return c


def open_doc(c: Client, path: Path) -> tuple[str, str]:
    uri = path.as_uri()
    text = path.read_text()
    c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}})
    return uri, text


def hover_once(c: Client, uri: str, line: int, col: int) -> float:
    t0 = time.perf_counter()
    c.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col}}).result(10)
    return (time.perf_counter() - t0) * 1000


def find(text: str, needle: str) -> tuple[int, int]:
    for n, line in enumerate(text.splitlines()):
        if needle in line:
            return n, line.index(needle) + 1
    return 0, 0


def publishes_for(uri: str) -> Any:
    return lambda p: p and p.get("uri") == uri


def search_finished(c: Client, after: float, timeout: float = 120) -> float:
    """Time the search's progress ended, or (fast searches report no progress) its result publish."""
    t, _ = c.wait_note("textDocument/publishDiagnostics", after, timeout=timeout)
    t2, _ = c.wait_note("textDocument/publishDiagnostics", t + 1e-9, timeout=timeout)
    return t2


def after_save(c: Client, uri: str, rounds: int) -> None:
    """1. diagnostics after save: the fast-check publish and the one with the search's results."""
    fast, full = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        c.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        t1, _ = c.wait_note("textDocument/publishDiagnostics", t0, publishes_for(uri))
        t2, _ = c.wait_note("textDocument/publishDiagnostics", t1 + 1e-9, publishes_for(uri))
        fast.append((t1 - t0) * 1000)
        full.append((t2 - t0) * 1000)
        time.sleep(0.2)
    print(f"diagnostics after save, fast checks      : {fmt(fast)}")
    print(f"diagnostics after save, with search      : {fmt(full)}   (target <= 500 ms)")


def hovers(c: Client, uri: str, line: int, col: int, rounds: int) -> None:
    """2. hover idle / while searching."""
    idle = [hover_once(c, uri, line, col) for _ in range(200)]
    print(f"hover, idle                              : {fmt(idle)}")
    busy: list[float] = []
    for _ in range(rounds * 4):
        t0 = time.perf_counter()
        c.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        done = threading.Event()

        def waiter(t0: float = t0, done: threading.Event = done) -> None:
            try:
                t1, _ = c.wait_note("textDocument/publishDiagnostics", t0, publishes_for(uri))
                c.wait_note("textDocument/publishDiagnostics", t1 + 1e-9, publishes_for(uri))
            finally:
                done.set()

        threading.Thread(target=waiter, daemon=True).start()
        while not done.is_set():
            busy.append(hover_once(c, uri, line, col))
            time.sleep(0.005)
    print(f"hover, while a search runs               : {fmt(busy)}   (target p95 <= 20 ms)")


def edits_during_search(c: Client, uri: str, text: str, line: int, col: int, rounds: int) -> None:
    """3. didChange while a search runs: a hover right after it, and the debounced re-check's publish."""
    to_publish, hover_after = [], []
    for i in range(rounds):
        c.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        time.sleep(0.01)
        t0 = time.perf_counter()
        # A half-typed edit (a syntax error): the re-check's publish is the first one carrying HP001.
        c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 100 + 2 * i},
                                             "contentChanges": [{"text": text.replace("model:", "model: [", 1)}]})
        hover_after.append(hover_once(c, uri, line, col))
        t1, _ = c.wait_note("textDocument/publishDiagnostics", t0,
                            lambda p: p and p.get("uri") == uri
                            and any(d.get("code") == "HP001" for d in p.get("diagnostics", [])))
        c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 101 + 2 * i},
                                             "contentChanges": [{"text": text}]})
        to_publish.append((t1 - t0) * 1000)
        time.sleep(0.5)
    print(f"didChange during a search -> hover       : {fmt(hover_after)}")
    print(f"didChange during a search -> re-check    : {fmt(to_publish)}   (300 ms debounce included)")


def exits_mid_search(folder: Path, train: Path, rounds: int) -> None:
    """4. shutdown + exit while the first search runs: time until the process is gone."""
    exits = []
    for _ in range(rounds):
        c = start(folder)
        uri, _text = open_doc(c, train)
        c.wait_note("textDocument/publishDiagnostics", 0, publishes_for(uri))
        time.sleep(0.05)  # the search has started in the worker
        t0 = time.perf_counter()
        c.request("shutdown", None).result(10)
        c.notify("exit", None)
        c.proc.wait(10)
        exits.append((time.perf_counter() - t0) * 1000)
    print(f"shutdown+exit mid-search -> process gone : {fmt(exits)}   (target < 1000 ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--examples", type=Path, default=ROOT / "examples")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hp-lsp-bench-"))
    try:
        llama = tmp / "llama3-70b"
        shutil.copytree(args.examples / "llama3-70b", llama)
        # The train.yaml; its cluster and search space come from the search config beside it.
        c = start(llama)
        train = llama / "train.yaml"
        uri, text = open_doc(c, train)
        c.wait_note("textDocument/publishDiagnostics", 0, publishes_for(uri))
        search_finished(c, 0)
        line, col = find(text, "tp_size")
        after_save(c, uri, args.rounds)
        hovers(c, uri, line, col, args.rounds)
        edits_during_search(c, uri, text, line, col, args.rounds)
        c.proc.kill()
        c.proc.wait()
        exits_mid_search(llama, train, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    main()
