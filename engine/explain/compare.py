"""Two plans side by side (`hp-plan compare`, docs/formats.md §7): every time and memory term, the speedup in
tokens/s at the same global batch size, the terms that make the difference, and whether the gap is inside
the cost model's error band.

Error band: the model's median absolute step-time error is 3.4 % over the 40 published step times it is
checked against (docs/cost-model.md §5, `benchmarks/accuracy.py`). Two predictions each that far off in
opposite directions give a ratio between (1 − e)/(1 + e) and (1 + e)/(1 − e), about ±7 %; a speedup
inside that is not a difference the model can vouch for. MoE step times are uncalibrated (no MoE run in
the calibration set), which the comparison says when either plan is MoE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.diagnostics import Diagnostic
from engine.results import MEMORY_TERMS, TIME_TERMS, Estimate

MEDIAN_STEP_ERROR = 0.034  # docs/cost-model.md §5: median |e| over the 40 step-time cases
BAND_LOW = (1 - MEDIAN_STEP_ERROR) / (1 + MEDIAN_STEP_ERROR)
BAND_HIGH = (1 + MEDIAN_STEP_ERROR) / (1 - MEDIAN_STEP_ERROR)
SUMMARY = ("step_time_s", "tokens_per_s", "tokens_per_s_per_device", "mfu", "peak_memory_gib")


@dataclass(frozen=True, slots=True)
class Difference:
    """One term of the two estimates: `term` is its JSON path in ESTIMATE (time_breakdown_s.tp_comm)."""

    term: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.b - self.a

    def to_json(self) -> dict[str, Any]:
        return {"term": self.term, "a": self.a, "b": self.b, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class Comparison:
    a: Estimate
    b: Estimate
    speedup: float
    within_error: bool
    differences: tuple[Difference, ...]  # the terms that differ, largest first (time, then memory)
    terms: tuple[Difference, ...]  # every term, in ESTIMATE order
    diagnostics: tuple[Diagnostic, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a.to_json(), "b": self.b.to_json(), "speedup": self.speedup,
                "within_error": self.within_error, "error_band": [BAND_LOW, BAND_HIGH],
                "differences": [d.to_json() for d in self.differences],
                "terms": [d.to_json() for d in self.terms],
                "diagnostics": [d.to_json() for d in self.diagnostics]}


def all_terms(a: Estimate, b: Estimate) -> list[Difference]:
    """Summary figures, every time term, every memory term (peak stage), per-stage memory."""
    out = [Difference(k, float(getattr(a, k)), float(getattr(b, k))) for k in SUMMARY]
    out += [Difference(f"time_breakdown_s.{k}", a.time_breakdown_s[k], b.time_breakdown_s[k]) for k in TIME_TERMS]
    out += [Difference(f"memory_breakdown_gib.{k}", a.memory_breakdown_gib[k], b.memory_breakdown_gib[k])
            for k in MEMORY_TERMS]
    return out


def compare(a: Estimate, b: Estimate, *, moe: bool = False, diagnostics: tuple[Diagnostic, ...] = ()) -> Comparison:
    """Compare plan b with plan a (speedup = tokens/s of b over a; same global batch size assumed)."""
    speedup = b.tokens_per_s / a.tokens_per_s if a.tokens_per_s > 0 else float("inf")
    within = BAND_LOW <= speedup <= BAND_HIGH
    terms = all_terms(a, b)
    scale_t = max(a.step_time_s, b.step_time_s, 1e-30)
    scale_m = max(a.peak_memory_gib, b.peak_memory_gib, 1e-30)
    time_diff = [d for d in terms if d.term.startswith("time_") and abs(d.delta) > 1e-3 * scale_t]
    mem_diff = [d for d in terms if d.term.startswith("memory_") and abs(d.delta) > 1e-3 * scale_m]
    time_diff.sort(key=lambda d: -abs(d.delta))
    mem_diff.sort(key=lambda d: -abs(d.delta))
    diags = list(diagnostics)
    if within:
        diags.append(Diagnostic("HP752", f"b is {speedup:.3f}× a in tokens/s, inside the cost model's error band "
                                f"{BAND_LOW:.3f}-{BAND_HIGH:.3f}× (median step-time error "
                                f"{100 * MEDIAN_STEP_ERROR:.1f}% per plan, docs/cost-model.md §5): measure both "
                                "before choosing"))
    if moe:
        diags.append(Diagnostic("HP752", "MoE step times are not calibrated (no MoE run in the calibration set): "
                                "the error band above is the dense models' and likely too narrow"))
    return Comparison(a, b, speedup, within, tuple(time_diff + mem_diff), tuple(terms), tuple(diags))
