"""`calibrate(RUNS)`: read the runs, price each uncalibrated, fit, and report every run three ways.

The one call `hp-plan calibrate` and the editor's RUNS-file features make. Never raises for bad input: every
problem is a diagnostic positioned in the RUNS file, and `ok` is False when any is an error (then nothing
may be written).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.calibrate.fit import (
    DEFAULT_RULE,
    REFIT_MAX_RUNS,
    RULES,
    Fitted,
    calibrated_part_seconds,
    calibrated_parts,
    fit,
    group_seconds,
    leave_one_out,
    named_moved,
    part_seconds,
    predict_step,
    refits,
    warnings,
)
from engine.calibrate.runs import Measured, Priced, RunsFile, measure, read_runs
from engine.diagnostics import Diagnostic
from engine.files import file_identity
from engine.positions import DOCUMENT_START
from engine.ratios.ratiofile import FittedRow, local_doc, ratios_text
from engine.ratios.stack import stack_of
from engine.specs import HOST_PART, PRICED_PARTS, RATIO_GROUPS


@dataclass(frozen=True, slots=True)
class RunReport:
    """One run: measured, uncalibrated and calibrated step and peak, leave-one-out, and the parts moved."""

    measured: Measured
    calibrated_step_s: float
    leave_one_out_step_s: float | None
    calibrated_peak_gib: float
    parts_before: dict[str, float]
    parts_after: dict[str, float]
    priced_before: dict[str, float] = field(default_factory=dict)  # per priced part (engine.specs.PRICED_PARTS)
    priced_after: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        m = self.measured
        return {
            "config": m.label,
            "measured_step_s": m.step_time_s,
            "uncalibrated_step_s": m.estimate.step_time_s,
            "calibrated_step_s": self.calibrated_step_s,
            "leave_one_out_step_s": self.leave_one_out_step_s,
            "measured_peak_gib": m.peak_memory_gib,
            "uncalibrated_peak_gib": m.estimate.peak_memory_gib,
            "calibrated_peak_gib": self.calibrated_peak_gib,
            "log": ({"format": m.log.format, "steps_used": m.log.steady.used, "warmup_dropped": m.log.steady.warmup,
                     "outliers_dropped": m.log.steady.outliers} if m.log is not None else None),
            "parts_s": {g: {"uncalibrated": self.parts_before[g], "calibrated": self.parts_after[g]}
                        for g in RATIO_GROUPS},
            "time_parts_s": {p: {"uncalibrated": self.priced_before[p], "calibrated": self.priced_after[p]}
                             for p in (*PRICED_PARTS, HOST_PART) if p in self.priced_before},
            "host_launches": m.estimate.host_launches,
        }


@dataclass(frozen=True, slots=True)
class Calibration:
    path: str
    rule: str
    runs: tuple[RunReport, ...]
    fitted: Fitted | None
    framework: str
    device_type: str
    diagnostics: tuple[Diagnostic, ...]
    # Every file the calibration read (the RUNS file, each run's config, its train.yaml, log and trace): none of
    # them may be the ratios file's output (engine.files.write_text's `inputs`).
    inputs: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.fitted is not None and not any(d.is_error for d in self.diagnostics)

    def ratios_text(self) -> str:
        assert self.fitted is not None
        rows = [FittedRow(r.measured.label, r.measured.step_time_s, r.measured.estimate.step_time_s,
                          r.calibrated_step_s) for r in self.runs]
        local = self.fitted.local.local if self.fitted.local is not None else None
        f = self.fitted
        return ratios_text(self.framework, self.device_type, f.ratios, f.memory, rows, local,
                           f.part_ratios if f.parts is not None or f.split_parts else None, f.host_s_per_launch)

    def to_json(self) -> dict[str, Any]:
        f = self.fitted
        return {
            "ratios": dict(f.ratios) if f else None,
            "memory_ratio": f.memory if f else None,
            "framework": self.framework,
            "device_type": self.device_type,
            "rule": self.rule,
            "moved": list(named_moved(f.moved)) if f else [],
            "profiled": list(named_moved(f.profiled)) if f else [],
            "local": _local_json(f) if f is None or f.parts is None else None,
            "parts": _parts_json(f),
            "part_ratios": dict(f.part_ratios) if f else None,
            "memory_parts": _memory_json(f),
            "host": _host_json(f),
            "runs": [r.to_json() for r in self.runs],
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }


def _verdict_json(biased: bool, prob: float, prior: float, spread: float, log_bias: float) -> dict[str, Any]:
    """The stack-bias verdict both the local and the parts rule report, under the same keys."""
    return {"stack_biased": biased, "probability_biased": round(prob, 6), "prior_biased": prior,
            "plan_spread": spread, "stack_factor": round(math.exp(log_bias), 6)}


def _local_json(f: Fitted | None) -> dict[str, Any] | None:
    """Why the local rule split the runs' misfit as it did (null under the other rules)."""
    if f is None or f.local is None:
        return None
    lf = f.local
    return {**_verdict_json(lf.biased, lf.prob_biased, lf.prior_biased, lf.plan_spread, lf.log_bias),
            **local_doc(lf.local)}


