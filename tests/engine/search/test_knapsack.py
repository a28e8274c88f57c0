"""The per-stage recompute knapsack equals brute force on random small instances."""

from __future__ import annotations

import numpy as np

from engine.search.recompute import brute_force, choose_counts, choose_stage


def _instances(seed: int, n: int, n_opt: int):
    rng = np.random.default_rng(seed)
    count = rng.integers(0, 9, n)
    mem = rng.uniform(0.5, 4.0, (n, n_opt))
    time = rng.uniform(0.5, 4.0, (n, n_opt))
    # Make a few ties and some dominated options on purpose.
    if n_opt == 3:
        time[::7, 1] = time[::7, 0]
        mem[::5, 2] = mem[::5, 0]
    budget = rng.uniform(0.0, 30.0, n)
    return count, mem, time, budget


def test_three_options_match_brute_force() -> None:
    count, mem, time, budget = _instances(1, 400, 3)
    got = choose_counts(count, mem, time, budget)
    for r in range(len(count)):
        t, comp = brute_force(int(count[r]), list(mem[r]), list(time[r]), float(budget[r]))
        if not np.isfinite(t):
            assert not got.feasible[r]
            continue
        assert got.feasible[r]
        assert got.time[r] == np.float64(got.time[r])
        assert abs(got.time[r] - t) <= 1e-9 * max(1.0, t), (r, got.counts[r], comp)
        assert got.counts[r].sum() == count[r]
        assert (got.counts[r] * mem[r]).sum() <= budget[r] + 1e-6


def test_one_and_two_options_match_brute_force() -> None:
    for n_opt in (1, 2):
        count, mem, time, budget = _instances(2 + n_opt, 200, n_opt)
        got = choose_counts(count, mem, time, budget)
        for r in range(len(count)):
            t, _ = brute_force(int(count[r]), list(mem[r]), list(time[r]), float(budget[r]))
            assert got.feasible[r] == bool(np.isfinite(t))
            if np.isfinite(t):
                assert abs(got.time[r] - t) <= 1e-9 * max(1.0, t)


def test_two_kinds_match_brute_force_over_both() -> None:
    rng = np.random.default_rng(7)
    n = 120
    counts = np.stack([rng.integers(0, 4, n), rng.integers(0, 7, n)], axis=1)
    mem = rng.uniform(0.5, 4.0, (n, 2, 3))
    time = rng.uniform(0.5, 4.0, (n, 2, 3))
    budget = rng.uniform(0.0, 30.0, n)
    got = choose_stage(counts, mem, time, budget)
    for r in range(n):
        best = np.inf
        for a in range(counts[r, 0] + 1):
            for b in range(counts[r, 0] - a + 1):
                c0 = (a, b, counts[r, 0] - a - b)
                m0 = float(np.dot(c0, mem[r, 0]))
                t0 = float(np.dot(c0, time[r, 0]))
                t1, _ = brute_force(int(counts[r, 1]), list(mem[r, 1]), list(time[r, 1]), float(budget[r]) - m0)
                best = min(best, t0 + t1)
        assert got.feasible[r] == bool(np.isfinite(best))
        if np.isfinite(best):
            assert abs(got.time[r] - best) <= 1e-9 * max(1.0, best)
            assert got.memory[r] <= budget[r] + 1e-6


def test_roomy_budget_takes_the_fastest_everywhere() -> None:
    got = choose_counts(np.array([10]), np.array([[3.0, 2.0, 1.0]]), np.array([[1.0, 1.2, 1.4]]), np.array([1e9]))
    assert got.counts.tolist() == [[10, 0, 0]]
    tight = choose_counts(np.array([10]), np.array([[3.0, 2.0, 1.0]]), np.array([[1.0, 1.2, 1.4]]),
                          np.array([10.0]))
    assert tight.counts.tolist() == [[0, 0, 10]]
    assert not choose_counts(np.array([10]), np.array([[3.0, 2.0, 1.0]]), np.array([[1.0, 1.2, 1.4]]),
                             np.array([9.0])).feasible[0]


def test_smaller_budget_is_never_faster() -> None:
    mem = np.tile([[3.0, 2.0, 1.0]], (60, 1))
    time = np.tile([[1.0, 1.3, 1.5]], (60, 1))
    budgets = np.linspace(10, 30, 60)
    got = choose_counts(np.full(60, 10), mem, time, budgets)
    assert np.all(np.diff(got.time) <= 1e-12)
