"""Price a space under the requested recompute and rank it: step time, then peak memory, then nest order.

Recompute requests (docs/formats.md §2; unlike HyperParallel, which prices every candidate fully recomputed,
[HP] §5.8, the stated mode is priced as stated):
  * none / selective / full: every layer in that mode;
  * auto: per candidate, the fastest single mode with which it fits ([HP] §8.5 "auto");
  * per_layer: per candidate, a mode per layer from the per-stage knapsack (engine.search.recompute, assembled
    into layer plans by engine.search.layer_plans).
    Interleaved candidates keep one mode, as in HyperParallel ([HP] §8.5: "no choice for non-1F1B schedules":
    their chunks hold different in-flight counts).

Pricing every candidate under every mode is what this avoids, exactly:
  * One pass prices every row with no recompute. The cost model splits each stage's memory into a part
    that no recompute choice changes and per-layer kept activations per mode (engine.cost.PricedTable), so
    that pass also gives every row's peak under full recompute, the lightest mode, exactly: whether any mode
    fits is known for all rows.
  * No recompute is the fastest mode (recompute only adds time), so that pass's step time bounds every
    mode and every per-layer mix from below. A row whose bound is above the K-th best exact step time
    cannot enter the top K; only the others are priced again under the modes that fit (and, for
    per_layer, get a knapsack). Their exact times are what the ranking uses.
  * Memory grows with the micro-batch size (activations scale with it, the in-flight count cannot grow;
    KOR22 §4), so rows are priced in waves of increasing micro-batch size per group of otherwise equal
    rows, and a row whose smaller-micro-batch sibling already failed the budget under its lightest mode is
    not priced: it is over the budget.
Branch and bound (engine.search.bound): most candidates of a large space cannot enter the top K, and
pricing them is most of the work. The search's space comes factored (engine.search.space.Groups: 2.9 M
candidates on 110,592 devices are 15k groups of (tp, pp, cp, micro-batch, vpp, sp) times the (fsdp, etp,
ep) combinations valid for them), and `price_groups` bounds the groups before any candidate becomes a row:
  1. a lower bound per group (the pipeline combination of the layers' own time, for every ep, fsdp and
     optimizer shard at once) orders the groups; the most promising are priced first (as above), which
     gives a K-th best time;
  2. the candidates of every group whose bound is at most it become rows, and get a second bound per
     (group, ep): the step without FSDP traffic, end-of-step sync or optimizer (shard_bound);
  3. those still at most the K-th best get a third, per row: the same step with the sharding's own traffic,
     priced once per combination of degrees and exposed beside the group's compute (sync_bound); with no
     recompute this is the candidate's own step time, so it drops nearly every candidate that cannot win;
  4. the rest are priced in rising order of that bound while it stays at most the K-th best so far, which
     falls as faster candidates are found.
A candidate never priced is slower than the K-th best: the top K is the exhaustive one (`exhaustive=True`
prices everything, for the refusals' whole-space statistics and the tests). Its memory is not priced
either: `Priced.unpriced` counts such rows, neither fit nor over. Memory stays that of the rows priced, not
of the space. `price_space` runs the same steps over a space already materialised.

The tests check the outcome against pricing every candidate one by one (tests/engine/search).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from engine.arrays import distinct
from engine.config.types import Config
from engine.cost.price import SyncParts
from engine.cost.rows import FULL, OFF, SELECTIVE
from engine.cost.table import CandidateTable, PricedTable
from engine.results import Estimate
from engine.search.bound import GROUP_COLUMNS, group_bound, group_codes, layer_bound, shard_parts, sync_bound
from engine.search.layer_plans import knapsack_plans
from engine.search.pricing import table_of
from engine.search.space import Groups, Space, subspace
from engine.specs import ModelSpec, Strategy

REQUEST_MODES: dict[str, tuple[int, ...]] = {
    "none": (OFF,), "selective": (SELECTIVE,), "full": (FULL,),
    "auto": (OFF, SELECTIVE, FULL), "per_layer": (OFF, SELECTIVE, FULL),
}
# Rows priced per call. The cost model's arrays are (rows × stages × ...): about a thousand rows keep them in
# cache (measured: 1024-row calls price 2-4× more rows per second than 16k-row calls), and a cancel or a
# progress report is never far away.
CHUNK = 1024
# The memory decomposition sums in another order than the pricing (a few ulp apart): a mode within this
# relative slack of the budget counts as possibly fitting, and exact pricing decides.
_SLACK = 1e-9
# Columns that, with the micro-batch size, identify a candidate (the micro-batch count follows from them).
_GROUP = ("tp", "pp", "cp", "fsdp", "etp", "ep", "vpp", "sp", "os")
# The bounded search first prices the candidates of the most promising bound groups, at least this many
# rows (half a pricing call), to learn a K-th best time; four times more each round while fewer than K fit.
# Spaces this small are priced whole.
SEED_ROWS = 512
# The best-first pass prices candidates in batches of rising size, starting here: small enough that the
# K-th best time tightens after the first batches, large enough that a call's fixed cost is amortised.
BEST_FIRST_ROWS = 1024


class Pricing(Protocol):
    def price(self, table: CandidateTable, parts: bool = True) -> PricedTable: ...

    def layer_counts(self, table: CandidateTable) -> np.ndarray: ...

    def sync_parts(self, table: CandidateTable, P: int) -> SyncParts: ...

    def sync_time(self, parts: SyncParts, comp_stage: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def time_ratio_span(self) -> tuple[float, float]: ...

    def estimate(self, strategy: Strategy) -> Estimate: ...

    @property
    def budget_gib(self) -> float: ...


class Cancelled(Exception):
    """Raised inside the search when the caller's `cancelled()` turns true; search() turns it into a result."""


