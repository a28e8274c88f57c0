"""Training logs `hp-plan calibrate` reads (docs/formats.md §8): the steady-state step time and the peak memory.

Formats, recognised by their lines (the format with the most step lines wins; on a tie the first below; lines
another format also read are ignored and said, HP814, so one stray line cannot decide how a log is read):

* torchtitan: `step: 20  loss:  7.9410  memory: 82.40GiB(86.73%)  tps: 5,762  ...`; `tps` is tokens/s per
  device, `memory` the max reserved GiB. ANSI colour codes (torchtitan colours its metrics) are ignored.
* Megatron-LM / NeMo / MindSpeed-LLM: ` iteration 20/ 5000 | ... | elapsed time per iteration (ms): 2843.2 |`
  and `[Rank 0] (after 10 iterations) memory (MB) | ... | max reserved: 84377.0` (MB = 2^20 bytes, as
  Megatron divides by 1024·1024).
* CSV: a header with `step_time_s` or `step_time_ms` (optionally `peak_memory_gib`), one row per step.

* HyperParallel's trainer ([HP], Corrections: the trainer's metrics and log line): on a non-terminal stderr one
  tqdm line per step, prefix `Training`, postfix `loss=…, grad_norm=…, lr=…, tokens/s=<%.3f>, step_time=<%.3f>s`;
  `step_time` is the optimizer step's wall time (max over the dp·cp ranks). The line carries no memory figure.

Steady state (docs/calibration.md): the first 10% of the step lines (at least one, when there are three or
more) are warm-up and dropped; of the rest, a step further than max(3.5 robust sigmas, 2%) from the median
is an outlier (a checkpoint save, an evaluation) and dropped; the steady value is the mean of what is left.
A log whose kept steps still spread wider than 1.5x (10th to 90th percentile), or where more than a third of
the steps are outliers, is not a steady state and is refused.

Logs are read only from regular files, at most MAX_LOG_BYTES: never a FIFO or a device. They are streamed:
one line at a time, each step kept as two machine numbers, so memory stays bounded by the step count, not the
log's size (reading a 128 MiB log whole took 2.3 GB). A line is read whole or not at all: one over
MAX_LINE_BYTES is skipped unread and said (HP814 at its line), never cut (cut at 64 K characters, a cell
`2.457` straddling the cut read as 2.0 s, Megatron's 2457.0 ms as 24 ms). Blank lines (a redirected progress
bar's bare `\r`) are counted in bulk and never reach a format's matching (4 MB of them took 7 s, 1.8 µs each);
once no format reads every line (the log has no CSV header), nor do lines without any format's words (Sieve).
A reading is kept per (file, size, modification time), so a log is read once per change however often a RUNS
file is checked (the language server checks at every pause in typing).

A value no run can measure is refused at its line (HP803): a step time, tokens/s or peak memory that is not
positive, not finite, beyond MEASURED_MAX (a step of 1e308 s overflowed the fit) or under MEASURED_MIN (a step
under a microsecond, a peak under a mebibyte).
"""

from __future__ import annotations

import csv
import math
import os
import re
import stat
import statistics
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import compress

