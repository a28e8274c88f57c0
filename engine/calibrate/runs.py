"""Reading a RUNS file (docs/formats.md §6) with positions, and measuring each run against the uncalibrated model.

A RUNS file is YAML: `runs:` a list of entries, each naming a `config` (a search config or train.yaml stating
one complete strategy, relative to the RUNS file) and what was measured: `step_time_s` and/or
`tokens_per_s_per_device`, optionally `peak_memory_gib` and `parts_s`, or a training `log:` (engine.calibrate.
logs). Cluster facts a bare train.yaml cannot state ride along (`devices`, `num_nodes`, `cards_per_node`,
`device_type`, `memory_gb`). Every problem is a diagnostic on the entry's own key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from engine.calibrate.ascend import read_ascend
from engine.calibrate.logs import (
    MEASURED_MAX,
    MEASURED_MIN,
    LogError,
    LogNote,
    LogReading,
    measured_problem,
    read_log,
)
from engine.calibrate.profiler_trace import TraceReading, read_trace
from engine.calibrate.profiler_trace import part_seconds as trace_part_seconds
from engine.calibrate.stream import TraceError
from engine.config.reader import Source, Val
from engine.config.types import ClusterOverrides, Config, Loaded
from engine.diagnostics import Diagnostic, Severity, has_errors
from engine.document import Map, Node, Seq, parse, read_text
from engine.positions import DOCUMENT_START, Range
from engine.results import Estimate
from engine.specs import PRICED_PARTS, RATIO_GROUPS

# Profile part names -> ratio group (docs/formats.md §6: HyperParallel's CSV columns, our time parts, the groups).
PART_GROUP: dict[str, str] = {
    "comp": "compute", "op_wait": "dp_comm", "dp_wait": "dp_comm", "mp_wait": "tp_comm", "sp_wait": "tp_comm",
    "ep_wait": "ep_comm", "cp_wait": "cp_comm", "pp_wait": "pp",
    **{part: group for group, parts in RATIO_GROUPS.items() for part in parts},
    **{group: group for group in RATIO_GROUPS},
}
ENTRY_KEYS = ("config", "log", "trace", "ascend_profile", "step_time_s", "tokens_per_s_per_device", "peak_memory_gib", "parts_s", "devices",
              "num_nodes", "cards_per_node", "device_type", "memory_gb", "name")


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One entry as written. Paths are resolved against the RUNS file; `at` is the entry's own range."""

    index: int
    at: Range
    config: Val | None = None
    config_path: str | None = None
    log: Val | None = None
    log_path: str | None = None
    step_time_s: Val | None = None
    tokens_per_s_per_device: Val | None = None
    peak_memory_gib: Val | None = None
    parts_s: tuple[tuple[str, float], ...] = ()
    overrides: ClusterOverrides | None = None
    name: str = ""
    profile: Val | None = None  # `trace:` (a PyTorch profiler trace) or `ascend_profile:` (a torch_npu folder)
    profile_path: str | None = None
    profile_kind: str = ""  # which key: "trace" or "ascend_profile"


@dataclass(frozen=True, slots=True)
class Measured:
    """A run priced and measured: the uncalibrated estimate and what the run did (seconds, GiB)."""

    entry: RunEntry
    label: str  # the config path relative to the RUNS file, as the ratios file writes it
    config: Config
    estimate: Estimate
    step_time_s: float
    peak_memory_gib: float | None
    parts_s: dict[str, float] = field(default_factory=dict)  # measured seconds per ratio group or priced part
    log: LogReading | None = None
    profile: TraceReading | None = None


@dataclass(frozen=True, slots=True)
class RunsFile:
    path: str
    entries: tuple[RunEntry, ...]
    diagnostics: tuple[Diagnostic, ...]


def may_be_runs_file(text: str) -> bool:
    """False only for a text that is certainly no RUNS file (it never says `runs`): a test with no parse, which the
    language server makes on its event loop to send a RUNS file's check, which reads logs and profiles, to a
    thread of its own."""
    return "runs" in text


def is_runs_file(text: str) -> bool:
    """A RUNS file's top level is `runs:` holding a list (cheap test for the editor's file detection)."""
    if not may_be_runs_file(text):
        return False  # the common case (every config), without a parse
    doc = parse(text)
    return isinstance(doc.root, Map) and isinstance(doc.root.get("runs"), Seq)


