"""Lower bounds on a candidate's step time, per group of candidates, from the cost model's own numbers.

The search needs the exact step time only of candidates that can still enter the top K. Two bounds, each
computed once per group of candidates that share the columns it depends on, decide which those are
(engine.search.rank prices the rest exactly, or not at all):

* `layer_bound` per (tp, pp, cp, micro-batch size, vpp, sp, etp): the pipeline combination of the layers'
  own time. engine.cost prices a step as m·t_max + (Σ_s t_s − t_max)/v + DP sync + optimizer (NAR21 §2.2,
  the 1F1B / interleaved bubble), every stage time t_s being at least Σ over its layers of one layer's
  forward + backward with its TP/CP/EP communication and no recompute (PricedTable.layer_time_s with mode
  off; recompute, FSDP traffic, P2P and the output layer only add). m·max + (Σ − max)/v grows with every
  t_s (m ≥ 1 ≥ 1/v), so the same combination of those layer sums bounds the step from below. A MoE layer's
  time depends on ep (the expert GEMMs' shape, the all-to-all); the bound takes, per group, the least over
  the group's ep values, so one bound covers every ep.
* `shard_bound` per (tp, pp, cp, micro-batch size, vpp, sp, etp, ep): the step of the group's candidate
  with no FSDP and no optimizer shard, less its DP sync and optimizer terms. What FSDP and the optimizer
  shard change (the per-micro-batch FSDP traffic each stage adds, the end-of-step synchronisation, the
  optimizer update) is either left out or only added to stage times, so, by the same monotonicity, that is
  at most the step of every member of the group.

Under calibration (engine.calibrate) a priced plan's step is Σ_g m_g(x)·u_g(x) over the ratio groups, u the
uncalibrated seconds and m_g(x) the group's multiplier at that plan (its ratio, times the local factor of a
`local` calibration, which differs between plans and so between a group's members and the representatives
priced here). So both bounds are computed on uncalibrated prices and multiplied by the least, over the group's
own rows, of min_g m_g(x) (engine.calibrate.local.floor_factor): Σ m_g u_g ≥ min_g m_g · Σ u_g. Uncalibrated,
or with one ratio on every group, that is the same bound as before.

Both are exact arithmetic on exact prices; BOUND_SLACK absorbs the few ulp by which the sums here and the
cost model's own may differ. tests/engine/search/test_bound.py checks every bound against exhaustive
pricing on random configurations, and the search's top K against the exhaustive one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from engine.calibrate.local import floor_factor, plan_features
from engine.search.pricing import table_of

# Relative slack taken off every bound: the bounds re-add the cost model's terms in another order.
BOUND_SLACK = 1e-9
# Columns of the two bound groups (space.COLUMNS names). dp and the micro-batch count follow from tp, pp,
# cp and the micro-batch size in a space of one device count and one global batch.
LAYER_KEY: tuple[str, ...] = ("tp", "pp", "cp", "mbs", "vpp", "sp", "etp")
SHARD_KEY: tuple[str, ...] = (*LAYER_KEY, "ep")
_CHUNK = 1024
OFF = 0


def group_codes(cols: Mapping[str, np.ndarray], names: Sequence[str], rows: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row's group, one row of each group), groups = distinct values of `names`, numbered in
    the order of their first row. Columns are small non-negative integers: each is coded densely through a
    lookup table and the codes combined in mixed radix (no sort while the radix product stays small)."""
    full = rows is None or (rows.size == cols[names[0]].shape[0] and rows.size > 0 and rows[0] == 0
                            and rows[-1] == rows.size - 1)
    sel: slice | np.ndarray = slice(None) if full or rows is None else rows
    n = cols[names[0]][sel].shape[0]
    key = np.zeros(n, dtype=np.int64)
    span = 1
    for c in names:
        col = cols[c][sel]
        present = np.bincount(col) > 0
        radix = int(present.sum())
        if span * radix >= 2**62:
            _, code = np.unique(key, return_inverse=True)
            key, span = code.reshape(-1).astype(np.int64), int(code.max()) + 1
        key *= radix
        key += (np.cumsum(present) - 1)[col]
        span *= radix
    if span <= 4 * n + 1024:
        seen = np.full(span, -1, dtype=np.int64)
        seen[key[::-1]] = np.arange(n - 1, -1, -1)  # the first row of each key (later writes win)
        firsts = np.sort(seen[seen >= 0])
        code_of = np.empty(span, dtype=np.int64)
        code_of[key[firsts]] = np.arange(firsts.size)
        return code_of[key], firsts
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[order] = np.arange(uniq.size)
    return rank[inv.reshape(-1)], first[order]


def _representatives(cols: Mapping[str, np.ndarray], rows: np.ndarray, **fixed: int) -> dict[str, np.ndarray]:
    """Columns of `rows` (int64) with some columns set to one value (not necessarily a valid candidate: the
    cost model prices any row)."""
    out = {k: np.asarray(v[rows], dtype=np.int64) for k, v in cols.items()}
    for k, v in fixed.items():
        out[k] = np.full(rows.size, v, dtype=np.int64)
    return out


def _price_chunks(pricer, cols: Mapping[str, np.ndarray]):  # type: ignore[no-untyped-def]
    """Price every row of `cols` under no recompute, in chunks of equal pipeline depth (small stage arrays),
    and yield (row indices, PricedTable)."""
    n = cols["tp"].shape[0]
    order = np.argsort(cols["pp"], kind="stable")
    for start in range(0, n, _CHUNK):
        idx = order[start:start + _CHUNK]
        yield idx, pricer.price(table_of(cols, idx, OFF))


