"""Near-ties: plans within the cost model's own error band of the fastest are equivalent, and among them the
simplest wins (docs/cost-model.md, "Ranking near-ties").

Why: the step-time model's ordering of two plans is right only to its band (engine.cost.band.ordering_spread:
the plan-to-plan scatter of its errors on the stack and device, ~6 % for Megatron on A100, docs/cost-model.md
"The error band"), so ranking plans 0.3 % apart on the third decimal picks the more exotic one by noise (tp 1 ·
cp 4 at 0.3 GiB of headroom 3 % ahead of tp 4 + FSDP). Inside the band the search prefers, in this order: fewer non-data-parallel
degrees above 1 (tp, cp, pp, vpp, ep), smaller ones (Σ log2 of them), a peak outside the memory margin
of the budget, then the faster plan. Outside the band the order stays step time, then memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from engine.cost.band import own_lead, pair_spread
from engine.results import Estimate

# Inside the band, a plan whose peak is within this fraction of the budget is "tight": the memory model's
# margin (the allocator reserve and fragmentation it cannot see, docs/cost-model.md §2) may not hold there.
MEMORY_MARGIN = 0.05
# How many of the fastest rows the search prices exactly before applying the band, so the simpler plans
# inside it are there to be chosen even when more than `top` exotic variants crowd the first places.
POOL = 64

NON_DP = ("tp", "cp", "pp", "vpp", "ep")


@dataclass(frozen=True, slots=True)
class Ranked:
    """The ranked plans, best first, and which of them are equivalent to the best (within the band)."""

    estimates: tuple[Estimate, ...]
    equivalent: tuple[bool, ...]
    band: float
    # How far above the fastest plan's step the slowest equivalent one lies (a fraction): `band`, or more where
    # a tie band was widened by what the fastest plan's lead rests on (tie_band).
    reach: float = 0.0


def complexity(e: Estimate) -> tuple[int, float]:
    """(non-data-parallel degrees above 1, Σ log2 of them): what a simpler plan has less of."""
    s = e.strategy
    degrees = [s.tp, s.cp, s.pp, s.vpp if s.pipeline_schedule == "interleaved" else 1, s.ep]
    big = [d for d in degrees if d > 1]
    return len(big), sum(math.log2(d) for d in big)


def tight(e: Estimate, margin: float = MEMORY_MARGIN) -> bool:
    """The peak lies within `margin` of a finite budget."""
    b = e.budget_gib
    return math.isfinite(b) and b > 0 and e.peak_memory_gib > (1 - margin) * b


def tie_band(fastest: Estimate, other: Estimate, band: float) -> float:
    """The band within which `other` ties with `fastest` (rank_equivalent with no stated band): `band` widened by
    first contact per term the fastest plan's lead rests on and the other lacks (engine.cost.band.own_lead)."""
    return pair_spread(band, 0.0, own_lead(fastest.own_terms, other.own_terms))


def rank_equivalent(estimates: Sequence[Estimate], band: float | None = None) -> Ranked:
    """Estimates ordered by step time and memory, then the ones within `band` of the fastest moved to the
    front in the simplicity order of the module docstring; `band` None: the fastest plan's own ordering spread
    (Estimate.order_spread, engine.cost.band), widened by first contact per term the fastest plan carries and the
    other does not (Estimate.own_terms: a context parallelism no run checked), since its lead then rests on
    something no run checked. Not the other way: a slower plan's own uncertainty does not make it a tie (it
    would only rank an exotic, slower plan above a faster, simpler one just outside the band)."""
    ordered = sorted(estimates, key=lambda e: (e.step_time_s, e.peak_memory_gib))
    if not ordered:
        return Ranked((), (), band or 0.0)
    fastest = ordered[0]
    fixed = band is not None
    band = band if band is not None else fastest.order_spread

    def within(e: Estimate) -> bool:
        return e.step_time_s <= fastest.step_time_s * (1 + (band if fixed else tie_band(fastest, e, band)))

    near = [e for e in ordered if within(e)]
    rest = [e for e in ordered if not within(e)]
    reach = max((e.step_time_s / fastest.step_time_s - 1 for e in near), default=0.0) if fastest.step_time_s > 0 \
        else 0.0
    near.sort(key=lambda e: (*complexity(e), tight(e), e.step_time_s, e.peak_memory_gib))
    return Ranked(tuple(near + rest), tuple([True] * len(near) + [False] * len(rest)), band, reach)
