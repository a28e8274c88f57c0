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


def _odd_events() -> list[Any]:
    """Device events as a profiler writes them beside every odd one the reader skips or reads as it can: times
    as strings, a missing or negative duration, NaN, an infinite start, another phase, a stated part, a name that
    is not a string, values that are not events, several processes, step annotations."""
    steps = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": "h", "tid": 1,
              "ts": i * 100.0, "dur": 100.0} for i in range(1, 4)]
    kernels = [_kernel(100.0 + 7 * i % 290, 3.0, name) for i, name in enumerate(
        ["sm90_xmma_gemm_bf16", "flash_fwd_kernel", "ncclDevKernel_AllReduce_Sum", "elementwise_kernel"] * 20)]
    for i, k in enumerate(kernels):
        k["pid"] = i % 3
    odd: list[Any] = [
        {**_kernel(150.0, 2.0), "ts": "150.5"}, {**_kernel(160.0, 2.0), "dur": -1.0}, {**_kernel(161.0, 1.0)},
        {**_kernel(170.0, float("nan"))}, {**_kernel(float("inf"), 1.0)}, {**_kernel(180.0, 1.0), "ph": "B"},
        {**_kernel(190.0, 5.0, "anything"), "args": {"hp_part": "tp_comm"}}, {**_kernel(200.0, 1.0), "name": 5},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 1, "ts": 210.0}, 7, [1], None,
        {"ph": "X", "cat": ["kernel"], "ts": 1.0, "dur": 1.0},
    ]
    del odd[2]["dur"]
    return steps + kernels[:40] + odd + kernels[40:]


def _columns(col: Any) -> dict[Any, tuple[list[float], list[float], list[int]]]:
    return {pid: tuple(c.tolist() for c in d.by_start()) for pid, d in col.devices.items()}


@pytest.mark.parametrize("window", [1, 5, 1000])
def test_events_read_column_by_column_are_kept_as_one_by_one(window: int) -> None:
    """A window's device events are read as columns, a window with an odd one event by event: either way the
    same events are kept, with the same codes, per process, in the same order, and the same steps."""
    from engine.calibrate.profiler_trace import _Collector

    events = _odd_events()
    by_window, one_by_one = _Collector(), _Collector()
    for i in range(0, len(events), window):
        by_window(events[i:i + window])
    for ev in events:
        if isinstance(ev, dict):
            one_by_one.one(ev)
    assert _columns(by_window) == _columns(one_by_one)
    assert by_window.host_steps == one_by_one.host_steps and len(by_window.host_steps) == 3
    assert by_window.kept == sum(d.count() for d in one_by_one.devices.values()) == 85


def _reference_parts(events: list[tuple[float, float, str]], lo: float, hi: float) -> dict[str, float]:
    """Each category's seconds in [lo, hi), by merging intervals one by one (the reader's former way)."""
    def union(ivs: list[tuple[float, float]]) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        for s, e in sorted(ivs):
            if out and s <= out[-1][1]:
                out[-1] = (out[-1][0], max(e, out[-1][1]))
            else:
                out.append((s, e))
        return out

    def length(ivs: list[tuple[float, float]]) -> float:
        return sum(e - s for s, e in union(ivs))

    inside = [(s, min(e, hi), c) for s, e, c in events if lo <= s < hi]
    compute = [(s, e) for s, e, c in inside if c not in ("collective", "alltoall", "sendrecv")]
    parts = {c: sum(e - s for s, e, k in inside if k == c) / 1e6 for c in
             ("gemm", "attention", "elementwise", "compute", "optimizer")}
    for c in ("collective", "alltoall", "sendrecv"):
        mine = [(s, e) for s, e, k in inside if k == c]
        parts[c] = (length(mine + compute) - length(compute)) / 1e6
    parts["busy"] = length([(s, e) for s, e, _ in inside]) / 1e6
    return parts


def test_a_steps_parts_are_the_interval_unions_they_were() -> None:
    """The step's categories measured on sorted columns (a running furthest end) equal the one-by-one interval
    merge, with overlapping, nested, touching and out-of-order events of every category, clipped to the step."""
    import random

    import numpy as np

    from engine.calibrate.profiler_trace import CATEGORIES, CATEGORY_CODE, DeviceEvents, step_parts

    rng = random.Random(7)
    events = [(t, t + rng.choice([0.0, 1.0, 2.5, 40.0]), rng.choice(CATEGORIES))
              for t in (rng.uniform(0, 500) for _ in range(2000))]
    events += [(100.0, 110.0, "gemm"), (110.0, 120.0, "collective"), (105.0, 106.0, "collective")]
    d = DeviceEvents()
    d.extend(np.array([s for s, _, _ in events]), np.array([e for _, e, _ in events]),
             np.array([CATEGORY_CODE[c] for _, _, c in events], np.int8))
    for lo, hi in ((0.0, 500.0), (100.0, 250.0), (3.0, 3.5), (600.0, 700.0)):
        got, want = step_parts(d, lo, hi), _reference_parts(events, lo, hi)
        assert got.parts_s == pytest.approx({c: want[c] for c in CATEGORIES}, abs=1e-12)
        assert got.idle_s == pytest.approx(max(0.0, (hi - lo) / 1e6 - want["busy"]), abs=1e-12)


