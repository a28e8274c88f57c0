"""The vectorised pricing core: memory per pipeline stage and step time for every row of a CandidateTable.

This module orchestrates; the terms live beside it: engine.cost.rows (the per-row context built once per
block), engine.cost.memory (memory terms), engine.cost.timing (compute, recompute, output layer,
optimizer) and engine.cost.communication (TP/CP/EP, pipeline, FSDP and data-parallel traffic). Every formula names its source; every coefficient comes from engine.cost.constants. docs/cost-model.md
states the same formulas in prose. Notation: T = b·s/cp tokens a rank's sequence shard holds, t = tp,
p = pp, v = virtual chunks, m = micro-batches, h = hidden, f = MLP width.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from engine.catalog.devices import matmul_rate_measured
from engine.catalog.frameworks import framework_of, release_label
from engine.cost import constants as K
from engine.cost.band import band_features, band_shape
from engine.cost.communication import (
    LayerComm,
    dp_sync_exposed,
    dp_sync_exposure,
    dp_sync_traffic,
    fsdp_exposed,
    fsdp_exposure,
    fsdp_traffic,
    layer_comm,
    pp_p2p,
)
from engine.cost.dualpipev import dualpipev_bubble
from engine.cost.memory import Memory, price_memory, stage_params
from engine.cost.model import model_stats
from engine.cost.offload import apply_offload, strip_offload, with_layer_offload
from engine.cost.ratio_scaling import apply_ratios
from engine.cost.rows import OFF, Rows, build_rows
from engine.cost.step_parts import host_launches, step_parts
from engine.cost.swap import exposed_copy_time
from engine.cost.table import CandidateTable, PricedTable
from engine.cost.timing import (
    LayerCompute,
    grad_accumulation_time,
    head_forward_time,
    head_time,
    layer_compute,
    optimizer_time,
    ordered_sum,
    recompute_extra,
)
from engine.cost.tower import TowerCost, tower_cost
from engine.ratios.local import plan_features
from engine.results import MEMORY_TERMS, TIME_TERMS
from engine.specs import ClusterSpec, ModelSpec, RunOptions

# Rows priced per block: small enough that a block's (rows × stages) arrays stay in cache, large enough
# that numpy's per-call overhead is amortised. Rows are independent, so blocking never changes a number.
BLOCK_ROWS = 4096


def price_table(
    model: ModelSpec, cluster: ClusterSpec, run: RunOptions, table: CandidateTable, budget_gib: float,
    parts: bool = True,
) -> PricedTable:
    """Price every row of `table`. See engine.cost for the contract; docs/cost-model.md for the formulas.

    `parts` False leaves out what only a plan's explanation reads (PricedTable.stage_time_parts, time_parts and
    host_launches stay empty): a search's bulk passes rank on the step, the fit and the memory terms and price
    the plans they keep again in full. A calibrated run or offloaded layers scale or move those parts, so they
    are priced all the same there. Every other figure is the same to the last digit."""
    n = len(table)
    P = int(np.maximum(table.pp, 1).max()) if n else 1
    features = None
    if run.ratios is not None and run.ratios.local is not None:
        features = plan_features(model, cluster, table.tp, table.pp, table.cp, table.ep, table.dp,
                                 table.micro_batch_size)
    # Offloaded layers (engine.cost.offload: the search's choice, or Megatron's stated CPU offloading) are priced
    # as off, then their memory leaves the stages.
    table, offloaded = strip_offload(with_layer_offload(model, run, table))
    parts = parts or run.ratios is not None or offloaded is not None
    if n <= BLOCK_ROWS:
        priced = _price_block(model, cluster, run, table, budget_gib, P, parts)
    else:
        priced = _concat([_price_block(model, cluster, run, table.take(np.arange(i, min(i + BLOCK_ROWS, n))),
                                       budget_gib, P, parts) for i in range(0, n, BLOCK_ROWS)])
    if offloaded is not None:
        priced = apply_offload(model, cluster, run, table, priced, offloaded)
    return apply_ratios(priced, run.ratios, features)


@dataclass(frozen=True, slots=True)
class SyncParts:
    """What a row's sharding costs before any overlap, uncalibrated, (n, P) per stage unless stated: FSDP
    traffic per micro-batch and the part of it prefetching cannot hide (fsdp_traffic), the end-of-step
    gradient reduction, weight gather and bucket count (dp_sync_traffic), the stage mask, and the (n,)
    optimizer step. None of it depends on the micro-batch size or sequence parallelism."""

    fsdp_raw: np.ndarray
    fsdp_floor: np.ndarray
    red: np.ndarray
    gat: np.ndarray
    buckets: np.ndarray
    valid: np.ndarray
    optimizer: np.ndarray

    def take(self, idx: np.ndarray) -> SyncParts:
        return SyncParts(*(getattr(self, f.name)[idx] for f in fields(self)))


def sync_parts(model: ModelSpec, cluster: ClusterSpec, run: RunOptions, table: CandidateTable, P: int
               ) -> SyncParts:
    """SyncParts of every row of `table`, stage arrays P wide (at least the table's largest pp). The search
    prices them once per combination of degrees and applies them to every micro-batch size with sync_time
    (engine.search.bound.sync_bound): the same functions `_price_block` composes, in two halves."""
    r = build_rows(model, cluster, run, table, P)
    tw = tower_cost(r)  # a vision tower's weights sit on stage 0, synchronised and sharded with the decoder's
    params = stage_params(r, None if tw is None else tw.params)
    raw, floor = fsdp_traffic(r, params)
    red, gat, buckets = dp_sync_traffic(r, params)
    opt = optimizer_time(r, params.ne_stage, params.ex_stage, params.shard_o)
    return SyncParts(raw, np.broadcast_to(floor, raw.shape).copy(), red, gat, buckets, r.valid, opt)


def sync_time(run: RunOptions, parts: SyncParts, comp_stage: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((n, P) exposed FSDP traffic per micro-batch, (n,) exposed end-of-step synchronisation) of rows whose
    stages compute `comp_stage` seconds per micro-batch with no recompute, as `_price_block` prices them."""
    fsdp = np.where(parts.valid, fsdp_exposure(parts.fsdp_raw, parts.fsdp_floor, comp_stage), 0.0)
    dp = dp_sync_exposure(framework_of(run).dp_overlaps(run), parts.red, parts.gat, parts.buckets, comp_stage,
                          np.zeros_like(comp_stage))
    return fsdp, np.where(parts.valid, dp, 0.0).max(axis=1)


def _concat(parts: list[PricedTable]) -> PricedTable:
    kw: dict[str, object] = {}
    for f in fields(PricedTable):
        vals = [getattr(pt, f.name) for pt in parts]
        if isinstance(vals[0], dict):
            kw[f.name] = {k: np.concatenate([v[k] for v in vals]) for k in vals[0]}
        elif isinstance(vals[0], np.ndarray) or (vals[0] is None and f.name == "causal_mfu"):
            kw[f.name] = np.concatenate(vals)
        else:
            kw[f.name] = vals[0]
    return PricedTable(**kw)  # type: ignore[arg-type]


def _price_block(
    model: ModelSpec, cluster: ClusterSpec, run: RunOptions, table: CandidateTable, budget_gib: float, P: int,
    parts: bool = True,
) -> PricedTable:
    """Price a block of rows with stage arrays P wide (the whole table's largest pp): memory terms, then
    time per layer (compute, recompute, TP/CP/EP communication), per stage, and the pipeline combination; with
    `parts`, the explanation's per-stage and per-part times too (price_table)."""
    r = build_rows(model, cluster, run, table, P)
    tw = tower_cost(r)
    mem = price_memory(r, *((None, None) if tw is None else (tw.params, tw.act_b)))
    lc = layer_compute(r, mem.act)
    # swap-attention's wait for its host copies is reported with recompute, the time it trades against
    rec = recompute_extra(r, mem.act, lc) + exposed_copy_time(r, mem.swapped, lc.attn_block_fwd)
    comm = layer_comm(r, lc)
    per_layer = lc.compute[:, :, None] + rec + comm.tp + comm.cp + comm.ep  # (n, 2, 3) per micro-batch

    # Per stage, per micro-batch: layers, the output layer on the last stage, pipeline p2p, FSDP traffic.
    comp_stage = r.stage_sum(np.broadcast_to(lc.compute[:, :, None], (r.n, 2, 3)))
    other_stage = r.stage_sum(rec + comm.tp + comm.cp + comm.ep)  # recompute + TP/CP/EP communication
    comp_stage = comp_stage + np.where(r.last, head_time(r)[:, None], 0.0)
    comp_stage = comp_stage + grad_accumulation_time(r, mem.params.ne_stage, mem.params.ex_stage)
    tw_parts = _tower_stage(r, tw)
    comp_stage = comp_stage + tw_parts["compute"]
    other_stage = other_stage + tw_parts["recompute"] + tw_parts["tp_comm"] + tw_parts["cp_comm"]
    p2p = pp_p2p(r)
    fsdp_exp = fsdp_exposed(r, mem.params, comp_stage)
    stage_t = comp_stage + other_stage + p2p[:, None] + fsdp_exp
    stage_t[~r.valid] = 0.0
    # End of step: DP synchronisation and the optimizer.
    dp_exp_stage = dp_sync_exposed(r, mem.params, comp_stage, r.stage_sum(rec) + tw_parts["recompute"])
    opt_t = optimizer_time(r, mem.params.ne_stage, mem.params.ex_stage, mem.params.shard_o)
    slowest = np.argmax(stage_t, axis=1)  # the stage each row's step is priced at
    bubble = _bubble(r, lc, stage_t, slowest, comp_stage, rec, tw_parts)
    priced = _combine(r, mem, stage_t, slowest, bubble, comp_stage, fsdp_exp, dp_exp_stage, opt_t, p2p, rec, comm,
                      per_layer, budget_gib, tw_parts)
    if not parts:
        return replace(priced, tower=_tower_totals(r, mem, tw))
    return replace(priced, stage_time_parts=_stage_time_parts(r, lc, comp_stage, rec, comm, {
        "pp_p2p": np.broadcast_to(p2p[:, None], stage_t.shape), "fsdp_comm": fsdp_exp, "dp_comm": dp_exp_stage,
        "optimizer": np.broadcast_to(opt_t[:, None], stage_t.shape)}, tw_parts), tower=_tower_totals(r, mem, tw),
        time_parts=step_parts(r, lc, priced.time_terms, slowest, tw_parts["compute"]),
        host_launches=host_launches(r, slowest))


def _bubble(r: Rows, lc: LayerCompute, stage_t: np.ndarray, slowest: np.ndarray, comp_stage: np.ndarray,
            rec: np.ndarray, tw: dict[str, np.ndarray]) -> np.ndarray:
    """(n,) the pipeline's idle time per step: the other stages' work once, ÷ v when interleaved (NAR21 §2.2;
    with unequal stages [HP] §7.5's T_sum − T_max), or DualPipeV's (engine.cost.dualpipev)."""
    bubble = (ordered_sum(stage_t) - stage_t[r.rows, slowest]) / r.v
    dpv = r.dualpipev
    if not dpv.any():
        return bubble
    fwd = r.stage_sum(np.broadcast_to(lc.fwd[:, :, None], (r.n, 2, 3)))
    fwd = fwd + np.where(r.last, head_forward_time(r)[:, None], 0.0) + tw["forward"]
    bwd = comp_stage - fwd + r.stage_sum(rec) + tw["recompute"]
    wgrad = r.stage_sum(np.broadcast_to(lc.gemm[:, :, None], (r.n, 2, 3)))
    valid = r.valid
    dual = dualpipev_bubble(stage_t, np.where(valid, fwd, 0.0), np.where(valid, bwd, 0.0),
                            np.where(valid, wgrad, 0.0))
    return np.where(dpv, dual, bubble)


def _tower_stage(r: Rows, tw: TowerCost | None) -> dict[str, np.ndarray]:
    """(n, P) per micro-batch seconds a vision tower adds to stage 0, by part (zero elsewhere, and everywhere for a
    text-only model)."""
    if tw is None:
        zero = np.zeros((r.n, r.P))
        return {k: zero for k in ("forward", "compute", "recompute", "tp_comm", "cp_comm")}
    parts = {"forward": tw.fwd, "compute": tw.compute, "recompute": tw.rec, "tp_comm": tw.tp, "cp_comm": tw.cp}
    return {k: np.where(r.first, v[:, None], 0.0) for k, v in parts.items()}


def _tower_totals(r: Rows, mem: Memory, tw: TowerCost | None) -> dict[str, np.ndarray]:
    """PricedTable.tower: the vision tower's share of stage 0, memory (its weights, gradients and optimizer states
    as stage 0 shards them, plus its activations × micro-batches in flight there) and time (per step: every
    micro-batch's forward, backward, recompute and communication). Empty for a text-only model."""
    if tw is None:
        return {}
    coef = sum(mem.params.coef_ne[k] for k in ("parameters", "gradients", "optimizer"))
    memory = tw.params * coef + tw.act_b * r.mf[:, 0]
    return {"memory_gib": memory / K.GIB, "time_s": r.mb * tw.time, "layers": np.full(r.n, float(tw.layers)),
            "visual_seq_len": np.full(r.n, float(tw.seq_len))}


def _stage_time_parts(r: Rows, lc: LayerCompute, comp_stage: np.ndarray, rec: np.ndarray, comm: LayerComm,
                      rest: dict[str, np.ndarray], tw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """PricedTable.stage_time_parts: the per-stage, per-micro-batch terms stage_t is the sum of (forward and
    backward compute apart), the stage's exposed end-of-step sync and the optimizer, zero past each row's pp
    (engine.explain draws the pipeline timeline from them)."""
    fwd = r.stage_sum(np.broadcast_to(lc.fwd[:, :, None], (r.n, 2, 3)))
    fwd = fwd + np.where(r.last, head_forward_time(r)[:, None], 0.0) + tw["forward"]
    parts = {"forward": fwd, "backward": comp_stage - fwd, "recompute": r.stage_sum(rec) + tw["recompute"],
             "tp_comm": r.stage_sum(comm.tp) + tw["tp_comm"], "cp_comm": r.stage_sum(comm.cp) + tw["cp_comm"],
             "ep_comm": r.stage_sum(comm.ep), **rest}
    return {k: np.where(r.valid, v, 0.0) for k, v in parts.items()}


def _combine(r: Rows, mem: Memory, stage_t: np.ndarray, imax: np.ndarray, bubble: np.ndarray,
             comp_stage: np.ndarray,
             fsdp_exp: np.ndarray, dp_exp_stage: np.ndarray, opt_t: np.ndarray, p2p: np.ndarray, rec: np.ndarray,
             comm: LayerComm, per_layer: np.ndarray, budget_gib: float, tw: dict[str, np.ndarray]) -> PricedTable:
    """Pipeline combination (the slowest stage runs m micro-batches; `bubble` is the pipeline's idle time,
    _bubble; `imax` the slowest stage) and the PricedTable of the block."""
    mb = r.mb
    pk = (r.rows, imax)
    t_max = stage_t[pk]
    dp_exposed = dp_exp_stage.max(axis=1)
    step = mb * t_max + bubble + dp_exposed + opt_t
    time_terms = {
        "compute": mb * comp_stage[pk],
        "recompute": mb * (r.at_stage(imax, rec) + tw["recompute"][pk]),
        "tp_comm": mb * (r.at_stage(imax, comm.tp) + tw["tp_comm"][pk]),
        "cp_comm": mb * (r.at_stage(imax, comm.cp) + tw["cp_comm"][pk]),
        "ep_comm": mb * r.at_stage(imax, comm.ep),
        "dp_comm": mb * fsdp_exp[pk] + dp_exposed,
        "pp_bubble": bubble,
        "pp_p2p": mb * p2p,
        "optimizer": opt_t,
    }
    assert set(time_terms) == set(TIME_TERMS) and set(mem.terms) == set(MEMORY_TERMS)
    tokens = r.dp * r.b * mb * r.s
    world = r.dp * r.t * r.p * r.cp
    tok_s = tokens / step
    stats = model_stats(r.model)
    tower_flops = _tower_flops(r) * r.dp * r.b * mb  # the tower's model FLOPs per step, bidirectional
    mfu = (stats.flops_per_token_noncausal * tokens + tower_flops) / (step * world * r.peak)
    causal_mfu = (stats.flops_per_token * tokens + tower_flops) / (step * world * r.peak)
    per_step_layer = mb[:, None, None] * per_layer
    extra = per_step_layer - per_step_layer[:, :, OFF:OFF + 1]
    valid = r.valid
    return PricedTable(
        peak_gib=mem.peak_gib, stage_memory_gib=mem.stage_gib, peak_stage=mem.peak_stage, memory_terms=mem.terms,
        stage_parts=mem.stage_parts,
        step_time_s=step, time_terms=time_terms, tokens_per_s=tok_s, tokens_per_s_per_device=tok_s / world,
        mfu=mfu, fits=mem.peak_gib <= budget_gib, budget_gib=float(budget_gib),
        stage_static_gib=np.where(valid, mem.params.static_b / K.GIB, np.nan),
        stage_fixed_gib=np.where(valid, mem.fixed_b / K.GIB, np.nan),
        layer_count=r.counts, in_flight=r.mf, layer_act_one_gib=mem.held * mem.alloc_ratio / K.GIB, layer_time_s=per_step_layer,
        layer_extra_time_s=np.maximum(extra, 0.0), causal_mfu=causal_mfu, framework=r.fw.name,
        framework_release=release_label(r.fw, r.run.framework_version),
        device=r.cluster.device.name, generation=r.cluster.device.generation,
        band_features=_band_features(r),
        band_shape=band_shape(moe=r.model.is_moe, hidden=r.model.hidden, seq_len=r.model.seq_len,
                              cp_algo=r.cp_algo, hybrid=r.model.hybrid is not None),
    )


def _band_features(r: Rows) -> tuple[str, ...]:
    """The error band's features of the rows' plan (engine.cost.band): FP8 where its GEMMs run in FP8 on this
    device, and whether the device's GEMM rate (its FP8 one with FP8) is a stand-in."""
    fp8 = bool(r.run.fp8 and r.cluster.device.fp8_tflops > 0)
    return band_features(moe=r.model.is_moe, seq_len=r.model.seq_len, fp8=fp8,
                         a2a_overlap=bool(r.ep_overlap or r.fb_overlap.any()),
                         unmeasured_device=not matmul_rate_measured(r.cluster.device, fp8))


def _tower_flops(r: Rows) -> float:
    """Model FLOPs of one sample's pass through a vision tower, forward + backward (its layers over visual_seq_len
    tokens, non-causal, plus the merger's GEMMs); 0 for a text-only model."""
    vt = r.model.vision
    if vt is None or vt.num_layers <= 0:
        return 0.0
    return vt.seq_len * (model_stats(vt.layer_model()).flops_per_token_noncausal + 6.0 * vt.merger_params)
