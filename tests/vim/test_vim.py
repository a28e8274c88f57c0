"""Vim 9 + ALE (Debian's vim-ale) against hp_lsp, headless: diagnostics in ALE's loclist, the hover text,
and the "Apply optimal strategy" quick fix applied to the buffer with its comments kept (tests/vim/e2e.vim,
whose USER block is the set-up editors/README.md documents). Under CI=true a missing vim or ALE fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALE = Path("/usr/share/vim-ale/plugin/ale.vim")


def test_vim_ale_diagnostics_hover_and_quick_fix(tmp_path: Path) -> None:
    vim = shutil.which("vim")
    if vim is None or not ALE.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("vim and vim-ale are required in CI (apt-get install vim-ale)")
        pytest.skip("vim or vim-ale not installed")
    for name in ("train.yaml", "search.yaml"):
        shutil.copy(REPO / "examples" / "llama3-70b" / name, tmp_path / name)
    log = tmp_path / "vim.log"
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "HP_FILE": str(tmp_path / "train.yaml"),
           "HP_LSP_PYTHON": sys.executable, "HP_VIM_LOG": str(log)}
    p = subprocess.run([vim, "-N", "-u", "NONE", "-i", "NONE", "-n", "-es", "-S", str(REPO / "tests/vim/e2e.vim")],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
    text = log.read_text() if log.exists() else "(no log)"
    assert p.returncode == 0 and text.rstrip().endswith("PASSED"), f"rc {p.returncode}\n{text}\n{p.stdout}{p.stderr}"
