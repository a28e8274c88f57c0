"""Activation offload ([HP] §8.6; docs/cost-model.md "Offload"): what a layer costs that runs with recompute off
and moves the activations it keeps to host memory over the host link while the later layers compute.

The cost model prices such a layer as `off` (the code OFFLOAD in CandidateTable.layer_modes, priced as OFF): its
forward, backward and communication are those of a plain layer, and the copies are hidden behind the forward of
the later layers (the search offloads only where they are: engine.search.offload_choice, HyperParallel's feasibility
rule). Only memory differs: the stage no longer holds that layer's activations for every micro-batch in flight,
only the one in transit, so each stage's memory falls by Σ in_flight × kept − the largest kept in transit. This
module applies that correction over the priced table, before calibration scales memory, so `hp-plan estimate`
and the search price an offloaded plan identically (one source of truth).

Megatron-Core's CPU offloading (`--cpu-offloading-num-layers N`, a stack whose StackSpace.offload is "layers")
moves the same memory: TransformerEngine's double-buffered handler ([TE-OFFLOAD]) copies each of the first N
layers' saved activations to the host on a side stream and frees them at a window spread over the whole forward
(the k-th copy is awaited ⌊L/N⌋·(k+1) − 1 layers in), so the device holds the last L − N layers and one copy in
transit; the backward reloads them the same way. Its copies are not chosen to hide (the file states N), so what
they take beyond the compute under them is priced (copy_wait), reported with recompute, the time it trades
against, as the attention swap's wait is (engine.cost.swap).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.catalog.frameworks import framework_of
from engine.cost.rows import layer_stages
from engine.cost.table import OFFLOAD_CODE, CandidateTable, PricedTable
from engine.specs import GIB as GIB_BYTES
from engine.specs import ClusterSpec, ModelSpec, RunOptions

# The layer-mode code of an offloaded layer (after off 0, selective 1, full 2); priced as off.
OFFLOAD = OFFLOAD_CODE
OFF = 0
# Share of the later layers' forward time a host copy may overlap: HyperParallel's assumed default ([HP] §7.9,
# [HW] §2 "overlap 0.8 assumed"); the copy contends with the forward's own HBM traffic, so not all of it.
OVERLAP = 0.8


def with_layer_offload(model: ModelSpec, run: RunOptions, table: CandidateTable) -> CandidateTable:
    """`table` with Megatron-Core's CPU offloading of the first `run.cpu_offload_layers` layers marked (OFFLOAD) on
    every row its stack can run it on, so `estimate`, the search and `compare` price the stated option alike; the
    other rows are priced without it (engine.cost.strategy_rules says so for a stated plan). Which rows can is
    StackSpace.layer_offload_refusals' to say, asked once per distinct (pp, recompute) pair the table holds: the
    rule has one home, and a table holds a handful of such pairs however many rows it has."""
    n_off = run.cpu_offload_layers
    if n_off <= 0 or not len(table):
        return table
    total = model.num_layers + model.mtp_depth
    lm = (np.broadcast_to(np.asarray(table.recompute, dtype=np.int8)[:, None], (len(table), total)).copy()
          if table.layer_modes is None else np.asarray(table.layer_modes, dtype=np.int8).copy())
    pp = np.asarray(table.pp, dtype=np.int64)
    recomputes = (lm != OFF).any(axis=1)
    space = framework_of(run).space
    runs = np.zeros(len(table), dtype=bool)
    for p, rc in {(int(p), bool(rc)) for p, rc in zip(pp.tolist(), recomputes.tolist(), strict=True)}:
        if not space.layer_offload_refusals(n_off, pp=p, recompute=bool(rc), num_layers=model.num_layers):
            runs |= (pp == p) & (recomputes == rc)
    if not runs.any():
        return table
    lm[runs, :n_off] = OFFLOAD
    return replace(table, layer_modes=lm)


def strip_offload(table: CandidateTable) -> tuple[CandidateTable, np.ndarray | None]:
    """The table with offloaded layers coded off (what the rest of the cost model prices), and the (n, layers)
    mask of offloaded layers, None when the table offloads nothing."""
    lm = table.layer_modes
    if lm is None:
        return table, None
    mask = np.asarray(lm) == OFFLOAD
    if not mask.any():
        return table, None
    return replace(table, layer_modes=np.where(mask, OFF, lm).astype(np.int8)), mask


def layer_types(model: ModelSpec) -> np.ndarray:
    """(layers + MTP,) the cost model's type of each global layer: 0 dense, 1 MoE (MTP layers as the model's)."""
    first_dense = model.first_k_dense if model.is_moe else model.num_layers
    total = model.num_layers + model.mtp_depth
    ty = np.where(np.arange(total) < first_dense, 0, 1)
    ty[model.num_layers:] = 1 if model.is_moe else 0
    return ty


def offload_saving(model: ModelSpec, run: RunOptions, table: CandidateTable, priced: PricedTable,
                   mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((n, P) GiB each stage no longer holds, (n, layers) GiB each offloaded layer moves per micro-batch).

    A layer's kept activations per micro-batch are `layer_act_one_gib` under off; the stage held them for
    `in_flight` micro-batches and now holds none, except one layer's of one micro-batch in transit (the largest
    of the stage's offloaded layers, [HP] §8.6 "one offloaded layer is kept in transit")."""
    n, P = priced.stage_memory_gib.shape
    st = layer_stages(model, run, np.asarray(table.pp, dtype=np.int64), np.asarray(table.vpp, dtype=np.int64))
    ty = layer_types(model)
    kept = priced.layer_act_one_gib[:, ty, OFF] * mask  # (n, layers) GiB per micro-batch, 0 where not offloaded
    rows = np.arange(n)[:, None]
    held = np.zeros((n, P))
    np.add.at(held, (np.broadcast_to(rows, st.shape), st), kept * priced.in_flight[rows, st])
    transit = np.zeros((n, P))
    np.maximum.at(transit, (np.broadcast_to(rows, st.shape), st), kept)
    return held - transit, kept


