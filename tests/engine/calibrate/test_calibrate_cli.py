"""`hp-plan calibrate` and `--ratios` end to end, in a subprocess (docs/formats.md §6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import ROOT
from tests.support.cli import hp_plan_script as hp_plan
from tests.support.configs import stated_config
from tests.support.plan_traces import EXAMPLE, explain_trace


def _estimate(config: Path, *extra: str) -> dict:
    r = hp_plan("estimate", str(config), "--json", *extra)
    return json.loads(r.stdout)


def test_one_run_is_reproduced_and_the_ratios_change_estimate_and_search(runs_dir: Path) -> None:
    uncal = _estimate(runs_dir / "a.yaml")
    assert uncal["calibration"] is None
    measured = uncal["step_time_s"] * 1.37
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: a.yaml\n    step_time_s: {measured}\n    peak_memory_gib: "
                    f"{uncal['peak_memory_gib'] * 1.05}\n")
    out = runs_dir / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json", "--rule", "local")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    (run,) = doc["runs"]
    assert run["calibrated_step_s"] == pytest.approx(measured, rel=0.01)
    assert run["leave_one_out_step_s"] is None
    assert doc["memory_ratio"] == pytest.approx(1.05, rel=1e-3)
    assert doc["framework"] == "torchtitan" and doc["device_type"] == "H100"
    # 37% off is far beyond the model's spread on torchtitan: rule local reads it as a stack bias
    assert doc["rule"] == "local" and doc["local"]["stack_biased"] is True
    stack_factor = doc["local"]["stack_factor"]
    assert 1.37 ** 0.9 < stack_factor < 1.37
    written = yaml.safe_load(out.read_text())
    assert set(written) >= {"framework", "device_type", "ratios", "memory_ratio", "fitted_on"}
    assert set(written["ratios"]) == {"compute", "tp_comm", "cp_comm", "ep_comm", "dp_comm", "pp", "optimizer"}

    cal = _estimate(runs_dir / "a.yaml", "--ratios", str(out))
    assert cal["step_time_s"] == pytest.approx(measured, rel=0.01)
    assert cal["peak_memory_gib"] == pytest.approx(uncal["peak_memory_gib"] * 1.05, rel=1e-3)
    assert cal["calibration"] == {"file": str(out), "runs": 1}
    text = hp_plan("estimate", str(runs_dir / "a.yaml"), "--ratios", str(out)).stdout
    assert f"calibrated on 1 run from {out}" in text

    # estimator.ratios_file, relative to the search config, prices the other plans too (search included)
    stated_config(runs_dir, "d.yaml", tp=2, gbs=32, extra="  ratios_file: ./ratios.yaml\n")
    other_uncal = _estimate(runs_dir / "b.yaml")["step_time_s"]
    other_cal = _estimate(runs_dir / "d.yaml")
    # a plan two doublings away: the stack part and a share of the anchor's own (local) part
    assert other_uncal * stack_factor < other_cal["step_time_s"] < other_uncal * 1.37
    s = json.loads(hp_plan("search", str(runs_dir / "d.yaml"), "--json").stdout)
    assert s["best"]["step_time_s"] == pytest.approx(other_cal["step_time_s"], rel=1e-6)
    assert s["best"]["calibration"]["runs"] == 1
    plain = json.loads(hp_plan("search", str(runs_dir / "b.yaml"), "--json").stdout)
    assert plain["best"]["step_time_s"] == pytest.approx(other_uncal, rel=1e-6)


def test_a_stand_in_device_rate_is_read_as_the_stacks_bias(tmp_path: Path) -> None:
    """GB300 is priced with GB200's measured matmul shares, so the error band pays a device term
    (`unmeasured_device`); but every plan on the device shares that error: the published GB200 405B plan run on
    GB300 20% faster than priced is read as the stack's bias, as the same run on GB200 is, not kept as the
    plan's own misfit (engine.calibrate.fit.plan_feature_spread leaves device features out)."""
    src = ROOT / "benchmarks" / "calibration_runs" / "llama31-405b-128xgb200-nemo"
    (tmp_path / "train.yaml").write_text((src / "train.yaml").read_text())
    factors = {}
    for device in ("GB200", "GB300"):
        config = tmp_path / f"{device}.yaml"
        config.write_text((src / "search.yaml").read_text().replace("device_type: GB200", f"device_type: {device}"))
        uncal = _estimate(config)
        assert ("unmeasured_device" in uncal["error_band"]["features"]) == (device == "GB300")
        runs = tmp_path / f"runs-{device}.yaml"
        runs.write_text(f"runs:\n  - config: {config.name}\n    step_time_s: {uncal['step_time_s'] * 0.8}\n")
        r = hp_plan("calibrate", str(runs), "-o", str(tmp_path / f"ratios-{device}.yaml"), "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        fit = json.loads(r.stdout)["parts"]
        assert fit["stack_biased"] is True, device
        factors[device] = fit["stack_factor"]
    assert factors["GB300"] == pytest.approx(factors["GB200"], rel=0.02) and factors["GB300"] < 0.85


def test_several_runs_are_fitted_with_leave_one_out(runs_dir: Path) -> None:
    steps = {n: _estimate(runs_dir / n)["step_time_s"] for n in ("a.yaml", "b.yaml", "c.yaml")}
    factors = {"a.yaml": 1.30, "b.yaml": 1.40, "c.yaml": 1.35}
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n" + "".join(f"  - config: {n}\n    step_time_s: {steps[n] * factors[n]}\n"
                                         for n in steps))
    r = hp_plan("calibrate", str(runs), "--json")
    assert r.returncode == 0, r.stdout
    doc = json.loads(r.stdout)
    assert len(doc["runs"]) == 3
    for row in doc["runs"]:
        assert row["leave_one_out_step_s"] is not None
        assert abs(row["calibrated_step_s"] / row["measured_step_s"] - 1) < 0.05
    # the default parts rule: a stack bias (every part moves by it), each part's own deviation within its prior
    assert doc["rule"] == "parts" and doc["parts"]["stack_biased"] is True
    assert 1.25 < doc["parts"]["stack_factor"] < 1.45, doc["ratios"]
    assert all(0.9 < v < 2.0 for v in doc["ratios"].values()), doc["ratios"]
    text = hp_plan("calibrate", str(runs)).stdout
    assert "calibrated on 3 runs" in text and "l-o-o" in text and "how each part moved" in text


