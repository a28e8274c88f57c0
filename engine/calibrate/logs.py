"""Training logs `hp-plan calibrate` reads (docs/formats.md §8): the steady-state step time and the peak memory.

Formats, recognised by their lines (the first format with a step line wins):

* torchtitan: `step: 20  loss:  7.9410  memory: 82.40GiB(86.73%)  tps: 5,762  ...`; `tps` is tokens/s per
  device, `memory` the max reserved GiB. ANSI colour codes (torchtitan colours its metrics) are ignored.
* Megatron-LM / NeMo / MindSpeed-LLM: ` iteration 20/ 5000 | ... | elapsed time per iteration (ms): 2843.2 |`
  and `[Rank 0] (after 10 iterations) memory (MB) | ... | max reserved: 84377.0` (MB = 2^20 bytes, as
  Megatron divides by 1024·1024).
* CSV: a header with `step_time_s` or `step_time_ms` (optionally `peak_memory_gib`), one row per step.

HyperParallel's own trainer log: its line format is not in the upstream files this project holds
(docs/calibration.md), so it is not guessed at; write its step times as the CSV above.

Steady state (docs/calibration.md): the first 10% of the step lines (at least one, when there are three or
more) are warm-up and dropped; of the rest, a step further than max(3.5 robust sigmas, 2%) from the median
is an outlier (a checkpoint save, an evaluation) and dropped; the steady value is the mean of what is left.
A log whose kept steps still spread wider than 1.5x (10th to 90th percentile), or where more than a third of
the steps are outliers, is not a steady state and is refused.

Logs are read only from regular files, line by line, at most MAX_LOG_BYTES: never a FIFO or a device.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import re
import stat
import statistics
from dataclasses import dataclass

MAX_LOG_BYTES = 512 * 1024 * 1024  # a month of step lines is far below this
MAX_LINE_CHARS = 64 * 1024
WARMUP_FRACTION = 0.10
OUTLIER_SIGMAS = 3.5
OUTLIER_FLOOR = 0.02  # relative to the median: steps within 2% are never outliers
MAX_SPREAD = 1.5  # p90 / p10 of the kept steps
MAX_OUTLIER_SHARE = 1 / 3

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TT_STEP = re.compile(r"\bstep:\s*(\d+)\b")
_TT_TPS = re.compile(r"\btps:\s*([0-9][0-9,]*(?:\.[0-9]+)?)")
_TT_MEM = re.compile(r"\bmemory:\s*([0-9]+(?:\.[0-9]+)?)\s*GiB")
_MG_ITER = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+")
_MG_MS = re.compile(r"elapsed time per iteration \(ms\):\s*([0-9]+(?:\.[0-9]+)?)")
_MG_MAXRES = re.compile(r"max reserved:\s*([0-9]+(?:\.[0-9]+)?)")


class LogError(Exception):
    """A log that yields no steady step time; `line` (0-based) is where the problem is, when it has one."""

    def __init__(self, code: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.line = line


@dataclass(frozen=True, slots=True)
class Steady:
    """A steady-state reading. `value` is seconds per step (kind "step_time_s") or tokens/s per device
    (kind "tokens_per_s_per_device"); `used` steps averaged, `warmup` and `outliers` dropped."""

    kind: str
    value: float
    used: int
    warmup: int
    outliers: int


@dataclass(frozen=True, slots=True)
class LogReading:
    """What a log says: its format, the steady figure, and the peak memory (GiB) when it reports one."""

    format: str
    steady: Steady
    peak_memory_gib: float | None
    lines: int


def read_lines(path: str, max_bytes: int = MAX_LOG_BYTES) -> list[str]:
    """The lines of a regular file (UTF-8, undecodable bytes replaced), at most `max_bytes`. A FIFO, a
    device or a directory is refused before it is opened for reading, so nothing can block."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise LogError("HP801", f"log not found: {path}") from None
    except OSError as exc:
        raise LogError("HP801", f"cannot read the log {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise LogError("HP801", f"the log {path} is not a regular file")
    if st.st_size > max_bytes:
        raise LogError("HP801", f"the log {path} is {st.st_size / 2**20:.0f} MiB, over the "
                       f"{max_bytes / 2**20:.0f} MiB limit: cut it to the steps to calibrate on")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise LogError("HP801", f"cannot read the log {path}: {exc.strerror or exc}") from None
    text = data.decode("utf-8", errors="replace")
    return [line[:MAX_LINE_CHARS] for line in text.splitlines()]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _torchtitan(lines: list[str]) -> tuple[list[tuple[int, float]], float | None]:
    vals: list[tuple[int, float]] = []
    peak: float | None = None
    for i, raw in enumerate(lines):
        line = _ANSI.sub("", raw)
        if not _TT_STEP.search(line):
            continue
        tps = _TT_TPS.search(line)
        if tps is not None:
            vals.append((i, _number(tps.group(1))))
        mem = _TT_MEM.search(line)
        if mem is not None:
            peak = max(peak or 0.0, float(mem.group(1)))
    return vals, peak


def _megatron(lines: list[str]) -> tuple[list[tuple[int, float]], float | None]:
    vals: list[tuple[int, float]] = []
    peak: float | None = None
    for i, line in enumerate(lines):
        if _MG_ITER.search(line):
            ms = _MG_MS.search(line)
            if ms is not None:
                vals.append((i, float(ms.group(1)) / 1000.0))
        res = _MG_MAXRES.search(line)
        if res is not None:
            peak = max(peak or 0.0, float(res.group(1)) / 1024.0)  # MB (2^20) -> GiB
    return vals, peak


def _csv(lines: list[str]) -> tuple[list[tuple[int, float]], float | None] | None:
    """None when the first non-empty line is not a header with a step-time column."""
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None:
        return None
    header = [h.strip().lower() for h in next(csv.reader([lines[start]]))]
    col, scale = ((header.index("step_time_s"), 1.0) if "step_time_s" in header else
                  (header.index("step_time_ms"), 1e-3) if "step_time_ms" in header else (None, 1.0))
    if col is None:
        return None
    mem_col = header.index("peak_memory_gib") if "peak_memory_gib" in header else None
    vals: list[tuple[int, float]] = []
    peak: float | None = None
    for offset, row in enumerate(csv.reader(lines[start + 1:])):
        i = start + 1 + offset
        if not row or not any(c.strip() for c in row):
            continue
        try:
            v = float(row[col]) * scale
        except (IndexError, ValueError):
            raise LogError("HP803", f"CSV row {offset + 2}: step time {row[col] if col < len(row) else ''!r} "
                           "is not a number", i) from None
        if not math.isfinite(v) or v <= 0:
            raise LogError("HP803", f"CSV row {offset + 2}: step time must be positive, got {v:g}", i)
        vals.append((i, v))
        if mem_col is not None and mem_col < len(row):
            with contextlib.suppress(ValueError):
                peak = max(peak or 0.0, float(row[mem_col]))
    return vals, peak


def steady_state(values: list[tuple[int, float]], kind: str) -> Steady:
    """Warm-up dropped, outliers dropped, mean of the rest; refuses a log whose steps disagree wildly."""
    n = len(values)
    warm = max(1, math.ceil(WARMUP_FRACTION * n)) if n >= 3 else 0
    rest = values[warm:]
    xs = [v for _, v in rest]
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    bound = max(OUTLIER_SIGMAS * 1.4826 * mad, OUTLIER_FLOOR * med)
    kept = [x for x in xs if abs(x - med) <= bound]
    outliers = len(xs) - len(kept)
    first_line = rest[0][0] if rest else None
    if outliers > MAX_OUTLIER_SHARE * len(xs):
        raise LogError("HP804", f"{outliers} of {len(xs)} steady steps lie far from the median {med:.4g}: "
                       "the steps disagree too much to read one step time", first_line)
    if len(kept) >= 3:
        q = statistics.quantiles(kept, n=10)
        if q[0] > 0 and q[-1] / q[0] > MAX_SPREAD:
            raise LogError("HP804", f"the steady steps spread from {q[0]:.4g} to {q[-1]:.4g} (10th to 90th "
                           "percentile): not one steady state; calibrate on a stretch of equal steps", first_line)
    return Steady(kind, statistics.fmean(kept), len(kept), warm, outliers)


def parse_log(lines: list[str]) -> LogReading:
    """The steady step figure and peak memory of a log in one of the docs/formats.md §8 formats."""
    if not any(line.strip() for line in lines):
        raise LogError("HP802", "the log is empty")
    tried: list[tuple[str, str, tuple[list[tuple[int, float]], float | None] | None]] = [
        ("torchtitan", "tokens_per_s_per_device", _torchtitan(lines)),
        ("megatron", "step_time_s", _megatron(lines)),
    ]
    for name, kind, got in tried:
        if got is not None and got[0]:
            return LogReading(name, steady_state(got[0], kind), got[1], len(lines))
    got_csv = _csv(lines)
    if got_csv is not None:
        if not got_csv[0]:
            raise LogError("HP802", "the CSV has a step-time column but no rows")
        return LogReading("csv", steady_state(got_csv[0], "step_time_s"), got_csv[1], len(lines))
    raise LogError("HP802", "no step lines in a known format: expected torchtitan `step: N ... tps: T`, "
                   "Megatron/NeMo/MindSpeed `iteration N/ M | ... elapsed time per iteration (ms): X`, or a CSV "
                   "with a step_time_s / step_time_ms column (docs/formats.md §8)")


def read_log(path: str) -> LogReading:
    """`parse_log` of a file read with `read_lines` (regular files only, bounded)."""
    return parse_log(read_lines(path))
