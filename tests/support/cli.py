"""Running `hp-plan` the way a user does, in a subprocess, and copying the examples it runs on."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


# The address space a bounded run may use: numpy and its BLAS reserve a few hundred MB of it at import; a
# timeline of 10^9 boxes or a log read whole needs many GB and fails under it.
BOUNDED_MEMORY = 2 << 30


def _run(command: list[str], cwd: Path, timeout: float, memory: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's engine, whatever else is installed

    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, preexec_fn=limit if memory is not None else None)


def hp_plan(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m engine.cli ARGS` with this interpreter (a search on a large example takes a minute on a
    busy machine, hence the generous timeout)."""
    return _run([sys.executable, "-m", "engine.cli", *args], cwd, timeout)


def hp_plan_bounded(*args: str, cwd: Path = ROOT, timeout: float = 30,
                    memory: int = BOUNDED_MEMORY) -> subprocess.CompletedProcess[str]:
    """`hp_plan` under a time limit (subprocess.TimeoutExpired past it) and an address-space limit (a
    MemoryError, so an HP900 or a traceback, past it): for the inputs whose work must stay bounded."""
    return _run([sys.executable, "-m", "engine.cli", *args], cwd, timeout, memory)


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "hp-plan"
    if script.exists():
        return [str(script)]
    found = shutil.which("hp-plan")
    return [found] if found else [sys.executable, "-m", "engine.cli"]


def hp_plan_script(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The `hp-plan` console script when installed (what a user types), else `python -m engine.cli`."""
    return _run([*_console_script(), *args], cwd, timeout)


def copy_example(name: str, dest: Path, examples: Path = EXAMPLES) -> Path:
    """A private copy of examples/NAME (from `examples`) at `dest`, for tests that write into it."""
    shutil.copytree(examples / name, dest)
    return dest


def estimate_in_process(path: Path, *flags: str) -> dict[str, Any]:
    """`hp-plan estimate PATH --json` run in this process: what a test that varies a constant (monkeypatch) reads
    through the interface a user touches."""
    import contextlib
    import io
    import json

    from engine.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["estimate", str(path), "--json", *flags]) in (0, 1)
    doc: dict[str, Any] = json.loads(buf.getvalue())
    return doc


def hp_plan_json(*args: str, code: int = 0) -> dict[str, Any]:
    """`hp-plan ARGS --json`: its exit code checked against `code`, no traceback, the one JSON document."""
    r = hp_plan(*args, "--json")
    assert "Traceback" not in r.stdout + r.stderr
    assert r.returncode == code, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc, dict)
    return doc
