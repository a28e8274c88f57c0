"""The RUNS-file hover says the host part a calibration read (docs/calibration.md, "Host overhead")."""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.calibrate.result import calibrate
from hp_lsp.features.calibration import run_hover
from tests.support.cli import ROOT
from tests.support.cli import hp_plan_script as hp_plan

EXAMPLE = ROOT / "examples" / "explain" / "1f1b.yaml"


def test_a_runs_hover_states_the_host_time_a_profile_measured(tmp_path: Path) -> None:
    ratios = tmp_path / "host.yaml"
    ratios.write_text("ratios: {compute: 1.0}\nparts: {host_s_per_launch: 0.001}\nmemory_ratio: 1.0\nfitted_on: []\n")
    r = hp_plan("explain", str(EXAMPLE), "--ratios", str(ratios), "--trace", str(tmp_path / "t.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    shutil.copy(EXAMPLE, tmp_path / "plan.yaml")
    runs = tmp_path / "runs.yaml"
    runs.write_text("runs:\n  - config: plan.yaml\n    trace: t.json\n")
    cal = calibrate(str(runs))
    text = run_hover(cal, cal.runs[0])
    assert "Host time (profile): 1000 µs per launch unit × this run's 64 units = 0.064 s per step" in text, text