def layer_split(layer_time_s: np.ndarray, stage_parts: dict[str, np.ndarray], mbn: np.ndarray,
                stage: int) -> tuple[np.ndarray, np.ndarray]:
    """((n, 2), (n, 2)) one plain layer's forward and backward seconds per micro-batch on `stage`: its time per
    micro-batch under off split by the stage's forward share of its compute (the cost model's forward /
    (forward + backward))."""
    fwd = stage_parts["forward"][:, stage]
    bwd = stage_parts["backward"][:, stage]
    share = np.divide(fwd, fwd + bwd, out=np.zeros_like(fwd), where=(fwd + bwd) > 0)
    per_mb = layer_time_s[:, :, OFF] / np.maximum(np.asarray(mbn, dtype=np.float64), 1.0)[:, None]
    forward = per_mb * share[:, None]
    return forward, per_mb - forward


def layer_forward(layer_time_s: np.ndarray, stage_parts: dict[str, np.ndarray], mbn: np.ndarray,
                  stage: int) -> np.ndarray:
    """(n, 2) one plain layer's forward seconds per micro-batch on `stage` (layer_split's first half)."""
    return layer_split(layer_time_s, stage_parts, mbn, stage)[0]


def copy_wait(model: ModelSpec, cluster: ClusterSpec, table: CandidateTable, priced: PricedTable,
              kept: np.ndarray) -> np.ndarray:
    """(n,) seconds per step the device waits for Megatron-Core's offload copies, pp 1 (module docstring). The N
    copies of a micro-batch queue on the one host link in each direction and must land within the forward (the
    backward) of the layers after the first, OVERLAP of which they may use: what they take beyond that is
    waited, once per micro-batch. A layer's forward and backward are layer_split's of its plain time."""
    link = cluster.device.host_link_gb_s * 1e9 / GIB_BYTES
    if link <= 0:
        return np.zeros(len(table))
    mbn = np.asarray(table.micro_batch_num, dtype=np.float64)
    fwd, bwd = layer_split(priced.layer_time_s, priced.stage_time_parts, mbn, 0)  # (n, 2) each
    ty = layer_types(model)[1:model.num_layers]  # the layers after the first
    count = np.array([(ty == 0).sum(), (ty == 1).sum()], dtype=np.float64)
    fwd_rest = (fwd * count).sum(axis=1)
    bwd_rest = (bwd * count).sum(axis=1)
    copies = kept.sum(axis=1) / link
    wait = np.maximum(copies - OVERLAP * fwd_rest, 0.0) + np.maximum(copies - OVERLAP * bwd_rest, 0.0)
    return wait * mbn