def _resolve(base: str, value: str) -> str:
    p = os.path.expanduser(value.strip())
    return os.path.normpath(p if os.path.isabs(p) else os.path.join(os.path.dirname(os.path.abspath(base)), p))


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _path_val(src: Source, item: Map, key: str, dotted: str, runs_path: str) -> tuple[Val | None, str | None]:
    v = src.str_(item, key, dotted)
    if v is None or not str(v.value).strip():
        return v, None
    if "\0" in str(v.value):  # no file system path holds a NUL; os.path would raise ValueError on it
        src.diag("HP801", f"{dotted} cannot name a file: a path never holds a NUL character", v.loc.value, dotted)
        return v, None
    resolved = _resolve(runs_path, str(v.value))
    if _same(resolved, runs_path):
        src.diag("HP801", f"{dotted} points at this RUNS file itself; name the run's {key} file", v.loc.value, dotted)
        return v, None
    if not (os.path.isdir(resolved) if key == "ascend_profile" else
            os.path.exists(resolved) if key == "trace" else os.path.isfile(resolved)):
        what = "config" if key == "config" else key.replace("_", " ")
        if not os.path.exists(resolved):
            link = "; a link to a missing file" if os.path.islink(resolved) else ""
            why = f"{what} file not found: {v.value} (looked for {resolved}{link})"
        else:
            kind = "folder" if key == "ascend_profile" else "regular file"
            why = f"the {what} {v.value} is not a {kind} (a directory, a FIFO or a device): name the file the run wrote"
        src.diag("HP801", why, v.loc.value, dotted)
        return v, None
    return v, resolved


def _overrides(src: Source, item: Map, dotted: str) -> ClusterOverrides | None:
    devices = src.int_(item, "devices", f"{dotted}.devices", minimum=1)
    nodes = src.int_(item, "num_nodes", f"{dotted}.num_nodes", minimum=1)
    cards = src.int_(item, "cards_per_node", f"{dotted}.cards_per_node", minimum=1)
    dtype = src.str_(item, "device_type", f"{dotted}.device_type")
    mem = src.number(item, "memory_gb", f"{dotted}.memory_gb", minimum=0.0, strict=True)
    vals = (devices, nodes, cards, dtype, mem)
    if all(v is None for v in vals):
        return None
    return ClusterOverrides(
        devices=devices.value if devices else None, num_nodes=nodes.value if nodes else None,
        cards_per_node=cards.value if cards else None, device_type=str(dtype.value) if dtype else None,
        memory_gb=mem.value if mem else None, memory_source="the RUNS file" if mem else None, explicit=True)


def _parts(src: Source, item: Map, dotted: str) -> tuple[tuple[str, float], ...]:
    sec = src.section(item, "parts_s", f"{dotted}.parts_s")
    if sec is None:
        return ()
    sums: dict[str, float] = {}
    for key, kn, _vn in sec.items():
        group = PART_GROUP.get(str(key)) or (str(key) if str(key) in PRICED_PARTS else None)
        if group is None:
            src.diag("HP800", f"{dotted}.parts_s.{key}: unknown part; use {', '.join(RATIO_GROUPS)}, a part "
                     f"({', '.join(PRICED_PARTS)}) or "
                     "HyperParallel's comp, op_wait, dp_wait, mp_wait, sp_wait, ep_wait, cp_wait, pp_wait",
                     kn.range, f"{dotted}.parts_s.{key}")
            continue
        v = src.number(sec, str(key), f"{dotted}.parts_s.{key}", minimum=0.0, maximum=MEASURED_MAX["step_time_s"])
        if v is not None:
            sums[group] = sums.get(group, 0.0) + float(v.value)
    return tuple(sums.items())


def _entry(src: Source, index: int, item: Node, runs_path: str) -> RunEntry | None:
    dotted = f"runs.{index}"
    if not isinstance(item, Map):
        src.diag("HP800", f"{dotted} must be a mapping with a config and a measurement", item.range, dotted)
        return None
    for key, kn, _vn in item.items():
        if key not in ENTRY_KEYS:
            src.diag("HP800", f"{dotted}.{key}: unknown key; a run has {', '.join(ENTRY_KEYS)}", kn.range,
                     f"{dotted}.{key}", severity=Severity.WARNING)
    cfg, cfg_path = _path_val(src, item, "config", f"{dotted}.config", runs_path)
    if cfg is None:
        src.diag("HP801", f"{dotted} names no config: every run needs the config that states its strategy",
                 item.range, dotted)
    log, log_path = _path_val(src, item, "log", f"{dotted}.log", runs_path)
    kind = next((k for k in ("trace", "ascend_profile") if k in item), "")
    profile, profile_path = _path_val(src, item, kind, f"{dotted}.{kind}", runs_path) if kind else (None, None)
    step, tps, peak = (src.number(item, key, f"{dotted}.{key}", minimum=MEASURED_MIN.get(key, 0.0),
                                  strict=key not in MEASURED_MIN, maximum=MEASURED_MAX[key])
                       for key in ("step_time_s", "tokens_per_s_per_device", "peak_memory_gib"))
    if log is None and profile is None and step is None and tps is None and "step_time_s" not in item \
            and "tokens_per_s_per_device" not in item:
        src.diag("HP806", f"{dotted} has no measurement: give step_time_s, tokens_per_s_per_device, a log or a "
                 "profiler trace",
                 item.range, dotted)
    if log is not None and (step is not None or tps is not None):
        figure = "step_time_s" if step is not None else "tokens_per_s_per_device"
        for_peak = "" if peak is not None else ", the log read only for the peak"
        src.diag("HP813", f"{dotted} gives both a log and {figure}: the figure is measured{for_peak}; give one of them",
                 (step or tps).loc.key, f"{dotted}.{figure}")  # type: ignore[union-attr]
    name = src.str_(item, "name", f"{dotted}.name")
    return RunEntry(index, item.range, cfg, cfg_path, log, log_path, step, tps, peak, _parts(src, item, dotted),
                    _overrides(src, item, dotted), str(name.value) if name else "", profile, profile_path, kind)


