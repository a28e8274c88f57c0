"""The host part: host-side time the model does not price (0 s uncalibrated), measured from a profile's device
idle beyond the predicted pipeline bubble, weakly fitted from step times, and carried to other plans by their
launch units (docs/calibration.md, "Host overhead")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.calibrate.profiler_trace import read_trace
from engine.calibrate.result import calibrate
from engine.config import load
from engine.cost import estimate_config
from engine.cost import price as price_module
from engine.ratios.ratiofile import parse_ratios
from engine.specs import HOST_PART
from tests.support.cli import ROOT
from tests.support.cli import hp_plan_script as hp_plan
from tests.support.configs import stated_config
from tests.support.plan_traces import EXAMPLE, explain_trace, ratios_file

GAP_S = 1e-3  # injected host seconds per launch unit (one layer's kernels for one micro-batch)


def _inject_gaps(trace: Path, per_layer_s: float, layers_per_box: int) -> None:
    """Idle gaps on every stage's compute stream: before each forward box, `per_layer_s` × its layers, with
    every later event of the stage shifted and its step lengthened (the device waiting on the host)."""
    doc = json.loads(trace.read_text())
    by_stage: dict[int, list[dict[str, Any]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            by_stage.setdefault(e["pid"], []).append(e)
    gap_us = per_layer_s * layers_per_box * 1e6
    for events in by_stage.values():
        starts = sorted(e["ts"] for e in events if e["tid"] == 0 and e["args"].get("hp_part") == "gemm"
                        and "forward" in e["name"])
        for e in events:
            if e["name"].startswith("ProfilerStep"):
                e["dur"] += gap_us * len(starts)
            else:
                e["ts"] += gap_us * sum(1 for t in starts if t <= e["ts"])
    trace.write_text(json.dumps(doc))


def _calibrated_on_gapped_trace(tmp_path: Path, truth: dict[str, float] | None = None,
                                **groups: float) -> tuple[dict[str, Any], Path, Path]:
    """(calibrate --json, the ratios file, the trace): a run drawn as the model's own timeline under `truth`
    part ratios, with GAP_S of host time per launch unit injected, calibrated through the CLI."""
    measured = tmp_path / "measured.trace.json"
    extra = ("--ratios", str(ratios_file(tmp_path / "truth.yaml", truth, **groups))) if truth or groups else ()
    explain_trace(measured, *extra)
    _inject_gaps(measured, GAP_S, layers_per_box=8)  # 32 layers over 4 stages, one chunk each
    shutil.copy(EXAMPLE, tmp_path / "plan.yaml")
    runs = tmp_path / "runs.yaml"
    runs.write_text("runs:\n  - config: plan.yaml\n    trace: measured.trace.json\n")
    out = tmp_path / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout), out, measured


def test_idle_gaps_in_a_trace_fit_the_host_part_back_and_leave_the_other_parts(tmp_path: Path) -> None:
    """GEMMs 25% slower, attention 20% faster, element-wise 40% slower, tensor-parallel traffic 60% slower, and
    1 ms of host time per launch unit: the host part reads the gaps back within 5% and every other part still
    reproduces its category of the trace within 5%."""
    truth = {"gemm": 1.25, "attention": 0.8, "elementwise": 1.4}
    doc, _out, trace = _calibrated_on_gapped_trace(tmp_path, truth, tp_comm=1.6)
    reading = read_trace(str(trace))
    run = doc["runs"][0]
    launches = run["host_launches"]
    assert launches == 64  # 8 layers on the slowest stage × 8 micro-batches
    assert doc["host"]["source"] == "profile" and "idle" in doc["host"]["why"]
    assert doc["host"]["s_per_launch"] == pytest.approx(GAP_S, rel=0.05)
    parts = {p: v["calibrated"] for p, v in run["time_parts_s"].items()}
    assert run["time_parts_s"][HOST_PART]["uncalibrated"] == 0.0
    assert parts[HOST_PART] == pytest.approx(GAP_S * launches, rel=0.05)
    kernels = sum(parts[k] for k in ("gemm", "attention", "elementwise"))
    for k in ("gemm", "attention", "elementwise"):
        assert parts[k] + parts["recompute"] * parts[k] / kernels == pytest.approx(reading.parts_s[k], rel=0.05)
    assert sum(v for p, v in parts.items() if p.split(".")[0] in ("tp_comm", "cp_comm", "dp_comm")) == \
        pytest.approx(reading.parts_s["collective"], rel=0.05)
    assert parts["optimizer"] == pytest.approx(reading.parts_s["optimizer"], rel=0.05)
    # the idle is the bubble plus the host: the bubble part keeps what the pipeline explains
    pp = parts["pp_bubble"] + parts["pp_p2p.intra"] + parts["pp_p2p.inter"]
    assert pp + parts[HOST_PART] == pytest.approx(reading.parts_s["sendrecv"] + reading.idle_s, rel=0.05)
    assert parts["pp_bubble"] == pytest.approx(reading.idle_s - GAP_S * launches, rel=0.05)
    got = doc["part_ratios"]
    assert got["gemm"] > 1.15 and got["attention"] < 0.9 and got["elementwise"] > 1.25 and got["tp_comm.intra"] > 1.4
    assert run["calibrated_step_s"] == pytest.approx(reading.step_time_s, rel=0.01)


def test_calibrate_then_estimate_carries_the_host_seconds_scaled_by_launch_units(tmp_path: Path) -> None:
    """The ratios file carries parts.host_s_per_launch; another plan of the stack with twice the micro-batches
    adds twice the anchor's host seconds to its step, and says so in its calibration output."""
    doc, ratios, _trace = _calibrated_on_gapped_trace(tmp_path)
    text = ratios.read_text()
    assert "host_s_per_launch:" in text
    anchor_host = doc["runs"][0]["time_parts_s"][HOST_PART]["calibrated"]
    other = tmp_path / "plan16.yaml"
    other.write_text(EXAMPLE.read_text().replace("micro_batch_num: 8", "micro_batch_num: 16")
                     .replace("global_batch_size: 16", "global_batch_size: 32"))
    cal = hp_plan("estimate", str(other), "--ratios", str(ratios), "--json")
    plain = hp_plan("estimate", str(other), "--json")
    assert cal.returncode == 0 and plain.returncode == 0, cal.stdout + cal.stderr
    est, base = json.loads(cal.stdout), json.loads(plain.stdout)
    c = est["calibration"]
    assert c["host_launches"] == 128 and c["host_s"] == pytest.approx(2 * anchor_host, rel=1e-4)
    assert c["host_s"] == pytest.approx(GAP_S * 128, rel=0.05)
    assert est["step_time_s"] == pytest.approx(base["step_time_s"] + c["host_s"], rel=1e-4)
    assert set(est["time_breakdown_s"]) == set(base["time_breakdown_s"])  # the breakdown's keys stay as they were
    assert base["calibration"] is None
    text_out = hp_plan("estimate", str(other), "--ratios", str(ratios))
    assert "host time 0.128" in text_out.stdout, text_out.stdout


