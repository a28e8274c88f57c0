"""Searches in a worker process, fed by a background thread, so the event loop never waits for them.

Why a process: [LSP] §2 measured hovers at 120-220 ms median while CPU-bound threads ran in the
server (the GIL), and 0.6 ms when the same work ran in a spawned process. Why our own thread and not
`ls.thread_pool`: that pool also reads stdin, and long work there starves it.

Model: one job per key (a document URI) at a time. Submitting a job for a key supersedes the pending one
and asks the running one to stop (its result would be stale anyway). The child checks a shared cancel
flag between chunks through the `cancelled` callback it hands to the job function; a child that ignores it
for longer than `cancel_grace_s` is killed and respawned. `shutdown()` kills the child at once, so the
server exits within a second even mid-search.

The job function runs in the child: it must be a module-level function (pickled by reference) taking
`(payload, *, progress, cancelled)` and returning a picklable value. Engine results freeze their maps in
`MappingProxyType`, which pickle refuses; this module (imported by both processes: the child runs
`_child_main`) registers a `copyreg` reducer that rebuilds each proxy around a copy of its dict, so results
cross the pipe as the engine typed them.
"""

from __future__ import annotations

import contextlib
import copyreg
import multiprocessing
import os
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import MappingProxyType
from typing import Any

from engine.heap import keep_freed_heap

JobFn = Callable[..., Any]


