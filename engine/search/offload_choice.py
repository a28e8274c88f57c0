"""Offload in the per-layer recompute choice ([HP] §8.6; docs/cost-model.md "Offload").

With `offload` asked (and recompute per_layer), a 1F1B stage's first k layers may run with recompute off and
copy what they keep, per micro-batch, to host memory after their forward (and back before their backward)
while the later layers compute. What it costs, as the cost model prices it (engine.cost.offload):
  * memory: the stage holds none of those layers' activations but the one layer's in transit;
  * time: a plain layer's; the copies are hidden, because k is feasible only if each copy, with the copies queued
    after it on the one host link, fits in OVERLAP × the forward time of the stage's layers after it (HyperParallel's
    rule). The constraint is linear in the copy's position, so checking the first and the last copy suffices.
The rest of the stage keeps the knapsack's choice (engine.search.recompute) in the budget left beside the copy in
transit; the fewest layers that reach the least stage time win, and offload is chosen only where it beats the
knapsack alone (beyond 10⁻⁹ relative rounding, [HP] §8.6). Everything is vectorised over the rows: the stage
time falls with k, so a bisection over k finds it in log₂(layers) knapsacks (choose_offload).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.cost.offload import OVERLAP
from engine.search.recompute import StageChoice, choose_stage

OFF = 0
# "Chosen only if faster": beyond this relative rounding ([HP] §8.6, 10⁻⁹).
_FASTER = 1e-9


@dataclass(frozen=True, slots=True)
class StageInputs:
    """One stage of every row, as the knapsack sees it: counts (n, 2) layers per kind; act (n, 2, 3) GiB a layer
    holds at the stage's peak per mode; act_one (n, 2, 3) GiB per micro-batch; time (n, 2, 3) s per step per
    layer; fwd (n, 2) one layer's forward seconds per micro-batch; budget (n,) GiB the layers may hold; first
    (n,) the kind (0 dense, 1 MoE) of the stage's first layer."""

    counts: np.ndarray
    act: np.ndarray
    act_one: np.ndarray
    time: np.ndarray
    fwd: np.ndarray
    budget: np.ndarray
    first: np.ndarray


@dataclass(frozen=True, slots=True)
class OffloadChoice:
    """k (n,) layers offloaded at the stage's front (0 = none) and the knapsack's choice for the others."""

    k: np.ndarray
    rest: StageChoice


def copies_hidden(k: np.ndarray, n_first: np.ndarray, total: np.ndarray, copy_s: np.ndarray, fwd_first: np.ndarray,
                  fwd_stage: np.ndarray) -> np.ndarray:
    """Whether offloading the first k layers (all of the first kind, `n_first` of them lead the stage) hides every
    copy: for each offloaded layer i (0-based), the copies of layers i..k-1 fit in OVERLAP × the forward time of
    the layers after i, fwd_stage − (i + 1)·fwd_first. Linear in i: i = 0 and i = k − 1 decide."""
    first = k * copy_s <= OVERLAP * (fwd_stage - fwd_first) * (1 + _FASTER)
    last = copy_s <= OVERLAP * (fwd_stage - k * fwd_first) * (1 + _FASTER)
    return (k >= 1) & (k <= n_first) & (k <= total - 1) & first & last


def choose_offload(s: StageInputs, base: StageChoice, link_gib_s: float) -> OffloadChoice:
    """The best k ≥ 0 for every row (module docstring); k = 0 keeps `base`, the knapsack without offload.

    Offloading one more leading layer never slows the stage nor adds memory (that layer takes a plain layer's
    time, the least of any mode, and holds nothing once k ≥ 1 pays for the one copy in transit), so the stage
    time falls with k down to the largest feasible k, kmax. The smallest k reaching that time is found by a
    bisection over the rows at once: the fewest layers offloaded for the fastest stage."""
    n = s.counts.shape[0]
    rows = np.arange(n)
    n_first = s.counts[rows, s.first]
    total = s.counts.sum(axis=1)
    one = s.act_one[rows, s.first, OFF]
    copy_s = one / link_gib_s
    fwd_first = s.fwd[rows, s.first]
    fwd_stage = (s.counts * s.fwd).sum(axis=1)
    kmax = np.zeros(n, dtype=np.int64)
    for j in range(1, int(n_first.max(initial=0)) + 1):  # the copies' rule tightens with k: kmax is the last
        kmax = np.where(copies_hidden(np.full(n, j), n_first, total, copy_s, fwd_first, fwd_stage), j, kmax)
    top = _with_k(s, np.maximum(kmax, 1), one)
    use = (kmax >= 1) & top.feasible & (top.time < np.where(base.feasible, base.time, np.inf)
                                         - _FASTER * np.abs(np.where(base.feasible, base.time, 0.0)))
    lo, hi = np.ones(n, dtype=np.int64), np.maximum(kmax, 1)  # the answer lies in [lo, hi]
    while (lo < hi)[use].any():
        mid = (lo + hi) // 2
        at = _with_k(s, mid, one)
        reached = at.feasible & (at.time <= top.time + 1e-12 * np.abs(top.time))
        hi = np.where(use & (lo < hi) & reached, mid, hi)
        lo = np.where(use & (lo < hi) & ~reached, mid + 1, lo)
    k = np.where(use, hi, 0)
    best = _with_k(s, np.maximum(k, 1), one)
    pick = use[:, None]
    return OffloadChoice(k, StageChoice(np.where(pick, best.counts, base.counts), np.where(use, best.time, base.time),
                                        np.where(use, best.memory, base.memory), base.feasible | use))


def _with_k(s: StageInputs, k: np.ndarray, one: np.ndarray) -> StageChoice:
    """The stage with its first k (n,) layers offloaded: the knapsack over the others in the budget less the copy
    in transit; time and memory include the offloaded layers (a plain layer's time; the copy in transit)."""
    rows = np.arange(len(k))
    rest = s.counts.copy()
    rest[rows, s.first] -= np.minimum(k, rest[rows, s.first])
    sub = choose_stage(rest, s.act, s.time, s.budget - one)
    return StageChoice(sub.counts, sub.time + k * s.time[rows, s.first, OFF], sub.memory + one, sub.feasible)


def first_kind(counts: np.ndarray, stage: int, first_dense: int) -> np.ndarray:
    """(n,) the kind of stage `stage`'s first layer: each stage holds the next counts[:, s] (n, P, 2) layers in
    model order, whatever layout the cost model priced (engine.search.layer_plans.stage_layers), and the dense layers
    lead the model."""
    start = counts[:, :stage].sum(axis=(1, 2))
    return np.where(start < first_dense, 0, 1).astype(np.int64)
