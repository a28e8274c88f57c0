"""Communication terms: tensor-, context- and expert-parallel collectives per layer, pipeline
point-to-point, FSDP traffic per micro-batch and the end-of-step data-parallel synchronisation, each as the
seconds it leaves exposed after the overlaps the frameworks implement (docs/cost-model.md §3, "Overlap").
Collective times come from engine.cost.collectives.Links (alpha-beta over the two-level hierarchy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.cost import constants as K
from engine.cost.collectives import Links
from engine.cost.memory import StageParams, state_bytes
from engine.cost.model import moe_share
from engine.cost.rows import DENSE, FULL, MOE, SELECTIVE, Rows
from engine.cost.timing import LayerCompute
from engine.specs import ModelSpec


@dataclass(frozen=True, slots=True)
class LayerComm:
    """(n, 2, 3) exposed seconds per layer, per micro-batch, per type and recompute mode."""

    tp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray


def tp_exposed(coll: np.ndarray, gemm: np.ndarray, overlap: bool, base_overlap: float = K.TP_OVERLAP,
               achieved: float = 1.0, backward: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Exposed seconds of one forward and one backward tensor-parallel collective pair (all-gather +
    reduce-scatter, or the all-reduce without SP) of `coll` seconds, given the forward weight GEMMs of the
    block the pair belongs to, `gemm` (n, 2): the attention block's QKV and output projection, or the MLP's
    two (three) matrices.

    Without comm-GEMM overlap, Megatron still runs the backward all-reduce asynchronously with the weight-
    gradient GEMM: a fixed share TP_OVERLAP is hidden (KOR22 §6.2 note; FITTED). With it
    (--tp-comm-overlap, TransformerEngine userbuffers; MindSpeed's MC2, `npu_all_gather_base_mm` /
    `npu_mm_reduce_scatter_base`; constants.TP_COMM_OVERLAP_SPLITS), each collective is fused with the GEMM
    next to it: the forward pair shows only the last of the reduce-scatter's chunks, 1/(2·splits) of the pair,
    and the backward pair runs beside that block's other backward GEMMs (the column layer's reduce-scatter
    under its weight-gradient GEMM, the row layer's all-gather fused with its input-gradient GEMM). Either hides
    at most the time of its own block's GEMMs (forward `gemm`, backward BWD_GEMM_RATIO/2 × `gemm` beside each
    collective), never another block's: an attention block whose collectives outlast its projections shows
    the rest even when the MLP's GEMMs are long (MC2 and userbuffers overlap a collective only with the GEMM it
    is fused with). `base_overlap` is the share hidden without the option: TP_OVERLAP on stacks that run the
    backward collective asynchronously (Framework.tp_overlap), 0 on plain DTensor TP. `achieved`: where the
    stack's overlap reaches only part of that bound (MindSpeed's MC2 on 910B, constants.MC2_ACHIEVED_SHARE),
    the exposed time lies that share of the way from the option off (0) to the per-block bound (1).
    `backward` False: the option pipelines the forward pair only (Framework.tp_comm_overlap_backward: torchtitan's
    async TP), the backward pair shows as with the option off."""
    c = coll[:, None]
    off = np.broadcast_to((1 - base_overlap) * c, gemm.shape)
    if not overlap:
        return off, off
    fwd_e = c - np.minimum((1 - 0.5 / K.TP_COMM_OVERLAP_SPLITS) * c, gemm)
    bwd_e = c - np.minimum(c, 0.5 * K.BWD_GEMM_RATIO * gemm) if backward else off
    if achieved >= 1.0:
        return fwd_e, bwd_e
    return off + achieved * (fwd_e - off), off + achieved * (bwd_e - off)


def moe_tp_collective(r: Rows) -> np.ndarray:
    """(n,) seconds of the MoE block's tensor-parallel pair, one micro-batch: Megatron-Core's token dispatchers
    (MoEAlltoAllTokenDispatcher, and MindSpeed's alltoall / alltoall_seq built on it) all-gather the routed
    copies over the expert tensor-parallel group after the dispatch (gather_from_sequence_parallel_region,
    AllGather-V) and reduce-scatter the experts' outputs before the combine: the pair carries etp × the rank's
    T/t × routed copies hidden vectors (top-k × capacity × the busiest rank's excess, moe_copies), k times a
    dense MLP's bytes; with etp = 1 the experts see only the tokens the all-to-all brought and no TP collective
    runs in the block. The all-gather dispatcher gathers over the expert tensor-and-expert-parallel group at
    once (ep_allgather): no pair of its own."""
    if r.dispatcher == "allgather":
        return np.zeros(r.n)
    size = K.ACT_BYTES * r.T / r.t * r.etp * r.moe_copies * r.h
    return moe_share(r.model) * np.where(r.etp > 1, r.links.allreduce(size, r.etp, np.ones(r.n)), 0.0)


