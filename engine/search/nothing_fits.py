"""Why nothing fits: when the search finds no strategy within the declared space, work out which refusal to
give and the numbers behind it, in this order: the global batch (which declared lists make it unreachable), the
lists (the space priced again with every list widened, and what each listed value reaches), the rules, the
memory budget (the lightest plan, and what would make one fit: full recompute, more devices, a higher limit).
This prices spaces of its own; engine.search.refusals words the positioned diagnostics."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

import engine.search.refusals as refusals
from engine.config.types import Config
from engine.diagnostics import Diagnostic
from engine.search.pricing import Pricer
from engine.search.rank import Cancelled, Priced, Pricing, allowed_modes, price_space, row_strategy
from engine.search.space import Space, config_groups
from engine.specs import ClusterSpec, ModelSpec, Strategy

# How far the budget refusal scales the cluster to find a size where something fits.
MAX_DEVICE_SCALE = 8


def _describe(pricer: Pricing, strategy: Strategy) -> str:
    """`dp 8 · tp 8 · … (12.3 s per step, 70.1 GiB)`, priced exactly."""
    e = pricer.estimate(strategy)
    return f"{strategy.short()} ({e.step_time_s:.3g} s per step, {refusals.gib(e.peak_memory_gib)})"


def _lightest(space: Space, priced: Priced) -> int | None:
    if len(space) == 0:
        return None
    peak = np.where(np.isfinite(priced.peak), priced.peak, np.inf)
    r = int(np.lexsort((np.arange(len(space)), priced.step, peak))[0])
    return r if math.isfinite(peak[r]) else None


def refuse(config: Config, pricer: Pricing, space: Space, priced: Priced,
           restrict: Mapping[str, tuple[int, ...] | None], model: ModelSpec, cluster: ClusterSpec, g: int,
           budget: float, cancelled: Callable[[], bool] | None) -> list[Diagnostic]:
    """Nothing fits within the declared space: say why (engine.search.refusals), in this order: the global
    batch, the lists (against the space with every list widened), the rules, the budget."""
    relax = {d: (v if d == "etp" else None) for d, v in restrict.items()}
    restricted = [d for d, v in restrict.items() if v is not None and d != "etp"]
    if refusals.batch_unreachable(space, g):
        # Which declared values cause it: each batch-shaping dimension widened on its own.
        causes: list[str] = []
        for d in ("tp", "pp", "cp", "dp", "micro_batch_size"):
            if restrict.get(d) is None:
                continue
            alone = config_groups(config, model, cluster, g, {**restrict, d: None}).materialise()
            if not refusals.batch_unreachable(alone, g) and alone.dp_values:
                causes.append(d)
        return [refusals.batch_refusal(config, space, g, causes)]

    def poll(_: int) -> None:
        if cancelled is not None and cancelled():
            raise Cancelled

    if restricted:
        wide = config_groups(config, model, cluster, g, relax).materialise()
        # The list refusals read every row's fit, step and peak: price the widened space whole.
        wide_priced = price_space(pricer, wide, config.recompute, top=1, model=model, poll=poll,
                                  allowed=allowed_modes(config), exhaustive=True)
        if wide_priced.fits.any():
            light = _lightest(space, priced)
            in_lists = float(priced.peak[light]) if light is not None else None
            notes = _value_notes(config, space, priced, restrict, model, cluster, g)
            return refusals.list_refusals(config, restrict, space, wide, wide_priced.fits, wide_priced.step,
                                         wide_priced.peak, in_lists, budget,
                                         lambda r: _describe(pricer, row_strategy(wide, wide_priced, r)), notes)
    else:
        wide, wide_priced = space, priced
    if len(wide) == 0:
        if refusals.batch_unreachable(wide, g):
            return [refusals.batch_refusal(config, wide, g)]
        return [refusals.validity_refusal(config, wide.refused)]
    light = _lightest(wide, wide_priced)
    if light is None:
        return [refusals.validity_refusal(config, wide.refused)]
    lightest = row_strategy(wide, wide_priced, light)
    peak = float(wide_priced.peak[light])
    advice = _budget_advice(config, pricer, wide, relax, model, cluster, g, budget, lightest, peak, poll)
    return [refusals.budget_refusal(config, budget, lightest.short(), peak, advice)]


def _value_notes(config: Config, space: Space, priced: Priced, restrict: Mapping[str, tuple[int, ...] | None],
                 model: ModelSpec, cluster: ClusterSpec, g: int) -> dict[tuple[str, int], str]:
    """Why each listed value yields nothing that fits: the lightest peak its candidates reach within the lists,
    or, when it has no valid candidate at all, the rules that candidates with it break (the lists as declared,
    this dimension pinned to the value)."""
    notes: dict[tuple[str, int], str] = {}
    for d, values in restrict.items():
        if values is None or d == "etp":
            continue
        col = space.columns[refusals.DIM_COLUMN[d]]
        for v in sorted(set(values)):
            rows = np.nonzero(col == v)[0]
            peaks = priced.peak[rows] if rows.size else np.empty(0)
            peaks = peaks[np.isfinite(peaks)]
            if peaks.size:
                notes[(d, v)] = f"its lightest strategy needs {refusals.gib(float(peaks.min()))}"
            elif rows.size == 0:
                alone = config_groups(config, model, cluster, g, {**restrict, d: (v,)}).materialise()
                rules = sorted(alone.refused.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
                if rules:
                    notes[(d, v)] = "no valid candidate (" + "; ".join(r for r, _ in rules) + ")"
    return notes


def _budget_advice(config: Config, pricer: Pricing, wide: Space, relax: Mapping[str, tuple[int, ...] | None],
                   model: ModelSpec, cluster: ClusterSpec, g: int, budget: float, lightest: Strategy,
                   peak: float, poll: Callable[[int], None]) -> list[str]:
    """What would make a strategy fit, in numbers: recompute, more devices, the budget itself."""
    tps = [int(t) for t in set(wide.columns["tp"].tolist())]
    pps = [int(p) for p in set(wide.columns["pp"].tolist())]
    out: list[str] = [
        f"Nothing is lighter with every dimension searched within its bounds (tp up to {max(tps)}, pp up to "
        f"{max(pps)}, micro_batch_size down to {int(wide.columns['mbs'].min())}) and recompute "
        f"{lightest.recompute.mode}."
    ]
    if config.recompute in ("none", "selective"):
        full = price_space(pricer, wide, "full", top=1, model=model, poll=poll)
        order = full.order(1)
        if order.size:
            r = int(order[0])
            out.append(f"With recompute: full, {row_strategy(wide, full, r).short()} fits at {refusals.gib(full.peak[r])}.")
        else:
            lf = _lightest(wide, full)
            if lf is not None:
                out.append(f"Full recompute lowers the lightest to {refusals.gib(full.peak[lf])}.")
    scale = 2
    while scale <= MAX_DEVICE_SCALE:
        bigger = replace(cluster, num_nodes=cluster.num_nodes * scale)
        big_pricer = replace(pricer, cluster=bigger) if isinstance(pricer, Pricer) else None
        if big_pricer is None:
            break
        space = config_groups(config, model, bigger, g, relax,
                              optimizer_shard=lightest.optimizer_shard).materialise()
        if len(space):
            priced = price_space(big_pricer, space, config.recompute, top=1, model=model, poll=poll,
                                 allowed=allowed_modes(config))
            order = priced.order(1)
            if order.size:
                r = int(order[0])
                out.append(f"With {bigger.world_size} devices ({bigger.num_nodes} nodes of {bigger.cards_per_node}), "
                           f"{row_strategy(space, priced, r).short()} fits at {refusals.gib(priced.peak[r])}.")
                break
        scale *= 2
    else:
        out.append(f"Even {cluster.world_size * MAX_DEVICE_SCALE} devices do not fit it with recompute {config.recompute}.")
    device = cluster.memory_gib
    need = refusals.round_up(peak)
    if config.memory_limit_gb and 0 < config.memory_limit_gb < device and peak <= device:
        out.append(f"Or raise constraint.memory_limit_gb to {need:.1f} (the device holds {refusals.gib(device)}).")
    elif peak > device:
        out.append(f"A device with at least {need:.1f} GiB would hold the lightest as it is.")
    return out