def test_profile_parts_fit_their_own_ratio(runs_dir: Path) -> None:
    est = _estimate(runs_dir / "b.yaml")
    tb = est["time_breakdown_s"]
    compute = (tb["compute"] + tb["recompute"]) * 1.2
    tp = tb["tp_comm"] * 3.0
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: b.yaml\n    step_time_s: {est['step_time_s'] * 1.3}\n"
                    f"    parts_s: {{comp: {compute}, mp_wait: {tp}}}\n")
    doc = json.loads(hp_plan("calibrate", str(runs), "--json").stdout)
    assert doc["ratios"]["compute"] == pytest.approx(1.2, rel=1e-6)
    assert doc["ratios"]["tp_comm"] == pytest.approx(3.0, rel=1e-6)
    assert doc["profiled"] == ["compute", "tp_comm"]


def test_ratios_from_another_framework_warn(runs_dir: Path) -> None:
    ratios = runs_dir / "r.yaml"
    ratios.write_text("framework: megatron\ndevice_type: A2\nratios: {compute: 1.5}\nmemory_ratio: 1.0\n"
                      "fitted_on: []\n")
    doc = _estimate(runs_dir / "a.yaml", "--ratios", str(ratios))
    assert any(d["code"] == "HP809" for d in doc["diagnostics"])
    assert doc["calibration"]["file"] == str(ratios)


