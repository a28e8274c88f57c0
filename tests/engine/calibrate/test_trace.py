"""Profiler traces as runs (engine.calibrate.profiler_trace, .stream, .ascend) and the predicted step as a trace
(`hp-plan explain --trace`): read on a real PyTorch profiler trace, fitted on traces synthesized from the model's
own timeline, bad input refused at the RUNS entry's key with nothing written."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from engine.calibrate import stream
from engine.calibrate.profiler_trace import classify, read_trace
from tests.support.cli import hp_plan_script as hp_plan
from tests.support.plan_traces import EXAMPLE, explain_trace, ratios_file

HERE = Path(__file__).resolve().parent
REAL = HERE / "traces" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_a_real_pytorch_trace_reads_as_its_kernels_say() -> None:
    """The streamed reading equals what loading the whole file finds: the device-side ProfilerStep#1 window,
    the one GEMM (ROCm's Cijk_ kernel) and every other device event in it as element-wise."""
    doc = json.loads(gzip.decompress(REAL.read_bytes()))
    events = doc["traceEvents"]
    (step,) = [e for e in events if e.get("cat") == "gpu_user_annotation" and e["name"] == "ProfilerStep#1"]
    lo, hi = step["ts"], step["ts"] + step["dur"]
    inside = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and lo <= e["ts"] < hi]
    gemm = sum(e["dur"] for e in inside if e["name"].startswith("Cijk_"))
    rest = sum(min(e["ts"] + e["dur"], hi) - e["ts"] for e in inside if not e["name"].startswith("Cijk_"))
    r = read_trace(str(REAL))
    assert r.used == 1 and r.warmup == 0 and r.devices == 1
    assert r.step_time_s == pytest.approx(step["dur"] / 1e6)
    assert r.parts_s["gemm"] == pytest.approx(gemm / 1e6, rel=1e-4) and gemm > 0
    assert r.parts_s["elementwise"] == pytest.approx(rest / 1e6, rel=1e-4) and rest > 0
    assert classify("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>", {}) == "optimizer"
    assert classify("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", {}) == \
        "sendrecv"
    assert classify("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", {}) == "collective"
    assert classify("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>", {}) == "attention"
    assert classify("hcom_alltoallv_", None) == "alltoall"


def test_the_stream_reads_events_split_across_any_chunk_boundary(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(REAL.read_bytes()))
    whole = read_trace(str(plain))
    monkeypatch.setattr(stream, "CHUNK_CHARS", 7)
    assert read_trace(str(plain)) == whole


def test_explain_writes_the_predicted_step_as_a_chrome_trace(tmp_path: Path) -> None:
    out = tmp_path / "plan.trace.json"
    doc = explain_trace(out)
    assert doc["trace"] == str(out)
    trace = _strict(out.read_text())
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert all(isinstance(e["ts"], float | int) and e["dur"] >= 0 and {"name", "cat", "pid", "tid"} <= set(e)
               for e in complete)
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {s: f"pipeline stage {s}" for s in range(4)}
    assert {e["cat"] for e in complete} == {"kernel", "gpu_user_annotation"}
    assert max(e["ts"] + e["dur"] for e in complete) == pytest.approx(doc["step_time_s"] * 1e6, abs=0.01)
    assert any(e["name"].startswith("nccl:AllReduce") for e in complete)


def test_a_trace_of_the_models_own_timeline_is_fitted_back_within_5_percent(tmp_path: Path) -> None:
    """A run whose GEMMs are 25% slower, attention 20% faster, element-wise work 40% slower and tensor-parallel
    traffic 60% slower than priced, drawn as the model's own timeline (explain --ratios --trace), calibrated on
    its trace: each part's calibrated seconds reproduce the trace's device time per category."""
    measured = tmp_path / "measured.trace.json"
    truth = {"gemm": 1.25, "attention": 0.8, "elementwise": 1.4}
    explain_trace(measured, "--ratios", str(ratios_file(tmp_path / "truth.yaml", truth, tp_comm=1.6)))
    reading = read_trace(str(measured))
    out = tmp_path / "ratios.yaml"
    doc = _calibrated_on(measured, out)
    parts = {p: v["calibrated"] for p, v in doc["runs"][0]["time_parts_s"].items()}
    groups = {g: v["calibrated"] for g, v in doc["runs"][0]["parts_s"].items()}
    kernels = sum(parts[k] for k in ("gemm", "attention", "elementwise"))
    for k in ("gemm", "attention", "elementwise"):  # recompute replays the three in the forward's proportions
        assert parts[k] + parts["recompute"] * parts[k] / kernels == pytest.approx(reading.parts_s[k], rel=0.05)
    assert sum(v for p, v in parts.items() if p.split(".")[0] in ("tp_comm", "cp_comm", "dp_comm")) == \
        pytest.approx(reading.parts_s["collective"], rel=0.05)
    assert groups["pp"] == pytest.approx(reading.parts_s["sendrecv"] + reading.idle_s, rel=0.05)
    assert groups["optimizer"] == pytest.approx(reading.parts_s["optimizer"], rel=0.05)
    # each part's own ratio is found (the drawn timeline squeezes its boxes a little where the bubble, not
    # scaled, no longer fits the re-simulated order: engine.explain.build, so not exactly the truth)
    got = doc["part_ratios"]
    assert got["gemm"] > 1.15 and got["attention"] < 0.9 and got["elementwise"] > 1.25
    assert got["tp_comm.intra"] > 1.4
    assert doc["runs"][0]["calibrated_step_s"] == pytest.approx(reading.step_time_s, rel=0.01)
    assert set(doc["profiled"]) >= {"compute", "optimizer"} and "tp_comm.intra" in doc["profiled"] + ["tp_comm"]
    written = out.read_text()
    assert "parts:" in written and "gemm:" in written  # the part ratios travel to every other plan