def _parts_json(f: Fitted | None) -> dict[str, Any] | None:
    """Why the parts rule moved each part as it did (null under the other rules)."""
    if f is None or f.parts is None:
        return None
    pf = f.parts
    return {**_verdict_json(pf.biased, pf.prob_biased, pf.prior_biased, pf.plan_spread, pf.log_bias),
            "parts": {g: {"ratio": round(math.exp(t), 6), "prior_spread": s}
                      for g, t, s in zip(pf.parts, pf.log_ratios, pf.part_spreads, strict=True)},
            "own": [round(e, 6) for e in pf.own]}


def host_why(f: Fitted) -> str:
    """Why the host part (engine.specs.HOST_PART) is the size it is, in a sentence."""
    pf = f.parts
    if f.host_source == "profile":
        return ("measured: the profiles' steady-state device idle time beyond the pipeline bubble the model "
                "predicts for each plan, per launch unit (decoder layers on the slowest stage × micro-batches)")
    if f.host_source == "step times" and pf is not None:
        prior_sd = f"prior 0 ± {pf.host_prior_sd_s:g} s per step (τ0, the per-step overhead the model does not price)"
        if f.host_s_per_launch > 0:
            return (f"fitted on the step times with the parts ({prior_sd}): the runs' misfit reads in part as a "
                    "per-launch host time, so every plan adds it × its own launch units")
        return (f"fitted on the step times with the parts ({prior_sd}): the runs' misfit is not explained better by "
                "host time than by the parts, so it stays 0")
    if pf is not None:
        return ("not fitted: on a stack the model was fitted on, the runs' shared misfit was measured at nothing, "
                "so a step time's misfit stays at its own plan and is not read as host time; a profile measures it")
    return "not fitted (this rule fits no host part, and no profile measured it): 0 s"


def _host_json(f: Fitted | None) -> dict[str, Any] | None:
    """The host part: its seconds per launch unit, where they come from, the prior spread and why."""
    if f is None:
        return None
    pf = f.parts
    return {"s_per_launch": f.host_s_per_launch, "source": f.host_source or None,
            "prior_spread_s": pf.host_prior_sd_s if pf is not None and f.host_source == "step times" else None,
            "why": host_why(f)}


def _memory_json(f: Fitted | None) -> dict[str, Any] | None:
    """The memory parts' ratios and prior spreads (null when no run measured a peak)."""
    if f is None or f.memory_fit is None:
        return None
    mf = f.memory_fit
    return {p: {"ratio": round(r, 6), "prior_spread": s} for p, r, s in zip(mf.parts, mf.ratios, mf.spreads,
                                                                            strict=True)}


