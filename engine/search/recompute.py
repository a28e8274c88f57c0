"""Recompute choice per candidate: one mode for every layer (`auto`) or a mode per layer (`per_layer`).

`per_layer` is HyperParallel's multiple-choice knapsack per pipeline stage ([HP] §8.5): each body
layer of a stage takes one of the modes off / selective / full, each with a memory it keeps (per micro-batch,
times the micro-batches the stage holds in flight) and a time it costs; the stage's layers must fit the
stage's budget (the device budget less everything that is not a body layer's kept activations), and the
stage's time is minimised. Stages are independent ([HP] §8.5 "stages are solved independently").

HyperParallel solves it with a dynamic programme over 1 MiB buckets. Layers of one kind are identical items,
so the problem is much smaller than it looks: with three modes, fixing how many layers take one mode leaves a
two-option problem whose optimum is closed-form (as many of the faster option as the memory allows). Looping
over that count (at most a stage's layer count) solves every candidate's stage at once, exactly, as numpy
arrays. A stage with several layer kinds (DeepSeek's first dense layers beside its MoE layers) enumerates the
compositions of the smaller kinds and solves the largest kind in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

# Memory comparisons allow this relative slack so float noise cannot flip a plan that fits exactly.
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class StageChoice:
    """The optimum for each row: `counts[r, m]` layers take mode m; `time`/`memory` are the layers' totals;
    `feasible[r]` is False where even the lightest choice exceeds the budget."""

    counts: np.ndarray  # (R, M) int
    time: np.ndarray  # (R,)
    memory: np.ndarray  # (R,)
    feasible: np.ndarray  # (R,) bool


def _two_options(r: np.ndarray, cap: np.ndarray, mx: np.ndarray, tx: np.ndarray, my: np.ndarray,
                 ty: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """r identical layers, each option x or y, total memory <= cap, minimum time. Returns (n_x, time, ok)."""
    # Let "fast" be the option with less time (ties: less memory).
    x_fast = (tx < ty) | ((tx == ty) & (mx <= my))
    mf = np.where(x_fast, mx, my)
    tf = np.where(x_fast, tx, ty)
    ms = np.where(x_fast, my, mx)
    ts = np.where(x_fast, ty, tx)
    slack = np.abs(cap) * _EPS + 1e-6
    # If the fast option also needs no more memory, it dominates: all fast.
    dominated = mf <= ms
    lightest = r * np.minimum(mf, ms)
    ok = lightest <= cap + slack
    gap = mf - ms
    with np.errstate(divide="ignore", invalid="ignore"):
        n_fast_mem = np.floor((cap + slack - r * ms) / np.where(gap > 0, gap, 1.0))
    n_fast = np.where(dominated, r, np.clip(n_fast_mem, 0, r)).astype(np.int64)
    n_fast = np.where(ok, n_fast, 0)
    time = n_fast * tf + (r - n_fast) * ts
    n_x = np.where(x_fast, n_fast, r - n_fast)
    return n_x, time, ok


def choose_counts(count: np.ndarray, mem: np.ndarray, time: np.ndarray, budget: np.ndarray) -> StageChoice:
    """Exact multiple-choice knapsack for `count[r]` identical layers with 1, 2 or 3 options.

    mem, time: (R, M) per layer per option (memory already multiplied by the micro-batches in flight);
    budget: (R,) memory the layers may keep. Ties in time go to less memory, then to the lower option index.
    """
    count = np.asarray(count, dtype=np.int64)
    mem = np.asarray(mem, dtype=np.float64)
    time = np.asarray(time, dtype=np.float64)
    budget = np.asarray(budget, dtype=np.float64)
    n_rows, n_opt = mem.shape
    if n_opt == 1:
        tot_m = count * mem[:, 0]
        ok = tot_m <= budget + np.abs(budget) * _EPS + 1e-6
        return StageChoice(count[:, None].copy(), count * time[:, 0], tot_m, ok)
    if n_opt == 2:
        n_x, t, ok = _two_options(count, budget, mem[:, 0], time[:, 0], mem[:, 1], time[:, 1])
        counts = np.stack([n_x, count - n_x], axis=1)
        return StageChoice(counts, t, (counts * mem).sum(axis=1), ok)
    if n_opt != 3:
        raise ValueError("choose_counts handles up to three recompute options")
    best_t = np.full(n_rows, np.inf)
    best_m = np.full(n_rows, np.inf)
    best = np.zeros((n_rows, 3), dtype=np.int64)
    for k in range(int(count.max(initial=0)) + 1):
        # k layers take option 2 (the lightest, full recompute, by convention; any option would be exact).
        live = count >= k
        rest = count - k
        cap = budget - k * mem[:, 2]
        n0, t, ok = _two_options(rest, cap, mem[:, 0], time[:, 0], mem[:, 1], time[:, 1])
        t = t + k * time[:, 2]
        m = n0 * mem[:, 0] + (rest - n0) * mem[:, 1] + k * mem[:, 2]
        better = live & ok & ((t < best_t) | ((t == best_t) & (m < best_m)))
        best_t = np.where(better, t, best_t)
        best_m = np.where(better, m, best_m)
        best[better] = np.stack([n0, rest - n0, np.full(n_rows, k)], axis=1)[better]
    feasible = np.isfinite(best_t)
    return StageChoice(best, np.where(feasible, best_t, np.inf), np.where(feasible, best_m, np.inf), feasible)


def choose_stage(counts: np.ndarray, mem: np.ndarray, time: np.ndarray, budget: np.ndarray) -> StageChoice:
    """A stage holding several layer kinds: counts (R, K), mem/time (R, K, M), budget (R,).

    Returns counts (R, K*M) flattened kind-major. The largest kind (by max count) is solved in closed form
    for every composition of the others, which are enumerated; DeepSeek's three dense layers make 10."""
    counts = np.asarray(counts, dtype=np.int64)
    n_rows, n_kinds = counts.shape
    n_opt = mem.shape[2]
    if n_kinds == 1:
        c = choose_counts(counts[:, 0], mem[:, 0], time[:, 0], budget)
        return c
    main = int(np.argmax(counts.max(axis=0)))
    others = [k for k in range(n_kinds) if k != main]
    best_t = np.full(n_rows, np.inf)
    best_m = np.full(n_rows, np.inf)
    best = np.zeros((n_rows, n_kinds, n_opt), dtype=np.int64)
    # Compositions of each other kind's count into n_opt parts, up to that kind's largest count.
    comps = []
    for k in others:
        cmax = int(counts[:, k].max(initial=0))
        comps.append([c for c in product(range(cmax + 1), repeat=n_opt) if sum(c) <= cmax])
    for choice in product(*comps):
        live = np.ones(n_rows, dtype=bool)
        used_m = np.zeros(n_rows)
        used_t = np.zeros(n_rows)
        for k, comp in zip(others, choice, strict=True):
            live &= counts[:, k] == sum(comp)
            comp_a = np.asarray(comp, dtype=np.float64)
            used_m += mem[:, k] @ comp_a
            used_t += time[:, k] @ comp_a
        if not live.any():
            continue
        sub = choose_counts(counts[:, main], mem[:, main], time[:, main], budget - used_m)
        t = sub.time + used_t
        m = sub.memory + used_m
        better = live & sub.feasible & ((t < best_t) | ((t == best_t) & (m < best_m)))
        if not better.any():
            continue
        best_t = np.where(better, t, best_t)
        best_m = np.where(better, m, best_m)
        for k, comp in zip(others, choice, strict=True):
            best[better, k] = np.asarray(comp, dtype=np.int64)
        best[better, main] = sub.counts[better]
    feasible = np.isfinite(best_t)
    return StageChoice(best.reshape(n_rows, n_kinds * n_opt), best_t, best_m, feasible)


def brute_force(count: int, mem: list[float], time: list[float], budget: float) -> tuple[float, tuple[int, ...]]:
    """Reference solver for tests: every composition of `count` layers into the options."""
    best: tuple[float, float, tuple[int, ...]] = (np.inf, np.inf, ())
    for comp in product(range(count + 1), repeat=len(mem)):
        if sum(comp) != count:
            continue
        m = sum(c * x for c, x in zip(comp, mem, strict=True))
        if m > budget + abs(budget) * _EPS + 1e-6:
            continue
        t = sum(c * x for c, x in zip(comp, time, strict=True))
        if (t, m) < best[:2]:
            best = (t, m, comp)
    return best[0], best[2]