def _stating_a_strategy(paths: list[Path]) -> list[Path]:
    """The example and case files that state a whole strategy (a search config with open dimensions prices none)."""
    out = []
    for path in paths:
        cfg = load(str(path)).config if path.name != "runs.yaml" else None
        if cfg is not None and estimate_config(cfg)[0] is not None:
            out.append(path)
    return out


CASES = _stating_a_strategy(sorted([*ROOT.glob("examples/*/*.yaml"), *(ROOT / "benchmarks" / "cases").glob("*.yaml")]))


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_without_a_ratios_file_the_host_part_changes_no_estimate(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Uncalibrated, the host part is 0 s and its launch units never reach a price: pricing with every launch
    count a billion gives the same step time to the last digit."""
    cfg = load(str(case)).config
    assert cfg is not None
    est, _ = estimate_config(cfg)
    assert est is not None
    assert est.time_parts_s[HOST_PART] == 0.0 and est.host_launches > 0 and est.calibration is None
    monkeypatch.setattr(price_module, "host_launches", lambda r, stage_t: np.full(r.n, 1e9))
    again, _ = estimate_config(cfg)
    assert again is not None and again.host_launches == 1e9
    assert again.step_time_s == est.step_time_s and again.time_breakdown_s == est.time_breakdown_s


def _runs_file(folder: Path, paths: list[Path], steps: list[float]) -> Path:
    runs = folder / "runs.yaml"
    runs.write_text("runs:\n" + "".join(f"  - config: {p.name}\n    step_time_s: {t!r}\n"
                                        for p, t in zip(paths, steps, strict=True)))
    return runs


def test_step_times_alone_read_a_uniform_per_launch_excess_as_host_and_a_relative_one_as_not(tmp_path: Path) -> None:
    """Three plans of a stack the model was not fitted on (torchtitan / H100), steps 2.5 s to 5.3 s: an excess of
    0.3 ms per launch unit on each is read in good part as host time and predicts each run left out better than
    uncalibrated; an excess of 10% on each is the stack's bias, not host time."""
    paths = [stated_config(tmp_path, "a.yaml"), stated_config(tmp_path, "b.yaml", tp=2, gbs=32),
             stated_config(tmp_path, "c.yaml", nodes=2, gbs=64)]
    ests = [estimate_config(load(str(p)).config)[0] for p in paths]  # type: ignore[arg-type]
    assert all(e is not None for e in ests)
    units = [e.host_launches for e in ests]  # type: ignore[union-attr]
    assert len(set(units)) == 3
    h = 3e-4
    measured = [e.step_time_s + h * n for e, n in zip(ests, units, strict=True)]  # type: ignore[union-attr]
    cal = calibrate(str(_runs_file(tmp_path, paths, measured)))
    assert cal.ok and cal.fitted is not None
    assert cal.fitted.host_source == "step times" and 0.3 * h < cal.fitted.host_s_per_launch <= h
    for r, t, e in zip(cal.runs, measured, ests, strict=True):
        assert r.calibrated_step_s == pytest.approx(t, rel=1e-9)  # each anchor reproduced
        assert r.leave_one_out_step_s is not None
        assert abs(r.leave_one_out_step_s / t - 1) < abs(e.step_time_s / t - 1)  # type: ignore[union-attr]
    relative = calibrate(str(_runs_file(tmp_path, paths, [e.step_time_s * 1.1 for e in ests])))  # type: ignore[union-attr]
    assert relative.fitted is not None and relative.fitted.parts is not None and relative.fitted.parts.biased
    for r in relative.runs:
        assert r.priced_after[HOST_PART] < 0.01 * r.measured.step_time_s


def test_on_a_stack_the_model_was_fitted_on_step_times_fit_no_host_part(tmp_path: Path) -> None:
    """megatron / H100: the published runs' shared misfit was measured at nothing, so a step time's misfit
    stays at its own plan; the ratios file carries no host part and the output says why."""
    shutil.copy(EXAMPLE, tmp_path / "plan.yaml")
    est = estimate_config(load(str(EXAMPLE)).config)[0]  # type: ignore[arg-type]
    assert est is not None
    cal = calibrate(str(_runs_file(tmp_path, [tmp_path / "plan.yaml"], [est.step_time_s + 0.2])))
    assert cal.ok and cal.fitted is not None and cal.fitted.host_s_per_launch == 0.0
    assert "host_s_per_launch" not in cal.ratios_text()
    assert "measured at nothing" in cal.to_json()["host"]["why"]


@pytest.mark.parametrize(("value", "says"), [("-1.0e-4", "cannot be negative"), ("0.5", "other units"),
                                             ("fast", "must be a number"), ("true", "must be a number")])
def test_a_bad_host_figure_in_a_ratios_file_is_hp810_at_its_value(value: str, says: str) -> None:
    text = ("ratios: {compute: 1.0}\nparts:\n  gemm: 1.1\n  host_s_per_launch: " + value +
            "\nmemory_ratio: 1.0\nfitted_on: []\n")
    ratios, diags = parse_ratios(text, "r.yaml")
    assert ratios is None
    (d,) = diags
    assert d.code == "HP810" and says in d.message and d.path == "parts.host_s_per_launch"
    assert (d.range.start.line, d.range.start.character) == (3, 21)


def test_a_good_host_figure_reads() -> None:
    ratios, diags = parse_ratios("ratios: {compute: 1.0}\nparts: {host_s_per_launch: 2.5e-5}\nmemory_ratio: 1.0\n"
                                 "fitted_on: []\n", "r.yaml")
    assert not diags and ratios is not None and ratios.host_s_per_launch == 2.5e-5 and ratios.parts == ()


def test_the_predicted_trace_of_a_host_calibrated_plan_reads_its_host_part_back(tmp_path: Path) -> None:
    """explain --trace under a ratios file with 1 ms per launch unit: the device's work ends the plan's host
    seconds before the step, and calibrating on that trace gives the same host part back."""
    ratios = ratios_file(tmp_path / "host.yaml", {"host_s_per_launch": GAP_S})
    trace = tmp_path / "predicted.trace.json"
    doc = explain_trace(trace, "--ratios", str(ratios))
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    device_end = max(e["ts"] + e["dur"] for e in events if e["cat"] == "kernel")
    assert doc["step_time_s"] * 1e6 - device_end == pytest.approx(GAP_S * 64 * 1e6, rel=1e-3)
    shutil.copy(EXAMPLE, tmp_path / "plan.yaml")
    runs = tmp_path / "runs.yaml"
    runs.write_text("runs:\n  - config: plan.yaml\n    trace: predicted.trace.json\n")
    cal = calibrate(str(runs))
    assert cal.ok and cal.fitted is not None
    assert cal.fitted.host_s_per_launch == pytest.approx(GAP_S, rel=0.01)
