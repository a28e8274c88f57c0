"""Lower bounds on a candidate's step time, per group of candidates, from the cost model's own numbers.

The search needs the exact step time only of candidates that can still enter the top K. Three bounds, each
computed once per group of candidates that share the columns it depends on, decide which those are
(engine.search.rank prices the rest exactly, or not at all):

* `layer_bound` (`group_bound` for the groups of a factored space) per (tp, pp, cp, micro-batch size, vpp,
  sp, etp): the pipeline combination of the layers' own time. engine.cost prices a step as
  m·t_max + (Σ_s t_s − t_max)/v + DP sync + optimizer (NAR21 §2.2, the 1F1B / interleaved bubble), every
  stage time t_s being at least Σ over its layers of one layer's
  forward + backward with its TP/CP/EP communication and no recompute (PricedTable.layer_time_s with mode
  off; recompute, FSDP traffic, P2P and the output layer only add). m·max + (Σ − max)/v grows with every
  t_s (m ≥ 1 ≥ 1/v), so the same combination of those layer sums bounds the step from below. A MoE layer's
  time depends on ep and etp (the expert GEMMs' shape, the all-to-all); the bound takes the least over the
  (etp, ep) pairs of the space, so one bound covers every pair a group's candidates take.
* `shard_bound` per (tp, pp, cp, micro-batch size, vpp, sp, etp, ep): the step of the group's candidate
  with no FSDP and no optimizer shard, less its DP sync and optimizer terms. What FSDP and the optimizer
  shard change (the per-micro-batch FSDP traffic each stage adds, the end-of-step synchronisation, the
  optimizer update) is either left out or only added to stage times, so, by the same monotonicity, that is
  at most the step of every member of the group.
* `sync_bound` per candidate: the shard bound's stage times plus the candidate's own FSDP traffic, its
  end-of-step synchronisation and optimizer step. Those depend on the degrees (SYNC_KEY), not on the
  micro-batch size or sequence parallelism, so engine.cost prices their traffic once per combination of
  degrees (sync_parts) and exposes it beside each group's compute (sync_time); the combination is then the
  cost model's own, and with no recompute the bound is the candidate's step. Without resharding FSDP
  gathers once per step, its traffic per micro-batch falling with their count: each combination is priced at
  its candidates' largest count, a bound below the others'.

All are exact arithmetic on exact prices; BOUND_SLACK absorbs the few ulp by which the sums here and the
cost model's own may differ. Calibrated prices (engine.cost.ratio_scaling) scale each time part by its own
ratio, which no pipeline combination commutes with: a calibrated step is at least the least ratio times the
uncalibrated one, and a bound read off calibrated prices at most the greatest ratio times its uncalibrated
self, so every bound is scaled by least / greatest (1 uncalibrated). tests/engine/search/test_bound.py checks
every bound against exhaustive pricing on random configurations, and the search's top K against the
exhaustive one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from engine.arrays import distinct
from engine.cost.table import STAGE_TIME_PARTS
from engine.search.pricing import table_of

# Relative slack taken off every bound: the bounds re-add the cost model's terms in another order.
BOUND_SLACK = 1e-9
# Columns of the first two bound groups (space.COLUMNS names). dp and the micro-batch count follow from tp, pp,
# cp and the micro-batch size in a space of one device count and one global batch.
LAYER_KEY: tuple[str, ...] = ("tp", "pp", "cp", "mbs", "vpp", "sp", "etp")
SHARD_KEY: tuple[str, ...] = (*LAYER_KEY, "ep")
# The columns the sharding's cost depends on (engine.cost.price.sync_floor): not the micro-batch size or
# sequence parallelism, which only move the compute windows the floor takes as unbounded, nor the micro-batch
# count, whose largest value in a key gives its least traffic per micro-batch.
SYNC_KEY: tuple[str, ...] = ("tp", "pp", "cp", "vpp", "fsdp", "etp", "ep", "os")
# What group_bound reads of a group: its layer key but etp (taken from the (etp, ep) pairs), dp and the count.
GROUP_COLUMNS: tuple[str, ...] = ("tp", "pp", "cp", "dp", "mbs", "mbn", "vpp", "sp")
_CHUNK = 1024
# Rows per step of sync_bound's per-row arithmetic ((rows × stages) arrays of at most a few MB each).
_SYNC_CHUNK = 4096
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


def _price_chunks(pricer, cols: Mapping[str, np.ndarray], parts: bool = True):  # type: ignore[no-untyped-def]
    """Price every row of `cols` under no recompute, in chunks of equal pipeline depth (small stage arrays),
    and yield (row indices, PricedTable); `parts` False where the caller reads no per-stage part."""
    n = cols["tp"].shape[0]
    order = np.argsort(cols["pp"], kind="stable")
    for start in range(0, n, _CHUNK):
        idx = order[start:start + _CHUNK]
        yield idx, pricer.price(table_of(cols, idx, OFF), parts=parts)


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
    rep = _representatives(groups, prep, mbn=1, fsdp=1, os=1, etp=1, ep=1)
    counts = pricer.layer_counts(table_of(rep, np.arange(prep.size), OFF))
    x = counts[pcode, :, 0] * least[:, None, 0] + counts[pcode, :, 1] * least[:, None, 1]  # (groups, P)
    m = np.maximum(np.asarray(groups["mbn"], dtype=np.float64), 1.0)
    vpp = np.asarray(groups["vpp"], dtype=np.int64)
    v = np.where(vpp > 1, vpp, 1).astype(np.float64)
    top = x.max(axis=1) if x.size else np.zeros(x.shape[0])
    bound = m * top + (x.sum(axis=1) - top) / v
    return bound * (1 - BOUND_SLACK) * _ratio_slack(pricer)


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
    for idx, pt in _price_chunks(pricer, rep, parts=False):
        layer_t[idx] = pt.layer_time_s[:, :, OFF]
    per_base = layer_t.reshape(lrep.size, k, 2).min(axis=1)
    return per_base[lcode]


@dataclass(frozen=True, slots=True)
class ShardParts:
    """The SHARD_KEY groups of some rows, each priced once with no FSDP and no optimizer shard: `code` maps
    each row to its group; per group, `stages` (groups, P) each stage's time per micro-batch without FSDP
    traffic and `comp` its compute alone (forward and backward), `m` and `v` the micro-batch count and the
    interleaving divisor, `bound` shard_bound's bound."""

    code: np.ndarray
    stages: np.ndarray
    comp: np.ndarray
    m: np.ndarray
    v: np.ndarray
    bound: np.ndarray


