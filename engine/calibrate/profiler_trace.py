"""A profiler trace as a measured run (`trace: PATH` in a RUNS file; docs/calibration.md, "Profiles").

PyTorch's profiler writes a Chrome trace per rank (`*.pt.trace.json[.gz]`): device work as complete events of
category `kernel` (and `gpu_memcpy`, `gpu_memset`) on a device process, and each profiled step as a
`ProfilerStep#N` annotation (`user_annotation` on the host, `gpu_user_annotation` on the device when the
profiler records it). This module streams the events (engine.calibrate.stream), classifies every device event
by its kernel name into the parts of a step — GEMM, attention, element-wise, optimizer, and each collective
kind — and measures, per complete step and device, each part's device time; communication counts where it is
exposed (not under compute on the same device), as the model prices it. Steady state: the first 10% of the
complete steps (at least one, from three on) are warm-up and dropped, as for logs; the step time is the mean
over the rest of the slowest device's step, the parts those of the busiest device (the one the step waits on).

The categories map onto the parts of the priced step (engine.specs.PRICED_PARTS, engine.cost.step_parts), the keys
of a run's measured `parts_s`: each category covers some parts, and its measured seconds go to them in
proportion to their priced seconds (part_seconds), so each covered part takes the category's ratio
(measured ÷ priced) and the fitted parts reproduce the trace's category times. GEMM, attention and element-wise
cover the parts of the same names, and each its share of recompute (recompute replays forward kernels of all
three, in the forward's proportions); an unsplit `compute` (a trace that states `hp_part: compute`) covers all
four; optimizer kernels → optimizer; all-to-all → expert-parallel communication; send/receive → pipeline p2p;
the device's idle time splits in two: the pipeline bubble the model predicts for the plan (its priced bubble
scaled as the measured pipeline work is to the priced: the bubble is the other stages' work, NAR21 §2.2) goes
to the bubble, and the rest, the time the device waited on the host (kernel launches, [CUDA-GRAPH]), to the host
part (engine.specs.HOST_PART), which the model prices at 0 s; all-reduce, all-gather and reduce-scatter serve tensor, context and data parallelism alike, and a
kernel name does not say which group it ran on, so they cover tp, cp and dp communication together (one ratio
for the three). An event that states its part (`args.hp_part`, as `hp-plan explain --trace` writes) is taken
at its word.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import re
from array import array
from dataclasses import dataclass, field
from typing import Any

from engine.calibrate.logs import WARMUP_FRACTION
from engine.calibrate.stream import TraceError, open_trace, stream_trace
from engine.specs import HOST_PART

DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
# Kernel name -> part, first match wins (names as CUDA, ROCm and the collective libraries spell them).
CATEGORY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("alltoall", re.compile(r"all_?to_?all", re.I)),
    ("sendrecv", re.compile(r"(nccl|rccl|hccl|hcom).*(send|recv|receive)|SendRecv", re.I)),
    ("collective", re.compile(r"(nccl|rccl|hccl|hcom).*(all_?reduce|all_?gather|reduce_?scatter|broadcast|reduce)"
                              r"|AllReduce|AllGather|ReduceScatter", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|softmax", re.I)),
    ("optimizer", re.compile(r"multi_tensor_apply|adam|optimizer|lamb_", re.I)),
    ("gemm", re.compile(r"gemm|matmul|cutlass|cublas|Cijk_|xmma|hipblaslt|nvjet|sm\d\d_.*(tensorop|wgmma)|MatMul",
                        re.I)),
)
MAX_NAMES = 100_000  # distinct kernel names remembered (a trace has a few hundred)
CATEGORIES = ("gemm", "attention", "elementwise", "compute", "optimizer", "collective", "alltoall", "sendrecv")
COMM_CATEGORIES = frozenset({"collective", "alltoall", "sendrecv"})
CATEGORY_CODE = {c: i for i, c in enumerate(CATEGORIES)}
PART_CATEGORY = {"compute": "compute", "gemm": "gemm", "attention": "attention", "elementwise": "elementwise",
                 "optimizer": "optimizer", "ep_comm": "alltoall", "pp": "sendrecv", "tp_comm": "collective",
                 "cp_comm": "collective", "dp_comm": "collective"}
# The priced parts (engine.specs.PRICED_PARTS) each category covers ("idle": the device idle within steps);
# recompute is covered by the three compute kernels' categories in shares (module doc, _coverage).
_KERNELS = ("gemm", "attention", "elementwise")


def _linked(*kinds: str) -> tuple[str, ...]:
    return tuple(f"{k}.{link}" for k in kinds for link in ("intra", "inter"))


CATEGORY_PARTS: dict[str, tuple[str, ...]] = {
    "gemm": ("gemm", "recompute"), "attention": ("attention", "recompute"),
    "elementwise": ("elementwise", "recompute"), "compute": (*_KERNELS, "recompute"),
    "optimizer": ("optimizer",), "alltoall": _linked("ep_comm"), "sendrecv": _linked("pp_p2p"),
    "collective": _linked("tp_comm", "cp_comm", "dp_comm"), "idle": ("pp_bubble",),
}


def classify(name: str, args: Any) -> str:
    """The part a device event belongs to: its stated `hp_part`, else the first name pattern, else element-wise."""
    part = args.get("hp_part") if isinstance(args, dict) else None
    if isinstance(part, str) and part in PART_CATEGORY:
        return PART_CATEGORY[part]
    for category, pattern in CATEGORY_PATTERNS:
        if pattern.search(name):
            return category
    return "elementwise"


@dataclass
class DeviceEvents:
    """One device's events, compactly: start and end (µs) and the category code of each."""

    start: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    end: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    code: array = field(default_factory=lambda: array("b"))  # type: ignore[type-arg]
    steps: dict[int, tuple[float, float]] = field(default_factory=dict)  # device-side ProfilerStep spans
    _order: list[int] | None = None
    _starts: list[float] | None = None

    def by_start(self) -> list[int]:
        """The events' indices by start time (computed once: every step window is a slice of it)."""
        if self._order is None or len(self._order) != len(self.start):
            self._order = sorted(range(len(self.start)), key=self.start.__getitem__)
            self._starts = [self.start[i] for i in self._order]
        return self._order

    def sorted_starts(self) -> list[float]:
        self.by_start()
        assert self._starts is not None
        return self._starts


