"""The search worker: a spawned process fed by a thread, superseded per key, killed on shutdown."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hp_lsp.worker import Job, Outcome, SearchWorker
from tests.support import lsp_jobs as jobs


@pytest.fixture
def results() -> queue.Queue[Outcome]:
    return queue.Queue()


@pytest.fixture
def worker(results: queue.Queue[Outcome]) -> Iterator[Callable[..., SearchWorker]]:
    """Makes SearchWorkers that report into `results`, and shuts every one down after the test, pass or fail."""
    made: list[SearchWorker] = []

    def make(fn: Callable[..., Any], **options: Any) -> SearchWorker:
        made.append(SearchWorker(fn, results.put, **options))
        return made[-1]

    yield make
    for w in made:
        w.shutdown()


def _next(q: queue.Queue[Outcome], timeout: float = 20.0) -> Outcome:
    return q.get(timeout=timeout)


def test_runs_a_job_and_reports_progress(worker: Callable[..., SearchWorker], results: queue.Queue[Outcome]) -> None:
    seen: list[float] = []
    w = worker(jobs.square, on_progress=lambda job, f: seen.append(f))
    w.submit(Job("a", 1, 7))
    out = _next(results)
    assert (out.job.key, out.result, out.error, out.cancelled) == ("a", 49, None, False)
    assert seen == [1.0]


def test_new_job_for_same_key_supersedes_the_running_one(worker: Callable[..., SearchWorker], results: queue.Queue[Outcome]) -> None:
    started: queue.Queue[Job] = queue.Queue()
    w = worker(jobs.slow, on_start=started.put)
    w.submit(Job("a", 1, 30.0))
    assert started.get(timeout=20).generation == 1
    w.submit(Job("a", 2, 0.05))
    first = _next(results)
    assert first.job.generation == 1 and first.cancelled
    second = _next(results)
    assert second.job.generation == 2 and second.result == "finished" and not second.cancelled


def test_pending_jobs_are_replaced_not_queued(worker: Callable[..., SearchWorker], results: queue.Queue[Outcome]) -> None:
    started: queue.Queue[Job] = queue.Queue()
    w = worker(jobs.slow, on_start=started.put)
    w.submit(Job("busy", 1, 0.5))
    started.get(timeout=20)
    for gen in range(1, 6):
        w.submit(Job("b", gen, 0.01))
    outs = [_next(results), _next(results)]
    assert [o.job.key for o in outs] == ["busy", "b"]
    assert outs[1].job.generation == 5
    with pytest.raises(queue.Empty):
        results.get(timeout=0.3)


def test_a_child_ignoring_cancel_is_killed_and_replaced(worker: Callable[..., SearchWorker], results: queue.Queue[Outcome]) -> None:
    started: queue.Queue[Job] = queue.Queue()
    w = worker(jobs.stubborn, on_start=started.put, cancel_grace_s=0.2)
    w.submit(Job("a", 1, 60.0))
    started.get(timeout=20)
    t0 = time.monotonic()
    w.cancel("a")
    out = _next(results)
    assert out.cancelled and time.monotonic() - t0 < 2.0
    w.submit(Job("a", 2, 0.0))
    assert _next(results).result == "finished"


def test_errors_come_back_as_text(worker: Callable[..., SearchWorker], results: queue.Queue[Outcome]) -> None:
    w = worker(jobs.fail)
    w.submit(Job("a", 1, 3))
    out = _next(results)
    assert out.result is None and out.error and "bad payload 3" in out.error


def test_child_stdout_goes_to_stderr(worker: Callable[..., SearchWorker], results: queue.Queue[Outcome], capfd: pytest.CaptureFixture[str]) -> None:
    w = worker(jobs.chatty)
    w.submit(Job("a", 1, "ok"))
    assert _next(results).result == "ok"
    w.shutdown()
    out, err = capfd.readouterr()
    assert "must not reach" not in out and "must not reach" in err


def test_shutdown_mid_job_is_fast(worker: Callable[..., SearchWorker], results: queue.Queue[Outcome]) -> None:
    started: queue.Queue[Job] = queue.Queue()
    w = worker(jobs.stubborn, on_start=started.put)
    w.submit(Job("a", 1, 60.0))
    started.get(timeout=20)
    proc = w._proc
    t0 = time.monotonic()
    w.shutdown()
    assert time.monotonic() - t0 < 1.0
    assert proc is not None and not proc.is_alive()