BAD = {
    "missing config": ("runs:\n  - config: nowhere.yaml\n    step_time_s: 2.0\n", "HP801", 1),
    "itself": ("runs:\n  - config: runs.yaml\n    step_time_s: 2.0\n", "HP801", 1),
    "no config": ("runs:\n  - step_time_s: 2.0\n", "HP801", 1),
    "no measurement": ("runs:\n  - config: a.yaml\n", "HP806", 1),
    "unknown log": ("runs:\n  - config: a.yaml\n    log: unknown.log\n", "HP802", 2),
    "empty log": ("runs:\n  - config: a.yaml\n    log: empty.log\n", "HP802", 2),
    "wild log": ("runs:\n  - config: a.yaml\n    log: wild.csv\n", "HP804", 2),
    "log is itself": ("runs:\n  - config: a.yaml\n    log: runs.yaml\n", "HP801", 2),
    "NUL in config": ('runs:\n  - config: "a\\0.yaml"\n    step_time_s: 2.0\n', "HP801", 1),  # was HP900
    "NUL in log": ('runs:\n  - config: a.yaml\n    log: "x\\0.log"\n', "HP801", 2),
    "does not price": ("runs:\n  - config: searched.yaml\n    step_time_s: 2.0\n", "HP805", 1),
    "not runs": ("- config: a.yaml\n", "HP800", 0),
    "too many runs": ("runs:\n" + "  - {config: a.yaml, step_time_s: 2.0}\n" * 1001, "HP800", 1),  # was minutes
    "log is a folder": ("runs:\n  - config: a.yaml\n    log: logs\n", "HP801", 2),  # said "not found"
    "log is a dangling link": ("runs:\n  - config: a.yaml\n    log: gone.log\n", "HP801", 2),
    "parts past the step": ("runs:\n  - config: a.yaml\n    step_time_s: 2.4\n    parts_s: {comp: 100}\n",
                            "HP803", 1),  # fitted +889 %
    "parts all zero": ("runs:\n  - config: a.yaml\n    step_time_s: 2.4\n    parts_s: {comp: 0, op_wait: 0}\n",
                       "HP803", 1),  # fitted -84 %
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_positioned_exit_1_nothing_written(runs_dir: Path, case: str) -> None:
    text, code, line = BAD[case]
    (runs_dir / "unknown.log").write_text("epoch 1 loss 2.0\nepoch 2 loss 1.9\n")
    (runs_dir / "empty.log").write_text("")
    (runs_dir / "wild.csv").write_text("step_time_s\n" + "\n".join(["1.0", "3.0"] * 6) + "\n")
    (runs_dir / "searched.yaml").write_text((runs_dir / "a.yaml").read_text().replace("tp: 1,", "tp: auto,"))
    (runs_dir / "logs").mkdir()
    (runs_dir / "gone.log").symlink_to(runs_dir / "nowhere" / "run.log")
    runs = runs_dir / "runs.yaml"
    runs.write_text(text)
    out = runs_dir / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json")
    assert r.returncode == 1
    assert not out.exists()
    doc = json.loads(r.stdout)
    hits = [d for d in doc["diagnostics"] if d["code"] == code]
    assert hits, doc["diagnostics"]
    assert hits[0]["range"]["start"]["line"] == line
    if case == "log is a dangling link":  # said as a missing file behind a link, not as a FIFO or a device
        assert "not found" in hits[0]["message"] and "a link to a missing file" in hits[0]["message"]
    text_out = hp_plan("calibrate", str(runs), "-o", str(out)).stdout
    assert f"runs.yaml:{line + 1}:" in text_out and "nothing written" in text_out


def test_a_torchtitan_log_gives_the_step_and_the_peak(runs_dir: Path) -> None:
    # a.yaml: 16 sequences of 8192 tokens on 8 devices = 16,384 tokens per device per step
    peak = round(_estimate(runs_dir / "a.yaml")["peak_memory_gib"] * 1.1, 2)
    lines = ["step:  1  loss: 12.0  memory: 20.00GiB(21.05%)  tps: 900  tflops: 50.0  mfu: 5.0%"]
    lines += [f"step: {i}  loss:  7.9  memory: {peak:.2f}GiB(50.00%)  tps: 8,192  tflops: 400.0  mfu: 40.0%"
              for i in range(2, 12)]
    (runs_dir / "train.log").write_text("\n".join(lines) + "\n")
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n  - config: a.yaml\n    log: train.log\n")
    doc = json.loads(hp_plan("calibrate", str(runs), "--json").stdout)
    (run,) = doc["runs"]
    assert run["measured_step_s"] == pytest.approx(2.0, rel=1e-6)
    assert run["measured_peak_gib"] == pytest.approx(peak)
    assert run["calibrated_peak_gib"] == pytest.approx(peak, rel=1e-3)
    assert run["log"] == {"format": "torchtitan", "steps_used": 9, "warmup_dropped": 2, "outliers_dropped": 0}


def test_apply_prices_the_search_with_the_ratios(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "llama3-70b"
    for name in ("search.yaml", "train.yaml"):
        (tmp_path / name).write_text((example / name).read_text())
    ratios = tmp_path / "r.yaml"
    ratios.write_text("framework: hyperparallel\nratios: {compute: 1.5}\nmemory_ratio: 1.0\n"
                      "fitted_on: [{config: a.yaml, measured_step_s: 1, uncalibrated_step_s: 1, calibrated_step_s: 1}]\n")
    doc = json.loads(hp_plan("apply", str(tmp_path / "search.yaml"), "--json", "--ratios", str(ratios)).stdout)
    assert doc["best"]["calibration"] == {"file": str(ratios), "runs": 1}
    plain = json.loads(hp_plan("apply", str(tmp_path / "search.yaml"), "--json").stdout)
    assert plain["best"]["calibration"] is None
    assert doc["best"]["step_time_s"] > plain["best"]["step_time_s"] * 1.2


def test_explain_timeline_follows_the_calibrated_step(runs_dir: Path) -> None:
    ratios = runs_dir / "r.yaml"
    ratios.write_text("framework: torchtitan\ndevice_type: H100\nratios: {compute: 1.3}\nmemory_ratio: 1.0\n"
                      "fitted_on: []\n")
    doc = json.loads(hp_plan("explain", str(runs_dir / "b.yaml"), "--json", "--ratios", str(ratios)).stdout)
    assert doc["step_time_s"] == pytest.approx(_estimate(runs_dir / "b.yaml")["step_time_s"] * 1.3, rel=1e-6)
    assert max(t["end_s"] for t in doc["timeline"]) == pytest.approx(doc["step_time_s"], rel=1e-3)
    assert not [d for d in doc["diagnostics"] if d["code"] == "HP750"]  # no rescaling needed


def test_local_rule_reproduces_the_anchor_and_moves_near_plans_more_than_distant_ones(runs_dir: Path) -> None:
    """`hp-plan calibrate` (default rule local) on one run 5% off — within the model's own spread on this stack —
    then `hp-plan estimate --ratios` on other plans: the anchor is reproduced, a plan one tp doubling away moves
    part of the way, a plan several doublings away does not move; rule step moves both by the whole 5%."""
    near = stated_config(runs_dir, "near.yaml", tp=2, gbs=16)
    far = stated_config(runs_dir, "far.yaml", nodes=4, tp=8, gbs=16)
    uncal = {p.name: _estimate(p)["step_time_s"] for p in (runs_dir / "a.yaml", near, far)}
    measured = uncal["a.yaml"] * 1.05
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: a.yaml\n    step_time_s: {measured}\n")
    out = runs_dir / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json", "--rule", "local")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["rule"] == "local" and doc["local"]["stack_biased"] is False
    assert yaml.safe_load(out.read_text())["local"]["anchors"][0]["plan"]["tp"] == 1
    text = hp_plan("calibrate", str(runs), "--rule", "local").stdout
    assert "local rule: the runs' misfit reads as within the model's own spread" in text

    def moved(path: Path, ratios: Path) -> float:
        return _estimate(path, "--ratios", str(ratios))["step_time_s"] / uncal[path.name] - 1

    assert _estimate(runs_dir / "a.yaml", "--ratios", str(out))["step_time_s"] == pytest.approx(measured, rel=0.01)
    m_near, m_far = moved(near, out), moved(far, out)
    assert 0.003 < m_near < 0.05
    assert abs(m_far) < 0.1 * m_near

    step = runs_dir / "step.yaml"
    assert hp_plan("calibrate", str(runs), "-o", str(step), "--rule", "step").returncode == 0
    assert "local" not in yaml.safe_load(step.read_text())
    assert moved(near, step) == pytest.approx(0.05, abs=1e-3)
    assert moved(far, step) == pytest.approx(0.05, abs=1e-3)

    # a search with the local ratios ranks with the same prices estimate gives
    d = stated_config(runs_dir, "d.yaml", tp=2, gbs=16, extra="  ratios_file: ./ratios.yaml\n")
    s = json.loads(hp_plan("search", str(d), "--json").stdout)
    assert s["best"]["step_time_s"] == pytest.approx(_estimate(d)["step_time_s"], rel=1e-6)


def test_the_local_rule_refuses_more_runs_than_it_fits_in_bounded_time(runs_dir: Path) -> None:
    """1,000 runs under --rule local ran past 2 minutes (its kernel and refits grow faster than n²)."""
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n" + "  - {config: a.yaml, step_time_s: 2.0}\n" * 101)
    r = hp_plan("calibrate", str(runs), "--rule", "local", "--json", timeout=60)
    assert r.returncode == 1, r.stdout[-2000:]
    hits = [d for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "HP800"]
    assert hits and "at most 100 runs" in hits[0]["message"] and hits[0]["range"]["start"]["line"] == 1


def test_a_ring_wider_than_any_checked_is_the_plans_own_misfit(tmp_path: Path) -> None:
    """A dense plan whose context-parallel ring is wider than any shown run's has no band feature, yet its band
    is wider (engine.cost.band, the evidence envelope): calibration reads that excess as the plan's own spread,
    as it does a feature's, so such a run weighs less as evidence of the stack's bias."""
    from engine.calibrate.fit import plan_feature_spread
    from engine.check import check_file
    from engine.cost import estimate_config

    src = ROOT / "benchmarks" / "calibration_runs" / "llama31-405b-128xgb200-nemo"
    (tmp_path / "train.yaml").write_text((src / "train.yaml").read_text())
    search = (src / "search.yaml").read_text()
    (tmp_path / "cp2.yaml").write_text(search)
    (tmp_path / "cp4.yaml").write_text(search.replace("  dp: 2\n", "  dp: 1\n").replace("  cp: 2\n", "  cp: 4\n")
                                       .replace("micro_batch_num: 32", "micro_batch_num: 64"))
    spreads = {}
    for name in ("cp2", "cp4"):
        config = check_file(str(tmp_path / f"{name}.yaml")).config
        assert config is not None
        est, _ = estimate_config(config)
        assert est is not None and est.band_features == ()
        spreads[name] = plan_feature_spread(est, config)
    assert spreads["cp2"] == 0.0 and spreads["cp4"] > 0.1


def _tt_log(path: Path) -> Path:
    """A torchtitan log of 11 steady steps at 8,192 tokens/s and 20 GiB (its format, docs/formats.md §8)."""
    path.write_text("".join(f"step: {i}  loss:  7.9  memory: 20.00GiB(50.00%)  tps: 8,192  tflops: 400.0  mfu: 40.0%\n"
                            for i in range(1, 12)))
    return path


def _said(runs: Path, code: str, *flags: str) -> list[dict[str, Any]]:
    """`hp-plan calibrate RUNS --json FLAGS`: its diagnostics of `code`."""
    doc = json.loads(hp_plan("calibrate", str(runs), "--json", *flags).stdout)
    return [d for d in doc["diagnostics"] if d["code"] == code]


def test_the_ratios_file_never_replaces_a_file_the_calibration_read(runs_dir: Path) -> None:
    """`-o` naming the run's own log (or its config) is refused and the file is kept: the measured data would be
    lost (a probe overwrote a log, a trace and a train.yaml this way)."""
    log = _tt_log(runs_dir / "run.log")
    before = log.read_bytes()
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n  - config: a.yaml\n    log: run.log\n")
    assert hp_plan("calibrate", str(runs), "-o", str(runs_dir / "ok.yaml")).returncode == 0  # the log fits
    for target in (log, runs_dir / "a.yaml"):
        kept = target.read_bytes()
        r = hp_plan("calibrate", str(runs), "-o", str(target))
        assert r.returncode == 1 and target.read_bytes() == kept, r.stdout + r.stderr
    assert log.read_bytes() == before


def test_a_config_priced_on_an_assumed_device_says_so_at_the_run(tmp_path: Path) -> None:
    """A bare train.yaml names no device: its check assumes A2 (HP303), so the ratios are fitted on A2 figures.
    calibrate says so at the run's `config:` (HP811; it calibrated "hyperparallel / A2" silently); a RUNS entry
    that names the device prices on it, without the warning."""
    (tmp_path / "train.yaml").write_text(
        "model:\n  name: llama3-8b\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n  torch_dtype: bfloat16\n"
        "training: {global_batch_size: 64, micro_batch_size: 1}\naccelerator: {tp_size: 1, pp_size: 1, cp_size: 1}\n"
        "fsdp_config: {dp_shard_size: 8}\ndataset: {data_transform: {max_seq_len: 4096}}\ncontext: {device_num: 8}\n")
    runs = tmp_path / "runs.yaml"
    runs.write_text("runs:\n  - config: train.yaml\n    step_time_s: 5.0\n")
    (d,) = _said(runs, "HP811")
    assert "HP303" in d["message"] and d["path"] == "runs.0.config" and d["range"]["start"]["line"] == 1
    runs.write_text("runs:\n  - config: train.yaml\n    step_time_s: 5.0\n    device_type: H100\n")
    doc = json.loads(hp_plan("calibrate", str(runs), "--json").stdout)
    assert not [d for d in doc["diagnostics"] if d["code"] == "HP811"] and doc["device_type"] == "H100"


def test_a_log_beside_a_figure_and_far_ratios_are_each_said_once(runs_dir: Path) -> None:
    """A run with both a log and a step time is measured by the figure, and says so (HP813 at the figure);
    a step ten times the priced one moves every part by one factor, said once (HP807 named the 16 parts one by one,
    the ones priced at no seconds among them)."""
    _tt_log(runs_dir / "run.log")
    uncal = _estimate(runs_dir / "a.yaml")["step_time_s"]
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: a.yaml\n    log: run.log\n    step_time_s: {uncal * 10}\n")
    (both,) = _said(runs, "HP813", "--rule", "step")
    assert both["severity"] == "warning" and both["path"] == "runs.0.step_time_s"
    far = _said(runs, "HP807", "--rule", "step")
    assert len(far) == 1 and "ratios of gemm" in far[0]["message"] and "cp_comm" not in far[0]["message"]


def test_two_runs_of_one_plan_far_apart_are_said(runs_dir: Path) -> None:
    """One plan measured at 2.0 and 3.0 s: the fit reads both as that plan (it fitted 2.45 s silently); HP812 says
    they are 50 % apart, at the later run. Repeats within noise say nothing."""
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n  - config: a.yaml\n    step_time_s: 2.0\n  - config: a.yaml\n    step_time_s: 3.0\n")
    (d,) = _said(runs, "HP812")
    assert "50% apart" in d["message"] and d["path"] == "runs.1" and d["range"]["start"]["line"] == 3
    runs.write_text("runs:\n  - config: a.yaml\n    step_time_s: 2.0\n  - config: a.yaml\n    step_time_s: 2.1\n")
    assert not _said(runs, "HP812")


def test_one_log_read_for_two_runs_is_said(runs_dir: Path) -> None:
    """The same log under two runs (also through a symlink): it counted as two measurements, silently."""
    _tt_log(runs_dir / "run.log")
    (runs_dir / "link.log").symlink_to(runs_dir / "run.log")
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n  - config: a.yaml\n    log: run.log\n  - config: a.yaml\n    log: link.log\n")
    (d,) = _said(runs, "HP812")
    assert "read the same log" in d["message"] and d["path"] == "runs.1"
    _tt_log(runs_dir / "other.log")
    runs.write_text("runs:\n  - config: a.yaml\n    log: run.log\n  - config: a.yaml\n    log: other.log\n")
    assert not _said(runs, "HP812")


def test_one_profile_read_for_two_runs_is_said(tmp_path: Path) -> None:
    """The same trace under two runs (also through a symlink) counted twice and moved the fitted ratios, silently;
    a log read twice was already said."""
    explain_trace(tmp_path / "t.json")
    (tmp_path / "link.json").symlink_to(tmp_path / "t.json")
    runs = tmp_path / "runs.yaml"
    runs.write_text(f"runs:\n  - config: {EXAMPLE}\n    trace: t.json\n  - config: {EXAMPLE}\n    trace: link.json\n")
    (d,) = _said(runs, "HP812")
    assert "read the same profile" in d["message"] and d["path"] == "runs.1"


def test_a_run_the_fit_cannot_reproduce_is_said(runs_dir: Path) -> None:
    """A step of 0.1 ms (seconds written as something else) pins the ratios at their bounds: the calibrated run
    is off by thousands of percent, which HP807 now says of the run itself (it said only that ratios were far)."""
    runs = runs_dir / "runs.yaml"
    runs.write_text("runs:\n  - config: a.yaml\n    step_time_s: 0.0001\n")
    (d,) = [d for d in _said(runs, "HP807") if "not reproduced" in d["message"]]
    assert d["path"] == "runs.0"
    uncal = _estimate(runs_dir / "a.yaml")["step_time_s"]
    runs.write_text(f"runs:\n  - config: a.yaml\n    step_time_s: {uncal * 1.1}\n")
    assert not [d for d in _said(runs, "HP807") if "not reproduced" in d["message"]]
