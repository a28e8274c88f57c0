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

import itertools
import math
import operator
import os
import re
from array import array
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any

import numpy as np

from engine.calibrate.logs import WARMUP_FRACTION
from engine.calibrate.stream import TraceError, open_trace, stream_trace
from engine.specs import HOST_PART

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")  # a tuple: `in` compares, a list for `cat` is no TypeError
STEP_CATS = ("user_annotation", "gpu_user_annotation")
STEP_NAME = re.compile(r"^ProfilerStep#(\d{1,18})$")  # a step number, not thousands of digits int() refuses
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
# What one trace file may hold, so that the 1 GiB of text it may be cannot hold more than memory does: device events
# (17 bytes each kept, 39 to 53 at the peak: 448 MB at this bound, docs/calibration.md), profiled steps (host or
# device spans, and device x step windows, each measured by a few dozen array operations: 3.5 s at this bound) and
# devices (processes with device work). A PyTorch kernel event is ~600 bytes of text, so 1 GiB of a real trace
# holds under 2 M; a trace profiles a few steps on one device (a node's trace, 8 or 16).
MAX_DEVICE_EVENTS = 1 << 23
MAX_STEPS = 1 << 16
MAX_DEVICES = 1 << 10
CATEGORIES = ("gemm", "attention", "elementwise", "compute", "optimizer", "collective", "alltoall", "sendrecv")
COMM_CATEGORIES = frozenset({"collective", "alltoall", "sendrecv"})
CATEGORY_CODE = {c: i for i, c in enumerate(CATEGORIES)}
_IS_COMM = np.array([c in COMM_CATEGORIES for c in CATEGORIES])  # by category code
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


def _field(events: list[Any], key: str, default: Any = None) -> list[Any]:
    """One key of every event (a TypeError where one is not an object): a C-level pass, a third of a
    comprehension's time."""
    return list(map(dict.get, events, repeat(key), repeat(default)))


def _too_many(what: str, cap: int) -> TraceError:
    return TraceError("HP820", f"over {cap:,} {what} in one trace file: no profile of a few steps holds as many "
                      "(profile a few steps, torch.profiler.schedule(active=3), and calibrate on that)")


