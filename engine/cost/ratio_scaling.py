"""Applying calibration ratios to priced strategies: one well-defined step over the priced outputs.

The cost model prices every part of a step from stated facts (engine.cost); calibration then multiplies each
named time part by its group's ratio (engine.specs.RATIO_GROUPS, docs/formats.md §6) — times, under a `local`
calibration, the local factor of each row's own plan (engine.ratios.local, one vector over the table) — and
every memory term by the memory ratio, and recomputes what derives from them (step time, tokens/s, MFU, fits);
a calibrated host part (engine.specs.HOST_PART) adds its seconds per launch unit × each plan's launch units.
Nothing inside the pricing changes, so a framework model or a new term in the cost model composes with calibration without either
knowing the other: `price_table` ends with `apply_ratios(priced, run.ratios)`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from engine.ratios.local import part_factors
from engine.specs import HOST_PART, PRICED_PARTS, RATIO_GROUPS, Ratios

if TYPE_CHECKING:
    from engine.cost.table import PricedTable

# The memory parts kept per stage for printing (engine.cost.table.PricedTable.stage_memory_terms): every
# byte array among them scales with the memory ratio; the counts ("valid", "ne", "ex") do not.
_COUNT_PARTS = frozenset({"valid", "ne", "ex", "grad_share"})
# The per-stage parts the pipeline timeline is drawn from (engine.cost.table.STAGE_TIME_PARTS, plus the
# end-of-step dp_comm and optimizer) -> the ratio group that scales them, so a calibrated timeline still ends
# at the calibrated step time (exactly when the bubble moves with the stage times, as under the step rule).
_STAGE_PART_GROUP = {"forward": "compute", "backward": "compute", "recompute": "compute", "tp_comm": "tp_comm",
                     "cp_comm": "cp_comm", "ep_comm": "ep_comm", "pp_p2p": "pp", "fsdp_comm": "dp_comm",
                     "dp_comm": "dp_comm", "optimizer": "optimizer"}


def part_ratio(ratios: Ratios, part: str) -> float:
    """The ratio that scales one TIME_TERMS part (1.0 for a part no group names), without the local part."""
    for group, parts in RATIO_GROUPS.items():
        if part in parts:
            return ratios.of(group)
    return 1.0


def _group_of(part: str) -> str | None:
    for group, parts in RATIO_GROUPS.items():
        if part in parts:
            return group
    return None


def _scaled_terms(priced: PricedTable, ratios: Ratios, factors: dict[str, np.ndarray | float]
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(time terms, step parts) scaled: each part by its multiplier (engine.ratios.local.part_factors: its own
    ratio, else its group's, times the local factor where it is moved); each term as the sum of its scaled
    parts when the file gives part ratios, else by its group's multiplier."""
    parts = {p: v * factors.get(p, 1.0) for p, v in priced.time_parts.items()}
    if not ratios.parts or not parts:
        return {k: v * factors.get(_group_of(k) or "", 1.0) for k, v in priced.time_terms.items()}, parts
    terms = {k: np.zeros_like(v) for k, v in priced.time_terms.items()}
    for p, v in parts.items():
        if p in PRICED_PARTS:
            terms[PRICED_PARTS[p]] = terms[PRICED_PARTS[p]] + v
    return terms, parts


def apply_ratios(priced: PricedTable, ratios: Ratios | None, features: np.ndarray | None = None) -> PricedTable:
    """`priced` with every time part × its group's multiplier and every memory term × the memory ratio; step time
    is the sum of the scaled parts, throughput and MFU scale inversely with it, `fits` is re-decided against
    the same budget. A group's multiplier is its ratio, times the local factor of each row's plan (`features`,
    engine.ratios.local.plan_features) for the groups a `local` calibration moves. Returns `priced` itself
    when `ratios` is None."""
    if ratios is None:
        return priced
    factors = part_factors(ratios, features)

    def of(group: str | None) -> np.ndarray | float:
        return 1.0 if group is None else factors.get(group, 1.0)

    def per_row(group: str, ndim: int) -> np.ndarray | float:
        """The group's multiplier shaped to broadcast over an array with `ndim` axes, rows first."""
        f = of(group)
        return f.reshape((-1,) + (1,) * (ndim - 1)) if isinstance(f, np.ndarray) else f

    terms, parts = _scaled_terms(priced, ratios, factors)
    step = np.sum(np.stack(list(terms.values())), axis=0) if terms else priced.step_time_s
    if ratios.host_s_per_launch > 0 and len(priced.host_launches) == len(step):
        # The host part adds seconds (no time term holds it): its seconds per launch unit × the plan's units.
        parts = {**parts, HOST_PART: ratios.host_s_per_launch * priced.host_launches}
        step = step + parts[HOST_PART]
    speed = np.divide(priced.step_time_s, step, out=np.ones_like(step), where=step > 0)
    mr = float(ratios.memory)
    wait = priced.offload_wait_s
    if wait is not None and "recompute" in priced.time_parts and "recompute" in parts:
        before = priced.time_parts["recompute"]  # the wait is in the recompute part: it scales with it
        wait = wait * np.divide(parts["recompute"], before, out=np.ones_like(before), where=before > 0)
    peak = priced.peak_gib * mr
    return replace(
        priced,
        peak_gib=peak,
        stage_memory_gib=priced.stage_memory_gib * mr,
        memory_terms={k: v * mr for k, v in priced.memory_terms.items()},
        stage_parts={k: (v if k in _COUNT_PARTS else v * mr) for k, v in priced.stage_parts.items()},
        step_time_s=step,
        time_terms=terms,
        time_parts=parts,
        tokens_per_s=priced.tokens_per_s * speed,
        tokens_per_s_per_device=priced.tokens_per_s_per_device * speed,
        mfu=priced.mfu * speed,
        fits=peak <= priced.budget_gib,
        stage_static_gib=priced.stage_static_gib * mr,
        stage_fixed_gib=priced.stage_fixed_gib * mr,
        layer_act_one_gib=priced.layer_act_one_gib * mr,
        # A layer's forward + backward + recompute is compute-bound; the knapsack trades it against memory
        # with the compute multiplier (its communication share is small beside it and scaled by the same step).
        layer_time_s=priced.layer_time_s * per_row("compute", priced.layer_time_s.ndim),
        layer_extra_time_s=priced.layer_extra_time_s * per_row("compute", priced.layer_extra_time_s.ndim),
        stage_time_parts={k: v * per_row(_STAGE_PART_GROUP.get(k, "compute"), v.ndim)
                          for k, v in priced.stage_time_parts.items()},
        tower={k: v * (mr if k == "memory_gib" else per_row("compute", v.ndim) if k == "time_s" else 1.0)
               for k, v in priced.tower.items()},
        calibration=ratios,
        offload_wait_s=wait,
    )
