"""Measuring each run of a RUNS file (engine.calibrate.runs): a step derived from tokens/s bounded as a stated
step is, what a log's reading left out said at the run's `log:`, and a config named by several runs priced once."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.calibrate.result import calibrate
from engine.diagnostics import Diagnostic

TT = "step: {i}  loss: 7.9  memory: 40.00GiB(50%)  tps: {tps}\n"


def _errors(diags: tuple[Diagnostic, ...]) -> list[Diagnostic]:
    return [d for d in diags if d.is_error]


@pytest.mark.parametrize("entry, at", [
    ("tokens_per_s_per_device: 1.0e-300", "runs.0.tokens_per_s_per_device"),
    ("log: tt.log", "runs.0.log"),
])
def test_a_step_derived_from_tokens_per_s_is_bounded_as_a_step(runs_dir: Path, entry: str, at: str) -> None:
    """tokens/s of 1e-300 is positive and under its own bound, and gave a 1.6e304 s step that was fitted (a good
    run beside it then no longer reproduced): the step it gives is refused as a stated one would be, at the value."""
    (runs_dir / "tt.log").write_text("".join(TT.format(i=i, tps="1e-300") for i in range(1, 8)))
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: a.yaml\n    {entry}\n  - config: b.yaml\n    step_time_s: 2.5\n")
    result = calibrate(str(runs))
    (d,) = _errors(result.diagnostics)
    assert d.code == "HP803" and d.path == at and "beyond any run (at most 1e+06)" in d.message, d
    assert d.range.start.line == 2 and not result.ok


def test_a_tokens_per_s_giving_a_plausible_step_still_fits(runs_dir: Path) -> None:
    (runs_dir / "tt.log").write_text("".join(TT.format(i=i, tps="5000") for i in range(1, 8)))
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n  - config: a.yaml\n    log: tt.log\n")
    result = calibrate(str(runs))
    assert result.ok and result.runs[0].measured.step_time_s > 0


def test_what_a_log_reading_left_out_is_said_at_the_log(runs_dir: Path) -> None:
    """A Megatron log with one stray `Training … step_time=0.5s` line is read as Megatron, and the stray line is a
    warning (HP814) at the run's `log:` value naming its line."""
    lines = ["Training args: profile step_time=0.5s budget\n"] + [
        f" iteration {i}/ 5000 | elapsed time per iteration (ms): 2457.0 |\n" for i in range(1, 31)]
    (runs_dir / "train.log").write_text("".join(lines))
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n  - config: a.yaml\n    log: train.log\n")
    result = calibrate(str(runs))
    assert result.ok and result.runs[0].measured.step_time_s == pytest.approx(2.457)
    (d,) = [d for d in result.diagnostics if d.code == "HP814"]
    assert d.path == "runs.0.log" and d.range.start.line == 2 and d.message.endswith("(log line 1)")
    assert d.effective_severity == "warning"


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
