"""Offload in the per-layer recompute choice ([HP] §8.6; docs/cost-model.md "Offload").

With `offload` asked (and recompute per_layer), a 1F1B stage's first k layers may run with recompute off and
copy what they keep, per micro-batch, to host memory after their forward (and back before their backward)
while the later layers compute. What it costs, as the cost model prices it (engine.cost.offload):
  * memory: the stage holds none of those layers' activations but the one layer's in transit;
  * time: a plain layer's; the copies are hidden, because k is feasible only if each copy, with the copies queued
    after it on the one host link, fits in OVERLAP × the forward time of the stage's layers after it (HyperParallel's
    rule). The constraint is linear in the copy's position, so checking the first and the last copy suffices.
The rest of the stage keeps the knapsack's choice (engine.search.recompute) in the budget left beside the copy in
transit; the k with the least stage time wins, and offload is chosen only where it beats the knapsack alone
(beyond 10⁻⁹ relative rounding, [HP] §8.6). Everything is vectorised over the rows, one k at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.cost.layout import chunk_bounds
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
    """The best k ≥ 0 for every row (module docstring); k = 0 keeps `base`, the knapsack without offload."""
    n = s.counts.shape[0]
    rows = np.arange(n)
    n_first = s.counts[rows, s.first]
    total = s.counts.sum(axis=1)
    one = s.act_one[rows, s.first, OFF]
    copy_s = one / link_gib_s
    fwd_first = s.fwd[rows, s.first]
    fwd_stage = (s.counts * s.fwd).sum(axis=1)
    t_off = s.time[rows, s.first, OFF]
    best_k = np.zeros(n, dtype=np.int64)
    best_t = np.where(base.feasible, base.time, np.inf)
    counts, t_best, m_best, ok_best = base.counts.copy(), base.time.copy(), base.memory.copy(), base.feasible.copy()
    for k in range(1, int(n_first.max(initial=0)) + 1):
        live = copies_hidden(np.full(n, k), n_first, total, copy_s, fwd_first, fwd_stage)
        if not live.any():
            continue
        rest = s.counts.copy()
        rest[rows, s.first] -= np.minimum(k, n_first)
        sub = choose_stage(rest, s.act, s.time, s.budget - one)
        t = sub.time + k * t_off
        better = live & sub.feasible & (t < best_t - _FASTER * np.abs(np.where(np.isfinite(best_t), best_t, 0)))
        if not better.any():
            continue
        best_k = np.where(better, k, best_k)
        best_t = np.where(better, t, best_t)
        counts[better] = sub.counts[better]
        t_best = np.where(better, t, t_best)
        m_best = np.where(better, sub.memory + one, m_best)
        ok_best = ok_best | better
    return OffloadChoice(best_k, StageChoice(counts, t_best, m_best, ok_best))


def first_kind(pp: np.ndarray, stage: int, num_layers: int, first_dense: int) -> np.ndarray:
    """(n,) the kind of stage `stage`'s first layer (vpp 1; engine.cost.layout.chunk_bounds's split)."""
    p = np.maximum(np.asarray(pp, dtype=np.int64), 1)
    start, _ = chunk_bounds(num_layers, p, np.ones_like(p), np.full_like(p, stage))
    return np.where(start < first_dense, 0, 1).astype(np.int64)


def layer_forward(layer_time_s: np.ndarray, stage_parts: dict[str, np.ndarray], mbn: np.ndarray,
                  stage: int) -> np.ndarray:
    """(n, 2) one plain layer's forward seconds per micro-batch on `stage`: its time per micro-batch under off
    × the stage's forward share of its compute (the cost model's forward / (forward + backward))."""
    fwd = stage_parts["forward"][:, stage]
    bwd = stage_parts["backward"][:, stage]
    share = np.divide(fwd, fwd + bwd, out=np.zeros_like(fwd), where=(fwd + bwd) > 0)
    per_mb = layer_time_s[:, :, OFF] / np.maximum(np.asarray(mbn, dtype=np.float64), 1.0)[:, None]
    return per_mb * share[:, None]
