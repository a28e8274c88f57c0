"""Emacs 28 + eglot (Debian's elpa-eglot) against hp_lsp, headless: the search's diagnostic in flymake, the
hover text, and the "Apply optimal strategy" quick fix applied with its comments kept (tests/emacs/e2e.el,
whose USER block is the set-up editors/README.md documents). Under CI=true a missing emacs or eglot fails."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

from tests.support.cli import ROOT
from tests.support.editors import require, run_editor_script


def test_emacs_eglot_diagnostics_hover_and_quick_fix(tmp_path: Path) -> None:
    emacs = shutil.which("emacs")
    require(emacs is not None and bool(glob.glob("/usr/share/emacs/site-lisp/elpa/eglot-*")), skip="emacs or elpa-eglot not installed",
            ci="emacs and eglot are required in CI (apt-get install emacs-nox elpa-eglot)")
    assert emacs is not None
    run_editor_script([emacs, "-Q", "--batch", "-l", str(ROOT / "tests/emacs/e2e.el")], tmp_path, "HP_EMACS_LOG",
                      timeout=180)