@dataclass
class Priced:
    """A whole space priced. Per row:
      feasible  some recompute choice fits the budget (exact: from the pricing's memory decomposition);
      exact     `step` is the exact step time of the row's chosen plan (else a lower bound, and the row
                cannot reach the top K);
      mode      the chosen single mode (-1 when none fits); `layer_modes[row]` a per-layer plan instead;
      step      the chosen plan's step time (inf when nothing fits);
      peak      the chosen plan's peak, or where nothing fits the peak under `unfit_mode` (inf when not
                priced).
    `priced` counts the rows the cost model priced (all passes)."""

    feasible: np.ndarray
    exact: np.ndarray
    mode: np.ndarray
    step: np.ndarray
    peak: np.ndarray
    layer_modes: dict[int, np.ndarray] = field(default_factory=dict)
    priced: int = 0
    unfit_mode: int = FULL  # the mode `peak` is priced under where nothing fits (the lightest offered)
    unpriced: int = 0  # rows the bound proved slower than the K-th best, left unpriced (fit unknown)

    @property
    def fits(self) -> np.ndarray:
        return self.feasible

    def order(self, top: int | None = None) -> np.ndarray:
        """Rankable rows (exact and fitting), best first: step time, peak memory, nest order; with `top`,
        only the first `top` (a partition first, so a large space is not fully sorted)."""
        idx = np.nonzero(self.exact & np.isfinite(self.step))[0]
        if top is not None and idx.size > top:
            kth = np.partition(self.step[idx], top - 1)[top - 1]
            idx = idx[self.step[idx] <= kth]
        keys = np.lexsort((idx, self.peak[idx], self.step[idx]))
        out = idx[keys]
        return out if top is None else out[:top]


def row_strategy(space: Space, priced: Priced, r: int) -> Strategy:
    """Row r with the recompute the search priced for it (its single mode or its per-layer plan)."""
    return row_strategies(space, priced, [r])[0]


def row_strategies(space: Space, priced: Priced, rows: list[int]) -> list[Strategy]:
    """`row_strategy` of each of `rows`, the uniform plans read from one table."""
    out: list[Strategy | None] = [None] * len(rows)
    uniform = [i for i, r in enumerate(rows) if r not in priced.layer_modes]
    if uniform:
        idx = np.asarray([rows[i] for i in uniform], dtype=np.int64)
        modes = np.where(priced.mode[idx] >= 0, priced.mode[idx], priced.unfit_mode)
        tab = table_of(space.columns, idx, modes)
        for j, i in enumerate(uniform):
            out[i] = tab.strategy(j)
    for i, r in enumerate(rows):
        if out[i] is None:
            mode = int(priced.mode[r]) if priced.mode[r] >= 0 else priced.unfit_mode
            tab = table_of(space.columns, np.array([r]), mode, priced.layer_modes[r][None, :])
            out[i] = tab.strategy(0)
    return [s for s in out if s is not None]


