"""Measuring each run of a RUNS file (engine.calibrate.runs): a config named by several runs priced once."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.calibrate.result import calibrate


def test_a_config_named_by_several_runs_is_priced_once(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 runs of one config were read and priced 1,000 times (9-11 s): one calibration prices each config
    once, and every run keeps its own diagnostics."""
    import engine.check

    calls: list[str] = []
    real = engine.check.check_file
    monkeypatch.setattr(engine.check, "check_file", lambda path, **kw: calls.append(path) or real(path, **kw))
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n" + "".join(f"  - config: {c}.yaml\n    step_time_s: {s}\n"
                                        for c, s in (("a", 2.5), ("b", 5.0), ("a", 2.6), ("a", 2.4))))
    result = calibrate(str(runs), rule="step")
    assert result.ok and len(result.runs) == 4
    assert sorted(Path(p).name for p in calls) == ["a.yaml", "b.yaml"]
    assert result.runs[0].measured.estimate.step_time_s == result.runs[2].measured.estimate.step_time_s
