"""The predicted step as a Chrome trace (`hp-plan explain FILE --trace OUT.json`, docs/formats.md §7).

The Trace Event Format (the JSON `traceEvents` list Perfetto and chrome://tracing open, and PyTorch's profiler
writes): one process per pipeline stage, a compute and a communication thread in it, the timeline's boxes as
complete events ("ph": "X", microseconds) in the categories a PyTorch profiler trace uses — `kernel` for
device work, `gpu_user_annotation` for the step and the pipeline bubbles (a profiler shows idle as a gap; the
annotation names it) — so a user opens the prediction beside a measured trace. A micro-batch's exposed
communication box is split by the stage's communication kinds (tensor, context, expert, pipeline, FSDP
traffic) in proportion to their priced seconds and named by its collective; a compute box (forward, backward,
recompute) is split likewise into GEMM, attention and element-wise kernels in proportion to the step's priced
parts (engine.cost.step_parts); every event carries its part (`args.hp_part`, a ratio group of docs/formats.md §6
or a priced part) so `hp-plan calibrate` reads the file back as a run (engine.calibrate.profiler_trace). The
last event ends at the estimate's step time.
"""

from __future__ import annotations

import json
from typing import Any

from engine.explain.types import Explained, Interval, StageRow

US = 1e6  # the format's unit is the microsecond
COMPUTE_TID, COMM_TID, SCHEDULE_TID = 0, 1, 2
# A micro-batch's communication kinds (engine.explain.types.StageRow.comm_s keys) -> the collective a
# profiler names, and the ratio group that prices it.
COMM_NAMES: dict[str, tuple[str, str]] = {
    "tp_comm": ("AllReduce (tensor parallel)", "tp_comm"),
    "cp_comm": ("AllGather (context parallel)", "cp_comm"),
    "ep_comm": ("AllToAll (expert parallel)", "ep_comm"),
    "pp_p2p": ("SendRecv (pipeline)", "pp"),
    "fsdp_comm": ("AllGather (FSDP)", "dp_comm"),
}
KIND_PART = {"forward": "compute", "backward": "compute", "recompute": "compute", "optimizer": "optimizer"}
# A compute box's kernels (engine.specs.PRICED_PARTS compute parts) and the names a profiler would show.
KERNEL_NAMES = {"gemm": "gemm", "attention": "flash_attention", "elementwise": "elementwise"}


def _event(name: str, cat: str, pid: int, tid: int, start_s: float, end_s: float, args: dict[str, Any]) -> dict[
        str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(start_s * US, 3),
            "dur": round((end_s - start_s) * US, 3), "args": args}


def _meta(pid: int, stage: int) -> list[dict[str, Any]]:
    threads = ((COMPUTE_TID, "compute stream"), (COMM_TID, "communication stream"), (SCHEDULE_TID, "schedule"))
    return [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"pipeline stage {stage}"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": stage}},
            *({"ph": "M", "name": "thread_name", "pid": pid, "tid": t, "args": {"name": n}} for t, n in threads)]


def _comm_events(iv: Interval, row: StageRow) -> list[dict[str, Any]]:
    """One communication box as its collectives, in proportion to the stage's priced seconds per kind."""
    base = {"micro_batch": iv.micro_batch, "chunk": iv.chunk}
    if iv.micro_batch is None:  # the end-of-step gradient sync
        return [_event("nccl:ReduceScatter (data parallel gradients)", "kernel", iv.stage, COMM_TID, iv.start_s,
                       iv.end_s, {**base, "hp_part": "dp_comm"})]
    shares = {k: row.comm_s.get(k, 0.0) for k in COMM_NAMES}
    total = sum(shares.values())
    if total <= 0:
        shares, total = {"tp_comm": 1.0}, 1.0
    out: list[dict[str, Any]] = []
    t = iv.start_s
    for kind, sec in shares.items():
        if sec <= 0:
            continue
        end = t + (iv.end_s - iv.start_s) * sec / total
        name, part = COMM_NAMES[kind]
        out.append(_event(f"nccl:{name}", "kernel", iv.stage, COMM_TID, t, end, {**base, "hp_part": part}))
        t = end
    return out


def trace_events(ex: Explained) -> list[dict[str, Any]]:
    """Every event of the predicted step, metadata first, then by stage and start time."""
    rows = {r.stage: r for r in ex.stages}
    kernels = {k: max(float(ex.estimate.time_parts_s.get(k, 0.0)), 0.0) for k in KERNEL_NAMES}
    events: list[dict[str, Any]] = []
    for stage in sorted(rows):
        events += _meta(stage, stage)
        events.append(_event("ProfilerStep#1", "gpu_user_annotation", stage, SCHEDULE_TID, 0.0, ex.step_time_s,
                             {"step_time_s": ex.step_time_s}))
    for iv in sorted(ex.timeline, key=lambda i: (i.stage, i.start_s)):
        if iv.end_s <= iv.start_s:
            continue
        if iv.kind == "comm":
            events += _comm_events(iv, rows[iv.stage])
        elif iv.kind == "bubble":
            events.append(_event("pipeline bubble", "gpu_user_annotation", iv.stage, SCHEDULE_TID, iv.start_s,
                                 iv.end_s, {"hp_part": "idle"}))
        else:
            events += _compute_events(iv, kernels)
    return events


def _compute_events(iv: Interval, kernels: dict[str, float]) -> list[dict[str, Any]]:
    """One compute box: the optimizer whole, forward / backward / recompute as GEMM, attention and element-wise
    kernels in the proportions `kernels` gives (whole and marked compute when it gives none)."""
    label = f"{iv.kind}" + (f", micro-batch {iv.micro_batch}" if iv.micro_batch is not None else "") + (
        f", chunk {iv.chunk}" if iv.chunk else "")
    base = {"micro_batch": iv.micro_batch, "chunk": iv.chunk}
    total = sum(kernels.values())
    part = KIND_PART.get(iv.kind, "compute")
    if part != "compute" or total <= 0:
        return [_event(label, "kernel", iv.stage, COMPUTE_TID, iv.start_s, iv.end_s, {**base, "hp_part": part})]
    out: list[dict[str, Any]] = []
    t = iv.start_s
    for kind, sec in kernels.items():
        end = t + (iv.end_s - iv.start_s) * sec / total
        if sec > 0:
            out.append(_event(f"{KERNEL_NAMES[kind]} ({label})", "kernel", iv.stage, COMPUTE_TID, t, end,
                              {**base, "hp_part": kind}))
        t = end
    return out


def render(ex: Explained) -> str:
    """The trace file's text: strict JSON (no NaN), a `traceEvents` list and what the prediction is of."""
    doc = {"traceEvents": trace_events(ex), "displayTimeUnit": "ms",
           "otherData": {"producer": "hp-plan explain --trace", "framework": ex.framework,
                         "strategy": ex.estimate.strategy.to_json(), "step_time_s": ex.step_time_s,
                         "world_size": ex.estimate.strategy.world_size}}
    return json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n"