MAX_LOG_BYTES = 512 * 1024 * 1024  # a month of step lines is far below this
# The longest line read (bytes; a quoted CSV row over several lines, in characters): far beyond any step line or
# CSV header (a Megatron arguments dump is a few KB), and bounded so that one line never holds more memory
# than this. A longer line is skipped whole and said (HP814), never read in part.
MAX_LINE_BYTES = 8 << 20
WARMUP_FRACTION = 0.10
OUTLIER_SIGMAS = 3.5
OUTLIER_FLOOR = 0.02  # relative to the median: steps within 2% are never outliers
MAX_SPREAD = 1.5  # p90 / p10 of the kept steps
MAX_OUTLIER_SHARE = 1 / 3
# The largest value a log or RUNS file may state for each measurement: far beyond any run (a step of 11.6
# days, 10^9 tokens/s on one device, a pebibyte of device memory), and small enough that the fit's sums of
# squares stay finite. A larger one is a typo or a unit mix-up: refused at its line.
MEASURED_MAX = {"step_time_s": 1e6, "tokens_per_s_per_device": 1e9, "peak_memory_gib": 1e6}
# The smallest: a step under a microsecond (no kernel launch is shorter) or a peak under about a mebibyte (no
# device runs a training step in less) is no measurement, but a unit mix-up or an underflow (1e-300). Tokens/s
# has none of its own: the step it gives (tokens per device ÷ tokens/s) is bounded as a step (runs.measure).
MEASURED_MIN = {"step_time_s": 1e-6, "peak_memory_gib": 1e-3}
_WHAT = {"step_time_s": "step time (s)", "tokens_per_s_per_device": "tokens/s per device",
         "peak_memory_gib": "peak memory (GiB)"}
CACHE_ENTRIES = 32  # readings kept (a RUNS file names a few logs)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# A logged number as the stacks print it, any sign, exponent, nan or inf included, so an impossible value is read
# and refused (HP803) rather than skipped or read by its leading digit (`2.4e3` as 2.4, `1e308` as 1).
_NUM = r"([-+]?(?:(?:[0-9][0-9,]*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|(?i:nan|inf(?:inity)?)))"
_TT_STEP = re.compile(r"\bstep:\s*(\d+)\b")
_TT_TPS = re.compile(r"\btps:\s*" + _NUM)
_TT_MEM = re.compile(r"\bmemory:\s*" + _NUM + r"\s*GiB")
_HP_LINE = re.compile(r"\bTraining\b")
_HP_STEP_TIME = re.compile(r"\bstep_time=" + _NUM + r"s\b")
_MG_ITER = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+")
_MG_MS = re.compile(r"elapsed time per iteration \(ms\):\s*" + _NUM)
_MG_MAXRES = re.compile(r"max reserved:\s*" + _NUM)


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
class LogNote:
    """What a reading left out that its user should know (HP814: a line too long to read, lines of a second
    format): the message and the 0-based line it names."""

    code: str
    message: str
    line: int


@dataclass(frozen=True, slots=True)
class LogReading:
    """What a log says: its format, the steady figure, and the peak memory (GiB) when it reports one."""

    format: str
    steady: Steady
    peak_memory_gib: float | None
    lines: int
    notes: tuple[LogNote, ...] = ()


@dataclass(frozen=True, slots=True)
class LongLine:
    """A line over MAX_LINE_BYTES, in place of its text: skipped unread (a number cut from its tail would be
    read as another number), its size said."""

    size: int


@dataclass(frozen=True, slots=True)
class Sieve:
    """The words one of which every line a format still reading the log could read holds (each format's
    `_Scan.words`), as text and as the bytes LogLines searches: once no format reads every line (the CSV scan has
    found no header of its own), a line without any of them is counted and dropped by C code, never a Python step
    through four formats' matching (64 MiB of junk lines took over 20 s at 0.6 µs a line, now 1.2 s)."""

    words: tuple[str, ...]
    encoded: tuple[bytes, ...]
    pattern: re.Pattern[bytes]

    @classmethod
    def of(cls, words: tuple[str, ...]) -> Sieve:
        encoded = tuple(w.encode() for w in words)
        return cls(words, encoded, re.compile(b"|".join(re.escape(w) for w in encoded)))

    def holds(self, line: str) -> bool:
        return any(w in line for w in self.words)


def measured_problem(kind: str, value: float) -> str | None:
    """Why `value` cannot be a measured `kind` (a MEASURED_MAX key), or None when it can."""
    if not math.isfinite(value) or value <= 0:
        return f"{_WHAT[kind]} must be a positive finite number, got {value:g}"
    if value > MEASURED_MAX[kind]:
        return f"{_WHAT[kind]} {value:g} is beyond any run (at most {MEASURED_MAX[kind]:g})"
    if value < MEASURED_MIN.get(kind, 0.0):
        return f"{_WHAT[kind]} {value:g} is below any run (at least {MEASURED_MIN[kind]:g})"
    return None


