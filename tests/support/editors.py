"""Running a real editor headless against hp_lsp: its e2e script opens a copy of examples/llama3-70b, checks
the diagnostics, the hover and the "Apply optimal strategy" quick fix, and ends its log with PASSED. Missing
editors or plugins skip the test, except under CI=true, where they fail it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import EXAMPLES


def require(present: bool, *, skip: str, ci: str) -> None:
    """Unless `present`: skip with the reason `skip`, or under CI=true fail with `ci` (which says how to
    install what is missing)."""
    if present:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(ci)
    pytest.skip(skip)


def run_editor_script(command: list[str], tmp_path: Path, log_var: str, timeout: float) -> None:
    """Run `command` (an editor in batch mode sourcing its e2e script) in `tmp_path` with HP_FILE, the
    Python that runs hp_lsp and the log path in `log_var`; assert it exits 0 with a log ending in PASSED."""
    for name in ("train.yaml", "search.yaml"):
        shutil.copy(EXAMPLES / "llama3-70b" / name, tmp_path / name)
    log = tmp_path / "editor.log"
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "HP_FILE": str(tmp_path / "train.yaml"),
           "HP_LSP_PYTHON": sys.executable, log_var: str(log)}
    p = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    text = log.read_text() if log.exists() else "(no log)"
    assert p.returncode == 0 and text.rstrip().endswith("PASSED"), (
        f"rc {p.returncode}\n{text}\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