def _with_wait(priced: PricedTable, wait: np.ndarray, mbn: np.ndarray) -> PricedTable:
    """`priced` with `wait` (n,) seconds a step added to the recompute it trades against: the step, its terms,
    parts and stage-0 timeline, and the rates that follow from the step."""
    if not (wait > 0).any():
        return priced
    step = priced.step_time_s + wait
    slower = np.divide(priced.step_time_s, step, out=np.ones_like(step), where=step > 0)
    terms = {**priced.time_terms, "recompute": priced.time_terms["recompute"] + wait}
    parts = dict(priced.time_parts)
    if "recompute" in parts:
        parts["recompute"] = parts["recompute"] + wait
    stage_parts = dict(priced.stage_time_parts)
    if "recompute" in stage_parts:
        rec = stage_parts["recompute"].copy()
        rec[:, 0] += wait / np.maximum(mbn, 1.0)
        stage_parts["recompute"] = rec
    return replace(priced, step_time_s=step, time_terms=terms, time_parts=parts, stage_time_parts=stage_parts,
                   offload_wait_s=wait, tokens_per_s=priced.tokens_per_s * slower,
                   tokens_per_s_per_device=priced.tokens_per_s_per_device * slower, mfu=priced.mfu * slower,
                   causal_mfu=None if priced.causal_mfu is None else priced.causal_mfu * slower)


def apply_offload(model: ModelSpec, cluster: ClusterSpec, run: RunOptions, table: CandidateTable,
                  priced: PricedTable, mask: np.ndarray) -> PricedTable:
    """`priced` (the table priced with its offloaded layers off) with each stage's memory, the peak, its stage,
    its breakdown and `fits` as offloading makes them. Times are unchanged where the stack's offload is chosen
    to hide (HyperParallel's, engine.search.offload_choice); Megatron-Core's stated offload adds the copies'
    wait (copy_wait)."""
    saving, kept = offload_saving(model, run, table, priced, mask)
    saving = np.where(np.isnan(priced.stage_memory_gib), 0.0, saving)
    stage = priced.stage_memory_gib - saving
    parts = dict(priced.stage_parts)
    act_before = parts["act"] / GIB_BYTES
    parts["act"] = parts["act"] - saving * GIB_BYTES
    out = replace(priced, stage_memory_gib=stage, stage_parts=parts)
    peak_stage = np.nanargmax(np.where(np.isnan(stage), -np.inf, stage), axis=1)
    rows = np.arange(len(stage))
    peak = stage[rows, peak_stage]
    per_stage = out.stage_memory_terms
    terms = {k: v[rows, peak_stage] for k, v in per_stage.items()}
    terms["activations"] = peak - sum(v for k, v in terms.items() if k != "activations")
    changed = mask.any(axis=1)
    memory_terms = {k: np.where(changed, terms[k], priced.memory_terms[k]) for k in priced.memory_terms}
    peak = np.where(changed, peak, priced.peak_gib)
    held = act_before[rows, peak_stage]
    share = np.where(changed & (held > 0), saving[rows, peak_stage] / np.where(held > 0, held, 1.0), 0.0)
    out = replace(out, peak_gib=peak, peak_stage=np.where(changed, peak_stage, priced.peak_stage),
                  memory_terms=memory_terms, fits=peak <= priced.budget_gib, offloaded_gib=kept,
                  offloaded_share=share)
    if framework_of(run).space.offload != "layers":
        return out
    wait = np.where(changed & (np.asarray(table.pp) == 1), copy_wait(model, cluster, table, priced, kept), 0.0)
    return _with_wait(out, wait, np.asarray(table.micro_batch_num, dtype=np.float64))
