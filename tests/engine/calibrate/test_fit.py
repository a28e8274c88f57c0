"""engine.calibrate.fit's leave-one-out under the rules `step` and `compute`: read from sums over the other runs,
without a refit per run (1,000 runs took 20-31 s refitting), and equal to the refit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.calibrate import fit as fit_module
from engine.calibrate.fit import leave_one_out, refit_leave_one_out
from engine.calibrate.runs import Measured, measure, read_runs
from engine.specs import HOST_PART

# (config, step as a multiple of its uncalibrated step, parts_s): a group key and a part key of that group in
# both orders (the later key's ratio wins on the parts both cover), a key only one run measures (its others fit
# without it), a key priced at nothing on these plans (pp: no ratio), and the host part on two runs.
RUNS: tuple[tuple[str, float, dict[str, float]], ...] = (
    ("a", 1.30, {}),
    ("b", 0.90, {"compute": 3.0, "gemm": 2.2}),
    ("c", 1.10, {"gemm": 1.9, "compute": 3.4, HOST_PART: 0.02}),
    ("a", 1.25, {"tp_comm": 0.3}),
    ("b", 1.05, {HOST_PART: 0.05, "pp": 0.1}),
    ("c", 0.80, {}),
)


def _measured(runs_dir: Path) -> list[Measured]:
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n" + "".join(f"  - config: {n}.yaml\n    step_time_s: 2.0\n" for n in "abc"))
    rf = read_runs(str(runs))
    base = {e.config_path and Path(e.config_path).stem: measure(rf, e)[0] for e in rf.entries}
    out = []
    for name, scale, parts in RUNS:
        m = base[name]
        assert m is not None
        out.append(replace(m, step_time_s=m.estimate.step_time_s * scale, parts_s=parts))
    return out


@pytest.mark.parametrize("rule", ["step", "compute"])
@pytest.mark.parametrize("profiled", [False, True])
def test_the_leave_one_out_from_sums_equals_refitting_without_the_run(runs_dir: Path, rule: str,
                                                                       profiled: bool) -> None:
    runs = _measured(runs_dir)
    if not profiled:
        runs = [replace(m, parts_s={}) for m in runs]
    fast = leave_one_out(runs, rule)
    assert fast == pytest.approx(refit_leave_one_out(runs, rule), rel=1e-12)


def test_the_step_rules_leave_one_out_refits_nothing(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear in the runs: no fit per run left out (the refit was quadratic, 1,000 runs 20-31 s)."""
    runs = _measured(runs_dir)

    def refit(*_: object, **__: object) -> None:
        raise AssertionError("leave_one_out refitted")

    monkeypatch.setattr(fit_module, "fit", refit)
    for rule in ("step", "compute"):
        assert all(v is not None and v > 0 for v in leave_one_out(runs, rule))


def test_a_leave_one_out_by_refits_stops_at_its_limit_and_says_so(runs_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule `parts` on runs with profiled parts has no closed form: its leave-one-out refits run by run, for at
    most REFIT_MAX_RUNS runs (1,000 would take minutes); past it the predictions are null and HP815 says why,
    while the fit itself takes every run."""
    from engine.calibrate import result as result_module

    runs = _measured(runs_dir)
    assert all(v is not None for v in leave_one_out(runs, "parts"))
    monkeypatch.setattr(fit_module, "REFIT_MAX_RUNS", 3)
    monkeypatch.setattr(result_module, "REFIT_MAX_RUNS", 3)
    assert leave_one_out(runs, "parts") == [None] * len(runs)
    assert all(v is not None for v in leave_one_out(runs, "step"))  # from sums: no limit
    path = runs_dir / "runs.yaml"
    path.write_text("runs:\n" + "".join(f"  - config: {c}.yaml\n    step_time_s: {s}\n    parts_s: {{compute: 1.0}}\n"
                                        for c, s in (("a", 2.5), ("b", 5.0), ("c", 4.5), ("a", 2.6))))
    result = result_module.calibrate(str(path))
    (said,) = [d for d in result.diagnostics if d.code == "HP815"]
    assert result.ok and said.effective_severity == "information" and "at most 3 runs" in said.message
    assert all(r.leave_one_out_step_s is None for r in result.runs)