def _stack_check(runs_file: RunsFile, measured: list[Measured]) -> tuple[str, str, list[Diagnostic]]:
    stacks = [stack_of(m.config) for m in measured]
    first = stacks[0]
    out: list[Diagnostic] = []
    for m, st in zip(measured, stacks, strict=True):
        if st != first:
            e = m.entry
            rng = e.config.loc.value if e.config is not None else e.at
            out.append(Diagnostic("HP808", f"this run is {st[0]} on {st[1]}, the first is {first[0]} on {first[1]}: "
                                  "ratios apply to one framework and device type; calibrate each stack from its "
                                  "own RUNS file", rng, f"runs.{e.index}.config"))
    return first[0], first[1], out


# The most runs the rule `local` fits: its pairwise kernel and one refit per run left out grow faster than n²
# (100 runs 5 s, 400 runs up to 534 s, 1,000 runs past 2 minutes on 2 shared cores,
# docs/calibration.md); the other rules are linear and take up to MAX_RUNS (engine.calibrate.runs), but for the
# leave-one-out of `parts` on profiled runs, refitted up to fit.REFIT_MAX_RUNS (HP815 past it).
LOCAL_MAX_RUNS = 100


def _over_local_limit(runs_file: RunsFile, rule: str) -> Diagnostic | None:
    """HP800 at the first run when the rule `local` is asked for more runs than it fits in bounded time."""
    n = len(runs_file.entries)
    if rule != "local" or n <= LOCAL_MAX_RUNS:
        return None
    return Diagnostic("HP800", f"the rule local fits at most {LOCAL_MAX_RUNS} runs, this file lists {n:,}: use "
                      "the rule parts, or keep the runs that differ", runs_file.entries[0].at, "runs")


