"""A multimodal model's vision tower, priced the way HyperParallel's search prices sibling towers ([HP] §5.14
"Multimodal"): the search drives the language model; the tower takes the same degrees (tp, cp, the data-parallel
and FSDP shards, the micro-batch) and all its layers are front-loaded on pipeline stage 0, before the first decoder
layer. One recompute mode covers the whole model ([HP] §8.5 "Multimodal models use one mode"), so the tower runs
each row's uniform mode even where the language model takes a per-layer plan.

The tower's layers are priced by the same per-layer terms as a decoder layer (engine.cost.memory, .timing,
.communication) over a ModelSpec of the tower's own widths (engine.specs.VisionTower.layer_model) and
`visual_seq_len` tokens per sample, the sequence HyperParallel hands its search (context.visual_seq_len). Two
differences from a decoder layer: the tower's attention is bidirectional (a flash kernel skips no causal blocks,
so its core costs twice the causal one), and the patch merger (norm + two linears, replicated over tp as
HyperParallel's Kimi recipe states its mm_projector) adds its weights and GEMMs. What stage 0 gains is returned
per row and per micro-batch; engine.cost.price and engine.cost.memory add it there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from engine.cost import constants as K
from engine.cost.communication import layer_comm
from engine.cost.memory import layer_activations
from engine.cost.model import layer_params
from engine.cost.rows import DENSE, Rows, build_rows
from engine.cost.timing import layer_compute, recompute_extra


@dataclass(frozen=True, slots=True)
class TowerCost:
    """What the vision tower adds to stage 0 of each row (n,): `params` the parameters one rank holds (tp-split
    weights ÷ tp plus replicated ones, the merger whole); `act_b` the bytes it keeps per micro-batch in flight in
    the row's mode; per micro-batch seconds: `fwd` forward compute, `compute` forward + backward, `rec` the
    recompute the mode adds, `tp` and `cp` its exposed communication."""

    layers: int
    seq_len: int
    params: np.ndarray
    act_b: np.ndarray
    fwd: np.ndarray
    compute: np.ndarray
    rec: np.ndarray
    tp: np.ndarray
    cp: np.ndarray

    @property
    def time(self) -> np.ndarray:
        """(n,) seconds per micro-batch the tower adds to stage 0."""
        return self.compute + self.rec + self.tp + self.cp


def tower_cost(r: Rows) -> TowerCost | None:
    """The vision tower's share of stage 0 for every row of `r`, or None for a text-only model."""
    vt = r.model.vision
    if vt is None or vt.num_layers <= 0:
        return None
    tm = vt.layer_model()
    one = np.ones(r.n, dtype=r.table.pp.dtype)
    # Same degrees, one stage (all its layers on stage 0), dense (no experts to spread), one mode for the model.
    table = replace(r.table, pp=one, vpp=one, schedule=np.zeros_like(r.table.schedule), ep=one, etp=one,
                    recompute=r.mode_row.astype(r.table.recompute.dtype), layer_modes=None)
    tr = build_rows(tm, r.cluster, r.run, table, 1)
    act = layer_activations(tr)
    lc = layer_compute(tr, act)
    # Bidirectional attention: the flash kernel runs the causal half again (engine.cost.timing.attention_layer_core
    # halves it for a decoder); the fused-softmax path already ran the full s×s product.
    extra_f = lc.attn_fwd if tm.use_flash_attention else np.zeros_like(lc.attn_fwd)
    extra_b = lc.attn_bwd if tm.use_flash_attention else np.zeros_like(lc.attn_bwd)
    lc = replace(lc, fwd=lc.fwd + extra_f, compute=lc.compute + extra_f + extra_b)
    rec = recompute_extra(tr, act, lc)
    comm = layer_comm(tr, lc)
    rows, mode = tr.rows, tr.mode_row
    L = float(vt.num_layers)

    def pick(x: np.ndarray) -> np.ndarray:
        return L * x[rows, DENSE, mode] if x.ndim == 3 else L * x[rows, DENSE]

    lp = layer_params(tm, False)
    merger = float(vt.merger_params)
    # The merger's GEMMs over the visual tokens it emits (each the concatenation of merge² patches): 2 FLOPs per
    # weight per token forward, BWD_GEMM_RATIO times that backward.
    merger_fwd = 2.0 * merger * tr.T / tr.gemm_rate
    fwd = pick(lc.fwd) + merger_fwd
    compute = pick(lc.compute) + merger_fwd * (1 + K.BWD_GEMM_RATIO)
    return TowerCost(
        layers=vt.num_layers, seq_len=vt.seq_len,
        params=L * (lp.split / tr.t + lp.rep) + merger,
        act_b=pick(act), fwd=fwd, compute=compute, rec=pick(rec), tp=pick(comm.tp), cp=pick(comm.cp),
    )
