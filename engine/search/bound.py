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

Both are exact arithmetic on exact prices; BOUND_SLACK absorbs the few ulp by which the sums here and the
cost model's own may differ. tests/engine/search/test_bound.py checks every bound against exhaustive
pricing on random configurations, and the search's top K against the exhaustive one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from engine.search.pricing import table_of

# Relative slack taken off every bound: the bounds re-add the cost model's terms in another order.
BOUND_SLACK = 1e-9
# Columns of the two bound groups (space.COLUMNS names). dp and the micro-batch count follow from tp, pp,
# cp and the micro-batch size in a space of one device count and one global batch.
LAYER_KEY: tuple[str, ...] = ("tp", "pp", "cp", "mbs", "vpp", "sp", "etp")
SHARD_KEY: tuple[str, ...] = (*LAYER_KEY, "ep")
# What group_bound reads of a group: its layer key but etp (taken from the (etp, ep) pairs), dp and the count.
GROUP_COLUMNS: tuple[str, ...] = ("tp", "pp", "cp", "dp", "mbs", "mbn", "vpp", "sp")
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
    out = {k: np.asarray(v[rows], dtype=np.int64) for k, v in cols.items() if k not in fixed}
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


def layer_bound(pricer, cols: Mapping[str, np.ndarray], rows: np.ndarray  # type: ignore[no-untyped-def]
                ) -> tuple[np.ndarray, np.ndarray]:
    """(code of each of `rows` in LAYER_KEY groups, each group's lower bound on the step time, seconds)."""
    gcode, grep = group_codes(cols, LAYER_KEY, rows)
    g_rows = rows[grep]
    _, prep = group_codes(cols, ("etp", "ep"), rows)
    pairs = (np.asarray(cols["etp"][rows[prep]]), np.asarray(cols["ep"][rows[prep]]))
    return gcode, group_bound(pricer, {k: cols[k][g_rows] for k in GROUP_COLUMNS}, pairs)


def group_bound(pricer, groups: Mapping[str, np.ndarray],  # type: ignore[no-untyped-def]
                pairs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Each group's lower bound on the step time, seconds. `groups` holds one row per group (GROUP_COLUMNS);
    `pairs` the (etp, ep) combinations its candidates may take (a superset only loosens the bound)."""
    least = _least_layer_time(pricer, groups, pairs)  # (groups, 2)
    # Layers per stage of each (pp, vpp), MTP layers included, as the cost model places them.
    pcode, prep = group_codes(groups, ("pp", "vpp"))
    P = int(np.asarray(groups["pp"][prep]).max()) if prep.size else 1
    counts = np.zeros((prep.size, P, 2))
    rep = _representatives(groups, prep, mbn=1, fsdp=1, os=1, etp=1, ep=1)
    for idx, pt in _price_chunks(pricer, rep):
        c = pt.layer_count
        counts[idx, :c.shape[1]] = c
    x = counts[pcode, :, 0] * least[:, None, 0] + counts[pcode, :, 1] * least[:, None, 1]  # (groups, P)
    m = np.maximum(np.asarray(groups["mbn"], dtype=np.float64), 1.0)
    vpp = np.asarray(groups["vpp"], dtype=np.int64)
    v = np.where(vpp > 1, vpp, 1).astype(np.float64)
    top = x.max(axis=1) if x.size else np.zeros(x.shape[0])
    bound = m * top + (x.sum(axis=1) - top) / v
    return bound * (1 - BOUND_SLACK)


def _least_layer_time(pricer, groups: Mapping[str, np.ndarray],  # type: ignore[no-untyped-def]
                      pairs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """(groups, 2) one dense and one MoE layer's forward + backward time per micro-batch with its
    communication and no recompute, the least over the (etp, ep) `pairs` (a group's own are among them, so
    this is at most each member's). Priced as one-stage, one-micro-batch rows: pp, vpp, the micro-batch
    count, FSDP and the optimizer shard do not enter a layer's own time."""
    lcode, lrep = group_codes(groups, ("tp", "cp", "mbs", "sp"))
    k = pairs[1].size
    reps = np.repeat(lrep, k)
    rep = _representatives(groups, reps, pp=1, vpp=1, mbn=1, fsdp=1, os=1)
    rep["etp"] = np.tile(np.asarray(pairs[0], dtype=np.int64), lrep.size)
    rep["ep"] = np.tile(np.asarray(pairs[1], dtype=np.int64), lrep.size)
    rep["dp"] = np.asarray(groups["dp"][reps], dtype=np.int64) * np.asarray(groups["pp"][reps], dtype=np.int64)
    layer_t = np.empty((reps.size, 2))
    for idx, pt in _price_chunks(pricer, rep):
        layer_t[idx] = pt.layer_time_s[:, :, OFF]
    per_base = layer_t.reshape(lrep.size, k, 2).min(axis=1)
    return per_base[lcode]


def shard_bound(pricer, cols: Mapping[str, np.ndarray], rows: np.ndarray  # type: ignore[no-untyped-def]
                ) -> tuple[np.ndarray, np.ndarray]:
    """(code of each of `rows` in SHARD_KEY groups, each group's lower bound on the step time, seconds)."""
    code, rep_idx = group_codes(cols, SHARD_KEY, rows)
    rep = _representatives(cols, rows[rep_idx], fsdp=1, os=1)
    bound = np.empty(rep_idx.size)
    for idx, pt in _price_chunks(pricer, rep):
        terms = pt.time_terms
        bound[idx] = pt.step_time_s - terms["dp_comm"] - terms["optimizer"]
    return code, bound * (1 - BOUND_SLACK)


__all__ = ["BOUND_SLACK", "GROUP_COLUMNS", "LAYER_KEY", "SHARD_KEY", "group_bound", "group_codes", "layer_bound",
           "shard_bound"]
