"""Calibration in the editor: hover over a RUNS file's run, and a code lens on `estimator.ratios_file`.

- Hover on a run of a RUNS file (docs/formats.md §6): its measured step time and peak against the uncalibrated and
  the calibrated model (and the leave-one-out prediction when there are several runs), from the analysis'
  calibration (engine.calibrate.result), never recomputed here.
- Code lens on a search config's `estimator.ratios_file`: what calibration changed for the stated plan
  (step time and peak, uncalibrated -> calibrated) and on how many runs of which stack it was fitted.
"""

from __future__ import annotations

from dataclasses import replace

from engine.calibrate.result import Calibration, RunReport
from engine.cost import estimate_config
from engine.positions import Range
from hp_lsp.features.code_lens import Lens
from hp_lsp.session import DocState

RATIOS_KEY = "estimator.ratios_file"


def _contains(rng: Range, line: int) -> bool:
    return rng.start.line <= line <= max(rng.end.line - (1 if rng.end.character == 0 else 0), rng.start.line)


def _pct(pred: float | None, measured: float | None) -> str:
    if pred is None or not measured:
        return ""
    return f" ({100 * (pred / measured - 1):+.1f}%)"


def _row(name: str, measured: float | None, uncal: float, cal: float, loo: float | None, unit: str,
         fmt: str) -> str:
    m = format(measured, fmt) + unit if measured is not None else "not measured"
    out = f"| {name} | {m} | {format(uncal, fmt)}{unit}{_pct(uncal, measured)} | {format(cal, fmt)}{unit}" \
          f"{_pct(cal, measured)} |"
    if loo is not None:
        out += f" {format(loo, fmt)}{unit}{_pct(loo, measured)} |"
    return out


def run_hover(cal: Calibration, report: RunReport) -> str:
    """Markdown for one run: measured vs uncalibrated vs calibrated (vs leave-one-out)."""
    m = report.measured
    loo = report.leave_one_out_step_s
    head = "| | measured | uncalibrated | calibrated |" + (" leave-one-out |" if loo is not None else "")
    sep = "|---|---|---|---|" + ("---|" if loo is not None else "")
    lines = [f"**Run {m.label}** — {cal.framework} / {cal.device_type}, {m.estimate.strategy.short()}", "",
             head, sep,
             _row("step time", m.step_time_s, m.estimate.step_time_s, report.calibrated_step_s, loo, " s", ".3f"),
             _row("peak memory", m.peak_memory_gib, m.estimate.peak_memory_gib, report.calibrated_peak_gib, None,
                  " GiB", ".2f")]
    if m.profile is not None:
        pr = m.profile
        lines += ["", f"From the profile: {pr.used} steady steps ({pr.warmup} warm-up dropped) on {pr.devices} "
                  f"device{'s' if pr.devices != 1 else ''}."]
    if m.log is not None:
        s = m.log.steady
        lines += ["", f"From the {m.log.format} log: {s.used} steady steps ({s.warmup} warm-up, {s.outliers} "
                  "outliers dropped)."]
    f = cal.fitted
    if f is not None:
        n = len(cal.runs)
        lines += ["", f"Calibrated on {n} run{'s' if n != 1 else ''} ({cal.rule} rule): "
                  + ", ".join(f"{g} ×{r:.3g}" for g, r in f.ratios.items()) + f"; memory ×{f.memory:.3g}"]
        if f.host_s_per_launch > 0:
            lines += ["", f"Host time ({f.host_source}): {f.host_s_per_launch * 1e6:.4g} µs per launch unit × this "
                      f"run's {m.estimate.host_launches:g} units = {report.priced_after.get('host', 0.0):.3g} s per "
                      "step; another plan adds it × its own launch units."]
        if f.local is not None:
            lf = f.local
            verdict = ("a stack bias: every plan of the stack moves" if lf.biased else
                       "within the model's own spread here: only plans like these runs move")
            carried = ("each part moves by its own ratio; what is left of each run stays at its plan"
                       if f.parts is not None else "each run's own misfit carries to plans like it")
            lines += ["", f"The runs' misfit reads as {verdict} (P(stack biased) {lf.prob_biased:.2f}); "
                      f"{carried}."]
    return "\n".join(lines)


def runs_hover(cal: Calibration, line: int) -> str | None:
    """The hover of the run whose entry spans `line`, or None."""
    for report in cal.runs:
        if _contains(report.measured.entry.at, line):
            return run_hover(cal, report)
    return None


def ratios_lenses(state: DocState) -> list[Lens]:
    """A lens on `estimator.ratios_file` saying what the ratios change for the stated plan."""
    analysis = state.analysis
    config = analysis.config if analysis is not None else None
    if config is None or config.run.ratios is None:
        return []
    loc = config.locations.get(RATIOS_KEY)
    if loc is None or (loc.file and config.path and loc.file != config.path):
        return []
    ratios = config.run.ratios
    where = f"{ratios.runs} run{'s' if ratios.runs != 1 else ''}"
    stack = f" of {ratios.framework} / {ratios.device_type}" if ratios.framework or ratios.device_type else ""
    after = analysis.estimate if analysis is not None else None
    before = None
    if after is not None:
        before, _ = estimate_config(replace(config, run=replace(config.run, ratios=None)))
    if before is None or after is None:
        moved = ", ".join(f"{g} ×{r:.3g}" for g, r in ratios.time if abs(r - 1) > 1e-9) or "no time part"
        return [Lens(loc.key, f"Calibrated on {where}{stack}: {moved}; memory ×{ratios.memory:.3g}", "")]
    title = (f"Calibrated on {where}{stack}: step {before.step_time_s:.2f} → {after.step_time_s:.2f} s, "
             f"peak {before.peak_memory_gib:.1f} → {after.peak_memory_gib:.1f} GiB")
    return [Lens(loc.key, title, "")]
