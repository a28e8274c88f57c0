"""Two plans side by side (`hp-plan compare`, docs/formats.md §7): every time and memory term, the speedup in
tokens/s at the same global batch size, the terms that make the difference, and whether the gap is inside
the cost model's error band.

Error band: each plan's ordering spread (engine.cost.band.ordering_spread, the plan-to-plan scatter of the
model's errors on its stack and device, docs/cost-model.md "The error band"), combined for the two plans in
quadrature (pair_spread, g): a speedup between 1/(1 + g) and 1 + g is not a difference the model can vouch for
(about ±8 % for Megatron on A100).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.cost.band import own_difference, pair_spread
from engine.diagnostics import Diagnostic
from engine.results import MEMORY_TERMS, TIME_TERMS, Estimate

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

    @property
    def error_band(self) -> tuple[float, float]:
        return error_band(self.a, self.b)

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a.to_json(), "b": self.b.to_json(), "speedup": self.speedup,
                "within_error": self.within_error, "error_band": list(self.error_band),
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


def error_band(a: Estimate, b: Estimate) -> tuple[float, float]:
    """(low, high) speedups of b over a the model cannot tell from 1 (the module docstring)."""
    g = pair_spread(a.order_spread, b.order_spread, own_difference(a.own_terms, b.own_terms))
    return 1 / (1 + g), 1 + g


def compare(a: Estimate, b: Estimate, *, moe: bool = False, diagnostics: tuple[Diagnostic, ...] = ()) -> Comparison:
    """Compare plan b with plan a (speedup = tokens/s of b over a; same global batch size assumed)."""
    speedup = b.tokens_per_s / a.tokens_per_s if a.tokens_per_s > 0 else float("inf")
    low, high = error_band(a, b)
    within = low <= speedup <= high
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
                                f"{low:.3f}-{high:.3f}× for these two plans ({a.step_band} and {b.step_band} per "
                                "step, docs/cost-model.md \"The error band\"): measure both before choosing"))
    if moe:
        diags.append(Diagnostic("HP752", f"MoE step times carry a wider band ({a.step_band} here): the MoE runs "
                                "the model was checked on are few (docs/cost-model.md \"The error band\")"))
    return Comparison(a, b, speedup, within, tuple(time_diff + mem_diff), tuple(terms), tuple(diags))