def _checked(kind: str, value: float, line: int, where: str = "") -> float:
    problem = measured_problem(kind, value)
    if problem is not None:
        raise LogError("HP803", where + problem, line)
    return value


def _number(text: str) -> float:
    return float(text.replace(",", ""))


class _Scan:
    """One format's reading of a log, fed line by line: step values (line numbers and values in machine
    arrays), the peak, and the first impossible value (raised only if this format is the log's)."""

    name = ""
    kind = ""
    # a line holding none of these is never one this format reads (None: it reads every line); the reader drops
    # such lines unread once no format needs every line (Sieve)
    words: tuple[str, ...] | None = None

    def __init__(self) -> None:
        self.at: array[int] = array("q")
        self.values: array[float] = array("d")
        self.peak: float | None = None
        self.error: LogError | None = None
        self.steps = 0  # step lines read, a refused value counted: how much of the log is in this format
        self.first = 0  # the first step line's index

    def step(self, i: int, value: float, where: str = "") -> None:
        if not self.steps:
            self.first = i
        self.steps += 1
        try:
            self.values.append(_checked(self.kind, value, i, where))
            self.at.append(i)
        except LogError as exc:
            self.error = self.error or exc

    def peak_at(self, i: int, value: float, where: str = "") -> None:
        try:
            self.peak = max(self.peak or 0.0, _checked("peak_memory_gib", value, i, where))
        except LogError as exc:
            self.error = self.error or exc

    def feed(self, i: int, line: str) -> None:
        raise NotImplementedError

    def skipped(self, i: int, size: int) -> None:
        """Line `i`, `size` bytes, was too long to read (LongLine): a format whose reading depends on it says so
        here."""

    def end(self) -> None:
        """The log has no more lines: what a format leaves open (a CSV quote never closed) is said here."""

    def found(self) -> bool:
        return bool(self.values) or self.error is not None

    @property
    def needs_every_line(self) -> bool:
        return self.words is None

    @property
    def read_steps(self) -> int:
        """How many step lines this format read (a refused value counted): the format with the most reads the
        log."""
        return self.steps


class _Torchtitan(_Scan):
    name, kind = "torchtitan", "tokens_per_s_per_device"
    words = ("step",)

    def feed(self, i: int, raw: str) -> None:
        if "step" not in raw:  # most lines of a long log: no regex for them (words)
            return
        line = _ANSI.sub("", raw) if "\x1b" in raw else raw
        if not _TT_STEP.search(line):
            return
        tps = _TT_TPS.search(line)
        if tps is not None:
            self.step(i, _number(tps.group(1)))
        mem = _TT_MEM.search(line)
        if mem is not None:
            self.peak_at(i, _number(mem.group(1)))


class _HyperParallel(_Scan):
    """HyperParallel's tqdm line: `Training: … [ …, tokens/s=…, step_time=2.345s]` (no memory figure)."""

    name, kind = "hyperparallel", "step_time_s"
    words = ("Training",)

    def feed(self, i: int, raw: str) -> None:
        if "Training" not in raw:  # an ANSI code never splits the word; most lines lack it: no regex for them
            return
        line = _ANSI.sub("", raw)
        if not _HP_LINE.search(line):
            return
        st = _HP_STEP_TIME.search(line)
        if st is not None:
            self.step(i, _number(st.group(1)))


class _Megatron(_Scan):
    name, kind = "megatron", "step_time_s"
    words = ("iteration", "reserved")

    def feed(self, i: int, line: str) -> None:
        if "iteration" not in line and "reserved" not in line:  # (words)
            return
        if _MG_ITER.search(line):
            ms = _MG_MS.search(line)
            if ms is not None:
                self.step(i, _number(ms.group(1)) / 1000.0)
        res = _MG_MAXRES.search(line)
        if res is not None:
            self.peak_at(i, _number(res.group(1)) / 1024.0)  # MB (2^20) -> GiB