def test_a_device_keeps_17_bytes_an_event_and_lets_the_appended_columns_go() -> None:
    """Start and end (float64) and code (int8): 17 bytes an event kept (the reader kept a tuple and two lists
    per event, ~250 bytes). Out of order, the sorted columns replace the appended ones; in order, they are the
    appended ones, not copied."""
    import numpy as np

    from engine.calibrate.profiler_trace import DeviceEvents

    d = DeviceEvents()
    d.extend(np.array([3.0, 1.0, 2.0]), np.array([4.0, 2.0, 3.0]), np.array([0, 1, 2], np.int8))
    start, end, code = d.by_start()
    assert (start.tolist(), end.tolist(), code.tolist()) == ([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [1, 2, 0])
    assert start.nbytes + end.nbytes + code.nbytes == 17 * 3 and len(d.start) == 0 and d.count() == 3
    d = DeviceEvents()
    d.extend(np.array([1.0, 2.0]), np.array([2.0, 3.0]), np.array([0, 0], np.int8))
    assert d.by_start()[0].base is not None and d.count() == 2  # a view of the appended column


@pytest.mark.parametrize(("bound", "what", "events"), [
    ("MAX_DEVICE_EVENTS", "device events", lambda: [_kernel(float(i), 1.0) for i in range(50)]),
    ("MAX_DEVICES", "devices", lambda: [{**_kernel(float(i), 1.0), "pid": i} for i in range(50)]),
    ("MAX_STEPS", "profiled steps", lambda: [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}",
                                              "pid": 1, "ts": i * 10.0, "dur": 9.0} for i in range(50)]),
    ("MAX_STEPS", "device steps", lambda: [
        e for i in range(30) for e in ({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{i}",
                                        "pid": 0, "ts": i * 10.0, "dur": 9.0}, _kernel(i * 10.0, 1.0))]
     + [{**e, "pid": 1} for i in range(30) for e in (
         {"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{i}", "ts": i * 10.0, "dur": 9.0},
         _kernel(i * 10.0, 1.0))]),
])
def test_a_trace_over_what_one_file_may_hold_is_refused_where_reading_stopped(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bound: str, what: str, events: Any) -> None:
    """Device events, devices, steps: each bounded (8 M, 1,024, 65,536 in use, 40 here), so that 1 GiB of tiny
    events cannot hold more than memory does; HP820 at the character where reading stopped."""
    from engine.calibrate import profiler_trace

    monkeypatch.setattr(profiler_trace, bound, 40)
    (tmp_path / "t.json").write_text(_trace_text(events()))
    with pytest.raises(stream.TraceError, match=f"over 40 {what} in one trace file") as err:
        read_trace(str(tmp_path / "t.json"))
    assert err.value.code == "HP820" and (err.value.offset is not None or what == "device steps")


@pytest.mark.parametrize("pid", [[1, 2], {"rank": 0}])
def test_a_process_named_by_a_list_or_an_object_is_read(tmp_path: Path, pid: Any) -> None:
    """An unhashable `pid` had ended in an internal error (HP900: unhashable type)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "ts": s * 1000.0, "dur": 1000.0,
               "pid": "host"} for s in range(3)]
    events += [{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "ts": s * 1000.0, "dur": 400.0,
                "pid": pid} for s in range(3)]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    r = read_trace(str(trace))
    assert r.devices == 1 and r.parts_s["gemm"] == pytest.approx(400e-6)


def test_a_step_number_of_thousands_of_digits_is_no_step(tmp_path: Path) -> None:
    """`ProfilerStep#` and 5,000 digits had raised out of int() (HP900); it names no step: HP821."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + "9" * 5000, "ts": 0.0, "dur": 1e3,
               "pid": "host"}, {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1.0, "dur": 10.0, "pid": 0}]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(stream.TraceError) as got:
        read_trace(str(trace))
    assert got.value.code == "HP821"
