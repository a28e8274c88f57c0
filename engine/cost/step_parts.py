"""The priced step's parts (engine.specs.PRICED_PARTS): the time terms split further, from the arrays the
pricing already built, so each plan is still priced once and the parts add up to the step time.

compute splits into the weight GEMMs of forward and backward (the layers', the logits GEMM on the last stage,
and a vision tower's compute, whose split is not priced apart), the attention core forward and backward, and
the rest, element-wise work (norms, activations, the loss, MoE permutations, FP8 casts, unfused gradient
accumulation), as engine.cost.timing.layer_compute composes them. Every communication term goes whole to the
link class its group crosses: a group whose ranks sit on one node runs on the intra-node fabric; one that
spans nodes is bounded by its inter-node phase (the inter-node rate is the slower by far, [HW] §3), so its time
counts as inter-node. Calibration fits a ratio per part (engine.calibrate.parts); a profiler trace measures
the same parts (engine.calibrate.profiler_trace). The host part (engine.specs.HOST_PART) is priced at 0 s: the
model prices device time only; a calibration adds its seconds per launch unit × host_launches.
"""

from __future__ import annotations

import numpy as np

from engine.cost.communication import pp_stride
from engine.cost.rows import Rows
from engine.cost.timing import LayerCompute, head_gemm_time
from engine.specs import HOST_PART

LINKED_TERMS = ("tp_comm", "cp_comm", "ep_comm", "dp_comm", "pp_p2p")


def inter_node(r: Rows) -> dict[str, np.ndarray]:
    """(n,) per communication term: True where its group spans more than one node (rank order tp, cp, dp, pp
    with ep inside dp × cp, as engine.cost.communication lays the groups out)."""
    t = r.table

    def spans(n: np.ndarray, stride: np.ndarray) -> np.ndarray:
        return r.links.split(n, stride)[1] > 1

    return {"tp_comm": spans(t.tp, np.ones(r.n)), "cp_comm": spans(t.cp, t.tp),
            "ep_comm": spans(t.ep, t.tp * t.cp), "dp_comm": spans(t.dp * t.cp, t.tp),
            "pp_p2p": (pp_stride(r) >= r.cluster.cards_per_node) & (r.p > 1)}


def step_parts(r: Rows, lc: LayerCompute, time_terms: dict[str, np.ndarray], imax: np.ndarray,
               tower_compute: np.ndarray) -> dict[str, np.ndarray]:
    """(n,) seconds per step of every PRICED_PARTS part: the time terms of the slowest stage `imax` (the one
    engine.cost.price._combine prices the step at) split as the module doc says."""
    pk = (r.rows, imax)
    shape = (r.n, 2, 3)
    gemm = r.at_stage(imax, np.broadcast_to(lc.gemm_all[:, :, None], shape))
    gemm = gemm + np.where(r.last[pk], head_gemm_time(r), 0.0) + tower_compute[pk]
    gemm = r.mb * gemm
    attention = r.mb * r.at_stage(imax, np.broadcast_to((lc.attn_fwd + lc.attn_bwd)[:, :, None], shape))
    parts = {"gemm": gemm, "attention": attention, "elementwise": time_terms["compute"] - gemm - attention,
             "recompute": time_terms["recompute"], "pp_bubble": time_terms["pp_bubble"],
             "optimizer": time_terms["optimizer"]}
    for term, inter in inter_node(r).items():
        parts[f"{term}.intra"] = np.where(inter, 0.0, time_terms[term])
        parts[f"{term}.inter"] = np.where(inter, time_terms[term], 0.0)
    parts[HOST_PART] = np.zeros(r.n)
    return parts


def host_launches(r: Rows, imax: np.ndarray) -> np.ndarray:
    """(n,) launch units per step: decoder layers on the slowest stage × micro-batches. Eager PyTorch launches
    each layer's kernels from the host, one CPU submission each, for every micro-batch, so the host time a step
    waits on grows with this count ([CUDA-GRAPH]); `imax` is the slowest stage, the one the step is priced at."""
    return r.counts[r.rows, imax].sum(axis=-1) * r.mb
