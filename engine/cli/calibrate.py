"""`hp-plan calibrate RUNS [-o RATIOS] [--json] [--rule parts|local|step|compute]`: fit ratios from measured runs (docs/formats.md §6).

Text: the diagnostics (compiler-style, positioned in the RUNS file), then one row per run (measured,
uncalibrated, calibrated and leave-one-out step time; measured, uncalibrated and calibrated peak), the ratios
and which parts the step times moved, per priced part its seconds before and after, its ratio and why (and
the host part's seconds, per launch unit and why), the memory parts' ratios, and per run how each part moved. JSON: the docs/formats.md §6 document.
Exit 1 (and nothing written) when any run has an error; 0 otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TextIO

from engine.calibrate.fit import DEFAULT_RULE, Fitted, named_moved
from engine.calibrate.parts import PartsFit
from engine.calibrate.result import Calibration, calibrate, host_why
from engine.cli.check import display_path, format_line
from engine.files import write_text
from engine.jsonout import write_json
from engine.specs import HOST_PART, PRICED_PARTS, RATIO_GROUPS


def _err(pred: float | None, measured: float | None) -> str:
    if pred is None or not measured:
        return "-"
    return f"{100 * (pred / measured - 1):+.1f}%"


def _f(v: float | None, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def render(cal: Calibration, out: TextIO) -> None:
    """The human-readable report."""
    f = cal.fitted
    assert f is not None
    n = len(cal.runs)
    print(f"calibrated on {n} run{'s' if n != 1 else ''} of {cal.framework} / {cal.device_type} from "
          f"{display_path(cal.path)} (rule: {cal.rule})", file=out)
    print(f"\n{'run':<40} {'measured':>9} {'uncal':>9} {'err':>7} {'calib':>9} {'err':>7} {'l-o-o':>9} {'err':>7}"
          f"  {'peak meas':>9} {'uncal':>7} {'calib':>7}", file=out)
    for r in cal.runs:
        m = r.measured
        t = m.step_time_s
        print(f"{m.label[-40:]:<40} {t:>9.3f} {m.estimate.step_time_s:>9.3f} {_err(m.estimate.step_time_s, t):>7} "
              f"{r.calibrated_step_s:>9.3f} {_err(r.calibrated_step_s, t):>7} {_f(r.leave_one_out_step_s):>9} "
              f"{_err(r.leave_one_out_step_s, t):>7}  {_f(m.peak_memory_gib, '.2f'):>9} "
              f"{m.estimate.peak_memory_gib:>7.2f} {r.calibrated_peak_gib:>7.2f}", file=out)
    print("\nratios: " + ", ".join(f"{g} {f.ratios[g]:.4g}" for g in RATIO_GROUPS) + f"; memory {f.memory:.4g}",
          file=out)
    moved = ", ".join(named_moved(f.moved)) if f.moved else "none"
    print(f"  from profiles: {', '.join(named_moved(f.profiled)) or 'none'}; moved by the step times ({cal.rule} "
          f"rule): {moved}", file=out)
    if f.parts is not None:
        _render_verdict(f.parts, out)
    elif f.local is not None:
        lf = f.local
        verdict = ("a stack bias: every plan moves by the stack factor" if lf.biased else
                   "within the model's own spread on this stack: only plans like the runs move")
        print(f"  local rule: the runs' misfit reads as {verdict} (P(stack biased) {lf.prob_biased:.2f}, prior "
              f"{lf.prior_biased:g}, plan spread {100 * lf.plan_spread:.1f}%); each run's own misfit carries to "
              f"plans like it (length scale {lf.local.length_scale:g} doublings)", file=out)
    _render_part_table(cal, out)
    print("\nhow each part moved (seconds per step, uncalibrated -> calibrated):", file=out)
    for r in cal.runs:
        parts = [f"{p} {r.priced_before[p]:.3g} -> {r.priced_after[p]:.3g}" for p in (*PRICED_PARTS, HOST_PART)
                 if r.priced_before.get(p, 0.0) > 0 or r.priced_after.get(p, 0.0) > 0]
        print(f"  {r.measured.label[-40:]}: " + "; ".join(parts), file=out)
        if r.measured.log is not None:
            s = r.measured.log.steady
            print(f"    log ({r.measured.log.format}): {s.used} steady steps, {s.warmup} warm-up and {s.outliers} "
                  "outlier steps dropped", file=out)


def _render_verdict(pf: PartsFit, out: TextIO) -> None:
    """The parts rule's hypothesis: a stack bias or not, and how probable."""
    verdict = ("a stack bias: every part moves by the stack factor, each part besides by its own deviation"
               if pf.biased else "within the model's own spread on this stack: no stack-wide factor")
    print(f"  parts rule: the runs' misfit reads as {verdict} (P(stack biased) {pf.prob_biased:.2f}, prior "
          f"{pf.prior_biased:g}, stack factor {math.exp(pf.log_bias):.4g}, plan spread "
          f"{100 * pf.plan_spread:.1f}%); what is left of each run is its own and stays at its plan", file=out)