@dataclass
class DeviceEvents:
    """One device's events, compactly: start and end (µs, float64) and the category code (int8) of each, 17 bytes
    an event, appended in the order read; sorted by start once, when first measured."""

    start: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    end: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    code: array = field(default_factory=lambda: array("b"))  # type: ignore[type-arg]
    steps: dict[int, tuple[float, float]] = field(default_factory=dict)  # device-side ProfilerStep spans
    _sorted: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, compare=False, repr=False)

    def extend(self, start: np.ndarray, end: np.ndarray, code: np.ndarray) -> None:
        """Append columns (float64, float64, int8) as they are: a copy of their bytes, no Python object each."""
        self.start.frombytes(start.data.cast("B"))
        self.end.frombytes(end.data.cast("B"))
        self.code.frombytes(code.data.cast("B"))

    def count(self) -> int:
        return len(self.start) if self._sorted is None else len(self._sorted[0])

    def by_start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Starts, ends and codes by start time, computed once, when the device is first measured (every step
        window is a slice of it; nothing is appended after). Columns already in order are viewed as they are
        (no copy); else sorted (stably) one at a time, each appended column let go once sorted: the sort peaks at
        33 bytes an event (the 17, its order, one sorted column), not 42."""
        if self._sorted is None:
            start = np.frombuffer(self.start, np.float64)
            if bool(np.all(start[1:] >= start[:-1])):
                self._sorted = (start, np.frombuffer(self.end, np.float64), np.frombuffer(self.code, np.int8))
            else:
                order = np.argsort(start, kind="stable")
                del start
                start, self.start = np.frombuffer(self.start, np.float64)[order], array("d")
                end, self.end = np.frombuffer(self.end, np.float64)[order], array("d")
                code, self.code = np.frombuffer(self.code, np.int8)[order], array("b")
                self._sorted = (start, end, code)
        return self._sorted


@dataclass
class _Collector:
    """What streaming one trace file keeps: device events per process, host step spans."""

    devices: dict[Any, DeviceEvents] = field(default_factory=dict)
    host_steps: dict[int, tuple[float, float]] = field(default_factory=dict)
    events: int = 0
    kept: int = 0  # device events kept, all devices
    codes: dict[Any, int] = field(default_factory=dict)  # kernel name -> category code: names repeat every step

    def __call__(self, events: list[Any]) -> None:
        """A window's events: its device events column by column (the bulk of a trace: a Python call per event
        cost more than its decoding), its step annotations one by one. A window with an odd device event (a time
        written as a string, a list for a name) is read event by event."""
        try:
            cats = _field(events, "cat")
        except TypeError:  # a value other than an object in the list: no event
            events = [e for e in events if type(e) is dict]
            cats = _field(events, "cat")
        self.events += len(events)
        if any(c in cats for c in STEP_CATS):
            for ev in compress(events, map(STEP_CATS.__contains__, cats)):
                self.one(ev)
        device = list(compress(events, map(DEVICE_CATS.__contains__, cats)))
        phases = _field(device, "ph")
        if phases.count("X") < len(device):
            device = list(compress(device, [p == "X" for p in phases]))
        if not device:
            return
        try:
            self._columns(device)
        except (TypeError, ValueError, OverflowError):  # nothing kept yet: each event as one
            for ev in device:
                self.one(ev)

    def _columns(self, device: list[dict[str, Any]]) -> None:
        """Complete device events: their times as float64 columns (`array` takes only numbers: a string time
        raises, and the window is read event by event), their codes, kept per process."""
        ts = np.frombuffer(array("d", _field(device, "ts")), np.float64)
        dur = np.frombuffer(array("d", _field(device, "dur", 0.0)), np.float64)
        codes = np.frombuffer(array("b", self._codes(device)), np.int8)
        pids = _field(device, "pid")
        kept = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0)
        with np.errstate(over="ignore"):
            end = ts + dur
        if not kept.all():
            ts, end, codes, pids = ts[kept], end[kept], codes[kept], list(compress(pids, kept.tolist()))
        if not pids:
            return
        if pids.count(pids[0]) == len(pids):  # one process: the usual trace of one rank
            self._device(pids[0]).extend(ts, end, codes)
        else:
            slot: dict[Any, int] = {}
            index = np.array([slot.setdefault(p, len(slot)) for p in pids])
            for pid, k in slot.items():
                mine = index == k
                self._device(pid).extend(ts[mine], end[mine], codes[mine])
        self._count(len(pids))

    def _codes(self, device: list[dict[str, Any]]) -> list[int]:
        """The events' category codes: by name, from the names seen (a KeyError the first time a name is), and
        from `args.hp_part` where an event states it (looked for one by one only where some event's args hold
        the key: a profiler's never do)."""
        names = _field(device, "name", "")
        try:
            codes = list(map(self.codes.__getitem__, names))
        except KeyError:
            codes = [self._code(n) for n in names]
        args = _field(device, "args")
        try:
            stated = args.count(None) < len(args) and any(map(operator.contains, args, repeat("hp_part")))
        except TypeError:  # args of no events beside dicts
            stated = True
        for i in [i for i, a in enumerate(args) if type(a) is dict and "hp_part" in a] if stated else ():
            codes[i] = CATEGORY_CODE[classify(str(names[i]), args[i])]
        return codes

    def _code(self, name: Any) -> int:
        code = self.codes.get(name)
        if code is None:
            code = CATEGORY_CODE[classify(str(name), None)]
            if len(self.codes) < MAX_NAMES:
                self.codes[name] = code
        return code

    def _device(self, pid: Any) -> DeviceEvents:
        if not isinstance(pid, str | int | float | None):  # a list or an object names a process only as text
            pid = repr(pid)
        d = self.devices.get(pid)
        if d is None:
            if len(self.devices) >= MAX_DEVICES:
                raise _too_many("devices", MAX_DEVICES)
            d = self.devices[pid] = DeviceEvents()
        return d

    def _count(self, n: int) -> None:
        self.kept += n
        if self.kept > MAX_DEVICE_EVENTS:
            raise _too_many("device events", MAX_DEVICE_EVENTS)

    def one(self, ev: dict[str, Any]) -> None:
        """One event: a ProfilerStep annotation's span, or a device event."""
        if ev.get("ph") != "X":
            return
        cat, name = ev.get("cat"), str(ev.get("name", ""))
        try:
            ts, dur = float(ev["ts"]), float(ev.get("dur", 0.0))
        except (KeyError, TypeError, ValueError, OverflowError):
            return
        if not (math.isfinite(ts) and math.isfinite(dur)) or dur < 0:
            return
        step = STEP_NAME.match(name)
        if step is not None and cat in STEP_CATS:
            spans = self._device(ev.get("pid")).steps if cat == "gpu_user_annotation" else self.host_steps
            key = int(step.group(1))
            if key not in spans and len(spans) >= MAX_STEPS:
                raise _too_many("profiled steps", MAX_STEPS)
            spans[key] = (ts, ts + dur)
        elif cat in DEVICE_CATS:
            d = self._device(ev.get("pid"))
            d.start.append(ts)
            d.end.append(ts + dur)
            args = ev.get("args")
            stated = isinstance(args, dict) and "hp_part" in args
            d.code.append(CATEGORY_CODE[classify(name, args)] if stated else self._code(name))
            self._count(1)


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


def _covered(start: np.ndarray, end: np.ndarray) -> float:
    """The length of the union of intervals sorted by start: each adds what it reaches past every one before it
    (those all start earlier, so their union meets it as one span up to their furthest end). One array of
    scratch, worked in place."""
    if not len(start):
        return 0.0
    reach = np.maximum.accumulate(end)
    gain = reach[:-1]  # the reach before each later interval, then what that interval adds past it
    np.maximum(gain, start[1:], out=gain)
    np.subtract(end[1:], gain, out=gain)
    return float(end[0] - start[0] + np.fmax(gain, 0.0, out=gain).sum())  # fmax: an infinite end met twice adds 0


def step_parts(d: DeviceEvents, lo: float, hi: float) -> StepParts:
    """The categories' device seconds of the events that start in [lo, hi), clipped to it: compute summed per
    category; communication where no compute runs beside it (its union with compute less compute's own)."""
    start, end, code = d.by_start()
    a, b = np.searchsorted(start, (lo, hi))
    s, e, c = start[a:b], np.minimum(end[a:b], hi), code[a:b]
    summed = np.bincount(c, weights=e - s, minlength=len(CATEGORIES))
    computing = ~_IS_COMM[c]
    every = bool(computing.all())
    compute = _covered(s, e) if every else _covered(s[computing], e[computing])
    parts: dict[str, float] = {}
    for k, category in enumerate(CATEGORIES):
        if not _IS_COMM[k]:
            parts[category] = float(summed[k]) / 1e6
        elif every or not (c == k).any():
            parts[category] = 0.0
        else:
            beside = computing | (c == k)
            parts[category] = max(0.0, _covered(s[beside], e[beside]) - compute) / 1e6
    busy = compute if every else _covered(s, e)
    step = (hi - lo) / 1e6
    return StepParts(step, parts, max(0.0, step - busy / 1e6))


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
        last = float(d.by_start()[1].max()) if d.count() else host[keys[0]][1]
        wins.append((host[keys[0]][0], max(host[keys[0]][1], last)))
    return [(lo, hi) for lo, hi in wins if _starts_in(d, lo, hi)]


def _starts_in(d: DeviceEvents, lo: float, hi: float) -> bool:
    """Whether a device event starts in [lo, hi): a bisection of its sorted starts, not a pass over every event per
    step."""
    starts = d.by_start()[0]
    i = int(np.searchsorted(starts, lo))
    return i < len(starts) and bool(starts[i] < hi)


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
    devices = [d for d in col.devices.values() if d.count()]
    windows = [_windows(d, col.host_steps) for d in devices]
    if sum(map(len, windows)) > MAX_STEPS:  # each is measured by a few dozen array operations
        raise _too_many("device steps", MAX_STEPS)
    steps = [[step_parts(d, lo, hi) for lo, hi in wins] for d, wins in zip(devices, windows, strict=True)]
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
