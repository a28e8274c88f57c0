"""The RUNS-file hover says the host part a calibration read (docs/calibration.md, "Host overhead")."""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.calibrate.result import calibrate
from hp_lsp.features.calibration import run_hover
from tests.support.plan_traces import EXAMPLE, explain_trace, ratios_file


def test_a_runs_hover_states_the_host_time_a_profile_measured(tmp_path: Path) -> None:
    explain_trace(tmp_path / "t.json", "--ratios", str(ratios_file(tmp_path / "host.yaml", {"host_s_per_launch": 1e-3})))
    shutil.copy(EXAMPLE, tmp_path / "plan.yaml")
    runs = tmp_path / "runs.yaml"
    runs.write_text("runs:\n  - config: plan.yaml\n    trace: t.json\n")
    cal = calibrate(str(runs))
    text = run_hover(cal, cal.runs[0])
    assert "Host time (profile): 1000 µs per launch unit × this run's 64 units = 0.064 s per step" in text, text