def _tp_pairs(r: Rows, lc: LayerCompute) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(attention forward, attention backward, MLP forward, MLP backward) exposed seconds (n, 2) of the two TP
    collective pairs of one layer and micro-batch. The MoE column's MLP pair is the dispatcher's
    (moe_tp_collective), which no comm-GEMM overlap covers: TransformerEngine's userbuffers and MindSpeed's
    MC2 fuse collectives into linear layers, not into the dispatcher's gather and scatter (MindSpeed docs
    features/mc2.md: the MLP of a mcore MoE model runs without MC2), and no asynchronous backward hides a share
    of it (TP_OVERLAP is the linear layers' all-reduce beside their weight-gradient GEMM)."""
    tp_ar = r.links.allreduce(K.ACT_BYTES * r.T * r.h, r.table.tp, np.ones(r.n))  # residual stream all-reduce
    base = K.TP_OVERLAP if r.fw.tp_overlap else 0.0
    # without the attention block's own GEMM time (a LayerCompute built elsewhere) each pair gets half the layer's
    attn_gemm = 0.5 * lc.gemm if lc.attn_gemm is None else np.broadcast_to(lc.attn_gemm[:, None], lc.gemm.shape)
    achieved = K.MC2_ACHIEVED_SHARE if r.fw.mc2 else 1.0
    overlap = r.run.tp_comm_overlap and r.fw.tp_comm_overlap_on(r.cluster.device)  # else HP533, priced without
    bwd = r.fw.tp_comm_overlap_backward
    mixer, mlp = 1.0, 1.0
    if r.model.hybrid is not None:
        # one block, so one pair, per hybrid layer: the attention and Mamba layers' pairs (each hidden under its own
        # block's projections: the layer's mixer GEMMs over the mixer share) for their share of the layers, the
        # MLP layers' for theirs
        share, d, mu = r.model.hybrid.shares()
        mixer, mlp = share + mu, d
    a_f, a_b = tp_exposed(tp_ar, attn_gemm / max(mixer, 1e-12), overlap, base, achieved, bwd)
    m_f, m_b = tp_exposed(tp_ar, (lc.gemm - attn_gemm) / max(mlp, 1e-12), overlap, base, achieved, bwd)
    a_f, a_b, m_f, m_b = mixer * a_f, mixer * a_b, np.array(mlp * m_f), np.array(mlp * m_b)
    if r.is_moe:
        # the dispatcher's gather and scatter run synchronously in autograd: nothing of TP_OVERLAP (the linear
        # layers' asynchronous backward all-reduce beside their weight-gradient GEMM) applies to them
        e_f, e_b = tp_exposed(moe_tp_collective(r), lc.gemm, False, 0.0)
        m_f[:, MOE], m_b[:, MOE] = e_f[:, MOE], e_b[:, MOE]
    return a_f, a_b, m_f, m_b


def _tp_comm(r: Rows, lc: LayerCompute) -> np.ndarray:
    """(n, 2, 3) TP collectives: the attention block's pair and the MLP's, forward and backward (AR, or AG +
    RS with SP: same bytes), NAR21 §3 / KOR22 §4.2; the recomputed forward repeats its collectives."""
    a_f, a_b, m_f, m_b = _tp_pairs(r, lc)
    fwd_e = a_f + m_f
    tp = np.zeros((r.n, 2, 3))
    tp[:, :, :] = (fwd_e + a_b + m_b)[:, :, None]
    tp[:, :, FULL] += fwd_e
    if r.policy == "modules":
        # a recomputed dense MLP or MoE layer (normal checkpointing of the submodule) re-runs its block's
        # collectives (all-gather + reduce-scatter under SP, the all-reduce without: one pair);
        # output-discarding modules and the attention core run no collective again
        on = set(r.modules)
        if "mlp" in on:  # the dense layers (a dense model's MoE column repeats its dense one)
            tp[:, DENSE, SELECTIVE] += m_f[:, DENSE]
            if not r.is_moe:
                tp[:, MOE, SELECTIVE] += m_f[:, MOE]
        if "moe" in on and r.is_moe:
            tp[:, MOE, SELECTIVE] += m_f[:, MOE]
    elif r.policy != "attention":
        tp[:, :, SELECTIVE] += np.where(r.sp[:, None], a_f, 0.0)  # all-gathers re-run ([HP] §8.2)
    return tp


def ring_cp_exposed(x: np.ndarray, lat: np.ndarray, steps: np.ndarray, c_fwd: np.ndarray,
                    c_bwd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) exposed seconds of ring attention per layer and micro-batch (constants.py, "Ring
    context parallelism"). `x` is one KV block's transfer, `steps` the ring's transfers (ring size − 1),
    `c_fwd` / `c_bwd` one step's attention compute. Each step's transfer overlaps only that step's compute
    and waits at least the link latency; the backward moves KV and dKV (2x) per step and returns the last
    dKV block after the last step (x, nothing to hide it under)."""
    fwd = steps * np.maximum(lat, x - c_fwd)
    bwd = steps * np.maximum(lat, 2 * x - c_bwd) + x
    return fwd, bwd


def cp_split(r: Rows) -> tuple[np.ndarray, np.ndarray]:
    """(Ulysses all-to-all group, ring size) of each row's CP group by `cp_algo`: ring rings over all cp
    ranks; Ulysses all-to-alls over all of them; hybrid (HyperParallel hybrid_cp) all-to-alls inside the
    node (g members) and rings over the k nodes the group spans."""
    cp = r.table.cp
    one = np.ones_like(cp)
    if r.cp_algo == "allgather":  # no ring, no all-to-all: _cp_comm prices its all-gather
        return one, one
    if r.cp_algo == "ulysses":
        return cp, one
    if r.cp_algo == "hybrid":
        g, k = r.links.split(cp, r.table.tp)
        return g.astype(cp.dtype), k.astype(cp.dtype)
    return one, cp


def _cp_comm(r: Rows, lc: LayerCompute) -> np.ndarray:
    """(n, 2, 3) context parallelism per layer and micro-batch: the attention layers' (_attention_cp) and, in a
    hybrid model, its Mamba mixers' all-to-alls (_mamba_cp), each kind by its share of the layers. A recomputed
    forward repeats the forward part."""
    cpc = np.zeros((r.n, 2, 3))
    if not (r.table.cp > 1).any():
        return cpc
    fwd, tot = _attention_cp(r, lc)
    hy = r.model.hybrid
    if hy is not None:
        share, _, mu = hy.shares()
        mixer = mu * _mamba_cp(r)  # the backward sends the same tensors' gradients the other way
        fwd, tot = share * fwd + mixer, share * tot + 2 * mixer
    cpc[:, :, :] = tot[:, None, None]
    cpc[:, :, FULL] += fwd[:, None]
    return cpc


def _attention_cp(r: Rows, lc: LayerCompute) -> tuple[np.ndarray, np.ndarray]:
    """(forward, forward + backward) exposed seconds of one attention layer's context parallelism: Ulysses
    all-to-alls of Q, K, V and the output (forward, and again for their gradients backward; not overlapped,
    DeepSpeed-Ulysses §3) and ring attention's KV exchange (ring_cp_exposed) hidden under that layer's attention
    core, on NVLink inside a node and on the NIC once the ring spans nodes (any hop crossing a node paces every
    step)."""
    table = r.table
    a, T, t = r.attn, r.T, r.t
    n_u, n_r = cp_split(r)
    size = K.ACT_BYTES * T * (a.q_width + a.kv_width + a.out_width) / t
    u_fwd = r.links.alltoall(size, n_u, table.tp)  # zero where the all-to-all group is one rank
    # The ring's ranks are g_u·tp apart (inside a hybrid group the Ulysses members are innermost).
    ring_stride = table.tp * n_u
    g_r, _k = r.links.split(n_r, ring_stride)
    cross = g_r < n_r
    x = r.links.p2p(K.ACT_BYTES * T * a.kv_width / t, cross)
    lat = np.where(cross, K.LAT_INTER_S, K.LAT_INTRA_S)
    steps = np.maximum(n_r - 1, 0).astype(np.float64)
    calls = np.maximum(n_r, 1).astype(np.float64)
    af, ab = lc.attn_layer  # an attention layer's own core, not a hybrid layer mix's
    r_fwd, r_bwd = ring_cp_exposed(x, lat, steps, af / calls, ab / calls)
    r_fwd = np.where(n_r > 1, r_fwd, 0.0)
    r_bwd = np.where(n_r > 1, r_bwd, 0.0)
    g_fwd, g_bwd = _cp_allgather(r)
    fwd = np.where(table.cp > 1, u_fwd + r_fwd + g_fwd, 0.0)
    tot = np.where(table.cp > 1, 2 * u_fwd + r_fwd + r_bwd + g_fwd + g_bwd, 0.0)
    return fwd, tot


def mamba_cp_widths(m: ModelSpec, t: np.ndarray, cp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(before, after) elements per token one rank's Mamba-2 mixer sends through its context-parallel
    all-to-alls (MCORE-MAMBA-CP): before the convolution and scan z and x (d_inner/t each), B and C (the rank's
    groups/t, or cp where fewer, × state each: a group repeated to every cp rank that holds its heads) and dt
    (heads/t); after them y (d_inner/t). 0 without Mamba layers."""
    hy = m.hybrid
    zero = np.zeros(np.broadcast(t, cp).shape)
    if hy is None or not hy.mamba:
        return zero, zero
    groups = np.maximum(hy.groups / t, cp)
    return zero + 2 * hy.d_inner / t + 2 * groups * hy.state + hy.mamba_heads / t, zero + hy.d_inner / t


# Copies, each read and written once through HBM, of what crosses a Mamba mixer's CP all-to-alls in one pass
# (MCORE-MAMBA-CP): before the mixer the all-to-all's own layout (all_to_all_sp2hp concatenates the hidden-split
# tensor), the concatenation of z, x, B, C and dt, and the reorder that undoes the attention layers' load-balanced
# chunks; after it the reorder back and all_to_all_hp2sp's layout.
MAMBA_CP_COPIES_BEFORE, MAMBA_CP_COPIES_AFTER = 3, 2


def _mamba_cp(r: Rows) -> np.ndarray:
    """(n,) seconds of one Mamba-2 mixer's context-parallel all-to-alls in one pass (mamba_cp_widths, over the cp
    group, tp apart) and the copies around them (MAMBA_CP_COPIES_*), exposed: the convolution waits for the first
    and the next layer for the second, and the copies run on the compute stream. Whatever the attention layers'
    algorithm, Megatron-Core's Mamba mixer runs this all-to-all one (MCORE-MAMBA-CP)."""
    before, after = mamba_cp_widths(r.model, r.t, r.table.cp)
    send = [r.links.alltoall(K.ACT_BYTES * r.T * w, r.table.cp, r.table.tp) for w in (before, after)]
    copied = MAMBA_CP_COPIES_BEFORE * before + MAMBA_CP_COPIES_AFTER * after
    copies = np.where(r.table.cp > 1, 2 * K.ACT_BYTES * r.T * copied / r.hbm, 0.0)
    return send[0] + send[1] + copies


def _cp_allgather(r: Rows) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) seconds of all-gather CP ([TE-CP] cp_comm_type "all_gather": "all-gather to get full
    sequence of KV before attention. The all-gather is not async, and cannot be overlapped"): the KV of the whole
    sequence gathered over the cp group forward, its gradient reduce-scattered backward, both exposed; 0 for the
    other algorithms."""
    zero = np.zeros(r.n)
    if r.cp_algo != "allgather":
        return zero, zero
    table = r.table
    full_kv = K.ACT_BYTES * r.T * table.cp * r.attn.kv_width / r.t
    t = r.links.gather(full_kv, table.cp, table.tp)
    return t, t


def distinct_nodes(m: ModelSpec, nodes: np.ndarray) -> np.ndarray:
    """Expected distinct nodes among `nodes` that one token's top-k experts sit on, experts laid out evenly
    and in order over the EP ranks, routing uniform: what DeepEP sends across the NIC once each.

    Free routing: K·(1 − (1 − 1/K)^k). Group-limited routing (DeepSeek-V3's `n_group` G, `topk_group` g: a
    token's experts come from g of G expert groups, [MODELS] §2) caps it: with q = G/K whole groups per node,
    a token misses a node when all g of its groups lie elsewhere, K·(1 − C(G − q, g)/C(G, g)) (DeepSeek-V3 at
    EP 64 on 8 nodes: 4 nodes, against 5.25 free); a group spread over j = K/G nodes takes k/g experts over
    its j nodes, g·j·(1 − (1 − 1/j)^(k/g)). The smaller of the free and the group-limited count."""
    K_ = np.maximum(nodes, 1.0)
    k = float(m.experts_per_tok)
    free = K_ * (1.0 - (1.0 - 1.0 / K_) ** k)
    G, g = m.expert_groups, m.groups_per_tok
    if not (0 < g < G):
        return free
    q = G / K_
    whole_groups = K_ * (1.0 - _all_groups_elsewhere(G, g, q))
    j = np.maximum(K_ / G, 1.0)
    spread_groups = g * j * (1.0 - (1.0 - 1.0 / j) ** (k / g))
    return np.minimum(free, np.where(q >= 1.0, whole_groups, spread_groups))


def _all_groups_elsewhere(G: int, g: int, q: np.ndarray) -> np.ndarray:
    """C(G − q, g) / C(G, g) per element of q (q possibly fractional; 0 where fewer than g groups lie elsewhere):
    the chance that none of a token's g groups of G is among a node's q. Through log-gamma on q's distinct
    values, so its cost does not grow with the group counts a file states."""
    values, where = np.unique(q, return_inverse=True)
    out = np.zeros(values.size)
    for i, v in enumerate(values.tolist()):
        rest = G - v - g + 1.0
        if rest > 0:
            out[i] = math.exp(math.lgamma(G - v + 1.0) - math.lgamma(rest) - math.lgamma(G + 1.0)
                              + math.lgamma(G - g + 1.0))
    return np.clip(out[where].reshape(q.shape), 0.0, 1.0)


def ep_allgather(r: Rows) -> np.ndarray:
    """(n,) one dispatch (or combine) of Megatron-Core's all-gather token dispatcher (MoEAllGatherTokenDispatcher,
    MCORE-MOE): every rank gathers the hidden states of its whole expert tensor-and-expert-parallel group
    (etp·ep ranks, T/t tokens each, gather_from_sequence_parallel_region) before its local experts pick theirs,
    and the combine reduce-scatters the outputs back: the bytes grow with the group, not with top-k. The group
    is contiguous where the stack folds its expert layers (Framework.expert_fold), else its EP members sit
    tp·cp apart, whose TP run is contiguous: cp apart per member (Links.gather)."""
    n = r.table.ep * r.etp
    stride = np.ones(r.n) if r.fw.expert_fold else r.table.cp
    return r.links.gather(K.ACT_BYTES * r.T / r.t * r.h * n, n, stride)


def ep_alltoall(r: Rows, size: np.ndarray) -> np.ndarray:
    """(n,) one dispatch (or combine) of `size` bytes per rank over the EP group. alltoall: every routed copy
    crosses its link (Links.alltoall). deepep: the NIC carries each token once per remote destination node,
    a share distinct_nodes/copies of the copies' bytes, at DeepEP's measured RDMA rate (Links.deepep_rdma),
    the NVLink part stays (the copies fan out inside the node); the slower part counts, as in
    Links.alltoall."""
    table, links = r.table, r.links
    if r.dispatcher == "allgather":
        return ep_allgather(r)
    if r.dispatcher != "deepep":
        return links.alltoall(size, table.ep, r.ep_stride)
    g, k = links.split(table.ep, r.ep_stride)
    nn = np.maximum(table.ep, 1).astype(np.float64)
    copies = max(r.model.experts_per_tok * max(r.model.capacity_factor, 1.0), 1.0)
    share = np.minimum(distinct_nodes(r.model, k) / copies, 1.0)
    t = np.maximum(size * (g - 1) / nn / links.bi, size * (nn - g) / nn / links.deepep_rdma * share)
    lat = (g - 1) * K.LAT_INTRA_S + (k - 1) * K.LAT_INTER_S
    return np.where(table.ep > 1, t + lat, 0.0)


def ep_exposed(a2a: np.ndarray, shared: np.ndarray, routed: np.ndarray, compute: np.ndarray,
               shared_overlap: bool, a2a_overlap: str, batch_share: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) exposed seconds of one MoE layer's dispatch + combine all-to-alls of `a2a`
    seconds each, per micro-batch, after the overlaps the framework offers (Framework.ep_overlap). Each
    hides at most the compute it runs beside, so nothing is hidden that has no compute under it:

    * shared-expert overlap (--moe-shared-expert-overlap): the shared expert's fc1 runs during the
      dispatch, its fc2 during the combine: each all-to-all hides up to half the shared expert's forward
      GEMMs (`shared`), backward BWD_GEMM_RATIO times that;
    * "chunked" (MindSpeed --moe-alltoall-overlap-comm): the all-to-alls run asynchronously under the same
      micro-batch's expert GEMMs (`routed`, and the shared expert's not already used), forward and, by
      sub-graph splitting, backward;
    * "batch" (Megatron-Core --overlap-moe-expert-parallel-comm; DualPipeV's forward-backward pairing): one
      micro-batch's all-to-alls run under another's compute of the same layer (forward under a backward and
      the reverse): `batch_share` of the four hides, up to that other micro-batch's forward + backward compute
      `compute` (0 where the step has no second one). Megatron-Core's measured share is
      constants.MCORE_BATCH_A2A_HIDDEN_SHARE; DualPipe states all of it (1).
    """
    fwd_c, bwd_c = 2 * a2a, 2 * a2a
    if shared_overlap:
        fwd_c = fwd_c - 2 * np.minimum(a2a, 0.5 * shared)
        bwd_c = bwd_c - 2 * np.minimum(a2a, 0.5 * K.BWD_GEMM_RATIO * shared)
        shared = np.zeros_like(shared)
    if a2a_overlap == "chunked":
        under = routed + shared
        fwd_c = fwd_c - np.minimum(fwd_c, under)
        bwd_c = bwd_c - np.minimum(bwd_c, K.BWD_GEMM_RATIO * under)
    elif a2a_overlap == "batch":
        total = fwd_c + bwd_c
        hidden = np.minimum(batch_share * total, compute)
        keep = np.where(total > 0, (total - hidden) / np.maximum(total, 1e-30), 0.0)
        fwd_c, bwd_c = fwd_c * keep, bwd_c * keep
    return fwd_c, bwd_c


def _ep_comm(r: Rows, lc: LayerCompute) -> np.ndarray:
    """(n, 2, 3) expert parallelism: dispatch + combine all-to-alls, forward and backward, as
    `estimator.moe_dispatcher` dispatches them (ep_alltoall), less what the overlaps the run states and the
    framework offers hide (ep_exposed; an option the framework does not offer hides nothing). A recomputed
    forward repeats the forward pair, exposed: the overlaps are scheduled for the first forward. The all-gather
    dispatcher runs neither overlap (Megatron-Core refuses both with it: engine.cost.strategy_rules, HP530)."""
    epc = np.zeros((r.n, 2, 3))
    if r.is_moe:
        # a hybrid model's layers carry its MoE layers' share of the dispatch and combine (model.moe_share)
        a2a = moe_share(r.model) * ep_alltoall(r, K.ACT_BYTES * r.T / r.t * r.moe_copies * r.h)
        mg = lc.moe
        assert mg is not None  # layer_compute prices the MoE GEMMs whenever the model is MoE
        fw, run = r.fw, r.run
        # The batch-level overlap interleaves two micro-batches: with one in the step there is no other
        # micro-batch's compute to hide under (ep_exposed then hides nothing by that overlap).
        other = np.where(r.mb >= 2, lc.compute[:, MOE], 0.0)
        gathers = r.dispatcher == "allgather"
        shared_on = run.moe_shared_expert_overlap and fw.shared_expert_overlap and not gathers
        fwd_e, bwd_e = ep_exposed(a2a, mg.shared, mg.routed, other, shared_on, "" if gathers else r.ep_overlap,
                                  K.MCORE_BATCH_A2A_HIDDEN_SHARE)
        fb = r.fb_overlap & (not gathers)
        if fb.any():  # DualPipeV pairs one micro-batch's forward with another's backward (engine.cost.dualpipev)
            fwd_b, bwd_b = ep_exposed(a2a, mg.shared, mg.routed, other, shared_on, "batch")
            fwd_e, bwd_e = np.where(fb, fwd_b, fwd_e), np.where(fb, bwd_b, bwd_e)
        epc[:, MOE, :] = (fwd_e + bwd_e)[:, None]
        epc[:, MOE, FULL] += 2 * a2a
    return epc


def layer_comm(r: Rows, lc: LayerCompute) -> LayerComm:
    """The TP, CP and EP communication of one layer, per micro-batch."""
    return LayerComm(_tp_comm(r, lc), _cp_comm(r, lc), _ep_comm(r, lc))


def pp_stride(r: Rows) -> np.ndarray:
    """Rank distance between neighbouring pipeline stages (pp is outermost in Megatron's rank order)."""
    return r.table.tp * r.table.cp * r.table.dp


def pp_p2p(r: Rows) -> np.ndarray:
    """(n,) pipeline point-to-point per micro-batch: activations forward and gradients backward, b·s·h/t
    each with NAR21's scatter/gather, v times per micro-batch when interleaved (NAR21 §2.2, §4.1), twice under
    DualPipeV (each rank's two stages of the V), and hidden under the paired forward/backward where DualPipeV
    runs its cross-micro-batch overlap ([MS-DUALPIPEV]: the P2P hides with the all-to-all)."""
    cross_pp = pp_stride(r) >= r.cluster.cards_per_node
    p2p_one = r.links.p2p(K.ACT_BYTES * r.T * r.h / r.t, cross_pp)
    chunks = np.where(r.dualpipev, 2.0, r.v)
    return np.where((r.p > 1) & ~r.fb_overlap, 2 * chunks * p2p_one * (1 - K.P2P_OVERLAP), 0.0)


def fsdp_exposed(r: Rows, sp_: StageParams, comp_stage: np.ndarray) -> np.ndarray:
    """(n, P) exposed FSDP traffic per micro-batch: ZeRO-3 gathers the stage's parameters for forward and
    backward and reduce-scatters its gradients (ZERO20 §5: 1.5× DP volume); ZeRO-2-like gathers once per
    step. Gradients are reduce-scattered in the parameter dtype (FSDP's default reduce dtype; DeepSpeed
    fp16). FSDP_OVERLAP of the stage's compute hides it.

    FSDP2 stacks (Framework.fsdp2: torchtitan, HyperParallel) reduce-scatter in `fsdp_reduce_bytes` (fp32)
    and gather per parameter one layer ahead: the first layer's gather and the last layer's reduce-scatter
    have nothing to hide under, so at least one layer's share stays exposed. FP8 weights are gathered in
    FP8 (torchao float8 all-gather) on those stacks.

    How the bytes cross the nodes is the stack's too: FSDP2 issues one NCCL all-gather (reduce-scatter) per
    block over the whole shard group, which NCCL runs as rings through every GPU of a node over NVLink and out
    of all the node's NICs at once: a group spanning k nodes with g members each moves (k−1)/k·S/g bytes per
    NIC (collectives.Links.gather_coef; [HW] §3.2, MLE-NET: 4 nodes × 8 B200 reach 377 GB/s bus bandwidth over
    50 GB/s NICs). Megatron-FSDP and MindSpeed's torch FSDP2 route run the same NCCL collectives. The ZeRO-3
    of NAR21 Table 2 (DeepSpeed beside Megatron-LM, 2021) moved its parameters at the flat ring's rate, every
    byte through each rank's own NIC (Framework.fsdp_flat_ring, fitted there): Megatron's release "2021"."""
    raw, floor = fsdp_traffic(r, sp_)
    return fsdp_exposure(raw, floor, comp_stage)


def fsdp_exposure(raw: np.ndarray, floor: np.ndarray | float, comp_stage: np.ndarray) -> np.ndarray:
    """(n, P) exposed FSDP traffic per micro-batch of `raw` seconds with `floor` prefetching cannot hide, beside
    `comp_stage` seconds of compute (fsdp_exposed). Never grows with the compute."""
    return np.maximum(floor, raw - K.FSDP_OVERLAP * comp_stage)


def fsdp_traffic(r: Rows, sp_: StageParams) -> tuple[np.ndarray, np.ndarray | float]:
    """(n, P) FSDP traffic per micro-batch and the part of it no compute hides (fsdp_exposed): it depends on
    the degrees, the stage layout and (gathering once per step without resharding) the micro-batch count, not
    on the micro-batch size, so the search prices it once per combination of degrees."""
    fs, table = r.fs, r.table
    fsdp_raw = np.zeros((r.n, r.P))
    floor: np.ndarray | float = 0.0
    if (fs > 1).any():
        coef = r.links.gather_flat_coef if r.fw.fsdp_flat_ring else r.links.gather_coef
        a_ne, l_ne = coef(table.dp_shard, table.tp)  # seconds per byte, and per call
        gather_ne, gather_ex = sp_.gather_ne, sp_.gather_ex
        # FSDP2 reduce-scatters in its reduce dtype (Framework.fsdp_reduce_bytes); the others in the 16-bit weights'
        reduce_b = (r.fw.fsdp_reduce_bytes if r.fw.fsdp2 else 0.0) or float(r.run.param_bytes)
        gathers = 2.0 if r.run.reshard_after_forward else 1.0 / r.mb[:, None]
        per = (gathers * gather_ne + reduce_b * sp_.ne_stage) * a_ne[:, None] + (gathers + 1.0) * l_ne[:, None]
        if r.is_moe:  # routed experts are sharded over the expert-data-parallel ranks only
            a_ex, l_ex = coef(np.minimum(table.dp_shard, r.edp_i), r.ep_stride * table.ep)
            per = per + (gathers * gather_ex + reduce_b * sp_.ex_stage) * a_ex[:, None] + (gathers + 1.0) * l_ex[:, None]
        fsdp_raw = np.where((fs > 1)[:, None], per, 0.0)
        if r.fw.fsdp2:  # the one layer's share prefetching cannot hide
            floor = fsdp_raw / np.maximum(r.counts[:, :, 0] + r.counts[:, :, 1], 1.0)
    return fsdp_raw, floor


def dp_sync_exposed(r: Rows, sp_: StageParams, comp_stage: np.ndarray, rec_stage: np.ndarray) -> np.ndarray:
    """(n, P) exposed end-of-step data-parallel synchronisation per stage. Gradient reduction overlaps the
    last micro-batch's backward (with its recomputed forward `rec_stage`); the ZeRO-1 weight all-gather
    overlaps the first micro-batch's forward of the next step (Megatron --overlap-grad-reduce /
    --overlap-param-gather), bucket by bucket: dp_exposed_time."""
    red, gat, buckets = dp_sync_traffic(r, sp_)
    return np.where(r.valid, dp_sync_exposure(r.fw.dp_overlaps(r.run), red, gat, buckets, comp_stage, rec_stage),
                    0.0)


def dp_sync_traffic(r: Rows, sp_: StageParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, P) each of (gradient reduction seconds, weight all-gather seconds, buckets) of the end-of-step
    synchronisation (dp_sync_exposed): they depend on the degrees and the stage layout, not on the micro-batch
    size, so the search prices them once per combination of degrees."""
    table, links = r.table, r.links
    _, Bg, _ = state_bytes(r.run)
    gather_ne, gather_ex = sp_.gather_ne, sp_.gather_ex
    red, gat = _dp_sync(links, Bg * sp_.ne_stage, gather_ne, table.dp * table.cp, table.dp_shard,
                        table.optimizer_shard, table.tp)
    if r.is_moe:
        e = r.edp_i
        r2, g2 = _dp_sync(links, Bg * sp_.ex_stage, gather_ex, e, np.minimum(table.dp_shard, e),
                          np.minimum(table.optimizer_shard, e), r.ep_stride * table.ep)
        red, gat = red + r2, gat + g2
    if r.model.tie_embeddings:
        emb_ar = links.allreduce(np.full(r.n, Bg * sp_.e_split) / r.t, np.full(r.n, 2), pp_stride(r))
        red = red + np.where((r.p > 1)[:, None] & (r.first | r.last), emb_ar[:, None], 0.0)
    return red, gat, dp_buckets(sp_.ne_stage + sp_.ex_stage, r.dp)


def dp_sync_exposure(overlaps: tuple[bool, bool], red: np.ndarray, gat: np.ndarray, buckets: np.ndarray,
                     comp_stage: np.ndarray, rec_stage: np.ndarray) -> np.ndarray:
    """(n, P) the exposed part of dp_sync_traffic beside `comp_stage` seconds of compute and `rec_stage` of
    recompute per stage (dp_sync_exposed). Never grows with either."""
    bwd_last = comp_stage * (K.BWD_GEMM_RATIO / (1 + K.BWD_GEMM_RATIO)) + rec_stage
    fwd_first = comp_stage * (1 / (1 + K.BWD_GEMM_RATIO))
    grad_overlap, gather_overlap = overlaps
    red_e = dp_exposed_time(red, K.DP_OVERLAP * bwd_last, buckets) if grad_overlap else red
    gat_e = dp_exposed_time(gat, K.DP_OVERLAP * fwd_first, buckets) if gather_overlap else gat
    return red_e + gat_e


def dp_buckets(params: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """(n, P) number of gradient buckets of each stage: Megatron's DDP groups gradients into buckets of
    max(DP_BUCKET_PARAMS, DP_BUCKET_PARAMS_PER_RANK × dp) parameters (constants.py), at least one."""
    size = np.maximum(K.DP_BUCKET_PARAMS, K.DP_BUCKET_PARAMS_PER_RANK * dp)[:, None]
    return np.maximum(np.ceil(params / size), 1.0)


def dp_exposed_time(comm: np.ndarray, window: np.ndarray, buckets: np.ndarray) -> np.ndarray:
    """Exposed seconds of a bucketed data-parallel collective of `comm` seconds launched bucket by bucket
    during a compute window of `window` seconds that produces (or, for the gather, consumes) the buckets
    at an even rate. With nb buckets of c = comm/nb seconds and compute chunks of w = window/nb: if c ≤ w
    every bucket's collective finishes under the next chunk and only the last one (first one, for the
    gather) shows, c; otherwise the collectives run back to back from the first bucket and
    comm + w − window shows. Hence max(c, comm − window·(1 − 1/nb)), between c and comm."""
    per = comm / buckets
    return np.maximum(per, comm - window * (1 - 1 / buckets))


def _dp_sync(links: Links, grad_b: np.ndarray, param_b: np.ndarray, group: np.ndarray, fsdp: np.ndarray,
             opt_shard: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """End-of-step synchronisation of one stage (n, P) as (gradient reduction, weight all-gather) times, by
    how the state is sharded. None: all-reduce over the data-parallel group. ZeRO-1 (optimizer_shard o):
    reduce-scatter over o, all-reduce of the 1/o shard across the group/o replicas, then all-gather of the
    updated weights (MLM-DISTOPT). FSDP (dp_shard f; its per-micro-batch traffic is priced per stage):
    all-reduce of the 1/f gradient shard across the group/f replicas (HSDP). Times are linear in bytes, so
    each row's coefficients are computed once and applied to every stage."""
    o = np.maximum(opt_shard, 1)
    f = np.maximum(fsdp, 1)
    zero1 = (f <= 1) & (o > 1)
    hsdp = f > 1
    # Reduction: one all-reduce (plain / HSDP replicas / ZeRO-1 replicas) plus ZeRO-1's reduce-scatter.
    ar_n = np.where(hsdp, np.maximum(group // f, 1), np.where(zero1, np.maximum(group // o, 1), group))
    ar_stride = np.where(hsdp, stride * f, np.where(zero1, stride * o, stride))
    ar_div = np.where(hsdp, f, np.where(zero1, o, 1)).astype(np.float64)
    a_ar, l_ar = links.gather_coef(ar_n, ar_stride)
    a_rs, l_rs = links.gather_coef(np.where(zero1, o, 1), stride)
    red = grad_b * (2 * a_ar / ar_div + a_rs)[:, None] + (2 * l_ar + l_rs)[:, None]
    gat = param_b * a_rs[:, None] + l_rs[:, None]
    return red, gat