def shard_parts(pricer, cols: Mapping[str, np.ndarray], rows: np.ndarray) -> ShardParts:  # type: ignore[no-untyped-def]
    """ShardParts of `rows` (see shard_bound)."""
    code, rep_idx = group_codes(cols, SHARD_KEY, rows)
    rep = _representatives(cols, rows[rep_idx], fsdp=1, os=1)
    bound = np.empty(rep_idx.size)
    P = int(np.asarray(rep["pp"]).max()) if rep_idx.size else 1
    stages, comp = np.zeros((rep_idx.size, P)), np.zeros((rep_idx.size, P))
    for idx, pt in _price_chunks(pricer, rep):
        terms = pt.time_terms
        bound[idx] = pt.step_time_s - terms["dp_comm"] - terms["optimizer"]
        parts = pt.stage_time_parts
        width = parts["forward"].shape[1]
        stages[idx, :width] = sum(parts[k] for k in STAGE_TIME_PARTS)
        comp[idx, :width] = parts["forward"] + parts["backward"]
    m = np.maximum(rep["mbn"], 1).astype(np.float64)
    v = np.where(rep["vpp"] > 1, rep["vpp"], 1).astype(np.float64)
    return ShardParts(code, stages, comp, m, v, bound * (1 - BOUND_SLACK) * _ratio_slack(pricer))


