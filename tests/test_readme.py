"""The README is what a newcomer runs first: every `hp-plan` command it shows runs as written (in a copy of the
files it names, so the ones that write leave the checkout alone), and it stays short enough to read in two
minutes."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.support.cli import ROOT, hp_plan_script

README = (ROOT / "README.md").read_text(encoding="utf-8")
# Inline `hp-plan SUBCOMMAND ARGS` code and `$ hp-plan ...` transcript lines. A bare `hp-plan calibrate` names a
# command and a synopsis with a placeholder (FILE, RUNS, COMMAND) shows a form: neither is a command to run.
SHOWN = sorted({c.strip() for found in re.findall(r"`(hp-plan [^`]+)`|^\$ (hp-plan .+)$", README, re.MULTILINE)
                for c in found if len(c.split()) > 2 and not re.search(r"\b[A-Z]{3,}\b", c)})


def test_the_readme_is_short_and_shows_commands() -> None:
    assert len(README.splitlines()) < 150
    assert len(SHOWN) >= 8


@pytest.mark.parametrize("command", SHOWN)
def test_each_command_runs_as_written(command: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "benchmarks" / "calibration_runs", tmp_path / "benchmarks" / "calibration_runs")
    done = hp_plan_script(*shlex.split(command)[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
