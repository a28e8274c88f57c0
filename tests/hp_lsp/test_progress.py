"""Work-done progress: only when advertised, only for searches longer than the delay, cancellable."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any

from lsprotocol import types

from hp_lsp.client import ClientFeatures
from hp_lsp.features import progress as progress_mod
from hp_lsp.features.progress import SearchProgress


class FakeProgress:
    def __init__(self) -> None:
        self.tokens: dict[str, Future[Any]] = {}
        self.sent: list[tuple[str, str, Any]] = []

    async def create_async(self, token: str) -> None:
        self.tokens[token] = Future()
        self.sent.append(("create", token, None))

    def begin(self, token: str, value: Any) -> None:
        self.sent.append(("begin", token, value))

    def report(self, token: str, value: Any) -> None:
        self.sent.append(("report", token, value))

    def end(self, token: str, value: Any) -> None:
        self.sent.append(("end", token, value))


def progress_for(work_done: bool, on_cancel: Any = lambda uri: None) -> tuple[SearchProgress, FakeProgress]:
    """A SearchProgress over a fake tracker, for a client advertising (or not) window.workDoneProgress."""
    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=work_done))
    features = ClientFeatures.resolve(caps)
    tracker = FakeProgress()
    return SearchProgress(tracker, lambda: features.work_done_progress, on_cancel), tracker


async def test_long_search_gets_cancellable_progress(monkeypatch: Any) -> None:
    monkeypatch.setattr(progress_mod, "DELAY_S", 0.01)
    cancelled: list[str] = []
    p, tracker = progress_for(True, cancelled.append)
    p.started("file:///a.yaml", "Strategy search")
    await asyncio.sleep(0.05)
    p.report("file:///a.yaml", 0.5)
    kinds = [k for k, _, _ in tracker.sent]
    assert kinds == ["create", "begin", "report"]
    begin = tracker.sent[1][2]
    assert begin.cancellable and begin.percentage == 0
    assert tracker.sent[2][2].percentage == 50
    token = tracker.sent[0][1]
    p.cancelled(token)
    assert cancelled == ["file:///a.yaml"]
    p.finished("file:///a.yaml", "cancelled")
    assert tracker.sent[-1][0] == "end" and token not in tracker.tokens


async def test_fast_search_shows_nothing(monkeypatch: Any) -> None:
    monkeypatch.setattr(progress_mod, "DELAY_S", 0.05)
    p, tracker = progress_for(True)
    p.started("u", "Strategy search")
    await asyncio.sleep(0)
    p.finished("u")
    await asyncio.sleep(0.1)
    assert tracker.sent == []


async def test_no_progress_when_not_advertised() -> None:
    p, tracker = progress_for(False)
    p.started("u", "Strategy search")
    await asyncio.sleep(0.3)
    assert tracker.sent == []
