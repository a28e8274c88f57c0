"""A torch_npu profiler folder as a measured run (`ascend_profile: DIR` in a RUNS file; docs/calibration.md).

torch_npu's profiler (`torch_npu.profiler`, Ascend's msprof underneath) writes, under the folder it is given,
`ASCEND_PROFILER_OUTPUT/kernel_details.csv`: one row per device task with its `Name`, `Type`, `Start Time(us)`
and `Duration(us)`, and, when the profiler's schedule marks steps, `Step Id` (and `Device_id` with several
devices). Those rows are classified and measured as a PyTorch trace's kernels are (engine.calibrate.profiler_trace:
`Type` first — MatMulV2, FlashAttentionScore, hcom_allReduce_ … — then `Name`). Where there is no
kernel_details.csv, msprof's `op_summary_*.csv` (the same tasks under its own column names: `Op Name`,
`OP Type`, `Task Start Time(us)`, `Task Duration(us)`) is read the same way. Without a step column the
folder's `trace_view.json` (a Chrome trace, step annotations included) is read instead. The CSV is read row by
row in bounded memory (and refused over MAX_TRACE_BYTES); a header without the four columns is refused at
line 1, naming the columns it found (the export's columns differ between versions: the four are the ones
every version writes).
"""

from __future__ import annotations

import csv
import fnmatch
import math
import os
from dataclasses import dataclass

from engine.calibrate.profiler_trace import (
    CATEGORY_CODE,
    DeviceEvents,
    TraceReading,
    classify,
    read_trace,
    steady_parts,
    step_parts,
)
from engine.calibrate.stream import MAX_TRACE_BYTES, TraceError, regular_file


@dataclass(frozen=True, slots=True)
class CsvKind:
    """One export's columns: the task's name, type, start and duration (µs), and the step column candidates."""

    file: str  # the file name, or a glob of names (op_summary_*.csv)
    name: str
    type: str
    start: str
    duration: str
    steps: tuple[str, ...] = ("Step Id",)

    @property
    def required(self) -> tuple[str, str, str, str]:
        return self.name, self.type, self.start, self.duration


# torch_npu's kernel_details.csv, and msprof's op_summary_*.csv (its per-task table: `Op Name`, `OP Type`,
# `Task Start Time(us)`, `Task Duration(us)`, `Device_id`, ... [ASCEND-MSPROF]; torch_npu's analysis adds
# `Step Id` where the profiler's schedule marked steps). Read in that order.
KERNEL_DETAILS = CsvKind("kernel_details.csv", "Name", "Type", "Start Time(us)", "Duration(us)")
OP_SUMMARY = CsvKind("op_summary_*.csv", "Op Name", "OP Type", "Task Start Time(us)", "Task Duration(us)",
                     ("Step Id", "Iteration ID"))
REQUIRED = KERNEL_DETAILS.required