def _why(f: Fitted, part: str, priced: float, rule: str) -> str:
    """Why one part's ratio is what it is."""
    if part in f.profiled:
        return "measured by a profile: measured ÷ priced seconds"
    pf = f.parts
    if priced <= 0:
        moved = pf is not None and pf.biased and part in f.moved
        return "priced at nothing in these runs: " + ("takes the stack factor (no evidence of its own)" if moved
                                                      else "unchanged")
    if pf is not None and part in pf.parts:
        i = pf.parts.index(part)
        s = pf.part_spreads[i]
        stack = "the stack factor" if pf.biased else "no stack factor"
        if s < 1e-3:
            return f"{stack}; the model knows this part on this stack (no shared misfit measured): no deviation"
        own = math.exp(pf.log_ratios[i] - pf.log_bias)
        return f"{stack}, × {own:.4g} its own (prior spread {100 * s:.1f}%: its share of the runs' misfit)"
    return f"moved by the {rule} rule's factor" if part in f.moved else "not moved by this rule"


def _render_part_table(cal: Calibration, out: TextIO) -> None:
    """Per priced part, over all the runs: the priced and calibrated seconds, the ratio, and why."""
    f = cal.fitted
    assert f is not None
    print(f"\n{'part':<14} {'uncal s':>9} {'calib s':>9} {'ratio':>7}  why", file=out)
    for p in PRICED_PARTS:
        before = sum(r.priced_before.get(p, 0.0) for r in cal.runs)
        after = sum(r.priced_after.get(p, 0.0) for r in cal.runs)
        print(f"{p:<14} {before:>9.4g} {after:>9.4g} {f.part_ratios[p]:>7.4g}  {_why(f, p, before, cal.rule)}",
              file=out)
    host_after = sum(r.priced_after.get(HOST_PART, 0.0) for r in cal.runs)
    print(f"{HOST_PART:<14} {0.0:>9.4g} {host_after:>9.4g} {'+':>7}  {f.host_s_per_launch * 1e6:.4g} µs per launch "
          f"unit (layers on the slowest stage × micro-batches): {host_why(f)}", file=out)
    mf = f.memory_fit
    if mf is not None:
        print("memory parts (a measured peak, each part with its prior): " + "; ".join(
            f"{p} {r:.4g} (prior {100 * s:.2g}%)" for p, r, s in zip(mf.parts, mf.ratios, mf.spreads, strict=True)),
            file=out)


def run(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Entry point used by engine.cli.main for the `calibrate` subcommand."""
    out = out or sys.stdout
    path = str(args.file)
    as_json = bool(getattr(args, "json", False))
    output = getattr(args, "output", None)
    cal = calibrate(path, rule=str(getattr(args, "rule", DEFAULT_RULE) or DEFAULT_RULE))
    written: str | None = None
    if cal.ok and output:
        # The one safe writer (engine.files): device nodes, FIFOs and read-only files refused, symlinks written
        # through, hard links, mode and owner kept, atomic where it can be.
        failed = write_text(output, cal.ratios_text(), inputs=cal.inputs)  # never a file the calibration read
        if failed is not None:
            print(f"hp-plan calibrate: {failed.reason}", file=sys.stderr)
            if as_json:
                doc = cal.to_json()
                doc.update({"file": path, "written": None, "error": failed.reason})
                write_json(out, doc)
            return 1
        written = output
    if as_json:
        doc = cal.to_json()
        doc.update({"file": path, "written": written})
        write_json(out, doc)
        return 0 if cal.ok else 1
    for d in cal.diagnostics:
        print(format_line(d, path), file=out)
    if not cal.ok:
        print(f"hp-plan calibrate: {path}: nothing fitted, nothing written", file=out)
        return 1
    if cal.diagnostics:
        print(file=out)
    render(cal, out)
    if written:
        print(f"\nwrote {written}", file=out)
    return 0