class _Csv(_Scan):
    """A CSV whose first non-empty line is a header with a step-time column (else it reads nothing)."""

    name, kind = "csv", "step_time_s"

    def __init__(self) -> None:
        super().__init__()
        self.header_at: int | None = None
        self.col: int | None = None
        self.scale = 1.0
        self.mem_col: int | None = None
        self.done = False
        # a row whose quoted field a line break cut: where it began, its lines so far and their length; each line
        # is scanned once, as it comes, and the row joined once, when the quote closes
        self.open: tuple[int, list[str], int] | None = None
        self.rows = 0  # data rows so far, a row that spans lines (a quoted line break) counted once
        self.check: tuple[int, float] | None = None  # a second step-time column (step_time_ms beside _s) and scale
        self.long_header: tuple[int, int] | None = None  # (line, bytes) of a first line too long to read

    def feed(self, i: int, line: str) -> None:
        if self.done:
            return
        if self.open is not None:  # a quoted field runs on over this line (a break the reader split it at)
            at, parts, size = self.open
            parts.append(line)
            size += len(line) + 1
            if _inside_quotes(line, quoted=True):
                self.open = (at, parts, size)
                if size > MAX_LINE_BYTES:
                    self.error = self.error or LogError(
                        "HP803", f"a quoted CSV field runs on past {MAX_LINE_BYTES:,} characters", at)
                    self.done = True
                return
            line, i, self.open = "\n".join(parts), at, None
        if not line.strip():
            return
        row = _cells(line)
        if row is _OPEN:
            if self.col is None:  # before a header: a header over two lines is no header of ours (no CSV)
                self.done = True
            else:
                self.open = (i, [line], len(line))
            return
        if self.header_at is None:
            self._header(i, row, line)
            return
        self.rows += 1
        n = self.rows + 1  # as a spreadsheet numbers it: the header is row 1
        if row is None:
            self.error = self.error or LogError("HP803", f"CSV row {n}: not a CSV row (a bare carriage return "
                                                "inside a field)", i)
            return
        if not any(c.strip() for c in row):
            return
        assert self.col is not None
        try:
            v = float(row[self.col]) * self.scale
        except (IndexError, ValueError):
            cell = row[self.col] if self.col < len(row) else ""
            self.error = self.error or LogError("HP803", f"CSV row {n}: step time {cell[:40]!r} is not a number", i)
            return
        self.step(i, v, f"CSV row {n}: ")
        if self.check is not None and self.check[0] < len(row):
            try:
                other = float(row[self.check[0]]) * self.check[1]
            except ValueError:
                other = v
            if abs(other - v) > 0.01 * max(abs(v), abs(other)):
                self.error = self.error or LogError(
                    "HP803", f"CSV row {n}: step_time_s and step_time_ms disagree ({v:.6g} s against {other:.6g} s): "
                    "keep one column", i)
                return
        if self.mem_col is not None and self.mem_col < len(row) and row[self.mem_col].strip():
            try:
                peak = float(row[self.mem_col])
            except ValueError:
                self.error = self.error or LogError(
                    "HP803", f"CSV row {n}: peak memory {row[self.mem_col][:40]!r} is not a number", i)
                return
            self.peak_at(i, peak, f"CSV row {n}: ")

    def skipped(self, i: int, size: int) -> None:
        """A line too long to read: before a header, no header can be read (said if no format reads the log);
        inside a quoted field, the row runs on past the limit; else it is a row, counted so that the later rows
        keep their numbers (the line itself is said, HP814)."""
        if self.done:
            return
        if self.header_at is None:
            self.header_at, self.done, self.long_header = i, True, (i, size)
        elif self.open is not None:
            self.error = self.error or LogError(
                "HP803", f"a quoted CSV field runs on past {MAX_LINE_BYTES:,} characters", self.open[0])
            self.done = True
        else:
            self.rows += 1

    def _header(self, i: int, cells: list[str] | None, line: str) -> None:
        header = [h.strip().lower() for h in cells or []]  # a line csv cannot split is no header
        self.header_at = i
        if "step_time_s" in header:
            self.col = header.index("step_time_s")
            if "step_time_ms" in header:
                self.check = (header.index("step_time_ms"), 1e-3)
        elif "step_time_ms" in header:
            self.col, self.scale = header.index("step_time_ms"), 1e-3
        else:
            if ";" in line and any(k in line.lower() for k in ("step_time_s", "step_time_ms")):
                self.error = LogError("HP802", "the CSV's columns are separated by semicolons (a spreadsheet's "
                                      "locale setting): save it with commas", i)
            self.done = True
            return
        for name in ("step_time_s", "step_time_ms", "peak_memory_gib"):
            if header.count(name) > 1:
                self.error = LogError("HP803", f"the CSV has {header.count(name)} '{name}' columns: keep one", i)
                self.done = True
                return
        self.mem_col = header.index("peak_memory_gib") if "peak_memory_gib" in header else None

    def end(self) -> None:
        if self.open is not None and self.col is not None and not self.done:
            self.error = self.error or LogError("HP803", "a quoted CSV field opened here is never closed", self.open[0])

    def found(self) -> bool:
        return self.col is not None or self.error is not None

    @property
    def needs_every_line(self) -> bool:
        return not self.done  # a header's rows, or the first line that may be one

    @property
    def read_steps(self) -> int:
        return self.rows


