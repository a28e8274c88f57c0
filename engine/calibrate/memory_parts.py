"""A measured peak as evidence on the memory parts (docs/calibration.md, "Memory"): the most probable ratio of
each memory part given the runs' measured peaks, with the same MAP machinery the step time's parts use
(engine.calibrate.parts.fit_parts), instead of one ratio of sums.

The parts are the peak stage's breakdown (engine.results.MEMORY_TERMS). Their priors say how well the model
knows each: parameters, gradients and optimizer states are byte counts of what the config states (dtype ×
parameters ÷ sharding), so their spread is the floor (engine.calibrate.spreads.SHARED_FLOOR): a peak that
disagrees moves them only if nothing else can take it; activations, buffers and the allocator's reserve are
formulas with a measured error, the error band's memory spread for the framework and device class
(engine.cost.band.relative_spread, as a standard deviation), each. Each peak's own spread is the measurement's
(prior.MEASUREMENT_SD). There is no stack-wide factor as for the step time: what a stack shares in memory is its
allocator and runtime buffers, which are parts with their own spreads, and a factor on every part would scale
the byte counts too. Each run keeps its
own remaining misfit (reproduced at its plan). The ratios file carries one `memory_ratio` (docs/formats.md §6),
which every plan gets: Σ measured ÷ Σ priced peaks, clamped to [MEMORY_MIN, MEMORY_MAX], so a plan that is one
of the runs reads its measured peak back (a run's own remainder has no other home in the file); the part
ratios say where the misfit sits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from engine.calibrate.parts import fit_parts
from engine.calibrate.spreads import SHARED_FLOOR
from engine.catalog.frameworks import framework_of
from engine.cost.band import COVERAGE, relative_spread
from engine.ratios import prior
from engine.results import MEMORY_TERMS

if TYPE_CHECKING:
    from engine.calibrate.runs import Measured

MEMORY_MIN, MEMORY_MAX = 0.5, 2.0  # a peak beyond 2x either way: the config does not describe what ran
COUNTED = frozenset({"parameters", "gradients", "optimizer"})  # byte counts of what the config states
_Z = NormalDist().inv_cdf((1 + COVERAGE) / 2)


@dataclass(frozen=True, slots=True)
class MemoryFit:
    """The memory parts' MAP ratios, their prior spreads, the single ratio a ratios file carries, whether it hit
    its bound, and per run (None where it measured no peak) its own remaining log misfit."""

    parts: tuple[str, ...]
    ratios: tuple[float, ...]
    spreads: tuple[float, ...]
    ratio: float
    clamped: bool
    own: tuple[float | None, ...]

    def peak(self, breakdown: dict[str, float], own: float | None = None) -> float:
        """A plan's calibrated peak from its priced breakdown (GiB per part), with its own misfit when it is one
        of the runs."""
        base = sum(r * float(breakdown.get(p, 0.0)) for p, r in zip(self.parts, self.ratios, strict=True))
        return base * math.exp(own or 0.0)


def memory_spreads(framework: str, generation: str) -> dict[str, float]:
    """Each memory part's prior spread (log units) on this stack (module doc)."""
    estimated = relative_spread(framework, generation).memory / _Z
    return {p: SHARED_FLOOR if p in COUNTED else max(estimated, SHARED_FLOOR) for p in MEMORY_TERMS}


def fit_memory(runs: Sequence[Measured]) -> MemoryFit | None:
    """The memory parts' MAP fit on the runs that measured a peak (None when none did or none is priced)."""
    rows = [(i, m) for i, m in enumerate(runs) if m.peak_memory_gib is not None and m.estimate.peak_memory_gib > 0]
    if not rows or runs[0].config.cluster is None:
        return None
    spreads = memory_spreads(framework_of(runs[0].config.run).name, runs[0].config.cluster.device.generation)
    priced = np.asarray([[float(m.estimate.memory_breakdown_gib.get(p, 0.0)) for p in MEMORY_TERMS]
                         for _, m in rows])
    measured = np.asarray([float(m.peak_memory_gib or 0.0) for _, m in rows])
    sd = np.full(len(rows), prior.MEASUREMENT_SD)
    pf = fit_parts(MEMORY_TERMS, priced, measured, sd, [spreads[p] for p in MEMORY_TERMS], prior.MEASUREMENT_SD,
                   0.0)
    ratios = tuple(math.exp(t) for t in pf.log_ratios)
    scalar = float(measured.sum() / priced.sum())
    bounded = min(max(scalar, MEMORY_MIN), MEMORY_MAX)
    own: list[float | None] = [None] * len(runs)
    for (i, _m), e in zip(rows, pf.own, strict=True):
        own[i] = e
    return MemoryFit(MEMORY_TERMS, ratios, tuple(spreads[p] for p in MEMORY_TERMS), bounded, bounded != scalar,
                     tuple(own))
