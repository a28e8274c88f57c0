"""Per-layer recompute plans from the per-stage knapsack: `knapsack_plans` solves every pipeline stage of every
priced row (engine.search.recompute, and engine.search.offload_choice where a host link allows offload) and lays
each stage's chosen counts onto the stage's own layers, in model order, as the per-layer mode codes the cost model
prices exactly (engine.cost.CandidateTable.layer_modes). engine.search.rank decides which rows get a plan and
prices them; this module only assembles the plans."""

from __future__ import annotations

import numpy as np

from engine.cost.offload import layer_forward
from engine.cost.rows import FULL, OFF, SELECTIVE
from engine.cost.table import OFFLOAD_CODE, PricedTable
from engine.search.offload_choice import StageInputs, choose_offload, first_kind
from engine.search.recompute import choose_stage
from engine.specs import ModelSpec


def knapsack_plans(pt: PricedTable, pp: np.ndarray, model: ModelSpec, budget: float,
                    modes: tuple[int, ...] = (OFF, SELECTIVE, FULL), *, offload: float = 0.0,
                    mbn: np.ndarray | None = None) -> list[np.ndarray | None]:
    """Solve every stage of every row; return per-row layer mode codes over the body and MTP layers (None
    where a stage cannot fit). With `offload` (a host link, GiB/s) a stage's first layers may be offloaded
    where that is faster (engine.search.offload_choice); `mbn` (the rows' micro-batch counts) is then needed."""
    n, n_stages = pt.stage_static_gib.shape
    counts = np.rint(np.nan_to_num(pt.layer_count, nan=0.0)).astype(np.int64)  # (n, P, 2)
    act = np.nan_to_num(pt.layer_act_gib, nan=0.0)  # (n, P, 2, 3)
    # a mode not offered never fits (finite: an option taken 0 times must still cost 0)
    act[..., [m for m in (OFF, SELECTIVE, FULL) if m not in modes]] = 1e30
    time = pt.layer_time_s  # (n, 2, 3)
    chosen = np.zeros((n, n_stages, 2, 3), dtype=np.int64)
    offloaded = np.zeros((n, n_stages), dtype=np.int64)
    feasible = np.ones(n, dtype=bool)
    first_dense = model.first_k_dense if model.is_moe else model.num_layers
    for s in range(n_stages):
        live = pp > s
        if not live.any():
            continue
        stage_budget = budget - np.nan_to_num(pt.stage_static_gib[:, s]) - np.nan_to_num(pt.stage_fixed_gib[:, s])
        c = choose_stage(counts[:, s], act[:, s], time, stage_budget)
        if offload > 0 and mbn is not None:
            fwd = layer_forward(time, pt.stage_time_parts, mbn, s)
            inputs = StageInputs(counts[:, s], act[:, s], np.nan_to_num(pt.layer_act_one_gib), time, fwd,
                                 stage_budget, first_kind(counts, s, first_dense))
            oc = choose_offload(inputs, c, offload)
            c = oc.rest
            offloaded[:, s] = np.where(live, oc.k, 0)
        feasible &= ~live | c.feasible
        chosen[:, s] = np.where(live[:, None, None], c.counts.reshape(n, 2, 3), 0)
    out: list[np.ndarray | None] = []
    for i in range(n):
        if not feasible[i]:
            out.append(None)
            continue
        layers = stage_layers(int(pp[i]), model.num_layers, first_dense, counts[i])
        width = model.num_layers + model.mtp_depth
        out.append(None if layers is None else assign_layers(layers, chosen[i], width, offloaded[i]))
    return out


def stage_layers(pp: int, body: int, first_dense: int, counts: np.ndarray) -> list[list[tuple[int, int]]] | None:
    """Per stage (vpp 1), its (global layer, kind) pairs in model order, kind 0 dense, 1 MoE, following the
    cost model's split: each stage holds the next `counts[s]` layers (engine.cost.layout, whatever layout it
    priced). Layers past the `body` layers (MTP) sit on the last stage and take the kind the cost model counted
    them under. None if `counts` (P, 2) disagree."""
    totals = [int(counts[s, 0] + counts[s, 1]) for s in range(pp)]
    extra_total = sum(totals) - body
    if extra_total < 0 or totals[-1] < extra_total:
        return None
    totals[-1] -= extra_total
    out: list[list[tuple[int, int]]] = []
    start = 0
    for n in totals:
        out.append([(g, 0 if g < first_dense else 1) for g in range(start, start + n)])
        start += n
    g = body
    for k in (0, 1):
        extra = int(counts[pp - 1, k]) - sum(1 for _, kind in out[-1] if kind == k)
        for _ in range(max(extra, 0)):
            out[-1].append((g, k))
            g += 1
    for s in range(pp):
        for k in (0, 1):
            if sum(1 for _, kind in out[s] if kind == k) != int(counts[s, k]):
                return None
    return out


def assign_layers(layers: list[list[tuple[int, int]]], counts: np.ndarray, num_layers: int,
            offloaded: np.ndarray | None = None) -> np.ndarray:
    """Lay a stage's chosen counts (kind, mode) onto its layers: its first `offloaded[s]` layers offloaded
    (OFFLOAD_CODE, [HP] §8.6), then full first, then selective, then off, so the layer that ends the warm-up
    (the stage's last; its backward working set is charged) keeps its activations ([HP] §6.11)."""
    modes = np.zeros(num_layers, dtype=np.int8)
    for s, stage in enumerate(layers):
        left = counts[s].copy()
        k = int(offloaded[s]) if offloaded is not None else 0
        for g, _ in stage[:k]:
            modes[g] = OFFLOAD_CODE
        for g, kind in stage[k:]:
            for m in (FULL, SELECTIVE, OFF):
                if left[kind, m] > 0:
                    left[kind, m] -= 1
                    modes[g] = m
                    break
    return modes