def _inside_quotes(line: str, quoted: bool = False) -> bool:
    """Whether `line` ends inside a quoted CSV field (the csv module's rules: a quote opens a field only at its
    start, a doubled quote inside is a quote), reading it from inside one where `quoted` (a row's earlier lines
    left it open): the row goes on over the next line, as a spreadsheet writes a cell holding a line break."""
    start, i, n = not quoted, 0, len(line)
    while i < n:
        c = line[i]
        if quoted:
            if c == '"':
                if i + 1 < n and line[i + 1] == '"':
                    i += 1
                else:
                    quoted = False
        elif c == ",":
            start = True
            i += 1
            continue
        elif c == '"' and start:
            quoted = True
        start = False
        i += 1
    return quoted


# _cells of a line that ends inside a quoted field: the row goes on over the next line.
_OPEN: list[str] = []


def _cells(line: str) -> list[str] | None:
    """The line's CSV cells; _OPEN where it ends inside a quoted field (_inside_quotes); None where the csv module
    refuses the line: a bare carriage return inside an unquoted field (a binary file, or CR line breaks inside a
    LF file, both decode to such lines) raises csv.Error, which is the log's fault, never the reader's. Read
    strictly first (as fast as leniently, and it raises at an open quote), then leniently (a stray quote inside
    a field is a character, as spreadsheets write it)."""
    try:
        return next(csv.reader([line], strict=True), [])
    except csv.Error:
        pass
    if _inside_quotes(line):
        return _OPEN
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return None


def steady_state(values: Iterable[tuple[int, float]] | _Scan, kind: str) -> Steady:
    """Warm-up dropped, outliers dropped, mean of the rest; refuses a log whose steps disagree wildly."""
    at, xs_all = (values.at, values.values) if isinstance(values, _Scan) else _columns(values)
    n = len(xs_all)
    warm = max(1, math.ceil(WARMUP_FRACTION * n)) if n >= 3 else 0
    xs = xs_all[warm:]
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    bound = max(OUTLIER_SIGMAS * 1.4826 * mad, OUTLIER_FLOOR * med)
    kept = [x for x in xs if abs(x - med) <= bound]
    outliers = len(xs) - len(kept)
    first_line = at[warm] if warm < n else None
    if outliers > MAX_OUTLIER_SHARE * len(xs):
        raise LogError("HP804", f"{outliers} of {len(xs)} steady steps lie far from the median {med:.4g}: "
                       "the steps disagree too much to read one step time", first_line)
    if len(kept) >= 3:
        q = statistics.quantiles(kept, n=10)
        if q[0] > 0 and q[-1] / q[0] > MAX_SPREAD:
            raise LogError("HP804", f"the steady steps spread from {q[0]:.4g} to {q[-1]:.4g} (10th to 90th "
                           "percentile): not one steady state; calibrate on a stretch of equal steps", first_line)
    return Steady(kind, statistics.fmean(kept), len(kept), warm, outliers)