def allowed_modes(config: Config) -> tuple[int, ...]:
    """The recompute mode codes (engine.cost.rows OFF/SELECTIVE/FULL) the config lets auto / per_layer use."""
    codes = {"off": 0, "selective": 1, "full": 2}
    return tuple(codes[m] for m in config.recompute_modes if m in codes)



Poll = Callable[[int], None]


def mode_peaks(pt: PricedTable, rows: np.ndarray | None = None, modes: tuple[int, ...] = (OFF, SELECTIVE, FULL)
               ) -> np.ndarray:
    """(n, len(modes)), or (len(rows), len(modes)): each row's peak under every layer in one mode, from the
    priced memory decomposition (engine.cost.PricedTable: stage = static + fixed + in-flight micro-batches ×
    Σ layers × one micro-batch's kept activations of their mode). Stages past a row's pp are NaN there and
    drop out of the maximum (fmax ignores NaN)."""
    sel = slice(None) if rows is None else rows
    m = list(modes)
    count = pt.layer_count[sel]
    one = pt.layer_act_one_gib[sel][:, :, m]  # (n, 2, len(modes))
    kept = count[:, :, 0, None] * one[:, None, 0, :]
    if np.any(count[:, :, 1]):  # MoE layers (a dense model holds none)
        kept = kept + count[:, :, 1, None] * one[:, None, 1, :]
    stages = (pt.stage_static_gib[sel] + pt.stage_fixed_gib[sel])[:, :, None] + pt.in_flight[sel][:, :, None] * kept
    return np.fmax.reduce(stages, axis=1)


