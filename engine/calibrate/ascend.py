"""A torch_npu profiler folder as a measured run (`ascend_profile: DIR` in a RUNS file; docs/calibration.md).

torch_npu's profiler (`torch_npu.profiler`, Ascend's msprof underneath) writes, under the folder it is given,
`ASCEND_PROFILER_OUTPUT/kernel_details.csv`: one row per device task with its `Name`, `Type`, `Start Time(us)`
and `Duration(us)`, and, when the profiler's schedule marks steps, `Step Id` (and `Device_id` with several
devices). Those rows are classified and measured as a PyTorch trace's kernels are (engine.calibrate.profiler_trace:
`Type` first — MatMulV2, FlashAttentionScore, hcom_allReduce_ … — then `Name`). Without a `Step Id` column the
folder's `trace_view.json` (a Chrome trace, step annotations included) is read instead. The CSV is read row by
row in bounded memory; a header without the four columns is refused at that line (the export's columns differ
between versions: the four are the ones every version writes).
"""

from __future__ import annotations

import csv
import math
import os

from engine.calibrate.profiler_trace import (
    CATEGORY_CODE,
    DeviceEvents,
    TraceReading,
    classify,
    read_trace,
    steady_parts,
    step_parts,
)
from engine.calibrate.stream import MAX_TRACE_BYTES, TraceError

REQUIRED = ("Name", "Type", "Start Time(us)", "Duration(us)")
KERNEL_DETAILS = "kernel_details.csv"


def _find(folder: str, name: str) -> str | None:
    """The first `name` under `folder` (sorted walk, at most three levels deep)."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if name in files:
            return os.path.join(root, name)
        if root[len(folder):].count(os.sep) >= 3:
            dirs[:] = []
    return None


def _devices(path: str, rows: csv.DictReader) -> dict[str, DeviceEvents]:  # type: ignore[type-arg]
    devices: dict[str, DeviceEvents] = {}
    spans: dict[tuple[str, int], list[float]] = {}
    for line, row in enumerate(rows, start=2):
        try:
            start, dur = float(row["Start Time(us)"]), float(row["Duration(us)"])
            step = int(float(row["Step Id"]))
        except (TypeError, ValueError):
            raise TraceError("HP820", f"{os.path.basename(path)} line {line}: Start Time(us) "
                             f"{row.get('Start Time(us)')!r}, Duration(us) {row.get('Duration(us)')!r} or Step Id "
                             f"{row.get('Step Id')!r} is not a number") from None
        if not (math.isfinite(start) and math.isfinite(dur)) or dur < 0:
            raise TraceError("HP820", f"{os.path.basename(path)} line {line}: a negative or infinite duration")
        dev = str(row.get("Device_id", "0"))
        d = devices.setdefault(dev, DeviceEvents())
        d.start.append(start)
        d.end.append(start + dur)
        d.code.append(CATEGORY_CODE[classify(f"{row['Type']} {row['Name']}", None)])
        span = spans.setdefault((dev, step), [start, start + dur])
        span[0], span[1] = min(span[0], start), max(span[1], start + dur)
    for (dev, step), (lo, hi) in spans.items():
        devices[dev].steps[step] = (lo, hi + 1e-3)  # the last task's end is inside its step
    return devices


def read_ascend(folder: str) -> TraceReading:
    """The steady state of a torch_npu profiler folder."""
    path = _find(folder, KERNEL_DETAILS)
    if path is None:
        view = _find(folder, "trace_view.json")
        if view is None:
            raise TraceError("HP801", f"no {KERNEL_DETAILS} or trace_view.json under {folder}")
        return read_trace(view)
    if os.path.getsize(path) > MAX_TRACE_BYTES:
        raise TraceError("HP820", f"{path} is over the {MAX_TRACE_BYTES / 2**20:.0f} MiB limit: profile fewer steps")
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        rows = csv.DictReader(fh)
        header = [h.strip() for h in rows.fieldnames or []]
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise TraceError("HP820", f"{os.path.basename(path)} line 1: not the kernel_details columns this reads "
                             f"(missing {', '.join(missing)}; it needs {', '.join(REQUIRED)})")
        if "Step Id" not in header:
            view = _find(folder, "trace_view.json")
            if view is None:
                raise TraceError("HP821", f"{os.path.basename(path)} has no Step Id column and there is no "
                                 "trace_view.json: no complete step (profile with a schedule and prof.step())")
            return read_trace(view)
        devices = _devices(path, rows)
    per_device = [[step_parts(d, lo, hi) for lo, hi in (d.steps[k] for k in sorted(d.steps))]
                  for d in devices.values()]
    per_device = [s for s in per_device if s]
    if not per_device:
        raise TraceError("HP821", f"{os.path.basename(path)} holds no task: no complete step")
    step, parts, idle, used, warm = steady_parts(per_device)
    return TraceReading((path,), step, parts, idle, used, warm, len(per_device), None)