# The most runs one RUNS file may list. Each run is read, priced and fitted with its leave-one-out (about 7 ms
# and 25 KB a run whose config no earlier run named, a config priced once per calibration; the fit and
# leave-one-out of 1,000 runs well under a second but for the refits engine.calibrate.fit.REFIT_MAX_RUNS bounds;
# benchmarks/hostile_numbers.py): a generated file of 150,000 runs (10 MB) took minutes and gigabytes; a real
# calibration has tens. A longer list is refused whole at `runs:` (HP800), before any run is read.
MAX_RUNS = 1000


def read_runs(path: str, text: str | None = None) -> RunsFile:
    """Every entry of a RUNS file (or the editor buffer `text` standing for it), with diagnostics."""
    diags: list[Diagnostic] = []
    if text is None:
        text, read_diags = read_text(path)
        if text is None:
            return RunsFile(path, (), read_diags)
    doc = parse(text, path=path)
    src = Source(doc, path)
    diags += doc.diagnostics
    root = src.root
    runs = root.get("runs") if root is not None else None
    if not isinstance(runs, Seq) or not runs.items:
        rng = runs.range if runs is not None else DOCUMENT_START
        if doc.ok:
            src.diag("HP800", "a RUNS file holds `runs:`, a list of measured runs (docs/formats.md §6)", rng, "runs")
        return RunsFile(path, (), tuple(diags + src.diags))
    if len(runs.items) > MAX_RUNS:
        src.diag("HP800", f"runs lists {len(runs.items):,} runs: at most {MAX_RUNS:,} are fitted; keep the runs that "
                 "differ (the same plan measured again adds nothing a mean of its step times does not)", runs.range,
                 "runs")
        return RunsFile(path, (), tuple(diags + src.diags))
    entries = [e for i, item in enumerate(runs.items) if (e := _entry(src, i, item, path)) is not None]
    return RunsFile(path, tuple(entries), tuple(diags + src.diags))


def _at(entry: RunEntry, val: Val | None, dotted: str) -> tuple[Range, str]:
    return (val.loc.value, dotted) if val is not None else (entry.at, f"runs.{entry.index}")


def _log_diag(entry: RunEntry, exc: LogError) -> Diagnostic:
    rng, dotted = _at(entry, entry.log, f"runs.{entry.index}.log")
    where = f" (log line {exc.line + 1})" if exc.line is not None else ""
    return Diagnostic(exc.code, f"{entry.log.value if entry.log else 'log'}: {exc}{where}", rng, dotted)


def _note_diag(entry: RunEntry, note: LogNote) -> Diagnostic:
    """A log's note (what its reading left out, HP814) at the run's `log:` value, naming the line."""
    rng, dotted = _at(entry, entry.log, f"runs.{entry.index}.log")
    name = entry.log.value if entry.log else "log"
    return Diagnostic(note.code, f"{name}: {note.message} (log line {note.line + 1})", rng, dotted)


# A config checked and priced, per (path, cluster overrides): kept by one calibration for every run naming it, so a
# plan measured again is read and priced once (each takes about 10 ms; 1,000 runs of one config took 9-11 s).
Priced = dict[tuple[str, ClusterOverrides | None],
              tuple[Loaded, Config | None, Estimate | None, tuple[Diagnostic, ...]]]