def _waves(cols: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rank of each row's micro-batch size within its group, the row of the same group one rank lighter or
    -1). A group is the rows equal in every column but the micro-batch size (and the count it implies).
    Columns are small positive integers: each is coded densely through a lookup table (no sort), the codes
    are combined in mixed radix with the micro-batch size last, and one stable sort orders the rows."""
    key = np.zeros(n, dtype=np.int64)
    span = 1
    for c in (*_GROUP, "mbs"):
        col = cols[c]
        present = np.bincount(col) > 0
        radix = int(present.sum())
        if span * radix >= 2**62:  # never for real clusters; re-code the groups so far densely
            _, code = np.unique(key, return_inverse=True)
            key, span = code.reshape(-1).astype(np.int64), int(code.max()) + 1
        key = key * radix + (np.cumsum(present) - 1)[col]
        span *= radix
    mbs_radix = int((np.bincount(cols["mbs"]) > 0).sum())
    order = np.argsort(key, kind="stable")
    group = key[order] // mbs_radix
    first = np.r_[True, group[1:] != group[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - start
    prev = np.full(n, -1, dtype=np.int64)
    has_prev = ~first
    prev[order[has_prev]] = order[np.nonzero(has_prev)[0] - 1]
    return rank, prev


def price_space(pricer: Pricing, space: Space, request: str, *, top: int, model: ModelSpec,
                poll: Poll | None = None, allowed: tuple[int, ...] = (), exhaustive: bool = False) -> Priced:
    """Price `space` under `request` (module docstring): the rows that can reach the top K exactly, the others
    bounded out, or with `exhaustive` every row. `poll(rows_done)` runs between chunks (progress and
    cancellation); it may raise Cancelled. `allowed` narrows the modes auto / per_layer choose among
    (HyperParallel's recompute_modes, e.g. (OFF, FULL)); () keeps all three."""
    n = len(space)
    if exhaustive or n <= SEED_ROWS:
        return _price_all(pricer, space, request, top=top, model=model, poll=poll, allowed=allowed)
    gcode, bound = layer_bound(pricer, space.columns, np.arange(n))

    def take(groups: np.ndarray) -> tuple[Space, np.ndarray]:
        chosen = np.zeros(bound.size, dtype=bool)
        chosen[groups] = True
        rows = np.flatnonzero(chosen[gcode])
        return subspace(space, rows), rows

    def narrow(groups: np.ndarray, kth: float) -> tuple[Space, np.ndarray, np.ndarray]:
        cand, ids = take(groups)
        shard = shard_parts(pricer, cand.columns, np.arange(len(cand)))
        live = np.flatnonzero(shard.bound[shard.code] <= kth)
        return subspace(cand, live), ids[live], sync_bound(pricer, cand.columns, live, shard, live)

    _, priced, rows = _branch_and_bound(pricer, bound, np.bincount(gcode, minlength=bound.size), take, narrow,
                                        request, top=top, model=model, poll=poll, allowed=allowed, total=n)
    out = Priced(feasible=np.zeros(n, dtype=bool), exact=np.zeros(n, dtype=bool),
                 mode=np.full(n, -1, dtype=np.int8), step=np.full(n, np.inf), peak=np.full(n, np.inf),
                 priced=priced.priced, unfit_mode=priced.unfit_mode, unpriced=priced.unpriced)
    for name in ("feasible", "exact", "mode", "step", "peak"):
        getattr(out, name)[rows] = getattr(priced, name)
    out.layer_modes = {int(rows[r]): lm for r, lm in priced.layer_modes.items()}
    return out


# The nest order of a space's rows (engine.search.space), most significant first: the final tie-break.
NEST_ORDER = ("tp", "pp", "cp", "mbs", "fsdp", "etp", "ep", "vpp", "sp")


def price_groups(pricer: Pricing, groups: Groups, request: str, *, top: int, model: ModelSpec,
                 poll: Poll | None = None, allowed: tuple[int, ...] = ()) -> tuple[Space, Priced]:
    """`price_space` over a factored space without materialising it: the groups are bounded first and only
    the candidates of groups that can reach the top K become rows (D-009: the memory follows what is
    priced, not the 2.9 M candidates). Returns the priced candidates as a Space in nest order (every
    candidate when every group had to be priced) and their Priced; `Priced.unpriced` counts the rest."""
    total = groups.total
    if total <= SEED_ROWS:
        space = groups.materialise()
        return space, _price_all(pricer, space, request, top=top, model=model, poll=poll, allowed=allowed)
    combos = groups.combos
    _, first = group_codes(combos, ("etp", "ep"))
    pairs = (np.asarray(combos["etp"][first]), np.asarray(combos["ep"][first]))
    bound = group_bound(pricer, {k: groups.cols[k] for k in GROUP_COLUMNS}, pairs)

    def take(sel: np.ndarray) -> tuple[Space, np.ndarray]:
        return groups.materialise(sel), np.zeros(0, dtype=np.int64)

    def narrow(sel: np.ndarray, kth: float) -> tuple[Space, np.ndarray, np.ndarray]:
        space, lb = _narrow_groups(pricer, groups, np.sort(sel), kth)
        return space, np.zeros(0, dtype=np.int64), lb

    sub, priced, _ = _branch_and_bound(pricer, bound, groups.weight, take, narrow, request, top=top, model=model,
                                       poll=poll, allowed=allowed, total=total)
    order = np.lexsort(tuple(np.asarray(sub.columns[k]) for k in reversed(NEST_ORDER)))
    return subspace(sub, order), _permuted(priced, order)


def _narrow_groups(pricer: Pricing, groups: Groups, sel: np.ndarray, kth: float) -> tuple[Space, np.ndarray]:
    """Steps 2 and 3 of the module docstring for the groups `sel` (ascending) of a factored space: the shard
    bound per (group, etp, ep pair), priced from the groups' own columns, then rows only for the pairs under
    `kth`, and their sync bound. Returns those rows and their bound."""
    pair = groups.pair  # per (fsdp, etp, ep) combination
    n_pairs = int(pair.max()) + 1 if pair.size else 1
    key_of = np.repeat(np.arange(groups.count.size), groups.count)
    kp = distinct(key_of * n_pairs + pair)  # the pairs each key offers, by key
    kp_start = np.searchsorted(kp // n_pairs, np.arange(groups.count.size))
    cnt = np.bincount(kp // n_pairs, minlength=groups.count.size)[groups.key[sel]]
    local = np.repeat(np.arange(sel.size), cnt)
    within = np.arange(local.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    gp_pair = kp[np.repeat(kp_start[groups.key[sel]], cnt) + within] % n_pairs
    _, first_combo = np.unique(pair, return_index=True)
    reps = {k: np.asarray(groups.cols[k][sel[local]]) for k in GROUP_COLUMNS}
    reps.update(etp=np.asarray(groups.combos["etp"][first_combo[gp_pair]]),
                ep=np.asarray(groups.combos["ep"][first_combo[gp_pair]]),
                fsdp=np.ones(local.size, dtype=np.int64), os=np.ones(local.size, dtype=np.int64))
    shard = shard_parts(pricer, reps, np.arange(local.size))
    live = shard.bound[shard.code] <= kth
    keep = np.zeros((sel.size, n_pairs), dtype=bool)
    keep[local[live], gp_pair[live]] = True
    gp_index = np.full((sel.size, n_pairs), -1, dtype=np.int64)
    gp_index[local, gp_pair] = np.arange(local.size)
    space, row_local, row_pair = groups.materialise_where(sel, keep, pair)
    lb = sync_bound(pricer, space.columns, np.arange(len(space)), shard, gp_index[row_local, row_pair])
    return space, lb


def _permuted(priced: Priced, order: np.ndarray) -> Priced:
    """`priced` with its rows in `order` (row i of the result is row order[i])."""
    where = np.empty(order.size, dtype=np.int64)
    where[order] = np.arange(order.size)
    return Priced(feasible=priced.feasible[order], exact=priced.exact[order], mode=priced.mode[order],
                  step=priced.step[order], peak=priced.peak[order],
                  layer_modes={int(where[r]): lm for r, lm in priced.layer_modes.items()}, priced=priced.priced,
                  unfit_mode=priced.unfit_mode, unpriced=priced.unpriced)


Take = Callable[[np.ndarray], tuple[Space, np.ndarray]]
Narrow = Callable[[np.ndarray, float], tuple[Space, np.ndarray, np.ndarray]]


@dataclass
class _Found:
    """What the branch and bound has priced so far: the candidates' spaces, their prices and ids, in the order
    priced, and every exact fitting step time (the K-th best of which is the threshold)."""

    spaces: list[Space] = field(default_factory=list)
    priced: list[Priced] = field(default_factory=list)
    ids: list[np.ndarray] = field(default_factory=list)
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rows: int = 0

    def add(self, space: Space, priced: Priced, ids: np.ndarray) -> None:
        self.spaces.append(space)
        self.priced.append(priced)
        self.ids.append(ids)
        self.steps = np.concatenate([self.steps, priced.step[priced.exact & np.isfinite(priced.step)]])
        self.rows += len(space)

    def kth(self, top: int) -> float:
        if self.steps.size < top:
            return float("inf")
        return float(np.partition(self.steps, top - 1)[top - 1])


def _branch_and_bound(pricer: Pricing, bound: np.ndarray, weight: np.ndarray, take: Take, narrow: Narrow,
                      request: str, *, top: int, model: ModelSpec, poll: Poll | None, allowed: tuple[int, ...],
                      total: int) -> tuple[Space, Priced, np.ndarray]:
    """Branch and bound over groups (module docstring): `bound[g]` a lower bound on the step of the
    `weight[g]` candidates of group g, `take(groups)` their candidates as a Space (and ids the caller keeps),
    `narrow(groups, kth)` those of their candidates whose tighter bounds are at most kth, with ids and the
    sync bound. Returns the priced candidates (one Space, in the order priced), their Priced and ids."""
    found = _Found()
    order = np.argsort(bound, kind="stable")
    rows_in_order = np.cumsum(weight[order])
    done, want = 0, SEED_ROWS
    while True:  # the most promising groups, until K rows fit (or every group is priced)
        upto = min(int(np.searchsorted(rows_in_order, want)) + 1, bound.size)
        sub, ids = take(order[done:upto])
        found.add(sub, _price_all(pricer, sub, request, top=top, model=model, allowed=allowed,
                                  threshold=found.kth(top)), ids)
        done = upto
        if poll is not None:
            poll(found.rows)
        if done == bound.size or np.isfinite(found.kth(top)):
            break
        want *= 4
    if done < bound.size:
        rest = order[done:]
        cand, ids, lb = narrow(rest[bound[rest] <= found.kth(top)], found.kth(top))
        _best_first(pricer, found, cand, ids, lb, request, top=top, model=model, poll=poll, allowed=allowed,
                    skipped=total - len(cand))
    return _union(found, total)


def _best_first(pricer: Pricing, found: _Found, cand: Space, ids: np.ndarray, lb: np.ndarray, request: str, *,
                top: int, model: ModelSpec, poll: Poll | None, allowed: tuple[int, ...], skipped: int) -> None:
    """Step 4 of the module docstring: price the candidates `cand` lowest bound `lb` first, in batches of
    rising size, while the bound is at most the K-th best so far. `skipped` counts the candidates already
    done or bounded out (progress)."""
    n = len(cand)
    order = np.argsort(lb, kind="stable")
    lb_sorted = lb[order]
    pos, step = 0, BEST_FIRST_ROWS
    while pos < n:
        stop = min(int(np.searchsorted(lb_sorted, found.kth(top), side="right")), pos + step)
        if stop <= pos:
            break
        rows = np.sort(order[pos:stop])
        sub = subspace(cand, rows)
        found.add(sub, _price_all(pricer, sub, request, top=top, model=model, allowed=allowed,
                                  threshold=found.kth(top)), ids[rows] if ids.size else ids)
        pos = stop
        if poll is not None:
            poll(skipped + pos)
        step *= 2


def _union(found: _Found, total: int) -> tuple[Space, Priced, np.ndarray]:
    """The priced parts as one Space, one Priced and one id array."""
    first = found.spaces[0]
    cols = {k: np.concatenate([np.asarray(s.columns[k]) for s in found.spaces]) for k in first.columns}
    space = Space(columns=cols, refused=first.refused, value_reasons=first.value_reasons,
                  dp_values=first.dp_values, mbs_values=first.mbs_values)
    parts = found.priced
    offsets = np.cumsum([0] + [len(s) for s in found.spaces])
    priced = Priced(**{name: np.concatenate([getattr(p, name) for p in parts])
                       for name in ("feasible", "exact", "mode", "step", "peak")},
                    layer_modes={int(off) + r: lm for p, off in zip(parts, offsets, strict=False)
                                 for r, lm in p.layer_modes.items()},
                    priced=sum(p.priced for p in parts), unfit_mode=parts[-1].unfit_mode,
                    unpriced=total - found.rows)
    return space, priced, np.concatenate(found.ids)


def _pricing_order(cols: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The order _price_all prices rows in: (rows in (pp, vpp) order, each one's micro-batch wave in that order,
    the row one wave lighter (engine.search.rank._waves; -1 none), and the rows priced whatever their lighter
    neighbour did). Chunks of equal pipeline shape keep the cost model's stage arrays small. A heavier
    micro-batch is priced only where the lighter one fits: memory grows with the micro-batch at a fixed batch,
    except the unsharded gradients of an interleaved FSDP pipeline, which shrink to one chunk's once fewer than
    2·pp micro-batches run (engine.cost.memory.unsharded_grad_share): those rows are all priced."""
    if n <= CHUNK:  # one call prices them all: waves would only add calls
        rank, prev = np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    else:
        rank, prev = _waves(cols, n)
    fewer_grads = (cols["pp"] > 1) & (cols["vpp"] > 1) & (cols["fsdp"] > 1)
    pp_vpp = cols["pp"].astype(np.int64) * (int(cols["vpp"].max()) + 1) + cols["vpp"]
    shape_order = np.argsort(pp_vpp, kind="stable")
    return shape_order, rank[shape_order], prev, fewer_grads


def _price_all(pricer: Pricing, space: Space, request: str, *, top: int, model: ModelSpec,
               poll: Poll | None = None, allowed: tuple[int, ...] = (), threshold: float = np.inf) -> Priced:
    """Price every row of `space` (the module docstring's passes, without the branch and bound). Rows whose
    lower bound exceeds `threshold` (a K-th best time found elsewhere) or the K-th best here are not priced
    again under the slower modes."""
    n = len(space)
    cols = dict(space.columns)
    modes = REQUEST_MODES[request]
    if allowed and len(modes) > 1:
        modes = tuple(m for m in modes if m in allowed) or modes
    single = len(modes) == 1
    first_mode = modes[0]
    light = max(modes)  # the lightest mode offered (full, else selective): it decides whether any mode fits
    budget = float(pricer.budget_gib)
    out = Priced(feasible=np.zeros(n, dtype=bool), exact=np.zeros(n, dtype=bool),
                 mode=np.full(n, -1, dtype=np.int8), step=np.full(n, np.inf), peak=np.full(n, np.inf),
                 unfit_mode=first_mode if single else light)
    if n == 0:
        return out
    bound = np.full(n, np.inf)  # the first pass's step time: exact (single) or a lower bound (several modes)
    full_peak = np.full(n, np.inf)  # full recompute's peak where no recompute does not fit
    shape_order, rank_sorted, prev, fewer_grads = _pricing_order(cols, n)
    done = 0
    for k in range(int(rank_sorted.max()) + 1):
        rows = shape_order[rank_sorted == k]
        if k > 0:
            rows = rows[out.feasible[prev[rows]] | fewer_grads[rows]]
        if rows.size == 0:
            break
        for start in range(0, rows.size, CHUNK):
            idx = rows[start:start + CHUNK]
            pt = pricer.price(table_of(cols, idx, first_mode if single else OFF), parts=False)
            out.priced += idx.size
            # Megatron's stated CPU offload waits for its copies under no recompute only (engine.cost.offload):
            # without that wait no recompute still bounds every mode from below, and a row that waits is not
            # final: recomputing instead may be faster (_exact_modes weighs it against its no-recompute time).
            wait = pt.offload_wait_s if pt.offload_wait_s is not None else np.zeros(idx.size)
            bound[idx] = pt.step_time_s - wait
            if single:
                fits = np.asarray(pt.fits, dtype=bool)
                out.feasible[idx] = fits
                out.exact[idx] = True
                out.step[idx] = np.where(fits, pt.step_time_s, np.inf)
                out.peak[idx] = pt.peak_gib
                out.mode[idx] = np.where(fits, first_mode, -1)
            else:
                # no recompute, priced as the lower bound of every mode; a choice only where it is offered
                off_fits = np.asarray(pt.fits, dtype=bool) & (OFF in modes)
                # Where no recompute fits the row is feasible already; elsewhere full recompute, the lightest
                # mode, decides whether any mode fits (the faster ones are priced exactly if they matter).
                full = np.full(idx.size, -np.inf)
                unfit = np.nonzero(~off_fits)[0]
                if unfit.size:
                    full[unfit] = mode_peaks(pt, unfit, (light,))[:, 0]
                full_peak[idx] = full
                feasible = off_fits | (full <= budget + _SLACK * max(budget, 1.0))
                out.feasible[idx] = feasible
                out.exact[idx] = off_fits & ~(wait > 0)
                out.step[idx] = np.where(feasible, pt.step_time_s, np.inf)
                out.peak[idx] = np.where(off_fits, pt.peak_gib, full)
                out.mode[idx] = np.where(off_fits, OFF, -1)
            done += idx.size
            if poll is not None:
                poll(done)
    if not single:
        _exact_modes(pricer, cols, out, bound, full_peak, budget, top, modes, threshold)
        if request == "per_layer":
            _per_layer(pricer, cols, out, bound, top=top, model=model, modes=modes, threshold=threshold)
    return out


def _kth(out: Priced, top: int) -> float:
    """The K-th best exact step time (inf with fewer than K exact fitting rows)."""
    ex = out.step[out.exact & np.isfinite(out.step)]
    if ex.size < top:
        return float("inf")
    return float(np.partition(ex, top - 1)[top - 1])


def _exact_modes(pricer: Pricing, cols: dict[str, np.ndarray], out: Priced, bound: np.ndarray,
                 full_peak: np.ndarray, budget: float, top: int,
                 modes: tuple[int, ...] = (OFF, SELECTIVE, FULL), outer: float = np.inf) -> None:
    """Price exactly, under selective and under full recompute, the feasible rows no recompute cannot fit (or
    fits only waiting for Megatron's offload copies) whose lower bound could still reach the top K; the fastest
    fitting mode wins (ties: less memory), no recompute among them where it fits."""
    threshold = min(_kth(out, top), outer)
    cand = np.nonzero(out.feasible & ~out.exact & (bound <= threshold))[0]
    if cand.size == 0:
        return
    # a row whose no-recompute plan fits but waits for offload copies starts from that plan (its mode OFF)
    off = out.mode[cand] == OFF
    best_t = np.where(off, out.step[cand], np.inf)
    best_m = np.where(off, out.peak[cand], np.inf)
    best_mode = np.where(off, OFF, -1).astype(np.int8)
    offered = [m for m in (SELECTIVE, FULL) if m in modes]
    # Every offered mode of a row in one table (rows are independent: the same digits as one call per mode,
    # in fewer calls); modes in order, so a tie in time and memory keeps the first, as before.
    step = max(CHUNK // max(len(offered), 1), 1)
    for start in range(0, cand.size, step):
        j = np.arange(start, min(start + step, cand.size))
        rc = np.repeat(np.asarray(offered, dtype=np.int64), j.size)
        pt = pricer.price(table_of(cols, np.tile(cand[j], len(offered)), rc), parts=False)
        out.priced += rc.size
        for i, m in enumerate(offered):
            part = slice(i * j.size, (i + 1) * j.size)
            t, pk = pt.step_time_s[part], pt.peak_gib[part]
            fits = np.asarray(pt.fits[part], dtype=bool)
            better = fits & ((t < best_t[j]) | ((t == best_t[j]) & (pk < best_m[j])))
            best_t[j] = np.where(better, t, best_t[j])
            best_m[j] = np.where(better, pk, best_m[j])
            best_mode[j] = np.where(better, m, best_mode[j])
    ok = best_mode >= 0
    out.exact[cand] = True
    out.step[cand] = np.where(ok, best_t, np.inf)
    out.peak[cand] = np.where(ok, best_m, full_peak[cand])
    out.mode[cand] = best_mode
    out.feasible[cand] = ok


def _per_layer(pricer: Pricing, cols: dict[str, np.ndarray], out: Priced, bound: np.ndarray, *, top: int,
               model: ModelSpec, modes: tuple[int, ...] = (OFF, SELECTIVE, FULL), threshold: float = np.inf) -> None:
    """Give the rows that could still reach the top K a mode per layer (module docstring): 1F1B rows where
    no recompute does not fit whose all-off bound is at most the K-th best time. With offload, rows no single
    mode fits are tried too: offloading holds less than full recompute (engine.search.offload_choice)."""
    threshold = min(_kth(out, top), threshold)
    live = (cols["vpp"] == 1) & (bound <= threshold)
    pick = out.exact & out.feasible & (out.mode != OFF)
    if _offload_link(pricer) > 0:
        pick = pick | (~out.feasible & np.isfinite(bound))
    cand = np.nonzero(pick & live)[0]
    budget = float(pricer.budget_gib)
    for start in range(0, cand.size, CHUNK):
        rows = cand[start:start + CHUNK]
        pt = pricer.price(table_of(cols, rows, FULL))
        out.priced += rows.size
        plans = knapsack_plans(pt, cols["pp"][rows], model, budget, modes,
                                offload=_offload_link(pricer), mbn=cols["mbn"][rows])
        has_plan = np.array([p is not None for p in plans], dtype=bool)
        if not has_plan.any():
            continue
        sel = rows[has_plan]
        lm = np.stack([p for p in plans if p is not None])
        repriced = pricer.price(table_of(cols, sel, FULL, layer_modes=lm))
        out.priced += sel.size
        fits = np.asarray(repriced.fits, dtype=bool)
        better = fits & ((repriced.step_time_s < out.step[sel])
                         | ((repriced.step_time_s == out.step[sel]) & (repriced.peak_gib < out.peak[sel])))
        for j in np.nonzero(better)[0].tolist():
            r = int(sel[j])
            out.feasible[r] = out.exact[r] = True  # a row only offload fits is now priced exactly
            out.step[r] = float(repriced.step_time_s[j])
            out.peak[r] = float(repriced.peak_gib[j])
            out.layer_modes[r] = lm[j]


def _offload_link(pricer: Pricing) -> float:
    """The host link offload may use, GiB/s (the Pricer's offload_gb_s, GB/s; 0 = no offload)."""
    return float(getattr(pricer, "offload_gb_s", 0.0)) * 1e9 / 2.0 ** 30