def _find(folder: str, name: str) -> str | None:
    """The first file called `name` (or matching it, a glob) under `folder` (sorted walk, at most three levels
    deep)."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        hits = sorted(f for f in files if fnmatch.fnmatchcase(f, name))
        if hits:
            return os.path.join(root, hits[0])
        if root[len(folder):].count(os.sep) >= 3:
            dirs[:] = []
    return None


def _number(row: dict[str, str | None], column: str | None) -> float:
    """A cell as a number (msprof pads some cells with a trailing tab)."""
    return float(str(row.get(column) or "").strip()) if column else 0.0


def _devices(path: str, rows: csv.DictReader, kind: CsvKind, step_col: str  # type: ignore[type-arg]
             ) -> dict[str, DeviceEvents]:
    devices: dict[str, DeviceEvents] = {}
    spans: dict[tuple[str, int], list[float]] = {}
    for line, row in enumerate(rows, start=2):
        try:
            start, dur = _number(row, kind.start), _number(row, kind.duration)
            step = int(_number(row, step_col))
        except (TypeError, ValueError, OverflowError):  # OverflowError: a step id of inf
            raise TraceError("HP820", f"{os.path.basename(path)} line {line}: {kind.start} "
                             f"{row.get(kind.start)!r}, {kind.duration} {row.get(kind.duration)!r} or {step_col} "
                             f"{row.get(step_col)!r} is not a number") from None
        if not (math.isfinite(start) and math.isfinite(dur)) or dur < 0:
            raise TraceError("HP820", f"{os.path.basename(path)} line {line}: a negative or infinite duration")
        dev = str(row.get("Device_id") or "0").strip()
        d = devices.setdefault(dev, DeviceEvents())
        d.start.append(start)
        d.end.append(start + dur)
        d.code.append(CATEGORY_CODE[classify(f"{row[kind.type]} {row[kind.name]}", None)])
        span = spans.setdefault((dev, step), [start, start + dur])
        span[0], span[1] = min(span[0], start), max(span[1], start + dur)
    for (dev, step), (lo, hi) in spans.items():
        devices[dev].steps[step] = (lo, hi + 1e-3)  # the last task's end is inside its step
    return devices


def read_ascend(folder: str) -> TraceReading:
    """The steady state of a torch_npu profiler folder: kernel_details.csv, else op_summary_*.csv, else
    trace_view.json."""
    for kind in (KERNEL_DETAILS, OP_SUMMARY):
        path = _find(folder, kind.file)
        if path is not None:
            return _read_csv(folder, path, kind)
    view = _find(folder, "trace_view.json")
    if view is None:
        raise TraceError("HP801", f"no {KERNEL_DETAILS.file}, {OP_SUMMARY.file} or trace_view.json under {folder}")
    return read_trace(view)


def _read_csv(folder: str, path: str, kind: CsvKind) -> TraceReading:
    """One task table read row by row; a header without the kind's four columns is refused at line 1, naming
    the columns it has and the ones it lacks."""
    if regular_file(path, path).st_size > MAX_TRACE_BYTES:
        raise TraceError("HP820", f"{path} is over the {MAX_TRACE_BYTES / 2**20:.0f} MiB limit: profile fewer steps")
    try:
        return _read_rows(folder, path, kind)
    except csv.Error as exc:  # a cell over the csv module's field limit, a NUL: not a task table it can read
        raise TraceError("HP820", f"{os.path.basename(path)}: not a CSV task table it can read ({exc})") from None


def _read_rows(folder: str, path: str, kind: CsvKind) -> TraceReading:
    """_read_csv's reading, of a regular file within the size limit."""
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        rows = csv.DictReader(fh)
        rows.fieldnames = [h.strip() for h in rows.fieldnames or []]
        header = list(rows.fieldnames)
        missing = [c for c in kind.required if c not in header]
        if missing:
            shown = ", ".join(header[:8]) + (", ..." if len(header) > 8 else "")
            raise TraceError("HP820", f"{os.path.basename(path)} line 1: unknown columns ({shown or 'none'}): not "
                             f"the {kind.file} columns this reads (missing {', '.join(missing)}; it needs "
                             f"{', '.join(kind.required)})")
        step_col = next((c for c in kind.steps if c in header), None)
        if step_col is None:
            view = _find(folder, "trace_view.json")
            if view is None:
                raise TraceError("HP821", f"{os.path.basename(path)} has no {' or '.join(kind.steps)} column and "
                                 "there is no trace_view.json: no complete step (profile with a schedule and "
                                 "prof.step())")
            return read_trace(view)
        devices = _devices(path, rows, kind, step_col)
    per_device = [[step_parts(d, lo, hi) for lo, hi in (d.steps[k] for k in sorted(d.steps))]
                  for d in devices.values()]
    per_device = [s for s in per_device if s]
    if not per_device:
        raise TraceError("HP821", f"{os.path.basename(path)} holds no task: no complete step")
    step, parts, idle, used, warm = steady_parts(per_device)
    return TraceReading((path,), step, parts, idle, used, warm, len(per_device), None)