def _priced(entry: RunEntry, cache: Priced) -> tuple[Loaded, Config | None, Estimate | None, tuple[Diagnostic, ...]]:
    """check_file of the run's config; the config without ratios (calibration starts from the uncalibrated model)
    and, when it states one complete strategy, its estimate."""
    from engine.check import check_file
    from engine.cost import estimate_config

    assert entry.config_path is not None
    key = (entry.config_path, entry.overrides)
    if key not in cache:
        loaded = check_file(entry.config_path, overrides=entry.overrides)
        config = None if loaded.config is None or any(d.is_error for d in loaded.diagnostics) else replace(
            loaded.config, run=replace(loaded.config.run, ratios=None))
        est, more = estimate_config(config) if config is not None and config.stated is not None else (None, ())
        cache[key] = (loaded, config, est, more)
    return cache[key]


def _load(entry: RunEntry, cache: Priced | None = None) -> tuple[Config | None, Estimate | None, list[Diagnostic]]:
    """The run's config, priced without any ratios; `cache` keeps each config's pricing for the other runs that
    name it."""
    rng, dotted = _at(entry, entry.config, f"runs.{entry.index}.config")
    loaded, config, est, more = _priced(entry, {} if cache is None else cache)
    errors = [d for d in loaded.diagnostics if d.is_error]
    if config is None:
        first = errors[0].message if errors else "it could not be read"
        return None, None, [Diagnostic("HP805", f"{entry.config.value if entry.config else ''} does not price: "
                                       f"{first}" + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""),
                                       rng, dotted)]
    if config.stated is None:
        open_dims = [d for d, dim in config.dimensions.items() if dim.searched]
        return config, None, [Diagnostic("HP805", "the run's config does not state one complete strategy"
                                         f" (searched: {', '.join(open_dims) or 'unknown'}); fix every "
                                         "dimension to what the run used", rng, dotted)]
    if est is None or has_errors(tuple(d for d in more if d.code != "HP520")):
        first = next((d.message for d in more if d.is_error), "it cannot be priced")
        return config, None, [Diagnostic("HP805", f"the run's strategy does not price: {first}", rng, dotted)]
    return config, est, _as_priced(entry, loaded.diagnostics, rng, dotted)


# How many of a config's own warnings HP811 repeats at the run, one each (the rest counted in the last).
_SAID_MAX = 4


def _as_priced(entry: RunEntry, found: tuple[Diagnostic, ...], rng: Range, dotted: str) -> list[Diagnostic]:
    """HP811 at the run's `config:` for what the config's own check says the run is priced on without stating it:
    the device type assumed (HP303: a bare train.yaml is priced on HyperParallel's default A2) and its warnings.
    The ratios are fitted on that pricing, so the RUNS file says it where calibrate is read."""
    said = [d for d in found if d.code == "HP303" or d.effective_severity == "warning"]
    name = entry.config.value if entry.config is not None else "the config"
    out = [Diagnostic("HP811", f"{name}: priced as {d.code} says: {d.message}", rng, dotted)
           for d in said[:_SAID_MAX]]
    if len(said) > _SAID_MAX:
        out.append(Diagnostic("HP811", f"{name}: {len(said) - _SAID_MAX} more warnings (hp-plan check {name})",
                              rng, dotted))
    return out


def measure(runs: RunsFile, entry: RunEntry, cache: Priced | None = None) -> tuple[Measured | None, list[Diagnostic]]:
    """The entry priced (uncalibrated) and its measured step time, peak and parts; diagnostics if it cannot.
    `cache`: the configs already priced for other runs of the same calibration (_priced)."""
    if entry.config_path is None:
        return None, []
    log: LogReading | None = None
    if entry.log_path is not None:
        try:
            log = read_log(entry.log_path)
        except LogError as exc:
            return None, [_log_diag(entry, exc)]
    elif entry.log is not None or (entry.profile_path is None and entry.step_time_s is None
                                   and entry.tokens_per_s_per_device is None):
        return None, []  # already diagnosed by read_runs
    if entry.profile is not None and entry.profile_path is None:
        return None, []  # already diagnosed by read_runs
    config, est, notes = _load(entry, cache)
    if est is None or config is None:
        return None, notes
    profile, diags = _profile(entry, est)
    if diags:
        return None, diags
    step, derived = _step(entry, log, profile, est, config)
    if derived is not None:
        return None, [*notes, derived]
    if log is not None:
        notes = [*notes, *(_note_diag(entry, n) for n in log.notes)]
    peak = float(entry.peak_memory_gib.value) if entry.peak_memory_gib is not None else (
        log.peak_memory_gib if log is not None else None)
    label = os.path.relpath(entry.config_path, os.path.dirname(os.path.abspath(runs.path)))
    parts = dict(entry.parts_s)
    contradiction = _parts_problem(parts, step)
    if contradiction is not None:
        return None, [*notes, Diagnostic("HP803", contradiction, entry.at, f"runs.{entry.index}")]
    if profile is not None and not parts:
        parts = trace_part_seconds(profile, dict(est.time_parts_s))
    return Measured(entry, label, config, est, step, peak, parts, log, profile), notes


