"""Emacs 28 + eglot (Debian's elpa-eglot) against hp_lsp, headless: the search's diagnostic in flymake, the
hover text, and the "Apply optimal strategy" quick fix applied with its comments kept (tests/emacs/e2e.el,
whose USER block is the set-up editors/README.md documents). Under CI=true a missing emacs or eglot fails."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_emacs_eglot_diagnostics_hover_and_quick_fix(tmp_path: Path) -> None:
    emacs = shutil.which("emacs")
    if emacs is None or not glob.glob("/usr/share/emacs/site-lisp/elpa/eglot-*"):
        if os.environ.get("CI") == "true":
            pytest.fail("emacs and eglot are required in CI (apt-get install emacs-nox elpa-eglot)")
        pytest.skip("emacs or elpa-eglot not installed")
    for name in ("train.yaml", "search.yaml"):
        shutil.copy(REPO / "examples" / "llama3-70b" / name, tmp_path / name)
    log = tmp_path / "emacs.log"
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "HP_FILE": str(tmp_path / "train.yaml"),
           "HP_LSP_PYTHON": sys.executable, "HP_EMACS_LOG": str(log)}
    p = subprocess.run([emacs, "-Q", "--batch", "-l", str(REPO / "tests/emacs/e2e.el")], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    text = log.read_text() if log.exists() else "(no log)"
    assert p.returncode == 0 and text.rstrip().endswith("PASSED"), f"rc {p.returncode}\n{text}\n{p.stderr[-3000:]}"
