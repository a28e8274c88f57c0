"""Activation offload ([HP] §8.6; docs/cost-model.md "Offload"): what a layer costs that runs with recompute off
and moves the activations it keeps to host memory over the host link while the later layers compute.

The cost model prices such a layer as `off` (the code OFFLOAD in CandidateTable.layer_modes, priced as OFF): its
forward, backward and communication are those of a plain layer, and the copies are hidden behind the forward of
the later layers (the search offloads only where they are: engine.search.offload_choice, HyperParallel's feasibility
rule). Only memory differs: the stage no longer holds that layer's activations for every micro-batch in flight,
only the one in transit, so each stage's memory falls by Σ in_flight × kept − the largest kept in transit. This
module applies that correction over the priced table, before calibration scales memory, so `hp-plan estimate`
and the search price an offloaded plan identically (one source of truth).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.cost.rows import layer_stages
from engine.cost.table import OFFLOAD_CODE, CandidateTable, PricedTable
from engine.specs import GIB as GIB_BYTES
from engine.specs import ModelSpec, RunOptions

# The layer-mode code of an offloaded layer (after off 0, selective 1, full 2); priced as off.
OFFLOAD = OFFLOAD_CODE
OFF = 0
# Share of the later layers' forward time a host copy may overlap: HyperParallel's assumed default ([HP] §7.9,
# [HW] §2 "overlap 0.8 assumed"); the copy contends with the forward's own HBM traffic, so not all of it.
OVERLAP = 0.8


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


def apply_offload(model: ModelSpec, run: RunOptions, table: CandidateTable, priced: PricedTable,
                  mask: np.ndarray) -> PricedTable:
    """`priced` (the table priced with its offloaded layers off) with each stage's memory, the peak, its stage,
    its breakdown and `fits` as offloading makes them; times are unchanged (the copies are hidden)."""
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
    return replace(out, peak_gib=peak, peak_stage=np.where(changed, peak_stage, priced.peak_stage),
                   memory_terms=memory_terms, fits=peak <= priced.budget_gib, offloaded_gib=kept,
                   offloaded_share=share)