def _step(entry: RunEntry, log: LogReading | None, profile: TraceReading | None, est: Estimate,
          config: Config) -> tuple[float, Diagnostic | None]:
    """The run's measured step (s): stated, from a log or profile, or from tokens/s per device; a step derived from
    tokens/s is bounded as a stated step is (logs.measured_problem): tokens/s of 1e-300 passed its own bounds and
    gave a 1.6e304 s step that was fitted. HP803 at the tokens/s value or the log when it cannot be a step."""
    tokens_per_device = est.strategy.global_batch_size * config.model.seq_len / est.strategy.world_size \
        if config.model is not None else 0.0
    val: Val | None
    if entry.step_time_s is not None:
        return float(entry.step_time_s.value), None
    if entry.tokens_per_s_per_device is not None:
        val, key = entry.tokens_per_s_per_device, "tokens_per_s_per_device"
        tps = float(val.value)
        what = f"tokens_per_s_per_device {tps:g}"
    elif log is not None and log.steady.kind == "tokens_per_s_per_device":
        tps, val, key = log.steady.value, entry.log, "log"
        what = f"{entry.log.value if entry.log else 'log'}: its steady {tps:g} tokens/s per device"
    elif log is not None:
        return log.steady.value, None
    else:
        assert profile is not None
        return profile.step_time_s, None
    step = tokens_per_device / tps
    problem = measured_problem("step_time_s", step)
    if problem is None:
        return step, None
    rng, dotted = _at(entry, val, f"runs.{entry.index}.{key}")
    return step, Diagnostic("HP803", f"{what} gives a step of {tokens_per_device:g} tokens per device ÷ {tps:g} "
                            f"tokens/s: {problem}", rng, dotted)


# How far a profile's parts may add past the step they split: parts the profiler reports apart can overlap a
# little (a wait measured on one stream while another computes); twice the step is no profile of that step.
PARTS_OVER_STEP = 2.0


def _parts_problem(parts: dict[str, float], step: float) -> str | None:
    """Why a RUNS entry's `parts_s` cannot split its measured step (None when they can): all zero, or adding to
    more than PARTS_OVER_STEP times it (a part in other units, or another run's profile)."""
    if not parts:
        return None
    total = sum(parts.values())
    if total <= 0:
        return "parts_s are all zero: a profile splits the step it measured; give the seconds of each part"
    if total > PARTS_OVER_STEP * step:
        return (f"parts_s add to {total:g} s, over {PARTS_OVER_STEP:g}× the measured step {step:g} s: a part in "
                "other units (ms?), or another run's profile")
    return None


def _profile(entry: RunEntry, est: Estimate) -> tuple[TraceReading | None, list[Diagnostic]]:
    """The entry's profile read to its steady state, or a diagnostic on its key: unreadable, no complete step,
    or from another strategy (more devices or another world size than the config states)."""
    if entry.profile_path is None:
        return None, []
    rng, dotted = _at(entry, entry.profile, f"runs.{entry.index}.{entry.profile_kind}")
    try:
        reading = read_ascend(entry.profile_path) if entry.profile_kind == "ascend_profile" else read_trace(
            entry.profile_path)
    except TraceError as exc:
        where = f" (character {exc.offset})" if exc.offset is not None else ""
        name = str(entry.profile.value) if entry.profile else ""
        said = str(exc)
        lead = "" if said.startswith((name, os.path.basename(entry.profile_path))) else f"{name}: "  # named once
        return None, [Diagnostic(exc.code, f"{lead}{said}{where}", rng, dotted)]
    # The profile's own step is measured as a log's is (an infinite end, a zero or absurd duration refused).
    problem = measured_problem("step_time_s", reading.step_time_s)
    if problem is not None:
        return None, [Diagnostic("HP803", f"{entry.profile.value if entry.profile else ''}: the profile's steady "
                                 f"step: {problem}", rng, dotted)]
    world = est.strategy.world_size
    if (reading.world_size is not None and reading.world_size != world) or reading.devices > world:
        what = f"a world of {reading.world_size}" if reading.world_size else f"{reading.devices} devices"
        return None, [Diagnostic("HP822", f"the profile is of {what}, the config's strategy runs on {world} "
                                 "devices: it profiles another run than this config states", rng, dotted)]
    return reading, []
