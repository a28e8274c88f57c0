"""Module-level job functions for the worker tests (the spawned child imports them by name, so they live in
a plain module, never in a test module or conftest)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def square(payload: int, *, progress: Callable[[float], None], cancelled: Callable[[], bool]) -> int:
    progress(1.0)
    return payload * payload


def slow(payload: float, *, progress: Callable[[float], None], cancelled: Callable[[], bool]) -> str:
    """Runs `payload` seconds in small chunks, honouring the cancel flag like the search does."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < payload:
        if cancelled():
            return "stopped"
        progress((time.monotonic() - t0) / payload)
        time.sleep(0.01)
    return "finished"


def stubborn(payload: float, *, progress: Callable[[float], None], cancelled: Callable[[], bool]) -> str:
    time.sleep(payload)
    return "finished"


def fail(payload: Any, *, progress: Callable[[float], None], cancelled: Callable[[], bool]) -> None:
    raise ValueError(f"bad payload {payload!r}")


def chatty(payload: str, *, progress: Callable[[float], None], cancelled: Callable[[], bool]) -> str:
    print("this must not reach the protocol stream")
    return payload
