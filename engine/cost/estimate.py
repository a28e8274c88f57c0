"""One strategy priced: a one-row price_table turned into an Estimate (identical numbers by construction)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from engine.catalog.frameworks import find_framework
from engine.cost.band import ordering_spread, own_terms, relative_spread
from engine.cost.price import price_table
from engine.cost.table import CandidateTable, PricedTable, true_runs
from engine.diagnostics import Diagnostic
from engine.results import MEMORY_TERMS, TIME_TERMS, Estimate, Stages
from engine.specs import ClusterSpec, ModelSpec, RunOptions, Strategy


def estimate_row(priced: PricedTable, i: int, strategy: Strategy,
                 diagnostics: tuple[Diagnostic, ...] = ()) -> Estimate:
    """Row i of a priced table as an Estimate; the layers the pricing offloaded for a stated run option
    (engine.cost.offload.with_layer_offload) are the strategy's too."""
    return estimate_rows(priced, ((i, strategy),), diagnostics)[0]


@dataclass(frozen=True, slots=True)
class _Columns:
    """A priced table's per-row figures as Python numbers, read once for all the rows turned into Estimates (a
    search keeps up to POOL of them: element by element, numpy's scalar conversions were most of the cost)."""

    peak: list[float]
    stages: list[list[float]]
    step: list[float]
    tokens: list[float]
    tokens_device: list[float]
    mfu: list[float]
    causal_mfu: list[float] | None
    fits: list[bool]
    host: list[float] | None
    memory: dict[str, list[float]]
    time: dict[str, list[float]]
    parts: dict[str, list[float]]

    @classmethod
    def of(cls, priced: PricedTable) -> _Columns:
        def lists(terms: Mapping[str, np.ndarray]) -> dict[str, list[float]]:
            return {k: np.asarray(v, dtype=np.float64).tolist() for k, v in terms.items()}

        return cls(
            peak=priced.peak_gib.astype(np.float64).tolist(), stages=priced.stage_memory_gib.tolist(),
            step=priced.step_time_s.astype(np.float64).tolist(),
            tokens=priced.tokens_per_s.astype(np.float64).tolist(),
            tokens_device=priced.tokens_per_s_per_device.astype(np.float64).tolist(),
            mfu=priced.mfu.astype(np.float64).tolist(),
            causal_mfu=None if priced.causal_mfu is None else priced.causal_mfu.astype(np.float64).tolist(),
            fits=np.asarray(priced.fits, dtype=bool).tolist(),
            host=priced.host_launches.astype(np.float64).tolist() if len(priced.host_launches) else None,
            memory=lists({k: priced.memory_terms[k] for k in MEMORY_TERMS}),
            time=lists({k: priced.time_terms[k] for k in TIME_TERMS}), parts=lists(priced.time_parts))


def estimate_rows(priced: PricedTable, rows: Iterable[tuple[int, Strategy]],
                  diagnostics: tuple[Diagnostic, ...] = ()) -> list[Estimate]:
    """estimate_row of each (row, strategy) of one table, its columns read once (_Columns): what the search turns
    its kept rows into."""
    cols = _Columns.of(priced)
    calibrated = _calibrated(priced.framework)
    order = ordering_spread(priced.framework, priced.generation)
    return [_estimate(priced, cols, i, s, diagnostics, calibrated, order) for i, s in rows]


def _estimate(priced: PricedTable, cols: _Columns, i: int, strategy: Strategy, diagnostics: tuple[Diagnostic, ...],
              calibrated: bool, order: float) -> Estimate:
    """Row i of `priced` (read through `cols`) as the Estimate of `strategy`."""
    if priced.offloaded_gib is not None and not strategy.recompute.offload:
        moved = true_runs(priced.offloaded_gib[i] > 0)
        if moved:
            strategy = replace(strategy, recompute=replace(strategy.recompute, offload=tuple(moved)))
    pp = strategy.pp
    shape = replace(priced.band_shape, cp=strategy.cp, pp=pp, offload=bool(strategy.recompute.offload))
    spread = relative_spread(priced.framework, priced.generation, priced.band_features, shape)
    return Estimate(
        strategy=strategy,
        fits=cols.fits[i],
        budget_gib=priced.budget_gib,
        peak_memory_gib=cols.peak[i],
        stage_memory_gib=tuple(cols.stages[i][:pp]),
        memory_breakdown_gib={k: v[i] for k, v in cols.memory.items()},
        step_time_s=cols.step[i],
        tokens_per_s=cols.tokens[i],
        tokens_per_s_per_device=cols.tokens_device[i],
        mfu=cols.mfu[i],
        time_breakdown_s={k: v[i] for k, v in cols.time.items()},
        time_parts_s={k: v[i] for k, v in cols.parts.items()},
        host_launches=cols.host[i] if cols.host is not None else 0.0,
        diagnostics=diagnostics,
        calibration=priced.calibration,
        framework=priced.framework,
        framework_release=priced.framework_release,
        device=priced.device,
        causal_mfu=cols.causal_mfu[i] if cols.causal_mfu is not None else 0.0,
        calibrated_framework=calibrated,
        vision_tower=_tower(priced, i),
        offloaded_gib=_offloaded(priced, i, strategy),
        offloaded_share=(float(priced.offloaded_share[i]) if priced.offloaded_share is not None
                         and strategy.recompute.offload else None),
        offload_route=_offload_route(priced.framework) if strategy.recompute.offload else "",
        step_spread=spread.step, memory_spread=spread.memory, band_features=priced.band_features,
        order_spread=order,
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
    """Price one strategy (no validation: see estimate_config for the checked path), stage by stage
    (Estimate.stages)."""
    table = CandidateTable.from_strategies([strategy], num_layers=model.num_layers + model.mtp_depth)
    priced = price_table(model, cluster, run, table, budget_gib)
    est = estimate_row(priced, 0, strategy)
    return replace(est, stages=stages_of(priced, est.strategy.pp))


def stages_of(priced: PricedTable, pp: int) -> Stages:
    """Row 0 of a one-row pricing, stage by stage (its first `pp` stages); the pricing kept its stage time parts
    (price_table's `parts`, on by default)."""
    assert priced.stage_time_parts, "a pricing without its stage time parts cannot be told stage by stage"

    def first(a: np.ndarray) -> tuple[float, ...]:
        return tuple(float(x) for x in a[0, :pp])

    return Stages(layers=tuple(int(x) for x in priced.layer_count[0].sum(axis=1)[:pp]),
                  memory={k: first(priced.stage_memory_terms[k]) for k in MEMORY_TERMS},
                  time_parts={k: first(v) for k, v in priced.stage_time_parts.items()})