def shard_bound(pricer, cols: Mapping[str, np.ndarray], rows: np.ndarray  # type: ignore[no-untyped-def]
                ) -> tuple[np.ndarray, np.ndarray]:
    """(code of each of `rows` in SHARD_KEY groups, each group's lower bound on the step time, seconds)."""
    sp = shard_parts(pricer, cols, rows)
    return sp.code, sp.bound


def sync_bound(pricer, cols: Mapping[str, np.ndarray], rows: np.ndarray,  # type: ignore[no-untyped-def]
               shard: ShardParts, of_rows: np.ndarray) -> np.ndarray:
    """(len(rows),) a lower bound on each row's step time with its sharding: its SHARD_KEY group's stage
    times (`shard`, whose rows `of_rows` index) plus the FSDP traffic, end-of-step synchronisation and
    optimizer step of its degrees (Pricer.sync_parts, once per SYNC_KEY) exposed beside the group's compute
    (Pricer.sync_time), combined as the step is: with no recompute, the row's step itself."""
    n = rows.size
    if n == 0:
        return np.zeros(0)
    scode, srep = group_codes(cols, SYNC_KEY, rows)
    rep = _representatives(cols, rows[srep], mbs=1, sp=0)
    # FSDP without resharding gathers once per step: its traffic per micro-batch falls with their count, so
    # each key is priced at the most micro-batches among its rows.
    most = np.zeros(srep.size, dtype=np.int64)
    np.maximum.at(most, scode, np.asarray(cols["mbn"][rows], dtype=np.int64))
    rep["mbn"] = most
    lo, hi = pricer.time_ratio_span()
    # The traffic is uncalibrated and the compute it hides behind (shard.comp) calibrated. Calibrated, a row
    # exposes r_f·f beside r_c·c with lo ≤ r ≤ hi, so at least lo·exposed(f, (hi / lo)·c), and c ≤ comp / lo:
    # pricing the exposure beside comp·hi/lo² and scaling by lo (hi here, lo/hi below) stays a lower bound (the
    # exposure is homogeneous in traffic and compute); exactly the row's own under one ratio for every part.
    comp_scale = hi / (lo * lo)
    out = np.empty(n)
    row_pp, key_pp = np.asarray(cols["pp"][rows]), rep["pp"]
    where = np.empty(srep.size, dtype=np.int64)  # each key's place among the keys of its depth
    # One depth at a time: stage arrays exactly as wide as the pipeline, chunks of rows a few MB each.
    for depth in distinct(key_pp).tolist():
        keys = np.flatnonzero(key_pp == depth)
        where[keys] = np.arange(keys.size)
        parts = pricer.sync_parts(table_of(rep, keys, OFF), depth)
        at = np.flatnonzero(row_pp == depth)
        for start in range(0, at.size, _SYNC_CHUNK):
            j = at[start:start + _SYNC_CHUNK]
            g, k = shard.code[of_rows[j]], where[scode[j]]
            fsdp, dp = pricer.sync_time(parts.take(k), shard.comp[g, :depth] * comp_scale)
            stage = shard.stages[g, :depth] + hi * fsdp
            top = stage.max(axis=1)
            out[j] = shard.m[g] * top + (stage.sum(axis=1) - top) / shard.v[g] + hi * (dp + parts.optimizer[k])
    return out * (1 - BOUND_SLACK) * (lo / hi)


def _ratio_slack(pricer) -> float:  # type: ignore[no-untyped-def]
    """least / greatest calibration ratio: calibrated step = Σ ratio × part ≥ least × the uncalibrated step,
    and a bound read off calibrated prices is at most greatest × its uncalibrated self."""
    lo, hi = pricer.time_ratio_span()
    return lo / hi


__all__ = ["BOUND_SLACK", "GROUP_COLUMNS", "LAYER_KEY", "SHARD_KEY", "SYNC_KEY", "ShardParts", "group_bound", "group_codes",
           "layer_bound", "shard_bound", "shard_parts", "sync_bound"]