def _uncalibrated(pricer):  # type: ignore[no-untyped-def]
    """The pricer without its ratios (itself when it has none)."""
    run = getattr(pricer, "run", None)
    if run is None or getattr(run, "ratios", None) is None:
        return pricer
    return replace(pricer, run=replace(run, ratios=None))


def _group_floor(pricer, cols: Mapping[str, np.ndarray], rows: np.ndarray, code: np.ndarray,  # type: ignore[no-untyped-def]
                 groups: int) -> np.ndarray | float:
    """Per group, the least calibrated/uncalibrated step factor over the group's rows (1.0 uncalibrated)."""
    run = getattr(pricer, "run", None)
    ratios = getattr(run, "ratios", None)
    if ratios is None:
        return 1.0
    take = {k: np.asarray(cols[k][rows], dtype=np.int64) for k in ("tp", "pp", "cp", "ep", "dp", "mbs")}
    feats = plan_features(pricer.model, pricer.cluster, take["tp"], take["pp"], take["cp"], take["ep"], take["dp"],
                          take["mbs"])
    least = np.full(groups, np.inf)
    np.minimum.at(least, code, floor_factor(ratios, feats))
    return least


def layer_bound(pricer, cols: Mapping[str, np.ndarray], rows: np.ndarray  # type: ignore[no-untyped-def]
                ) -> tuple[np.ndarray, np.ndarray]:
    """(code of each of `rows` in LAYER_KEY groups, each group's lower bound on the step time, seconds)."""
    gcode, grep = group_codes(cols, LAYER_KEY, rows)
    floor = _group_floor(pricer, cols, rows, gcode, grep.size)
    pricer = _uncalibrated(pricer)
    g_rows = rows[grep]
    least = _least_layer_time(pricer, cols, g_rows)  # (groups, 2)
    # Layers per stage of each (pp, vpp), MTP layers included, as the cost model places them.
    pcode, prep = group_codes(cols, ("pp", "vpp"), g_rows)
    prow = g_rows[prep]
    P = int(np.asarray(cols["pp"][prow]).max()) if prow.size else 1
    counts = np.zeros((prow.size, P, 2))
    for idx, pt in _price_chunks(pricer, _representatives(cols, prow, mbn=1, fsdp=1, os=1)):
        c = pt.layer_count
        counts[idx, :c.shape[1]] = c
    x = counts[pcode, :, 0] * least[:, None, 0] + counts[pcode, :, 1] * least[:, None, 1]  # (groups, P)
    m = np.maximum(np.asarray(cols["mbn"][g_rows], dtype=np.float64), 1.0)
    vpp = np.asarray(cols["vpp"][g_rows], dtype=np.int64)
    v = np.where(vpp > 1, vpp, 1).astype(np.float64)
    top = x.max(axis=1)
    bound = m * top + (x.sum(axis=1) - top) / v
    return gcode, bound * floor * (1 - BOUND_SLACK)


def _least_layer_time(pricer, cols: Mapping[str, np.ndarray], g_rows: np.ndarray  # type: ignore[no-untyped-def]
                      ) -> np.ndarray:
    """(len(g_rows), 2) one dense and one MoE layer's forward + backward time per micro-batch with its
    communication and no recompute, the least over every ep of the space (a group's own ep values are among
    them, so this is at most each member's). Priced as one-stage, one-micro-batch rows: pp, vpp, the
    micro-batch count, FSDP and the optimizer shard do not enter a layer's own time."""
    lcode, lrep = group_codes(cols, ("tp", "cp", "mbs", "sp", "etp"), g_rows)
    base = g_rows[lrep]
    eps = np.unique(np.asarray(cols["ep"]))
    reps = np.repeat(base, eps.size)
    rep = _representatives(cols, reps, pp=1, vpp=1, mbn=1, fsdp=1, os=1)
    rep["ep"] = np.tile(eps.astype(np.int64), base.size)
    rep["dp"] = np.asarray(cols["dp"][reps], dtype=np.int64) * np.asarray(cols["pp"][reps], dtype=np.int64)
    layer_t = np.empty((reps.size, 2))
    for idx, pt in _price_chunks(pricer, rep):
        layer_t[idx] = pt.layer_time_s[:, :, OFF]
    per_base = layer_t.reshape(base.size, eps.size, 2).min(axis=1)
    return per_base[lcode]


def shard_bound(pricer, cols: Mapping[str, np.ndarray], rows: np.ndarray  # type: ignore[no-untyped-def]
                ) -> tuple[np.ndarray, np.ndarray]:
    """(code of each of `rows` in SHARD_KEY groups, each group's lower bound on the step time, seconds)."""
    code, rep_idx = group_codes(cols, SHARD_KEY, rows)
    floor = _group_floor(pricer, cols, rows, code, rep_idx.size)
    rep = _representatives(cols, rows[rep_idx], fsdp=1, os=1)
    bound = np.empty(rep_idx.size)
    for idx, pt in _price_chunks(_uncalibrated(pricer), rep):
        terms = pt.time_terms
        bound[idx] = pt.step_time_s - terms["dp_comm"] - terms["optimizer"]
    return code, bound * floor * (1 - BOUND_SLACK)


__all__ = ["BOUND_SLACK", "LAYER_KEY", "SHARD_KEY", "group_codes", "layer_bound", "shard_bound"]
