"""The parts rule (engine.calibrate.parts, the default of `hp-plan calibrate`): MAP part ratios with priors."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from engine.calibrate.parts import fit_parts
from engine.calibrate.spreads import part_spreads
from engine.ratios import prior
from tests.support.cli import hp_plan_script as hp_plan

PARTS = ("compute", "ep_comm")
SPREADS = (prior.POOLED_SPREAD, prior.COMM_SPREAD)  # a stack the model was not fitted on (spreads.part_spread)


def _estimate(config: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    return json.loads(hp_plan("estimate", str(config), "--json", *extra).stdout)


def _sd(n: int) -> np.ndarray:
    return np.full(n, math.hypot(prior.POOLED_SPREAD, prior.MEASUREMENT_SD))


def test_a_moe_anchor_moves_its_expert_traffic_and_barely_the_compute_a_dense_plan_is_made_of() -> None:
    # one MoE run, a quarter of its step expert all-to-all, 30% slower than priced, on a stack whose plans the
    # model misses by 17% (mindspeed / A2's spread): within the model's spread, so no stack bias
    sd = np.array([0.17])
    pf = fit_parts(PARTS, np.array([[7.5, 2.5]]), np.array([13.0]), sd, SPREADS, 0.17, 0.1)
    compute, ep = (math.exp(t) for t in pf.log_ratios)
    assert not pf.biased
    assert ep > 1.05 and abs(compute - 1) < 0.01  # a dense plan (no ep_comm) moves under 1%, the MoE part more
    anchor = 7.5 * compute + 2.5 * ep
    assert anchor * math.exp(pf.own[0]) == pytest.approx(13.0, rel=1e-9)  # its own rest reproduces it


def test_a_slower_cluster_reads_as_a_stack_bias_and_moves_every_part() -> None:
    u = np.array([[9.0, 1.0], [6.0, 4.0], [10.0, 0.0]])
    pf = fit_parts(PARTS, u, u.sum(axis=1) * 1.3, _sd(3), SPREADS, prior.POOLED_SPREAD, 0.5)
    assert pf.biased and math.exp(pf.log_bias) == pytest.approx(1.3, rel=0.05)
    assert all(abs(math.exp(t) - 1.3) < 0.05 for t in pf.log_ratios)
    assert pf.loo_log is not None and all(abs(v - math.log(1.3)) < 0.05 for v in pf.loo_log)


def test_ratios_stay_bounded_and_positive_on_absurd_measurements() -> None:
    u = np.array([[1.0, 1.0], [2.0, 0.5]])
    for factor in (1e-6, 1e6):
        pf = fit_parts(PARTS, u, u.sum(axis=1) * factor, _sd(2), SPREADS, prior.POOLED_SPREAD, 0.9)
        assert all(abs(t) <= prior.LOG_BOUND + 1e-9 for t in pf.log_ratios)


def test_leave_one_out_in_closed_form_matches_refitting_without_the_run() -> None:
    rng = np.random.default_rng(7)
    u = rng.uniform(0.5, 5.0, size=(8, 2))
    measured = u.sum(axis=1) * np.exp(rng.normal(0.1, 0.05, size=8))
    pf = fit_parts(PARTS, u, measured, _sd(8), SPREADS, prior.POOLED_SPREAD, 0.5)
    assert pf.loo_log is not None
    same = 0
    for i in range(8):
        keep = np.arange(8) != i
        other = fit_parts(PARTS, u[keep], measured[keep], _sd(7), SPREADS, prior.POOLED_SPREAD, 0.5)
        if other.biased != pf.biased:
            continue  # the closed form keeps the hypothesis all the runs chose (docs/calibration.md)
        same += 1
        w = u[i] / u[i].sum()
        refit = math.log(float(w @ np.exp(np.asarray(other.log_ratios))))
        assert pf.loo_log[i] == pytest.approx(refit, abs=2e-3)
    assert same >= 6


def test_the_fit_is_linear_in_the_number_of_runs() -> None:
    """Every product is (n × P) or (P × P): 20,000 runs fit (leave-one-out included) well within a second, and
    10× the runs costs far less than the 100× a pairwise (n × n) algebra would."""
    rng = np.random.default_rng(3)

    def seconds(n: int) -> float:
        u = rng.uniform(0.5, 5.0, size=(n, 2))
        measured = u.sum(axis=1) * np.exp(rng.normal(0.0, 0.05, size=n))
        t0 = time.perf_counter()
        fit_parts(PARTS, u, measured, _sd(n), SPREADS, prior.POOLED_SPREAD, 0.5)
        return time.perf_counter() - t0

    small = min(seconds(2_000) for _ in range(3))
    large = min(seconds(20_000) for _ in range(3))
    assert large < 1.0
    assert large < 30 * max(small, 5e-3)  # an (n × n) algebra: 100× (and 3 GB at 20,000 runs)


def test_spreads_are_the_floor_on_fitted_stacks_and_wide_elsewhere() -> None:
    assert max(part_spreads("megatron", "A100").values()) < 1e-3
    other = part_spreads("hyperparallel", "A2")
    assert other["gemm"] == other["attention"] == other["elementwise"] == pytest.approx(prior.POOLED_SPREAD)
    assert other["ep_comm.intra"] == other["ep_comm.inter"] == pytest.approx(prior.COMM_SPREAD)


def test_calibrate_defaults_to_parts_reproduces_the_anchor_and_says_how_each_part_moved(runs_dir: Path) -> None:
    uncal = _estimate(runs_dir / "a.yaml")
    measured = uncal["step_time_s"] * 1.37
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: a.yaml\n    step_time_s: {measured}\n")
    out = runs_dir / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["rule"] == "parts" and doc["local"] is None
    assert set(doc["parts"]["parts"]) <= set(doc["part_ratios"])
    assert doc["runs"][0]["calibrated_step_s"] == pytest.approx(measured, rel=0.01)
    assert _estimate(runs_dir / "a.yaml", "--ratios", str(out))["step_time_s"] == pytest.approx(measured, rel=0.01)
    text = hp_plan("calibrate", str(runs)).stdout
    assert "(rule: parts)" in text and "parts rule: the runs' misfit reads as" in text
    assert "gemm" in text and "prior spread" in text