@dataclass
class _Collector:
    """What streaming one trace file keeps: device events per process, host step spans."""

    devices: dict[Any, DeviceEvents] = field(default_factory=dict)
    host_steps: dict[int, tuple[float, float]] = field(default_factory=dict)
    events: int = 0
    codes: dict[str, int] = field(default_factory=dict)  # kernel name -> category code: names repeat every step

    def __call__(self, ev: dict[str, Any]) -> None:
        self.events += 1
        if ev.get("ph") != "X":
            return
        cat, name = ev.get("cat"), str(ev.get("name", ""))
        try:
            ts, dur = float(ev["ts"]), float(ev.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            return
        if not (math.isfinite(ts) and math.isfinite(dur)) or dur < 0:
            return
        step = STEP_NAME.match(name)
        if step is not None and cat in ("user_annotation", "gpu_user_annotation"):
            spans = self.devices.setdefault(ev.get("pid"), DeviceEvents()).steps if cat == "gpu_user_annotation" \
                else self.host_steps
            spans[int(step.group(1))] = (ts, ts + dur)
        elif cat in DEVICE_CATS:
            d = self.devices.setdefault(ev.get("pid"), DeviceEvents())
            d.start.append(ts)
            d.end.append(ts + dur)
            args = ev.get("args")
            if isinstance(args, dict) and "hp_part" in args:
                d.code.append(CATEGORY_CODE[classify(name, args)])
                return
            code = self.codes.get(name)
            if code is None:
                code = CATEGORY_CODE[classify(name, None)]
                if len(self.codes) < MAX_NAMES:
                    self.codes[name] = code
            d.code.append(code)


@dataclass(frozen=True, slots=True)
class StepParts:
    """One complete step on one device: its length and each category's device seconds (communication
    exposed), plus idle (the step less every busy moment)."""

    step_s: float
    parts_s: dict[str, float]
    idle_s: float


@dataclass(frozen=True, slots=True)
class TraceReading:
    """The steady state of a trace: mean step (the slowest device's), mean seconds per category (the busiest
    device's), steps used and dropped, devices, and the world size the trace states (None if it does not)."""

    files: tuple[str, ...]
    step_time_s: float
    parts_s: dict[str, float]
    idle_s: float
    used: int
    warmup: int
    devices: int
    world_size: int | None


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _length(u: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in u)


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted disjoint interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def step_parts(d: DeviceEvents, lo: float, hi: float) -> StepParts:
    """The categories' device seconds of the events that start in [lo, hi), clipped to it."""
    per: dict[str, list[tuple[float, float]]] = {c: [] for c in CATEGORIES}
    order = d.by_start()
    starts = d.sorted_starts()
    for i in order[bisect.bisect_left(starts, lo):bisect.bisect_left(starts, hi)]:
        per[CATEGORIES[d.code[i]]].append((d.start[i], min(d.end[i], hi)))
    compute = _union([iv for c in CATEGORIES if c not in COMM_CATEGORIES for iv in per[c]])
    parts = {c: sum(e - s for s, e in per[c]) / 1e6 for c in CATEGORIES if c not in COMM_CATEGORIES}
    for c in COMM_CATEGORIES:
        u = _union(per[c])
        parts[c] = (_length(u) - _overlap(u, compute)) / 1e6
    busy = _length(_union([iv for ivs in per.values() for iv in ivs])) / 1e6
    step = (hi - lo) / 1e6
    return StepParts(step, parts, max(0.0, step - busy))


def _windows(d: DeviceEvents, host: dict[int, tuple[float, float]]) -> list[tuple[float, float]]:
    """The device's complete steps: its own ProfilerStep spans, else the host's, each from its start to the
    next step's start (the device runs behind the host), the last host step only when it is the only one. Either
    way a step holds device work: a span with no kernel started in it is no step (it read as all host time)."""
    if d.steps:
        spans = [d.steps[k] for k in sorted(d.steps)]
        return [(lo, hi) for lo, hi in spans if _starts_in(d, lo, hi)]
    keys = sorted(host)
    wins = [(host[a][0], host[b][0]) for a, b in itertools.pairwise(keys)]
    if len(keys) == 1:
        wins.append((host[keys[0]][0], max(host[keys[0]][1], max(d.end, default=host[keys[0]][1]))))
    return [(lo, hi) for lo, hi in wins if _starts_in(d, lo, hi)]


def _starts_in(d: DeviceEvents, lo: float, hi: float) -> bool:
    """Whether a device event starts in [lo, hi): a bisection of its sorted starts, not a pass over every event per
    step."""
    starts = d.sorted_starts()
    i = bisect.bisect_left(starts, lo)
    return i < len(starts) and starts[i] < hi


def _world_size(meta: dict[str, Any]) -> int | None:
    for key in ("distributedInfo", "otherData"):
        info = meta.get(key)
        ws = info.get("world_size") if isinstance(info, dict) else None
        if isinstance(ws, int) and not isinstance(ws, bool) and ws > 0:
            return ws
    return None


def _read_file(path: str) -> tuple[list[list[StepParts]], int | None]:
    """Per device of one trace file, its complete steps; and the world size the file states."""
    col = _Collector()
    with open_trace(path) as fh:
        meta = stream_trace(fh, col)
    if "traceEvents" not in meta and col.events == 0:
        raise TraceError("HP820", "not a Chrome trace: no traceEvents list")
    steps = [[step_parts(d, lo, hi) for lo, hi in _windows(d, col.host_steps)]
             for d in col.devices.values() if len(d.start)]
    return [s for s in steps if s], _world_size(meta)


def trace_files(path: str) -> list[str]:
    """A trace path as files: the file itself, or every *.json / *.json.gz in a folder (one per rank)."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith((".json", ".json.gz")))
        return [os.path.join(path, n) for n in names]
    return [path]


def steady_parts(per_device: list[list[StepParts]]) -> tuple[float, dict[str, float], float, int, int]:
    """(step, parts, idle, used, warm-up) over the steps every device completed."""
    n = min(len(s) for s in per_device)
    warm = max(1, math.ceil(WARMUP_FRACTION * n)) if n >= 3 else 0
    kept = range(warm, n)
    step = sum(max(dev[k].step_s for dev in per_device) for k in kept) / len(kept)
    busiest = max(per_device, key=lambda dev: sum(dev[k].step_s - dev[k].idle_s for k in kept))
    parts = {c: sum(busiest[k].parts_s[c] for k in kept) / len(kept) for c in CATEGORIES}
    idle = sum(busiest[k].idle_s for k in kept) / len(kept)
    return step, parts, idle, len(kept), warm


def read_trace(path: str) -> TraceReading:
    """The steady state of the trace at `path` (a file, or a folder of one file per rank)."""
    files = trace_files(path)
    if not files:
        raise TraceError("HP801", f"no *.json or *.json.gz trace in the folder {path}")
    per_device: list[list[StepParts]] = []
    world: int | None = None
    for f in files:
        try:
            got, ws = _read_file(f)
        except TraceError as exc:
            named = f if f in str(exc) else f"{os.path.basename(f)}: {exc}"
            raise TraceError(exc.code, str(exc) if named == f else named, exc.offset) from None
        per_device += got
        world = world or ws
    if not per_device:
        raise TraceError("HP821", "no complete profiled step: the trace has no ProfilerStep#N annotation with "
                         "device work in it (profile with torch.profiler.schedule and call prof.step() each step)")
    step, parts, idle, used, warm = steady_parts(per_device)
    return TraceReading(tuple(files), step, parts, idle, used, warm, len(per_device), world)


def _coverage(category: str, priced: dict[str, float]) -> dict[str, float]:
    """The priced seconds of each part `category` covers: whole, except recompute under GEMM / attention /
    element-wise, which each cover the share of it that their part holds of the three."""
    kernels = sum(max(priced.get(k, 0.0), 0.0) for k in _KERNELS)
    out: dict[str, float] = {}
    for p in CATEGORY_PARTS[category]:
        share = 1.0
        if p == "recompute" and category in _KERNELS:
            share = max(priced.get(category, 0.0), 0.0) / kernels if kernels > 0 else 0.0
        out[p] = share * max(priced.get(p, 0.0), 0.0)
    return out


def idle_split(reading: TraceReading, priced: dict[str, float]) -> tuple[float, float]:
    """(bubble, host): the measured idle per step split into the pipeline bubble the model predicts for the plan
    and the rest. The priced bubble (the other stages' per-micro-batch work, NAR21 §2.2) is scaled by the
    measured ÷ priced pipeline work (every part but the bubble and the optimizer), and capped at the idle."""
    work = sum(v for c, v in reading.parts_s.items() if c != "optimizer")
    priced_work = sum(max(v, 0.0) for p, v in priced.items() if p not in ("pp_bubble", "optimizer", HOST_PART))
    scale = work / priced_work if priced_work > 0 else 1.0
    bubble = min(reading.idle_s, max(priced.get("pp_bubble", 0.0), 0.0) * scale)
    return bubble, reading.idle_s - bubble


def part_seconds(reading: TraceReading, priced: dict[str, float]) -> dict[str, float]:
    """The trace's seconds per priced part (a run's measured `parts_s`) from `priced`, the run's priced seconds
    per part: each category's measured seconds spread over the parts it covers in proportion to their priced
    seconds (a category whose parts are priced at nothing is left out: nothing to scale), and the idle split
    into the bubble and the host part (idle_split; the host seconds under HOST_PART). Unsplit `compute`
    takes the three kernel categories in when a trace holds both (events that state their part beside
    events classified by name)."""
    measured = {c: reading.parts_s.get(c, 0.0) for c in CATEGORIES}
    measured["idle"], host = idle_split(reading, priced)
    if measured["compute"] > 0:
        measured["compute"] += sum(measured.pop(k) for k in _KERNELS)
    out: dict[str, float] = {HOST_PART: host}
    for category, sec in measured.items():
        cover = _coverage(category, priced)
        total = sum(cover.values())
        if sec <= 0 or total <= 0:
            continue
        for p, u in cover.items():
            out[p] = out.get(p, 0.0) + sec * u / total
    return out