def _calibrated_on(trace: Path, out: Path) -> dict[str, Any]:
    """`hp-plan calibrate -o OUT --json` on one run of the example plan (copied beside `trace`) profiled by `trace`:
    the JSON it prints, its exit code 0."""
    runs = _runs_with(trace.parent, "trace", trace.name)
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def _runs_with(tmp_path: Path, key: str, value: str) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "plan.yaml")
    runs = tmp_path / "runs.yaml"
    runs.write_text(f"runs:\n  - config: plan.yaml\n    {key}: {value}\n")
    return runs


def _refused(runs: Path, code: str) -> dict[str, Any]:
    out = runs.parent / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json")
    assert r.returncode == 1, r.stdout
    assert not out.exists()
    doc = json.loads(r.stdout)
    (d,) = [d for d in doc["diagnostics"] if d["code"] == code]
    assert d["range"]["start"]["line"] == 2  # at the value of the entry's trace / ascend_profile key
    return d


def _trace_text(events: list[dict[str, Any]], **meta: Any) -> str:
    return json.dumps({**meta, "traceEvents": events})


def _kernel(ts: float, dur: float, name: str = "sm90_xmma_gemm_bf16") -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur}


def test_a_truncated_gz_trace_is_refused_at_its_key(tmp_path: Path) -> None:
    data = REAL.read_bytes()
    (tmp_path / "cut.json.gz").write_bytes(data[: len(data) // 2])
    d = _refused(_runs_with(tmp_path, "trace", "cut.json.gz"), "HP820")
    assert "cut short" in d["message"] or "corrupt" in d["message"]


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000,
                                  '{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}"])
def test_a_trace_nested_beyond_the_decoder_is_refused_at_its_key(tmp_path: Path, text: str) -> None:
    """The C decoder's RecursionError was an internal error (HP900)."""
    (tmp_path / "deep.json").write_text(text)
    d = _refused(_runs_with(tmp_path, "trace", "deep.json"), "HP820")
    assert "nested too deeply" in d["message"]


def test_a_trace_without_a_complete_step_is_refused(tmp_path: Path) -> None:
    (tmp_path / "nostep.json").write_text(_trace_text([_kernel(10.0, 5.0), _kernel(20.0, 5.0)]))
    _refused(_runs_with(tmp_path, "trace", "nostep.json"), "HP821")


def test_a_trace_of_another_world_size_is_refused(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
               "ts": i * 100.0, "dur": 90.0} for i in range(1, 4)] + [_kernel(i * 100.0 + 5, 50.0) for i in range(1, 4)]
    (tmp_path / "other.json").write_text(_trace_text(events, distributedInfo={"rank": 0, "world_size": 64}))
    d = _refused(_runs_with(tmp_path, "trace", "other.json"), "HP822")
    assert "64" in d["message"] and "16" in d["message"]


def test_a_2_gib_trace_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: no disk used
        fh.truncate(2 << 30)
    t0 = time.perf_counter()
    d = _refused(_runs_with(tmp_path, "trace", "big.json"), "HP820")
    assert "2048 MiB, over the 1024 MiB limit" in d["message"] and time.perf_counter() - t0 < 30
    os.unlink(big)


def test_a_gz_over_the_limit_is_refused_from_its_trailer_and_a_lying_one_while_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    text = _trace_text([_kernel(float(i), 1.0) for i in range(40_000)])  # ~3 MB of trace text
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    monkeypatch.setattr(stream, "MAX_TRACE_BYTES", 1 << 20)
    with pytest.raises(stream.TraceError, match="over the 1 MiB limit"):
        read_trace(str(gz))
    data = gz.read_bytes()
    gz.write_bytes(data[:-4] + (100).to_bytes(4, "little"))  # a trailer that understates the size
    with pytest.raises(stream.TraceError, match="over the 1 MiB limit"):
        read_trace(str(gz))


def test_kernel_details_with_unknown_columns_is_refused_at_its_line(tmp_path: Path) -> None:
    prof = tmp_path / "prof" / "ASCEND_PROFILER_OUTPUT"
    prof.mkdir(parents=True)
    (prof / "kernel_details.csv").write_text("Op,Begin,Length\nMatMulV2,1,2\n")
    d = _refused(_runs_with(tmp_path, "ascend_profile", "prof"), "HP820")
    assert "kernel_details.csv line 1" in d["message"] and "Start Time(us)" in d["message"]


def test_an_ascend_kernel_details_profile_is_a_run(tmp_path: Path) -> None:
    """torch_npu's kernel_details.csv (the columns every version writes, plus others ignored): three steps,
    the first dropped as warm-up; matmuls and flash attention are compute, hcom all-reduce exposed traffic."""
    prof = tmp_path / "prof" / "ASCEND_PROFILER_OUTPUT"
    prof.mkdir(parents=True)
    rows = ["Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us)"]
    for step in range(3):
        t0 = step * 1000.0
        scale = 2.0 if step == 0 else 1.0
        rows += [f"{step},0,MatMulV2_1,MatMulV2,AI_CORE,{t0},{400 * scale},0",
                 f"{step},0,FlashAttentionScore_1,FlashAttentionScore,MIX_AIC,{t0 + 400 * scale},{200 * scale},0",
                 f"{step},0,hcom_allReduce__1,hcom_allReduce_,COMMUNICATION,{t0 + 700 * scale},100,0"]
    (prof / "kernel_details.csv").write_text("\n".join(rows) + "\n")
    from engine.calibrate.ascend import read_ascend

    r = read_ascend(str(tmp_path / "prof"))
    assert r.used == 2 and r.warmup == 1
    assert r.parts_s["gemm"] == pytest.approx(400e-6) and r.parts_s["attention"] == pytest.approx(200e-6)
    assert r.parts_s["collective"] == pytest.approx(100e-6)
    assert r.step_time_s == pytest.approx(800e-6, rel=1e-3)


def _op_summary(prof: Path, gemm: float = 400.0, attn: float = 200.0, comm: float = 100.0, steps: int = 3) -> None:
    """msprof's op_summary table (its column names, a trailing tab in the start cells, as msprof writes them);
    durations in µs per step."""
    rows = ["Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
            "Task Duration(us),Task Wait Time(us),Block Dim,Step Id"]
    period = 2 * (gemm + attn + comm)
    for step in range(steps):
        t0 = step * 2 * period
        scale = 2.0 if step == 0 else 1.0
        rows += [f"0,4294967295,1,2,MatMulV2_1,MatMulV2,static,AI_CORE,{t0}\t,{gemm * scale},0,20,{step}",
                 f"0,4294967295,2,2,FlashAttentionScore_1,FlashAttentionScore,static,MIX_AIC,{t0 + gemm * scale}\t,"
                 f"{attn * scale},0,20,{step}",
                 f"0,4294967295,3,3,hcom_allReduce__1,hcom_allReduce_,static,COMMUNICATION,"
                 f"{t0 + (gemm + attn) * scale + 10}\t,{comm},0,1,{step}"]
    prof.mkdir(parents=True)
    (prof / "op_summary_20260101.csv").write_text("\n".join(rows) + "\n")


def test_an_msprof_op_summary_is_a_run_through_calibrate(tmp_path: Path) -> None:
    """Without kernel_details.csv, msprof's op_summary_*.csv is read under its own column names: its GEMM and
    attention device times become the run's measured parts, each part fitted from them (GEMMs 30% slower and
    attention 20% faster than the plan prices them, recompute's replay of each included)."""
    from engine.calibrate.ascend import read_ascend
    from engine.config import load
    from engine.cost import estimate_config

    cfg = load(str(EXAMPLE)).config
    assert cfg is not None
    est, _ = estimate_config(cfg)
    assert est is not None
    tp = est.time_parts_s
    kernels = tp["gemm"] + tp["attention"] + tp["elementwise"]
    gemm_us = 1.3 * (tp["gemm"] + tp["recompute"] * tp["gemm"] / kernels) * 1e6
    attn_us = 0.8 * (tp["attention"] + tp["recompute"] * tp["attention"] / kernels) * 1e6
    _op_summary(tmp_path / "prof" / "PROF_1" / "mindstudio_profiler_output", gemm_us, attn_us)
    r = read_ascend(str(tmp_path / "prof"))
    assert r.used == 2 and r.warmup == 1
    assert r.parts_s["gemm"] == pytest.approx(gemm_us * 1e-6) and r.parts_s["attention"] == pytest.approx(attn_us * 1e-6)
    assert r.parts_s["collective"] == pytest.approx(100e-6)
    runs = _runs_with(tmp_path, "ascend_profile", "prof")
    doc = json.loads(hp_plan("calibrate", str(runs), "--json").stdout)
    assert [d for d in doc["diagnostics"] if d["severity"] == "error"] == []
    assert doc["part_ratios"]["gemm"] == pytest.approx(1.3, rel=1e-6)
    assert doc["part_ratios"]["attention"] == pytest.approx(0.8, rel=1e-6)
    parts = {k: v["calibrated"] for k, v in doc["runs"][0]["time_parts_s"].items()}
    kernels = parts["gemm"] + parts["attention"] + parts["elementwise"]
    for k, measured in (("gemm", gemm_us), ("attention", attn_us)):  # the trace's category times, within 5%
        assert parts[k] + parts["recompute"] * parts[k] / kernels == pytest.approx(measured * 1e-6, rel=0.05)


def test_an_op_summary_with_unknown_columns_is_refused_at_line_1_naming_them(tmp_path: Path) -> None:
    prof = tmp_path / "prof"
    prof.mkdir()
    (prof / "op_summary_1.csv").write_text("Kernel,Begin,Length\nMatMulV2,1,2\n")
    d = _refused(_runs_with(tmp_path, "ascend_profile", "prof"), "HP820")
    assert "op_summary_1.csv line 1: unknown columns (Kernel, Begin, Length)" in d["message"]
    assert "Task Duration(us)" in d["message"]


@pytest.mark.parametrize(("dur", "code", "said"), [(0.0, "HP821", "no complete profiled step"),
                                                    (1e300, "HP803", "beyond any run")])
def test_a_profiles_step_is_measured_as_a_logs_is(tmp_path: Path, dur: float, code: str, said: str) -> None:
    """A step past any run (its end overflowing to infinity alike) is refused at the trace key (HP803), as a log's
    would be, and a step of zero holds no device work, so none is complete (HP821): they were fitted (ratios near
    0.1, an MFU of 400 % after) or wrote `.inf`."""
    events = [{"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{i}", "pid": 0, "tid": 2,
               "ts": i * 100.0, "dur": dur} for i in range(1, 4)] + [_kernel(i * 100.0, 1.0) for i in range(1, 4)]
    (tmp_path / "odd.json").write_text(_trace_text(events))
    d = _refused(_runs_with(tmp_path, "trace", "odd.json"), code)
    assert said in d["message"]


def test_idle_steps_fit_a_host_time_its_ratios_file_can_carry(tmp_path: Path) -> None:
    """The model's own timeline with every step 3× longer (the device idle: a stalled loader): the host part it
    fits is held at what a ratios file may carry (HP807 says so) and the written file applies (it was HP810)."""
    measured = tmp_path / "measured.trace.json"
    explain_trace(measured)
    doc = json.loads(measured.read_text())
    for e in doc["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep"):
            e["dur"] *= 3.0
    measured.write_text(json.dumps(doc))
    out = tmp_path / "ratios.yaml"
    said = _calibrated_on(measured, out)["diagnostics"]
    assert any(d["code"] == "HP807" and "host time" in d["message"] for d in said)
    est = hp_plan("estimate", str(tmp_path / "plan.yaml"), "--ratios", str(out), "--json")
    assert est.returncode in (0, 1) and not [d for d in json.loads(est.stdout)["diagnostics"] if d["code"] == "HP810"]


def test_a_device_step_without_kernels_is_no_step(tmp_path: Path) -> None:
    """The device's own ProfilerStep spans, the last three holding no kernel (the profiler stopped recording):
    only the steps with device work count, so the run reads as its busy steps, not as a step of host time."""
    busy = [{"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{i}", "pid": 0, "tid": 2,
             "ts": i * 1000.0, "dur": 900.0} for i in range(1, 7)]
    kernels = [_kernel(i * 1000.0 + 10, 800.0) for i in range(1, 4)]
    (tmp_path / "t.json").write_text(_trace_text(busy + kernels))
    reading = read_trace(str(tmp_path / "t.json"))
    assert reading.used + reading.warmup == 3 and reading.step_time_s == pytest.approx(900e-6)


def test_the_ratios_file_never_replaces_a_rank_file_of_a_trace_folder(tmp_path: Path) -> None:
    """`trace:` naming a folder (one file per rank): `-o` naming one of its files is refused and the trace kept."""
    (tmp_path / "traces").mkdir()
    rank0 = tmp_path / "traces" / "rank0.json"
    explain_trace(rank0)
    kept = rank0.read_bytes()
    runs = _runs_with(tmp_path, "trace", "traces")
    r = hp_plan("calibrate", str(runs), "-o", str(rank0))
    assert r.returncode == 1 and rank0.read_bytes() == kept, r.stdout + r.stderr