def calibrate(path: str, text: str | None = None, rule: str = DEFAULT_RULE) -> Calibration:
    """Calibrate on the RUNS file at `path` (or the editor buffer `text` for it) under `rule` (fit.RULES)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; one of {RULES}")
    runs_file = read_runs(path, text)
    over = _over_local_limit(runs_file, rule)
    if over is not None:
        return Calibration(path, rule, (), None, "", "", (*runs_file.diagnostics, over))
    diags = list(runs_file.diagnostics)
    measured: list[Measured] = []
    priced: Priced = {}
    for entry in runs_file.entries:
        m, more = measure(runs_file, entry, priced)
        diags += more
        if m is not None:
            measured.append(m)
    if not measured or any(d.is_error for d in diags):
        if not measured and not any(d.is_error for d in diags):
            diags.append(Diagnostic("HP800", "no run could be measured", DOCUMENT_START, "runs"))
        return Calibration(path, rule, (), None, "", "", tuple(diags))
    framework, device, more = _stack_check(runs_file, measured)
    diags += more + _repeats_apart(measured)
    fitted = fit(measured, rule)
    runs_node = runs_file.entries[0].at if runs_file.entries else DOCUMENT_START
    diags += warnings(fitted, runs_node, measured)
    loo = leave_one_out(measured, rule)
    if refits(measured, rule) and len(measured) > REFIT_MAX_RUNS:
        diags.append(Diagnostic("HP815", f"no leave-one-out predictions: under the rule {rule}, runs with profiled "
                                f"parts are left out by refitting the others, run by run, for at most "
                                f"{REFIT_MAX_RUNS} runs (this file has {len(measured):,}); the fit itself uses every "
                                "run", runs_node, "runs"))
    reports = []
    for i, (m, lo) in enumerate(zip(measured, loo, strict=True)):
        mf = fitted.memory_fit
        peak = (mf.peak(dict(m.estimate.memory_breakdown_gib), mf.own[i]) if mf is not None
                else m.estimate.peak_memory_gib * fitted.memory)
        reports.append(RunReport(m, predict_step(m, fitted), lo, peak, group_seconds(m), calibrated_parts(m, fitted),
                                 {**part_seconds(m), HOST_PART: 0.0}, calibrated_part_seconds(m, fitted)))
    diags += _not_reproduced(reports)
    return Calibration(path, rule, tuple(reports), fitted, framework, device, tuple(diags),
                       _inputs(path, runs_file, measured))


# How far a run's calibrated step may lie from its measured one before HP807 says the calibration does not
# reproduce it: several runs share ratios and need not each land exactly, but a quarter off is the fit failing.
NOT_REPRODUCED = 0.25


def _not_reproduced(reports: list[RunReport]) -> list[Diagnostic]:
    """HP807 at each run the fitted ratios leave more than NOT_REPRODUCED from its measurement (a ratio held at a
    bound, a host part held at what a ratios file carries, runs that contradict one another)."""
    out: list[Diagnostic] = []
    for r in reports:
        m = r.measured
        if m.step_time_s <= 0:
            continue
        off = r.calibrated_step_s / m.step_time_s - 1
        if abs(off) > NOT_REPRODUCED:
            out.append(Diagnostic("HP807", f"runs.{m.entry.index} is not reproduced: calibrated "
                                  f"{r.calibrated_step_s:.4g} s against its measured {m.step_time_s:.4g} s "
                                  f"({100 * off:+.0f}%): its config may not describe what ran, or the measurement is "
                                  "in other units", m.entry.at, f"runs.{m.entry.index}"))
    return out


# How far apart two measurements of one plan may lie before HP812 says so: run-to-run noise on one cluster is a
# few percent; a quarter is another run (a slow node, a different release, a config that does not say what ran).
REPEAT_APART = 0.25


def _repeats_apart(measured: list[Measured]) -> list[Diagnostic]:
    """HP812 at each run whose step lies more than REPEAT_APART from an earlier run of the same plan (one config,
    one strategy): the fit takes what they share, and a user should know it averaged two different runs. Also at a
    run that reads the log or profile an earlier run read (the same file or folder, through a link too): one
    measurement weighed twice."""
    first: dict[tuple[object, ...], Measured] = {}
    out: list[Diagnostic] = []
    sources: dict[tuple[int, int], Measured] = {}
    for m in measured:
        source = m.entry.log_path or m.entry.profile_path
        ident = file_identity(source) if source else None
        twin = sources.get(ident) if ident is not None else None
        if twin is not None:  # one file twice, or through a link or an alias of the entry: one measurement
            what = "log" if m.entry.log_path else "profile"
            out.append(Diagnostic("HP812", f"runs {twin.entry.index} and {m.entry.index} read the same {what} "
                                  f"({source}): one measurement counts twice in the fit; give each run "
                                  "its own", m.entry.at, f"runs.{m.entry.index}"))
        elif ident is not None:
            sources[ident] = m
        key = (m.label, m.estimate.strategy, m.estimate.device)
        seen = first.setdefault(key, m)
        if seen is m or twin is not None:
            continue
        lo, hi = sorted((seen.step_time_s, m.step_time_s))
        if hi > lo * (1 + REPEAT_APART):
            out.append(Diagnostic("HP812", f"runs {seen.entry.index} and {m.entry.index} are one plan ({m.label}) "
                                  f"measured {100 * (hi / lo - 1):.0f}% apart ({seen.step_time_s:g} s and "
                                  f"{m.step_time_s:g} s): the fit reads both as that plan; check that each ran what "
                                  "the config states", m.entry.at, f"runs.{m.entry.index}"))
    return out


def _inputs(path: str, runs_file: RunsFile, measured: list[Measured]) -> tuple[str, ...]:
    """Calibration.inputs: the RUNS file, every entry's config, log and profile, and the files the configs read
    (their train.yaml, the model's local config.json, the ratios file)."""
    read = [path]
    for e in runs_file.entries:
        read += [p for p in (e.config_path, e.log_path, e.profile_path) if p]
    for m in measured:
        read += [p for p in (m.config.train_yaml, m.config.model_file, m.config.ratios_file) if p]
        read += list(m.profile.files) if m.profile is not None else []  # a trace folder's per-rank files
    return tuple(dict.fromkeys(read))