def _columns(values: Iterable[tuple[int, float]]) -> tuple[array[int], array[float]]:
    at, xs = array("q"), array("d")
    for i, v in values:
        at.append(i)
        xs.append(v)
    return at, xs


class Numbered:
    """A log's lines that are not blank, each with its 0-based index among all of its lines, and (once read)
    `count`, how many lines it has, blank ones included. Blank lines never reach a format: none of them is a
    step line, and inside a quoted CSV field one changes nothing but the note it sits in."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self.lines = lines
        self.count = 0
        self.sieve: Sieve | None = None  # set by parse_log once no format reads every line

    def __iter__(self) -> Iterator[tuple[int, str | LongLine]]:
        for i, line in enumerate(self.lines):
            self.count = i + 1
            if line and not line.isspace() and (self.sieve is None or self.sieve.holds(line)):
                yield i, line


def parse_log(lines: Iterable[str] | Numbered) -> LogReading:
    """The steady step figure and peak memory of a log in one of the docs/formats.md §8 formats, in one pass over
    `lines`: read by the format with the most step lines (a tie: the order below), the lines another format
    read ignored and said (HP814), as is a line too long to read."""
    numbered = lines if isinstance(lines, Numbered) else Numbered(lines)
    scans: tuple[_Scan, ...] = (_HyperParallel(), _Torchtitan(), _Megatron(), _Csv())
    long: list[tuple[int, int]] = []  # (line, bytes) of each line too long to read
    every = [scan for scan in scans if scan.words is None]  # the formats that may need every line (CSV's rows)
    blank = True
    for i, line in numbered:
        blank = False
        if isinstance(line, LongLine):
            long.append((i, line.size))
            for scan in scans:
                scan.skipped(i, line.size)
        else:
            for scan in scans:
                scan.feed(i, line)
        if numbered.sieve is None and not any(scan.needs_every_line for scan in every):
            numbered.sieve = Sieve.of(tuple(w for scan in scans for w in scan.words or ()))
    for scan in scans:
        scan.end()
    if blank:
        raise LogError("HP802", "the log is empty")
    found = [scan for scan in scans if scan.found()]
    if not found:
        raise _unknown_format(scans[-1])
    best = max(found, key=lambda scan: scan.read_steps)  # the first of the most: a tie keeps the order above
    if best.error is not None:
        raise best.error
    if not best.values:
        raise LogError("HP802", "the CSV has a step-time column but no rows")
    notes = [_ignored(scan, best) for scan in found if scan is not best and scan.read_steps]
    if long:
        notes.append(_too_long(long))
    return LogReading(best.name, steady_state(best, best.kind), best.peak, numbered.count, tuple(notes))


_FORMATS = {"hyperparallel": "HyperParallel's `step_time=`", "torchtitan": "torchtitan's `step: … tps:`",
            "megatron": "Megatron's `iteration … elapsed time per iteration (ms):`", "csv": "CSV rows"}


def _ignored(scan: _Scan, best: _Scan) -> LogNote:
    """HP814 at the first line of a format the log is not read as: its lines are left out of the step time."""
    n = scan.read_steps
    at = scan.first if scan.steps else scan.error.line or 0 if scan.error is not None else 0
    return LogNote("HP814", f"{n:,} line{'s' if n > 1 else ''} in the form of {_FORMATS[scan.name]} "
                   f"{'are' if n > 1 else 'is'} not read: the log is read as {best.name}, which has more step lines "
                   f"({best.read_steps:,}); cut the log to one trainer's lines if the other is the run", at)


def _too_long(long: list[tuple[int, int]]) -> LogNote:
    """HP814 at the first line too long to read, naming how many more there are."""
    (at, size), more = long[0], len(long) - 1
    rest = f" ({more:,} more such line{'s' if more > 1 else ''} from line {long[1][0] + 1})" if more else ""
    return LogNote("HP814", f"a line of {_size(size)} is over the {_size(MAX_LINE_BYTES)} a log line may hold: "
                   f"skipped unread{rest}; a step it states is not in the step time", at)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB".replace(".0 MiB", " MiB") if n >= 2**20 else f"{n:,} bytes"


def _unknown_format(csv_scan: _Scan) -> LogError:
    """HP802 for a log no format reads; when its first line was too long to read (a CSV header, perhaps), says so
    at that line."""
    long = csv_scan.long_header if isinstance(csv_scan, _Csv) else None
    if long is not None:
        return LogError("HP802", f"no step lines in a known format, and the first line ({_size(long[1])}) is over "
                        f"the {_size(MAX_LINE_BYTES)} a log line may hold, so it is not read: if it is a CSV header, "
                        "shorten its column names", long[0])
    return LogError("HP802", "no step lines in a known format: expected HyperParallel's `Training: … "
                    "step_time=Xs]`, torchtitan `step: N ... tps: T`, "
                    "Megatron/NeMo/MindSpeed `iteration N/ M | ... elapsed time per iteration (ms): X`, or a CSV "
                    "with a step_time_s / step_time_ms column (docs/formats.md §8)")


def _open_log(path: str, max_bytes: int) -> tuple[int, os.stat_result]:
    """An O_NONBLOCK descriptor on the regular file at `path` and its stat; LogError (HP801) else."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise LogError("HP801", f"log not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise LogError("HP801", f"cannot read the log {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise LogError("HP801", f"the log {path} is not a regular file")
    if st.st_size > max_bytes:
        raise LogError("HP801", f"the log {path} is {st.st_size / 2**20:.0f} MiB, over the "
                       f"{max_bytes / 2**20:.0f} MiB limit: cut it to the steps to calibrate on")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        now = os.fstat(fd)
    except OSError as exc:
        raise LogError("HP801", f"cannot read the log {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(now.st_mode):  # swapped for something else between the stat and the open
        os.close(fd)
        raise LogError("HP801", f"the log {path} is not a regular file")
    return fd, now


class LogLines(Numbered):
    """The lines of an open file (UTF-8, undecodable bytes replaced, a leading byte-order mark dropped; `\n`,
    `\r\n` or a lone `\r` ends a line, so tqdm's refreshes in a redirected log are lines of their own), numbered,
    read a block at a time, at most a block and one line's bytes held. Blank lines are counted and dropped by C
    iterators (splitlines, strip, compress), never a Python step each: a redirected progress bar writes millions
    (4 MB of bare `\r` took 7 s at 1.8 µs a line; now about 0.1 µs). A line over MAX_LINE_BYTES is a LongLine, its
    bytes dropped as they come. A file that grows past `max_bytes` while it is read is refused (HP801)."""

    BLOCK = 1 << 20  # bytes read at a time

    def __init__(self, fd: int, path: str, max_bytes: int = MAX_LOG_BYTES) -> None:
        super().__init__()
        self.fd, self.path, self.max_bytes = fd, path, max_bytes

    def __iter__(self) -> Iterator[tuple[int, str | LongLine]]:
        index, total, cr_end = 0, 0, False  # the line the next block begins in; bytes read; the last block ended `\r`
        # the line a block left open: its bytes (dropped past the limit), their count, whether one is not white space
        kept, size, inked = bytearray(), 0, False
        with os.fdopen(self.fd, "rb", buffering=0) as fh:
            while block := fh.read(self.BLOCK):
                total += len(block)
                if total > self.max_bytes:
                    raise LogError("HP801", f"the log {self.path} grew past the {self.max_bytes / 2**20:.0f} MiB "
                                   "limit while it was read")
                if cr_end and block.startswith(b"\n"):  # the `\n` of a `\r\n` two blocks cut
                    block = block[1:]
                cr_end = block.endswith(b"\r")
                pieces = block.splitlines()  # split at `\n`, `\r\n` and `\r` only
                rest = b"" if block.endswith((b"\n", b"\r")) or not pieces else pieces.pop()
                first = 0
                if size and pieces:  # the line left open ends at this block's first break
                    head = pieces[0]
                    if (item := _line(index, kept + head, size + len(head), inked or bool(head.strip()))) is not None:
                        yield item
                    kept, size, inked, first = bytearray(), 0, False, 1
                # blank lines (nothing but ASCII white space) and, once a sieve is set, lines without its words
                # are dropped here, in C: never a Python step each
                for i, piece in compress(enumerate(pieces, index), self._kept(block, pieces)):
                    if i >= index + first and (item := _line(i, piece, len(piece))) is not None:
                        yield item
                index += len(pieces)
                size += len(rest)
                inked = inked or bool(rest.strip())
                if size <= MAX_LINE_BYTES:
                    kept += rest
                elif kept:
                    kept = bytearray()  # past the limit: its bytes dropped as they come
        if size:
            if (item := _line(index, kept, size, inked)) is not None:
                yield item
            index += 1
        self.count = index

    def _kept(self, block: bytes, pieces: list[bytes]) -> Iterable[object]:
        """Per piece of `block`, whether it may be read (truthy): not blank, and holding one of the sieve's words
        once parse_log has set one (none at all when the block holds none: one C scan of the block per word), or
        too long to read (only where a block is longer than a line may be: never at the default sizes)."""
        sieve = self.sieve
        if sieve is None:
            return map(bytes.strip, pieces)
        pattern = sieve.pattern
        if len(block) > MAX_LINE_BYTES:  # a piece may be a line too long to read: said (HP814) whatever it holds
            return [(len(p) > MAX_LINE_BYTES and bool(p.strip())) or pattern.search(p) is not None for p in pieces]
        if not any(w in block for w in sieve.encoded):
            return ()
        return map(pattern.search, pieces)


def _line(index: int, raw: bytes | bytearray, size: int, inked: bool = True) -> tuple[int, str | LongLine] | None:
    """Line `index` as read (`raw`, `size` bytes): None when blank, its LongLine when past MAX_LINE_BYTES (and
    `inked`: not all white space)."""
    if size > MAX_LINE_BYTES:
        return (index, LongLine(size)) if inked else None
    text = raw.decode("utf-8", errors="replace")
    if index == 0:
        text = text.removeprefix("\ufeff")  # Excel's UTF-8 CSVs begin with one
    return (index, text) if text and not text.isspace() else None


def stream_lines(fd: int, path: str, max_bytes: int = MAX_LOG_BYTES) -> LogLines:
    """The numbered lines of an open log file, streamed (LogLines)."""
    return LogLines(fd, path, max_bytes)


_CACHE: OrderedDict[tuple[object, ...], LogReading | LogError] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def read_log(path: str, max_bytes: int = MAX_LOG_BYTES) -> LogReading:
    """`parse_log` of the regular file at `path`, streamed (bounded memory), and kept per (file, size,
    modification time): an unchanged log is not read again."""
    fd, st = _open_log(path, max_bytes)
    key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, max_bytes)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
    if hit is not None:
        os.close(fd)
    else:
        try:
            hit = parse_log(stream_lines(fd, path, max_bytes))
        except LogError as exc:
            hit = exc
        with _CACHE_LOCK:
            _CACHE[key] = hit
            while len(_CACHE) > CACHE_ENTRIES:
                _CACHE.popitem(last=False)
    if isinstance(hit, LogError):
        raise LogError(hit.code, str(hit), hit.line)
    return hit