def frozen_map(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    """Unpickling side of the reducer below (pickle needs a function it can import by name: the type itself
    is `builtins.mappingproxy`, which has no importable name)."""
    return MappingProxyType(items)


def _reduce_mapping_proxy(proxy: MappingProxyType[Any, Any]) -> tuple[Callable[..., Any], tuple[dict[Any, Any]]]:
    """Pickle a read-only map as `frozen_map(dict(proxy))`: the copy is as frozen as the original."""
    return frozen_map, (dict(proxy),)


copyreg.pickle(MappingProxyType, _reduce_mapping_proxy)


@dataclass(frozen=True, slots=True)
class Job:
    key: str  # the document URI
    generation: int  # the document's generation when the job was made
    payload: Any  # picklable input of the job function


@dataclass(frozen=True, slots=True)
class Outcome:
    job: Job
    result: Any = None
    error: str | None = None
    cancelled: bool = False
    elapsed_s: float = 0.0


def _child_main(conn: Connection, cancel_flag: Any, fn: JobFn) -> None:
    """The worker process: run jobs one by one until told to stop or the pipe closes."""
    # Nothing but the protocol may reach the server's stdout, and the child inherited it.
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    sys.stdout = sys.stderr
    keep_freed_heap()  # search after search prices block after block: keep their freed blocks (engine.heap)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "stop":
            return
        _, jid, payload = msg
        last = [0.0]

        def progress(frac: float, jid: int = jid, last: list[float] = last) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.1:
                last[0] = now
                conn.send(("progress", jid, float(frac)))

        def cancelled(jid: int = jid) -> bool:
            return bool(cancel_flag.value == jid)

        try:
            result = fn(payload, progress=progress, cancelled=cancelled)
            conn.send(("cancelled", jid, None) if cancelled() else ("done", jid, result))
        except Exception:
            try:
                conn.send(("error", jid, traceback.format_exc()))
            except (OSError, ValueError):
                return


class SearchWorker:
    """Runs `fn` in one spawned child process; callbacks fire on the background thread."""

    def __init__(
        self,
        fn: JobFn,
        on_done: Callable[[Outcome], None],
        *,
        on_start: Callable[[Job], None] | None = None,
        on_progress: Callable[[Job, float], None] | None = None,
        cancel_grace_s: float = 1.0,
    ) -> None:
        self._fn = fn
        self._on_done = on_done
        self._on_start = on_start
        self._on_progress = on_progress
        self._grace = cancel_grace_s
        self._ctx = multiprocessing.get_context("spawn")
        self._cond = threading.Condition()
        self._pending: OrderedDict[str, Job] = OrderedDict()
        self._running: Job | None = None
        self._cancel_running = False
        self._stopped = False
        self._proc: Any = None
        self._conn: Connection | None = None
        self._cancel_flag: Any = None
        self._next_id = 0
        self._warm = False
        self._thread = threading.Thread(target=self._loop, name="hp-lsp-search", daemon=True)
        self._thread.start()

    # -- called from any thread (the event loop) ---------------------------------------------------------
    def submit(self, job: Job) -> None:
        with self._cond:
            if self._stopped:
                return
            self._pending.pop(job.key, None)
            self._pending[job.key] = job
            if self._running is not None and self._running.key == job.key:
                self._cancel_running = True
            self._cond.notify_all()

    def cancel(self, key: str) -> None:
        with self._cond:
            self._pending.pop(key, None)
            if self._running is not None and self._running.key == key:
                self._cancel_running = True
            self._cond.notify_all()

    def warm_up(self) -> None:
        """Start the child now (spawning and importing the engine takes a moment) instead of on first use."""
        with self._cond:
            self._cond.notify_all()
            self._warm = True

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._running is not None or bool(self._pending)

    def shutdown(self) -> None:
        """Stop at once: kill the child, drop pending work. Never blocks for long."""
        with self._cond:
            self._stopped = True
            self._pending.clear()
            self._cond.notify_all()
            proc = self._proc
        if proc is not None:
            try:
                proc.kill()
                proc.join(0.5)
            except Exception:  # already gone
                pass

    # -- the background thread --------------------------------------------------------------------------
    def _ensure_child(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            return
        self._close_child()
        parent, child = self._ctx.Pipe(duplex=True)
        flag = self._ctx.Value("q", -1, lock=False)
        proc = self._ctx.Process(target=_child_main, args=(child, flag, self._fn), name="hp-lsp-search-worker",
                                 daemon=True)
        with self._cond:
            if self._stopped:
                return
            proc.start()
            self._proc, self._conn, self._cancel_flag = proc, parent, flag
        child.close()

    def _close_child(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            try:
                proc.kill()
                proc.join(0.5)
            except Exception:
                pass

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and not self._pending and not self._warm:
                    self._cond.wait()
                if self._stopped:
                    return
                if self._warm and not self._pending:
                    self._warm = False
                    job = None
                else:
                    _, job = self._pending.popitem(last=False)
                    self._running = job
                    self._cancel_running = False
            try:
                self._ensure_child()
                if job is not None:
                    outcome = self._execute(job)
                    if outcome is not None:
                        self._on_done(outcome)
            except Exception:  # never let the thread die: report and carry on
                if job is not None and not self._stopped:
                    self._safe_done(Outcome(job, error=traceback.format_exc()))
            finally:
                with self._cond:
                    self._running = None

    def _safe_done(self, outcome: Outcome) -> None:
        try:
            self._on_done(outcome)
        except Exception:
            traceback.print_exc(file=sys.stderr)

    def _execute(self, job: Job) -> Outcome | None:
        conn = self._conn
        if conn is None or self._stopped:
            return None
        self._next_id += 1
        jid = self._next_id
        t0 = time.monotonic()
        conn.send(("job", jid, job.payload))
        if self._on_start is not None:
            self._on_start(job)
        cancel_sent_at: float | None = None
        while True:
            if self._stopped:
                return None
            with self._cond:
                want_cancel = self._cancel_running
            if want_cancel and cancel_sent_at is None:
                self._cancel_flag.value = jid
                cancel_sent_at = time.monotonic()
            if cancel_sent_at is not None and time.monotonic() - cancel_sent_at > self._grace:
                self._close_child()  # it ignored the flag: kill it, a fresh one starts for the next job
                return Outcome(job, cancelled=True, elapsed_s=time.monotonic() - t0)
            try:
                ready = conn.poll(0.05)
                msg = conn.recv() if ready else None
            except (EOFError, OSError):
                if self._stopped:
                    return None
                self._close_child()
                return Outcome(job, error="the search worker process died", elapsed_s=time.monotonic() - t0)
            if msg is None or msg[1] != jid:
                continue
            kind = msg[0]
            if kind == "progress":
                if self._on_progress is not None and cancel_sent_at is None:
                    self._on_progress(job, msg[2])
                continue
            elapsed = time.monotonic() - t0
            if kind == "done":
                return Outcome(job, result=msg[2], cancelled=cancel_sent_at is not None, elapsed_s=elapsed)
            if kind == "cancelled":
                return Outcome(job, cancelled=True, elapsed_s=elapsed)
            return Outcome(job, error=str(msg[2]), elapsed_s=elapsed)
