"""One strategy priced: a one-row price_table turned into an Estimate (identical numbers by construction)."""

from __future__ import annotations

from dataclasses import replace

from engine.catalog.frameworks import find_framework
from engine.cost.band import ordering_spread, own_terms, relative_spread
from engine.cost.price import price_table
from engine.cost.table import CandidateTable, PricedTable, true_runs
from engine.diagnostics import Diagnostic
from engine.results import MEMORY_TERMS, TIME_TERMS, Estimate
from engine.specs import ClusterSpec, ModelSpec, RunOptions, Strategy


def estimate_row(priced: PricedTable, i: int, strategy: Strategy,
                 diagnostics: tuple[Diagnostic, ...] = ()) -> Estimate:
    """Row i of a priced table as an Estimate (the search uses this for its top rows); the layers the pricing
    offloaded for a stated run option (engine.cost.offload.with_layer_offload) are the strategy's too."""
    if priced.offloaded_gib is not None and not strategy.recompute.offload:
        moved = true_runs(priced.offloaded_gib[i] > 0)
        if moved:
            strategy = replace(strategy, recompute=replace(strategy.recompute, offload=tuple(moved)))
    pp = strategy.pp
    shape = replace(priced.band_shape, cp=strategy.cp, pp=pp, offload=bool(strategy.recompute.offload))
    spread = relative_spread(priced.framework, priced.generation, priced.band_features, shape)
    stages = tuple(float(x) for x in priced.stage_memory_gib[i, :pp])
    return Estimate(
        strategy=strategy,
        fits=bool(priced.fits[i]),
        budget_gib=priced.budget_gib,
        peak_memory_gib=float(priced.peak_gib[i]),
        stage_memory_gib=stages,
        memory_breakdown_gib={k: float(priced.memory_terms[k][i]) for k in MEMORY_TERMS},
        step_time_s=float(priced.step_time_s[i]),
        tokens_per_s=float(priced.tokens_per_s[i]),
        tokens_per_s_per_device=float(priced.tokens_per_s_per_device[i]),
        mfu=float(priced.mfu[i]),
        time_breakdown_s={k: float(priced.time_terms[k][i]) for k in TIME_TERMS},
        time_parts_s={k: float(v[i]) for k, v in priced.time_parts.items()},
        host_launches=float(priced.host_launches[i]) if len(priced.host_launches) else 0.0,
        diagnostics=diagnostics,
        calibration=priced.calibration,
        framework=priced.framework,
        framework_release=priced.framework_release,
        device=priced.device,
        causal_mfu=float(priced.causal_mfu[i]) if priced.causal_mfu is not None else 0.0,
        calibrated_framework=_calibrated(priced.framework),
        vision_tower=_tower(priced, i),
        offloaded_gib=_offloaded(priced, i, strategy),
        offloaded_share=(float(priced.offloaded_share[i]) if priced.offloaded_share is not None
                         and strategy.recompute.offload else None),
        offload_route=_offload_route(priced.framework) if strategy.recompute.offload else "",
        step_spread=spread.step, memory_spread=spread.memory, band_features=priced.band_features,
        order_spread=ordering_spread(priced.framework, priced.generation),
        band_basis=spread.basis, own_terms=own_terms(priced.framework, shape),
    )


def _offloaded(priced: PricedTable, i: int, strategy: Strategy) -> dict[str, float] | None:
    """Row i's offloaded ranges, each with the GiB the largest of its layers moves per micro-batch
    (Estimate.offloaded_gib): a range of one layer kind (the search's offload) moves that much per layer; one
    over dense and MoE layers (Megatron's first N layers of DeepSeek-V3) at most that."""
    if priced.offloaded_gib is None or not strategy.recompute.offload:
        return None
    return {(f"{a}" if a == b else f"{a}-{b}"): float(priced.offloaded_gib[i, a:b + 1].max())
            for a, b in strategy.recompute.offload}


def _tower(priced: PricedTable, i: int) -> dict[str, float] | None:
    """Row i's vision tower share (docs/formats.md §3 `vision_tower`), None for a text-only model."""
    t = priced.tower
    if not t:
        return None
    return {"layers": int(t["layers"][i]), "visual_seq_len": int(t["visual_seq_len"][i]), "stage": 0,
            "memory_gib": float(t["memory_gib"][i]), "time_s": float(t["time_s"][i])}


def _calibrated(name: str) -> bool:
    fw = find_framework(name) if name else None
    return fw.calibrated if fw is not None else False


def _offload_route(framework: str) -> str:
    """How the stack runs an offloaded plan (StackSpace.offload), for what the front ends say of it."""
    fw = find_framework(framework) if framework else None
    return fw.space.offload if fw is not None else ""


def estimate(model: ModelSpec, cluster: ClusterSpec, run: RunOptions, strategy: Strategy,
             budget_gib: float) -> Estimate:
    """Price one strategy (no validation: see estimate_config for the checked path)."""
    table = CandidateTable.from_strategies([strategy], num_layers=model.num_layers + model.mtp_depth)
    return estimate_row(price_table(model, cluster, run, table, budget_gib), 0, strategy)
