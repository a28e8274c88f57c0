"""benchmarks/calibration.py on the published runs: calibrating on one run of a stack never predicts that stack's
other runs worse (median |e| over every (anchor, target) pair) than the uncalibrated model, and a stack whose
every step is 30% slower is corrected from one run on the stacks the model prices tightly. The runs are the plain
ones (dense, short context, BF16: no error-band feature, engine.cost.band) the model prices within their own
tolerance ([CAL] expected.json): an MoE or 32K run's error, or one outside its tolerance (MindSpeed LLaMA2-34B,
docs/cost-model.md "The error band"), is a term the model lacks, not a ratio one run can carry to another."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calibration_bench", ROOT / "benchmarks" / "calibration.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["calibration_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def stacks(bench: ModuleType) -> dict:  # type: ignore[type-arg]
    plain = {k: [p for p in v if _plain(p.run.config) and _within_tolerance(p)] for k, v in bench.priced_runs().items()}
    return {k: v for k, v in plain.items() if len(v) >= 2}


def _within_tolerance(p: object) -> bool:
    """The run's uncalibrated price is within the tolerance its expected.json states (a case without one: yes)."""
    import json

    exp = Path(p.run.config).parent / "expected.json"  # type: ignore[attr-defined]
    if not exp.is_file():
        return True
    tol = float(json.loads(exp.read_text())["tolerance"])
    return abs(p.uncalibrated_s / p.run.step_time_s - 1) <= tol  # type: ignore[attr-defined]


def _plain(config: Path) -> bool:
    from engine.check import check_file
    from engine.cost import estimate_config

    loaded = check_file(str(config))
    est = estimate_config(loaded.config)[0] if loaded.config is not None else None
    return est is not None and not est.band_features


def _medians(bench: ModuleType, runs: list, scale: float, tmp: Path) -> tuple[float, float]:  # type: ignore[type-arg]
    eu, ec, _ = bench._stack_pairs(runs, bench.DEFAULT_RULE, scale, tmp)
    return statistics.median(eu), statistics.median(ec)


def test_no_stack_is_predicted_worse_calibrated_on_one_published_run(bench: ModuleType, stacks: dict,  # type: ignore[type-arg]
                                                                     tmp_path: Path) -> None:
    assert {("megatron", "A100"), ("megatron", "H100"), ("mindspeed", "A2"), ("torchtitan", "H100-96G")} <= set(stacks)
    for stack, runs in stacks.items():
        uncal, cal = _medians(bench, runs, 1.0, tmp_path)
        assert cal <= uncal + 1e-4, stack  # a tie up to the ratios file's 6-digit rounding
        assert cal <= 0.08, stack


def test_a_uniformly_slower_stack_is_corrected_from_one_run(bench: ModuleType, stacks: dict,  # type: ignore[type-arg]
                                                            tmp_path: Path) -> None:
    # Each stack's pairs priced once (megatron / A100 alone is 930 of them): the bound below reads the same medians.
    medians = {stack: _medians(bench, stacks[stack], 1.3, tmp_path)
               for stack in (("megatron", "A100"), ("torchtitan", "H100-96G"), ("megatron", "H100"))}
    for stack, (uncal, cal) in medians.items():
        assert uncal > 0.2 and cal < 0.9 * uncal, stack
    uncal, cal = _medians(bench, stacks[("megatron", "A100")], 1.3, tmp_path)
    assert cal < 0.07


def test_a_moe_anchor_leaves_the_dense_runs_within_one_point(bench: ModuleType, stacks: dict,  # type: ignore[type-arg]
                                                              tmp_path: Path) -> None:
    """Grok-1 (megatron / H100) and Qwen3-30B-A3B (mindspeed / A2) as anchors: every dense run of their stack
    keeps its uncalibrated error within one point, and calibrating on all the other runs never makes a stack's
    median worse."""
    moved: list[float] = []
    every = bench.priced_runs()  # the MoE anchors too: the plain stacks leave them out
    for stack in (("megatron", "H100"), ("mindspeed", "A2")):
        bench._stack_pairs(every[stack], bench.DEFAULT_RULE, 1.0, tmp_path, None, moved)
    assert len(moved) >= 10 and max(abs(m) for m in moved) <= 0.01
    for stack, runs in stacks.items():
        uncal = statistics.median(abs(p.uncalibrated_s / p.run.step_time_s - 1) for p in runs)
        assert statistics.median(bench._stack_loo(runs, bench.DEFAULT_RULE, 1.0, tmp_path)) <= uncal + 1e-4, stack
