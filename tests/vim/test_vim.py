"""Vim 9 + ALE (Debian's vim-ale) against hp_lsp, headless: diagnostics in ALE's loclist, the hover text,
and the "Apply optimal strategy" quick fix applied to the buffer with its comments kept (tests/vim/e2e.vim,
whose USER block is the set-up editors/README.md documents). Under CI=true a missing vim or ALE fails."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.cli import ROOT
from tests.support.editors import require, run_editor_script

ALE = Path("/usr/share/vim-ale/plugin/ale.vim")


def test_vim_ale_diagnostics_hover_and_quick_fix(tmp_path: Path) -> None:
    vim = shutil.which("vim")
    require(vim is not None and ALE.exists(), skip="vim or vim-ale not installed",
            ci="vim and vim-ale are required in CI (apt-get install vim-ale)")
    assert vim is not None
    run_editor_script([vim, "-N", "-u", "NONE", "-i", "NONE", "-n", "-es", "-S", str(ROOT / "tests/vim/e2e.vim")],
                      tmp_path, "HP_VIM_LOG", timeout=150)
