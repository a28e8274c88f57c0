"""The vectorised pricing core: memory per pipeline stage and step time for every row of a CandidateTable.

Every formula names its source; every coefficient comes from engine.cost.constants. docs/cost-model.md
states the same formulas in prose. Notation: T = b·s/cp tokens a rank's sequence shard holds, t = tp,
p = pp, v = virtual chunks, m = micro-batches, h = hidden, f = MLP width.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from engine.calibrate.ratios import apply_ratios
from engine.catalog.devices import matmul_efficiency
from engine.cost import constants as K
from engine.cost.comm import Links
from engine.cost.layout import in_flight, layer_stage, stage_type_counts
from engine.cost.model import (
    attn_shape,
    embedding_params,
    head_params,
    layer_params,
    mlp_mats,
    model_stats,
    mtp_extra_params,
)
from engine.cost.table import CandidateTable, PricedTable
from engine.results import MEMORY_TERMS, TIME_TERMS
from engine.specs import ClusterSpec, ModelSpec, RunOptions

DENSE, MOE = 0, 1
OFF, SELECTIVE, FULL = 0, 1, 2


@dataclass(frozen=True, slots=True)
class ActTerms:
    """Bytes per token of one layer's kept activations, split by how they shard (KOR22 Table 2 terms).

    unsplit: sharded by tp only with sequence parallelism (norm inputs, norm outputs, block dropout masks,
      MLA latents, router logits); split: always sharded by tp (Q, K, V, attention output, MLP
      intermediates, routed tokens); score: the a·s score tensors per token (no flash attention), ÷ tp.
    """

    unsplit: float
    split: float
    score: float


def _dropout(m: ModelSpec) -> bool:
    """GPT-style recipes (plain GeLU MLP) train with dropout 0.1 and keep 1-byte masks (KOR22 §4.1);
    gated-MLP (Llama-style) recipes train without dropout."""
    return not m.gated_mlp


def act_terms(m: ModelSpec, moe: bool, mode: int, policy: str) -> ActTerms:
    """Activation bytes per token of one layer in a recompute mode (before dividing by tp and cp).

    KOR22 Table 2 / §4.1 generalised: attention keeps its input, norm output, Q, K, V (GQA widths),
    the output-projection input and (without flash attention) softmax output + dropout mask + dropout
    output (5·a·s bytes per token; 2·a·s without dropout); flash attention keeps an fp32 log-sum-exp per
    head instead. The GeLU MLP keeps its input, norm output, fc1 output and GeLU output (2 + 2 + 2f + 2f);
    a gated MLP keeps gate, up and their product (3 × 2f). MoE keeps, per routed copy of a token (top-k ×
    capacity), its permuted input, the expert's intermediates and its output, plus fp32 router logits and
    probabilities. Full recompute keeps only the layer input (2 bytes × h). Selective "attention" (KOR22)
    drops the score tensors; selective "hyperparallel" (HYPERPARALLEL.md §8.2) keeps matmul and
    communication outputs and drops norm outputs, activation outputs, softmax/dropout outputs and masks.
    """
    h = float(m.hidden)
    a = attn_shape(m)
    B = K.ACT_BYTES
    drop = _dropout(m)
    mask = K.MASK_BYTES if drop else 0.0
    if mode == FULL:
        return ActTerms(B * h, 0.0, 0.0)
    # Attention block.
    norm_in = 2 * B * h  # two norm inputs (residual stream)
    norm_out = 2 * B * h  # QKV input and MLP input (norm outputs)
    masks = 2 * mask * h  # block-output dropout masks
    latent = B * a.latent
    qkv = B * (a.q_width + a.kv_width)
    proj_in = B * a.out_width
    if m.use_flash_attention:
        score = 0.0
        lse = K.FLASH_LSE_BYTES * a.heads
    else:
        score = (2 * B + mask) * a.heads * m.seq_len if drop else B * a.heads * m.seq_len
        lse = 0.0
    # MLP block.
    nm = mlp_mats(m)
    if moe:
        f_e = float(m.moe_ffn or m.ffn_eff)
        f_s = float(m.shared_ffn or f_e)
        copies = m.experts_per_tok * max(m.capacity_factor, 1.0)
        per_copy_inter = B * f_e * (3 if nm == 3 else 2)
        routed_io = 2 * B * h
        mlp_split = copies * (routed_io + per_copy_inter) + m.num_shared_experts * B * f_s * (3 if nm == 3 else 2)
        act_out = B * (copies * f_e + m.num_shared_experts * f_s)  # GeLU output / gated product
        router = 2 * 4.0 * m.num_experts  # fp32 logits + probabilities
    else:
        f = float(m.ffn_eff)
        mlp_split = B * f * (3 if nm == 3 else 2)
        act_out = B * f
        router = 0.0
    unsplit = norm_in + norm_out + masks + latent + router
    split = qkv + proj_in + lse + mlp_split
    if mode == SELECTIVE:
        if policy == "attention":
            score = 0.0  # QKᵀ, softmax, dropout and attention·V are recomputed (KOR22 §4.3)
        else:
            unsplit -= norm_out + masks
            split -= act_out
            if score:
                score = B * a.heads * m.seq_len  # keep the QKᵀ matmul output only
    return ActTerms(unsplit, split, score)


def _gemm_time(flops: np.ndarray, min_dim: np.ndarray, rate: float) -> np.ndarray:
    """FLOPs over peak × MAMF fraction × shape factor x/(x + GEMM_HALF_DIM) (constants.py)."""
    x = np.maximum(min_dim, 1.0)
    return flops / (rate * x / (x + K.GEMM_HALF_DIM))


# Rows priced per block: small enough that a block's (rows × stages) arrays stay in cache, large enough
# that numpy's per-call overhead is amortised. Rows are independent, so blocking never changes a number.
BLOCK_ROWS = 4096


def price_table(
    model: ModelSpec, cluster: ClusterSpec, run: RunOptions, table: CandidateTable, budget_gib: float
) -> PricedTable:
    """Price every row of `table`. See engine.cost for the contract; docs/cost-model.md for the formulas."""
    n = len(table)
    P = int(np.maximum(table.pp, 1).max()) if n else 1
    if n <= BLOCK_ROWS:
        return apply_ratios(_price_block(model, cluster, run, table, budget_gib, P), run.ratios)
    parts = [_price_block(model, cluster, run, table.take(np.arange(i, min(i + BLOCK_ROWS, n))), budget_gib, P)
             for i in range(0, n, BLOCK_ROWS)]
    return apply_ratios(_concat(parts), run.ratios)


def _concat(parts: list[PricedTable]) -> PricedTable:
    kw: dict[str, object] = {}
    for f in fields(PricedTable):
        vals = [getattr(pt, f.name) for pt in parts]
        if isinstance(vals[0], dict):
            kw[f.name] = {k: np.concatenate([v[k] for v in vals]) for k in vals[0]}
        elif isinstance(vals[0], np.ndarray):
            kw[f.name] = np.concatenate(vals)
        else:
            kw[f.name] = vals[0]
    return PricedTable(**kw)  # type: ignore[arg-type]


def _price_block(
    model: ModelSpec, cluster: ClusterSpec, run: RunOptions, table: CandidateTable, budget_gib: float, P: int
) -> PricedTable:
    """Price a block of rows with stage arrays P wide (the whole table's largest pp)."""
    m_ = model
    n = len(table)
    f64 = np.float64
    t = table.tp.astype(f64)
    p_i = np.maximum(table.pp, 1)
    p = p_i.astype(f64)
    cp = np.maximum(table.cp, 1).astype(f64)
    ep = np.maximum(table.ep, 1).astype(f64)
    etp = np.maximum(table.etp, 1).astype(f64)
    v_i = np.where(table.schedule == 1, np.maximum(table.vpp, 1), 1)
    v = v_i.astype(f64)
    b = table.micro_batch_size.astype(f64)
    mb = np.maximum(table.micro_batch_num, 1).astype(f64)
    sp = table.sequence_parallel.astype(bool) & (table.tp > 1)
    dp = np.maximum(table.dp, 1).astype(f64)
    fs = np.maximum(table.dp_shard, 1).astype(f64)
    os_ = np.maximum(table.optimizer_shard, 1).astype(f64)
    vmax = int(v_i.max()) if n else 1
    L = m_.num_layers
    s = float(m_.seq_len)
    h = float(m_.hidden)
    V = float(m_.vocab)
    is_moe = m_.is_moe
    dev = cluster.device
    peak = dev.peak_tflops * K.TERA
    mamf = matmul_efficiency(dev.name)
    gemm_rate = peak * mamf * K.GEMM_FRACTION_OF_MAMF
    hbm = dev.hbm_tb_s * K.TERA * K.HBM_EFFICIENCY
    links = Links(cluster.cards_per_node, cluster.intra_node_gb_s, cluster.inter_node_gb_s)
    T = b * s / cp  # tokens of one rank's sequence shard, per micro-batch
    a = attn_shape(m_)
    policy = run.selective_policy

    # ------------------------------------------------------------------ layer placement
    first_dense = m_.first_k_dense if is_moe else L
    counts = stage_type_counts(L, first_dense, p_i, v_i, P, vmax)  # (n, P, 2)
    stage_idx = np.arange(P)[None, :]
    last = stage_idx == (p_i[:, None] - 1)
    first = stage_idx == 0
    valid = stage_idx < p_i[:, None]
    mtp_type = MOE if is_moe else DENSE
    if m_.mtp_depth:
        counts[:, :, mtp_type] += np.where(last, m_.mtp_depth, 0)
    rows = np.arange(n)
    mode_row = np.clip(table.recompute, 0, 2)
    counts_m: np.ndarray | None = None  # (n, P, 2, 3) only with per-layer modes
    if table.layer_modes is not None:
        counts_m = _mode_counts(m_, table, p_i, v_i, P, first_dense, mtp_type)
    mf = in_flight(p_i, v_i, mb, P)  # (n, P)

    # ------------------------------------------------------------------ activation bytes per layer
    act = np.zeros((n, 2, 3))
    for ty in (DENSE, MOE) if is_moe else (DENSE,):
        moe = ty == MOE
        for mode in (OFF, SELECTIVE, FULL):
            at = act_terms(m_, moe, mode, policy)
            if mode == FULL:
                # The checkpointed layer input is the (sequence-parallel sharded) residual stream.
                act[:, ty, mode] = T * at.unsplit / np.where(sp, t, 1.0)
            else:
                act[:, ty, mode] = T * (at.unsplit / np.where(sp, t, 1.0) + at.split / t + at.score / t)
    if not is_moe:
        act[:, MOE, :] = act[:, DENSE, :]

    def stage_sum(per_layer: np.ndarray) -> np.ndarray:
        """(n, 2, 3) per layer -> (n, P) per stage: Σ over type and mode of layers × value."""
        if counts_m is None:  # uniform mode: one column per type
            sel = per_layer[rows, :, mode_row]  # (n, 2)
            out = counts[:, :, 0] * sel[:, None, 0]
            return out + counts[:, :, 1] * sel[:, None, 1] if is_moe else out
        return _contract(counts_m, per_layer[:, None, :, :])
    drop = _dropout(m_)
    emb_act = T * (K.MASK_BYTES * h if drop else 0.0) / np.where(sp, t, 1.0)  # embedding dropout mask
    # Output side, KOR22 §4.3: final-norm input 2h, output-projection input 2h, fp32 logits 4·V/t.
    head_act = T * (4.0 * h / np.where(sp, t, 1.0) + K.LOGIT_BYTES * V / t) * (1 + m_.mtp_depth)
    ws_type = MOE if is_moe else DENSE
    working = act[:, ws_type, OFF]  # backward working set: one layer's activations, one micro-batch

    # ------------------------------------------------------------------ static memory (bytes)
    lp_d = layer_params(m_, False)
    lp_m = layer_params(m_, True) if is_moe else lp_d
    e_split, e_rep = embedding_params(m_)
    h_split, h_rep = head_params(m_)
    x_split, x_rep = mtp_extra_params(m_)
    ne_layer = np.stack([lp_d.split / t + lp_d.rep, lp_m.split / t + lp_m.rep], axis=1)  # (n, 2)
    ex_layer = np.stack([np.zeros(n), lp_m.routed / (ep * etp)], axis=1)
    # Parameters each stage holds on one rank (zero past a row's pp: counts are zero there), non-expert
    # and routed-expert apart because they shard over different data-parallel groups.
    ne_stage = counts[:, :, 0] * ne_layer[:, None, 0]
    if is_moe:
        ne_stage = ne_stage + counts[:, :, 1] * ne_layer[:, None, 1]
        ex_stage = counts[:, :, 1] * ex_layer[:, None, 1]
    else:
        ex_stage = np.zeros_like(ne_stage)
    tied_copy = e_split if (m_.tie_embeddings) else 0.0
    ne_stage += np.where(first, (e_split / t + e_rep)[:, None], 0.0)
    head_local = (h_split / t + h_rep) + np.where(p > 1, tied_copy / t, 0.0)
    if m_.mtp_depth:
        head_local = head_local + m_.mtp_depth * (x_split / t + x_rep)
    ne_stage += np.where(last, head_local[:, None], 0.0)
    edp = np.maximum(dp * cp * t / (ep * etp), 1.0)  # expert data-parallel size
    reshard = run.reshard_after_forward
    shard_p = np.where(fs > 1, fs if reshard else 1.0, 1.0)
    shard_g = fs
    shard_o = np.maximum(fs, os_)
    Bp, Bg = float(run.param_bytes), float(run.grad_bytes)
    Bo = float(run.optimizer_states * run.optimizer_state_bytes + (4 if run.master_weights else 0))
    # Bytes per held parameter, per row: weights, gradients, optimizer states after sharding.
    coef_ne = {"parameters": Bp / shard_p, "gradients": Bg / shard_g, "optimizer": Bo / shard_o}
    coef_ex = {"parameters": Bp / np.minimum(shard_p, edp), "gradients": Bg / np.minimum(shard_g, edp),
               "optimizer": Bo / np.minimum(shard_o, edp)}
    static_b = ne_stage * (coef_ne["parameters"] + coef_ne["gradients"] + coef_ne["optimizer"])[:, None]
    if is_moe:
        static_b = static_b + ex_stage * (coef_ex["parameters"] + coef_ex["gradients"] + coef_ex["optimizer"])[:, None]

    # ------------------------------------------------------------------ buffers (bytes per stage)
    layer_local = np.maximum(ne_layer[:, DENSE] + ex_layer[:, DENSE], ne_layer[:, MOE] + ex_layer[:, MOE])
    reserved_b = K.RESERVED_GIB * K.GIB
    buf = np.where(sp, 2 * K.ACT_BYTES * T * h, 0.0)  # all-gathered norm output (sequence parallel)
    buf = buf + np.where(p > 1, 2 * K.ACT_BYTES * T * h / t, 0.0)  # pipeline send + receive
    # FSDP working buffer: one gathered layer plus its unsharded gradient in the reduce (parameter) dtype,
    # DS-EST's "4 × largest layer's params" at 16-bit (CALIBRATION §6.3); ZeRO-2-like keeps the weights
    # whole (counted as parameters) and needs only the gradient buffer.
    buf = buf + np.where(fs > 1, 2 * Bp * layer_local if reshard else Bp * layer_local, 0.0)
    if is_moe:
        copies = m_.experts_per_tok * max(m_.capacity_factor, 1.0) * K.MOE_IMBALANCE
        buf = buf + np.where(ep > 1, 2 * K.ACT_BYTES * T / t * copies * h, 0.0)
    buf = buf + np.where(cp > 1, 2 * K.ACT_BYTES * T * a.kv_width / t, 0.0)  # ring KV double buffer

    fixed_act = working[:, None] + np.where(first, (emb_act[:, None] * mf), 0.0) + np.where(last, head_act[:, None], 0.0)
    fixed_b = fixed_act + buf[:, None] + reserved_b
    layers_act_b = mf * stage_sum(act)
    act_stage = fixed_act + layers_act_b
    tot = static_b + act_stage + (buf[:, None] + reserved_b)
    tot[~valid] = -np.inf
    peak_stage = np.argmax(tot, axis=1)
    pick = (rows, peak_stage)
    peak_gib = tot[pick] / K.GIB
    stage_gib = tot / K.GIB
    stage_gib[~valid] = np.nan
    fixed_b = fixed_act + buf[:, None] + reserved_b
    ne_pk, ex_pk = ne_stage[pick], ex_stage[pick]
    mem_terms = {k: (ne_pk * coef_ne[k] + ex_pk * coef_ex[k]) / K.GIB for k in ("parameters", "gradients", "optimizer")}
    mem_terms["activations"] = act_stage[pick] / K.GIB
    mem_terms["buffers"] = buf / K.GIB
    mem_terms["reserved"] = np.full(n, K.RESERVED_GIB)
    stage_parts = {"ne": ne_stage, "ex": ex_stage, "act": act_stage, "buf": buf, "valid": valid,
                   **{f"ne_{k}": v for k, v in coef_ne.items()}, **{f"ex_{k}": v for k, v in coef_ex.items()}}

    # ------------------------------------------------------------------ compute time per layer, per micro-batch
    fwd = np.zeros((n, 2))
    attn_fwd = np.zeros((n, 2))
    attn_bwd = np.zeros((n, 2))
    tokens_rep = T / np.where(sp, t, 1.0)  # tokens a replicated (non-TP) GEMM sees
    compute = np.zeros((n, 2))  # fwd + bwd per micro-batch
    gemm = np.zeros((n, 2))  # forward weight-GEMM time of one layer (what TP comm-GEMM overlap hides under)
    types = (DENSE, MOE) if is_moe else (DENSE,)  # a dense model's "MoE" column repeats the dense one
    for ty in types:
        moe = ty == MOE and is_moe
        g = np.zeros(n)
        # Attention weight GEMMs: (tokens, output width / t, input width).
        if m_.is_mla:
            nope = m_.qk_nope_head_dim or m_.head_dim_eff
            if m_.q_lora_rank:
                g += _gemm_time(2 * tokens_rep * h * m_.q_lora_rank, np.minimum(tokens_rep, m_.q_lora_rank), gemm_rate)
                g += _gemm_time(2 * T * m_.q_lora_rank * a.heads * a.d_qk / t, np.minimum(a.heads * a.d_qk / t, m_.q_lora_rank), gemm_rate)
            else:
                g += _gemm_time(2 * T * h * a.heads * a.d_qk / t, np.minimum(a.heads * a.d_qk / t, h), gemm_rate)
            kv_down = m_.kv_lora_rank + m_.qk_rope_head_dim
            g += _gemm_time(2 * tokens_rep * h * kv_down, np.minimum(tokens_rep, kv_down), gemm_rate)
            g += _gemm_time(2 * T * m_.kv_lora_rank * a.heads * (nope + a.d_v) / t,
                            np.minimum(a.heads * (nope + a.d_v) / t, m_.kv_lora_rank), gemm_rate)
        else:
            qkv_w = a.q_width + 2 * a.kv_heads * a.d_qk
            g += _gemm_time(2 * T * h * qkv_w / t, np.minimum(qkv_w / t, h), gemm_rate)
        g += _gemm_time(2 * T * a.out_width * h / t, np.minimum(a.out_width / t, h), gemm_rate)
        # MLP / MoE GEMMs.
        nm = mlp_mats(m_)
        if moe:
            f_e = float(m_.moe_ffn or m_.ffn_eff)
            f_s = float(m_.shared_ffn or f_e)
            copies = m_.experts_per_tok * max(m_.capacity_factor, 1.0) * K.MOE_IMBALANCE
            per_expert_tokens = T / t * copies * ep / m_.num_experts * etp
            g += _gemm_time(2 * tokens_rep * h * m_.num_experts, np.minimum(tokens_rep, m_.num_experts), gemm_rate)
            g += _gemm_time(2 * T / t * copies * nm * h * f_e,
                            np.minimum(np.minimum(per_expert_tokens, f_e / etp), h), gemm_rate)
            if m_.num_shared_experts:
                g += _gemm_time(2 * T * m_.num_shared_experts * nm * h * f_s / t, np.minimum(f_s / t, h), gemm_rate)
        else:
            f = float(m_.ffn_eff)
            g += _gemm_time(2 * T * nm * h * f / t, np.minimum(f / t, h), gemm_rate)
        # Attention core: QKᵀ and attention·V over T queries × s keys.
        core = 2 * T * s * a.heads * (a.d_qk + a.d_v) / t
        if m_.use_flash_attention:
            af = 0.5 * core / (peak * K.FLASH_ATTN_FRACTION)  # causal blocks skipped
            ab = K.BWD_FLASH_RATIO * af
        else:
            # Megatron's fused softmax path runs the full s×s batched GEMMs (no causal skipping).
            af = _gemm_time(core, np.full(n, float(min(a.d_qk, s))), gemm_rate)
            ab = K.BWD_GEMM_RATIO * af
        e = K.ELEMENTWISE_TRAFFIC_PER_KEPT_BYTE * act[:, ty, OFF] / hbm
        gemm[:, ty] = g
        attn_fwd[:, ty] = af
        attn_bwd[:, ty] = ab
        fwd[:, ty] = g + af + e
        bwd = K.BWD_GEMM_RATIO * g + ab + K.BWD_ELEMENTWISE_RATIO * e
        compute[:, ty] = fwd[:, ty] + bwd
    if not is_moe:
        for arr in (fwd, gemm, attn_fwd, attn_bwd, compute):
            arr[:, MOE] = arr[:, DENSE]

    # Recompute extra per mode (n, 2, 3).
    rec = np.zeros((n, 2, 3))
    rec[:, :, FULL] = fwd
    if policy == "attention":
        score_elem = np.zeros((n, 2))
        for ty in (DENSE, MOE):
            at = act_terms(m_, ty == MOE and is_moe, OFF, policy)
            score_elem[:, ty] = K.ELEMENTWISE_TRAFFIC_PER_KEPT_BYTE * T * at.score / t / hbm
        rec[:, :, SELECTIVE] = attn_fwd + score_elem
    else:
        rec[:, :, SELECTIVE] = K.ELEMENTWISE_TRAFFIC_PER_KEPT_BYTE * (act[:, :, OFF] - act[:, :, SELECTIVE]) / hbm

    # ------------------------------------------------------------------ communication per layer, per micro-batch
    one = np.ones(n)
    tp_ar = links.allreduce(K.ACT_BYTES * T * h, table.tp, one)  # one all-reduce of the residual stream
    # Exposed time of one forward and one backward TP collective, per layer type (n, 2).
    tp_fwd_e, tp_bwd_e = tp_exposed(tp_ar, gemm, run.tp_comm_overlap)
    tp = np.zeros((n, 2, 3))
    base_tp = 2 * tp_fwd_e + 2 * tp_bwd_e  # 2 forward + 2 backward (AR, or AG + RS with SP: same bytes), NAR21 §3 / KOR22 §4.2
    tp[:, :, :] = base_tp[:, :, None]
    tp[:, :, FULL] += 2 * tp_fwd_e  # the recomputed forward repeats its collectives
    if policy != "attention":
        tp[:, :, SELECTIVE] += np.where(sp[:, None], tp_fwd_e, 0.0)  # all-gathers re-run (HYPERPARALLEL.md §8.2)
    # Context parallelism.
    cpc = np.zeros((n, 2, 3))
    if (table.cp > 1).any():
        cp_stride = table.tp
        if run.cp_algo == "ulysses":
            size = K.ACT_BYTES * T * (a.q_width + a.kv_width + a.out_width) / t
            t_cp = 2 * links.alltoall(size, table.cp, cp_stride)
            t_cp_fwd = 0.5 * t_cp
        else:
            g_cp, _k = links.split(table.cp, cp_stride)
            cross = g_cp < table.cp
            chunk = K.ACT_BYTES * T * a.kv_width / t
            step = links.p2p(chunk, cross)
            t_fwd = (cp - 1) * step
            t_cp = np.maximum(0.0, 3 * t_fwd - K.CP_OVERLAP * (attn_fwd.max(axis=1) + attn_bwd.max(axis=1)))
            t_cp_fwd = np.maximum(0.0, t_fwd - K.CP_OVERLAP * attn_fwd.max(axis=1))
        t_cp = np.where(table.cp > 1, t_cp, 0.0)
        t_cp_fwd = np.where(table.cp > 1, t_cp_fwd, 0.0)
        cpc[:, :, :] = t_cp[:, None, None]
        cpc[:, :, FULL] += t_cp_fwd[:, None]
    # Expert parallelism: dispatch + combine, forward and backward.
    epc = np.zeros((n, 2, 3))
    if is_moe:
        copies = m_.experts_per_tok * max(m_.capacity_factor, 1.0) * K.MOE_IMBALANCE
        a2a = links.alltoall(K.ACT_BYTES * T / t * copies * h, table.ep, table.tp * table.cp)
        epc[:, MOE, :] = 4 * a2a[:, None]
        epc[:, MOE, FULL] += 2 * a2a

    per_layer = compute[:, :, None] + rec + tp + cpc + epc  # (n, 2, 3) per micro-batch

    # ------------------------------------------------------------------ per stage, per micro-batch
    comp_stage = stage_sum(np.broadcast_to(compute[:, :, None], (n, 2, 3)))
    other_stage = stage_sum(rec + tp + cpc + epc)  # recompute + TP/CP/EP communication
    # Output layer (last stage): logits GEMM fwd + bwd, fp32 cross-entropy streaming.
    logit_g = _gemm_time(2 * T * h * V / t, np.minimum(V / t, h), gemm_rate)
    logit_e = K.ELEMENTWISE_TRAFFIC_PER_KEPT_BYTE * K.LOGIT_BYTES * T * V / t / hbm
    head_t = (1 + K.BWD_GEMM_RATIO) * logit_g + (1 + K.BWD_ELEMENTWISE_RATIO) * logit_e
    head_t = head_t * (1 + m_.mtp_depth)
    comp_stage = comp_stage + np.where(last, head_t[:, None], 0.0)
    # Pipeline point-to-point: activations forward and gradients backward, b·s·h/t each with NAR21's
    # scatter/gather, v times per micro-batch when interleaved (NAR21 §2.2, §4.1).
    pp_stride = table.tp * table.cp * table.dp
    cross_pp = pp_stride >= cluster.cards_per_node
    p2p_one = links.p2p(K.ACT_BYTES * T * h / t, cross_pp)
    p2p = np.where(p > 1, 2 * v * p2p_one * (1 - K.P2P_OVERLAP), 0.0)
    # FSDP per micro-batch: ZeRO-3 gathers the stage's parameters for forward and backward and
    # reduce-scatters its gradients (ZERO20 §5: 1.5× DP volume); ZeRO-2-like gathers once per step.
    fsdp_raw = np.zeros((n, P))
    if (fs > 1).any():
        coef = links.gather_flat_coef if K.FSDP_FLAT_RING else links.gather_coef
        # Gradients are reduce-scattered in the parameter dtype (FSDP's default reduce dtype; DeepSpeed fp16).
        a_ne, l_ne = coef(table.dp_shard, table.tp)
        ag = (Bp * ne_stage) * a_ne[:, None] + l_ne[:, None]
        if is_moe:  # routed experts are sharded over the expert-data-parallel ranks only
            efs = np.minimum(table.dp_shard, np.maximum(np.round(edp).astype(np.int64), 1))
            a_ex, l_ex = coef(efs, table.tp * table.cp * table.ep)
            ag = ag + (Bp * ex_stage) * a_ex[:, None] + l_ex[:, None]
        gathers = 2.0 if reshard else 1.0 / mb[:, None]
        fsdp_raw = np.where((fs > 1)[:, None], (gathers + 1.0) * ag, 0.0)
    fsdp_exp = np.maximum(0.0, fsdp_raw - K.FSDP_OVERLAP * comp_stage)
    stage_t = comp_stage + other_stage + p2p[:, None] + fsdp_exp
    stage_t[~valid] = 0.0

    # ------------------------------------------------------------------ end of step: DP sync + optimizer
    dpcp = table.dp * table.cp
    ne_g = Bg * ne_stage
    red, gat = _dp_sync(links, ne_g, Bp * ne_stage, dpcp, table.dp_shard, table.optimizer_shard, table.tp)
    if is_moe:
        edp_i = np.maximum(np.round(edp).astype(np.int64), 1)
        r2, g2 = _dp_sync(links, Bg * ex_stage, Bp * ex_stage, edp_i, np.minimum(table.dp_shard, edp_i),
                          np.minimum(table.optimizer_shard, edp_i), table.tp * table.cp * table.ep)
        red, gat = red + r2, gat + g2
    if m_.tie_embeddings:
        emb_ar = links.allreduce(np.full(n, Bg * e_split) / t, np.full(n, 2), pp_stride)
        red = red + np.where((p > 1)[:, None] & (first | last), emb_ar[:, None], 0.0)
    # Gradient reduction overlaps the last micro-batch's backward (with its recomputed forward); the ZeRO-1
    # weight all-gather overlaps the first micro-batch's forward of the next step (Megatron
    # --overlap-grad-reduce / --overlap-param-gather), bucket by bucket: dp_exposed below.
    bwd_last = comp_stage * (K.BWD_GEMM_RATIO / (1 + K.BWD_GEMM_RATIO)) + stage_sum(rec)
    fwd_first = comp_stage * (1 / (1 + K.BWD_GEMM_RATIO))
    buckets = dp_buckets(ne_stage + ex_stage, dp)
    red_e = dp_exposed_time(red, K.DP_OVERLAP * bwd_last, buckets) if run.overlap_grad_reduce else red
    gat_e = dp_exposed_time(gat, K.DP_OVERLAP * fwd_first, buckets) if run.overlap_param_gather else gat
    dp_exp_stage = red_e + gat_e
    dp_exp_stage = np.where(valid, dp_exp_stage, 0.0)
    # The optimizer updates what each rank holds of the optimizer shard (ZeRO-1/FSDP divide it).
    opt_held = ne_stage / shard_o[:, None]
    if is_moe:
        opt_held = opt_held + ex_stage / np.minimum(shard_o, edp)[:, None]
    opt_t = opt_held.max(axis=1) * K.OPTIMIZER_BYTES_PER_PARAM / hbm

    # ------------------------------------------------------------------ pipeline combination
    imax = np.argmax(stage_t, axis=1)
    pk = (rows, imax)
    t_max = stage_t[pk]
    t_sum = _ordered_sum(stage_t)
    bubble = (t_sum - t_max) / v
    dp_exposed = dp_exp_stage.max(axis=1)
    step = mb * t_max + bubble + dp_exposed + opt_t
    time_terms = {
        "compute": mb * comp_stage[pk],
        "recompute": mb * _at_stage(counts, counts_m, imax, rec, mode_row),
        "tp_comm": mb * _at_stage(counts, counts_m, imax, tp, mode_row),
        "cp_comm": mb * _at_stage(counts, counts_m, imax, cpc, mode_row),
        "ep_comm": mb * _at_stage(counts, counts_m, imax, epc, mode_row),
        "dp_comm": mb * fsdp_exp[pk] + dp_exposed,
        "pp_bubble": bubble,
        "pp_p2p": mb * p2p,
        "optimizer": opt_t,
    }
    assert set(time_terms) == set(TIME_TERMS) and set(mem_terms) == set(MEMORY_TERMS)
    gbs = dp * b * mb
    tokens = gbs * s
    world = dp * t * p * cp
    tok_s = tokens / step
    stats = model_stats(m_)
    mfu = stats.flops_per_token_noncausal * tokens / (step * world * peak)

    per_step_layer = mb[:, None, None] * per_layer
    extra = per_step_layer - per_step_layer[:, :, OFF:OFF + 1]
    return PricedTable(
        peak_gib=peak_gib, stage_memory_gib=stage_gib, peak_stage=peak_stage, memory_terms=mem_terms,
        stage_parts=stage_parts,
        step_time_s=step, time_terms=time_terms, tokens_per_s=tok_s, tokens_per_s_per_device=tok_s / world,
        mfu=mfu, fits=peak_gib <= budget_gib, budget_gib=float(budget_gib),
        stage_static_gib=np.where(valid, static_b / K.GIB, np.nan),
        stage_fixed_gib=np.where(valid, fixed_b / K.GIB, np.nan),
        layer_count=counts, in_flight=mf, layer_act_one_gib=act / K.GIB, layer_time_s=per_step_layer,
        layer_extra_time_s=np.maximum(extra, 0.0),
    )


def tp_exposed(coll: np.ndarray, gemm: np.ndarray, overlap: bool) -> tuple[np.ndarray, np.ndarray]:
    """Exposed seconds of one forward and one backward tensor-parallel collective of `coll` seconds, per
    layer type, given the layer's forward weight-GEMM time `gemm` (n, 2).

    Without comm-GEMM overlap, Megatron still runs the backward all-reduce asynchronously with the weight-
    gradient GEMM: a fixed share TP_OVERLAP is hidden (KOR22 §6.2 note; FITTED). With it
    (--tp-comm-overlap, TransformerEngine userbuffers; constants.TP_COMM_OVERLAP_SPLITS), a forward
    all-gather + reduce-scatter pair shows only the last of the reduce-scatter's chunks, 1/(2·splits) of
    the pair, and a backward pair runs beside the other backward GEMM; either hides at most the time of
    the GEMMs it overlaps (a layer's forward weight GEMMs serve two pairs, g/2 each; backward GEMMs are
    BWD_GEMM_RATIO times longer)."""
    c = coll[:, None]
    if not overlap:
        e = np.broadcast_to((1 - K.TP_OVERLAP) * c, gemm.shape)
        return e, e
    fwd_e = c - np.minimum((1 - 0.5 / K.TP_COMM_OVERLAP_SPLITS) * c, 0.5 * gemm)
    bwd_e = c - np.minimum(c, 0.5 * K.BWD_GEMM_RATIO * gemm)
    return fwd_e, bwd_e


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


def _at_stage(counts: np.ndarray, counts_m: np.ndarray | None, stage: np.ndarray, per_layer: np.ndarray,
              mode_row: np.ndarray) -> np.ndarray:
    """(n,) Σ over the layers of each row's given stage of a per-layer (n, 2, 3) value."""
    rows = np.arange(len(stage))
    if counts_m is None:
        sel = per_layer[rows, :, mode_row]
        c = counts[rows, stage]
        return c[:, 0] * sel[:, 0] + c[:, 1] * sel[:, 1]
    cm = counts_m[rows, stage]  # (n, 2, 3)
    out = cm[:, 0, 0] * per_layer[:, 0, 0]
    for k in range(2):
        for mo in range(3):
            if k or mo:
                out = out + cm[:, k, mo] * per_layer[:, k, mo]
    return out


def _contract(counts_m: np.ndarray, per: np.ndarray) -> np.ndarray:
    """Σ over layer type and mode of counts × per-layer value, in a fixed order, so a row's result never
    depends on the other rows of the table (einsum/BLAS may re-associate)."""
    out = counts_m[:, :, 0, 0] * per[:, :, 0, 0]
    for k in range(2):
        for mo in range(3):
            if k or mo:
                out = out + counts_m[:, :, k, mo] * per[:, :, k, mo]
    return out


def _ordered_sum(x: np.ndarray) -> np.ndarray:
    """Row sums over stages, left to right (numpy's pairwise sum depends on the padded width)."""
    out = x[:, 0].copy()
    for i in range(1, x.shape[1]):
        out += x[:, i]
    return out


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


def _mode_counts(m: ModelSpec, table: CandidateTable, p: np.ndarray, v: np.ndarray, P: int, first_dense: int,
                 mtp_type: int) -> np.ndarray:
    """(n, P, 2, 3) layers per stage, type and mode from per-layer mode codes."""
    lm = np.asarray(table.layer_modes, dtype=np.int64)
    n = len(table)
    L = m.num_layers
    total = L + m.mtp_depth
    if lm.shape != (n, total):
        raise ValueError(f"layer_modes must be (rows, {total}), got {lm.shape}")
    st = np.empty((n, total), dtype=np.int64)
    st[:, :L] = layer_stage(L, p, v)
    st[:, L:] = (p - 1)[:, None]
    ty = np.empty(total, dtype=np.int64)
    ty[:L] = np.where(np.arange(L) < first_dense, DENSE, MOE)
    ty[L:] = mtp_type
    idx = ((np.arange(n)[:, None] * P + st) * 2 + ty[None, :]) * 3 + np.clip(lm, 0, 2)
    out = np.bincount(idx.ravel(), minlength=n * P * 6).astype(np.float64)
    return out.reshape(n, P, 2, 3)
