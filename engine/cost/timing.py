"""Time terms: compute and recompute per layer, the output layer, and how stages combine into a step
(docs/cost-model.md §3). Communication terms are in engine.cost.communication.

GEMMs run at peak × MAMF fraction × a shape factor; element-wise work streams its kept bytes through HBM;
flash attention runs at a fixed fraction of peak. Every coefficient comes from engine.cost.constants.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.cost import constants as K
from engine.cost.fp8 import FP8_GATHERED_WEIGHT_BYTES, cast_widths
from engine.cost.memory import act_terms, module_bytes, op_policy_recomputed_share
from engine.cost.model import layer_params, mamba_scan_flops_per_token, mlp_mats, mlp_share, moe_share
from engine.cost.rows import DENSE, FULL, MOE, OFF, SELECTIVE, Rows


def size_factor(call_flops: np.ndarray, half_flops: float = K.GEMM_HALF_FLOPS) -> np.ndarray:
    """Share of large-call efficiency a kernel call of `call_flops` FLOPs reaches, F/(F + half_flops)
    (constants.py: Calculon's op-size table, GEMM_HALF_FLOPS at the 16-bit rate). Why: a GEMM's efficiency
    depends on the tokens it sees (micro-batch × sequence shard), so a tiny micro-batch or a short CP chunk
    loses what a shape factor on the weight dimensions alone cannot see."""
    f = np.maximum(call_flops, 0.0)
    return f / (f + half_flops) if half_flops > 0 else np.ones_like(f)


def gemm_time(flops: np.ndarray, min_dim: np.ndarray, rate: float,
              call_flops: np.ndarray | None = None, half_flops: float = K.GEMM_HALF_FLOPS) -> np.ndarray:
    """FLOPs over peak × MAMF fraction × shape factor x/(x + GEMM_HALF_DIM) × size factor of the call
    (constants.py); `flops` is the work priced, `call_flops` one kernel call's (default: `flops`, one GEMM
    over the whole micro-batch's tokens; a grouped GEMM passes one expert's problem); `half_flops` the size
    factor's half point at this rate (weight_half_flops for the weight GEMMs)."""
    x = np.maximum(min_dim, 1.0)
    call = flops if call_flops is None else call_flops
    return flops / (rate * x / (x + K.GEMM_HALF_DIM) * np.maximum(size_factor(call, half_flops), 1e-6))


def weight_half_flops(r: Rows) -> float:
    """The size factor's half point for the weight GEMMs: GEMM_HALF_FLOPS (read at the 16-bit rate) × the
    weight GEMMs' speed-up over it (wgemm_rate / gemm_rate: 1 in BF16, about 2 in FP8). Why: what a small call
    cannot amortise (its launch, its tail wave, filling the pipeline of tiles) is time, not FLOPs; an FP8 call
    runs its FLOPs twice as fast, so the same fixed time weighs on twice the FLOPs, and FP8 gains less on a
    small GEMM (one fine-grained expert's) than on a large one, as torchao's float8 microbenchmarks show
    (TORCHAO-FP8: speed-up below 1 at small M·K·N, near 2 at large)."""
    return K.GEMM_HALF_FLOPS * (r.wgemm_rate / r.gemm_rate)


def weight_gemm_time(r: Rows, flops: np.ndarray, min_dim: np.ndarray) -> np.ndarray:
    """gemm_time of a weight GEMM (the layers' linear projections): at wgemm_rate, FP8 where the run casts them,
    with its half point (weight_half_flops)."""
    return gemm_time(flops, min_dim, r.wgemm_rate, half_flops=weight_half_flops(r))


@dataclass(frozen=True, slots=True)
class MoeGemms:
    """(n,) forward seconds of one MoE layer's GEMMs by part, one micro-batch: what the expert-parallel
    overlaps hide all-to-alls under (engine.cost.communication.ep_exposed)."""

    router: np.ndarray
    routed: np.ndarray
    shared: np.ndarray


@dataclass(frozen=True, slots=True)
class LayerCompute:
    """Seconds of one layer, one micro-batch, per layer type (n, 2).

    fwd: forward (weight GEMMs + attention core + element-wise); gemm: the forward weight GEMMs alone (what
    TP comm-GEMM overlap hides under); attn_fwd / attn_bwd: the attention core; compute: forward + backward;
    gemm_all: the weight GEMMs of forward + backward (compute's GEMM part; attention's is attn_fwd + attn_bwd,
    the rest of compute is element-wise: engine.cost.step_parts).
    attn_layer: (forward, backward) (n,) of one attention layer's core (attention_layer_core): attn_fwd /
    attn_bwd, or for a hybrid model what its attention layers run, not the layer mix (what a ring hides under).
    attn_gemm: (n,) the attention block's forward weight GEMMs (QKV and output projection), the GEMMs its own
    TP all-gather and reduce-scatter are fused with (gemm − attn_gemm is the MLP block's).
    """

    fwd: np.ndarray
    gemm: np.ndarray
    attn_fwd: np.ndarray
    attn_bwd: np.ndarray
    compute: np.ndarray
    gemm_all: np.ndarray
    attn_layer: tuple[np.ndarray, np.ndarray]
    moe: MoeGemms | None = None
    attn_gemm: np.ndarray | None = None

    @property
    def attn_block_fwd(self) -> np.ndarray:
        """(n,) forward seconds of the attention block: its projections and the attention core."""
        g = self.attn_gemm if self.attn_gemm is not None else np.zeros(self.fwd.shape[0])
        return g + self.attn_fwd[:, 0]


def _attention_gemms(r: Rows, tokens_rep: np.ndarray) -> np.ndarray:
    """(n,) forward seconds of the attention weight GEMMs: (tokens, output width / t, input width)."""
    m, a, T, t, h = r.model, r.attn, r.T, r.t, r.h
    g = np.zeros(r.n)
    if m.is_mla:
        nope = m.qk_nope_head_dim or m.head_dim_eff
        if m.q_lora_rank:
            g += weight_gemm_time(r, 2 * tokens_rep * h * m.q_lora_rank, np.minimum(tokens_rep, m.q_lora_rank))
            g += weight_gemm_time(r, 2 * T * m.q_lora_rank * a.heads * a.d_qk / t,
                                  np.minimum(a.heads * a.d_qk / t, m.q_lora_rank))
        else:
            g += weight_gemm_time(r, 2 * T * h * a.heads * a.d_qk / t, np.minimum(a.heads * a.d_qk / t, h))
        kv_down = m.kv_lora_rank + m.qk_rope_head_dim
        g += weight_gemm_time(r, 2 * tokens_rep * h * kv_down, np.minimum(tokens_rep, kv_down))
        g += weight_gemm_time(r, 2 * T * m.kv_lora_rank * a.heads * (nope + a.d_v) / t,
                              np.minimum(a.heads * (nope + a.d_v) / t, m.kv_lora_rank))
    else:
        qkv_w = a.q_width + 2 * a.kv_heads * a.d_qk
        g += weight_gemm_time(r, 2 * T * h * qkv_w / t, np.minimum(qkv_w / t, h))
    g += weight_gemm_time(r, 2 * T * a.out_width * h / t, np.minimum(a.out_width / t, h))
    if m.hybrid is None:
        return g
    share, _, mu = m.hybrid.shares()
    return share * g + mu * _mamba_gemms(r)


def _mamba_gemms(r: Rows) -> np.ndarray:
    """(n,) forward seconds of one Mamba-2 mixer's projections (column-parallel in, row-parallel out)."""
    hy, T, t, h = r.model.hybrid, r.T, r.t, r.h
    if hy is None:
        return np.zeros(r.n)
    return (weight_gemm_time(r, 2 * T * h * hy.in_proj / t, np.minimum(hy.in_proj / t, h))
            + weight_gemm_time(r, 2 * T * hy.d_inner * h / t, np.minimum(hy.d_inner / t, h)))


def tokens_per_expert(r: Rows) -> np.ndarray:
    """(n,) tokens one local expert's GEMM sees per micro-batch: the rank's T/t tokens × routed copies,
    gathered from the ep ranks of its group and spread over the num_experts experts (× etp: an expert's
    tensor-parallel ranks each see all its tokens)."""
    return r.T / r.t * r.moe_copies * r.ep / r.model.num_experts * r.etp


def grouped_gemm_time(r: Rows, tokens: np.ndarray) -> np.ndarray:
    """(n,) forward seconds of the routed experts' GEMMs, run as grouped GEMMs (Megatron --moe-grouped-gemm,
    MindSpeed GMM): the rank's T/t × copies tokens through nm matrices of h × f_e/etp, at the size factor
    of ONE expert's problem (fc1 with gate and up fused, fc2: nm/2 matrices per call), not of the whole
    group. Why: a grouped GEMM is a batch of small problems, each a tile-sized GEMM over the tokens its
    expert received, so fine-grained experts (small f_e, few tokens per expert) run below a dense GEMM of
    the same total FLOPs (size_factor, constants.GEMM_HALF_FLOPS; not fitted)."""
    m, h = r.model, r.h
    nm = mlp_mats(m)
    f_e = float(m.moe_ffn or m.ffn_eff) / r.etp
    total = 2 * r.T / r.t * r.moe_copies * nm * h * float(m.moe_ffn or m.ffn_eff)
    call = 2 * tokens * h * f_e * nm / 2
    # MindSpeed on Ascend: the expert MLP runs at a share of the stack's dense GEMM rate (Framework.npu_gemms)
    rate = r.wgemm_rate * (K.MINDSPEED_EXPERT_GEMM_SHARE if r.fw.npu_gemms else 1.0)
    return gemm_time(total, np.minimum(np.minimum(tokens, f_e), h), rate, call, weight_half_flops(r))


def moe_gemms(r: Rows, tokens_rep: np.ndarray) -> MoeGemms:
    """(router, routed experts, shared experts) forward GEMM seconds of one MoE layer and micro-batch."""
    m, T, t, h = r.model, r.T, r.t, r.h
    # The router stays in BF16 under FP8 (TransformerEngine and torchao cast only the expert/linear GEMMs).
    router = gemm_time(2 * tokens_rep * h * m.num_experts, np.minimum(tokens_rep, m.num_experts), r.gemm_rate)
    routed = grouped_gemm_time(r, tokens_per_expert(r))
    shared = np.zeros(r.n)
    if m.num_shared_experts:
        f_s = float(m.shared_ffn or m.moe_ffn or m.ffn_eff)
        shared = weight_gemm_time(r, 2 * T * m.num_shared_experts * mlp_mats(m) * h * f_s / t,
                                  np.minimum(f_s / t, h))
    if m.hybrid is not None:  # the MoE layers' share of a hybrid layer (model.moe_share)
        e = moe_share(m)
        return MoeGemms(e * router, e * routed, e * shared)
    return MoeGemms(router, routed, shared)


def permutation_passes(r: Rows) -> np.ndarray:
    """(n,) passes over the routed copies' hidden vectors a MoE layer's token dispatcher makes forward, each
    reading and writing every copy once. Megatron-Core's alltoall dispatcher (token_dispatcher.py,
    MoEAlltoAllTokenDispatcher; MindSpeed's alltoall_seq is the same sequence): permute before the dispatch,
    sort_chunks_by_idxs after it when a rank holds more than one expert, the reverse sort before the
    combine, unpermute after it: 4 (2 at ep 1 or one local expert). The flex dispatcher with DeepEP
    (MoEFlexTokenDispatcher) receives tokens already grouped by source and permutes once after the dispatch
    and unpermutes once before the combine: 2."""
    if r.dispatcher == "deepep":
        return np.full(r.n, 2.0)
    local = r.model.num_experts / np.maximum(r.ep, 1.0)
    return np.where((r.ep > 1) & (local > 1), 4.0, 2.0)


def permutation_time(r: Rows) -> np.ndarray:
    """(n,) forward seconds of the dispatcher's permutation passes (permutation_passes) beyond what the
    generic element-wise term already streams for the routed copies: that term moves elem_traffic × the
    copies' kept input and output (2 × 2·h bytes each, act_terms), a pass reads and writes 2·h bytes per
    copy, so passes − elem_traffic of those 4·h bytes per copy are added (never negative). Memory-bound
    at the HBM rate; the backward (the inverse permutations) moves the same bytes again."""
    per_copy = 2 * K.ACT_BYTES * r.h  # one read and one write of a copy's hidden vector
    extra = np.maximum(permutation_passes(r) - r.elem_traffic, 0.0)
    return moe_share(r.model) * extra * per_copy * r.T / r.t * r.moe_copies / r.hbm


def _add_mlp_gemms(r: Rows, g: np.ndarray, mg: MoeGemms | None) -> np.ndarray:
    """`g` plus the (n,) forward seconds of the MLP (dense layer: `mg` None) or the router + routed + shared
    expert GEMMs of `mg` (moe_gemms, priced once per layer_compute), added term by term (the order of the sum
    is part of the to-the-last-digit contract)."""
    m = r.model
    if mg is None:
        return g + dense_mlp_gemms(r)
    g = g + mg.router
    g = g + mg.routed
    if m.num_shared_experts:
        g = g + mg.shared
    return g


def dense_mlp_gemms(r: Rows) -> np.ndarray:
    """(n,) forward seconds of one dense MLP's GEMMs; a hybrid model's layer holds its MLP share of one."""
    m, T, t, h = r.model, r.T, r.t, r.h
    f = float(m.ffn_eff)
    return mlp_share(m) * weight_gemm_time(r, 2 * T * mlp_mats(m) * h * f / t, np.minimum(f / t, h))


def attention_calls(r: Rows) -> np.ndarray:
    """(n,) flash-attention kernel calls per layer and micro-batch: ring context parallelism runs one per ring
    step (cp, each over one KV block), Ulysses and no CP one over the whole sequence; hybrid rings over the
    nodes its CP group spans (engine.cost.communication.cp_split); all-gather CP one per local chunk (2)."""
    if r.cp_algo == "ulysses":
        return np.ones(r.n)
    if r.cp_algo == "allgather":  # [TE-CP]: the two chunks of the load-balanced split, each over its KV prefix
        return np.where(r.cp > 1, 2.0, 1.0)
    if r.cp_algo == "hybrid":
        _g, k = r.links.split(r.table.cp, r.table.tp)
        return k
    return r.cp


def _ring_merge_time(r: Rows, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) seconds a ring's steps after the first spend outside the attention kernel, merging their
    partial results and copying what they send on (the stack's `Framework.ring_merge`, bytes per element and step):
    the output and K/V forward (T × heads·d_v / t, T × kv_width / t elements), q and K/V backward, memory-bound at
    the HBM rate; 0 without a ring (Ulysses, all-gather CP, no CP)."""
    a, m = r.attn, r.fw.ring_merge
    steps = 0.0 if r.cp_algo == "allgather" else np.maximum(calls - 1.0, 0.0)  # all-gather: no partials
    per_byte = steps * r.T / r.t / r.hbm
    return per_byte * (m.out * a.out_width + m.kv_fwd * a.kv_width), per_byte * (m.q * a.q_width + m.kv * a.kv_width)


def _token_mixer(r: Rows, layer: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) seconds of one layer's token mixer: the attention core `layer` (attention_layer_core),
    or a hybrid model's mix of it and the Mamba scan by their shares of the layers."""
    fwd, bwd = layer
    if r.model.hybrid is None:
        return fwd, bwd
    share, _, mu = r.model.hybrid.shares()
    scan = mu * _scan_time(r)
    return share * fwd + scan, share * bwd + K.BWD_FLASH_RATIO * scan


def attention_layer_core(r: Rows) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) seconds of one attention layer's QKᵀ and attention·V over T queries × s keys. Flash
    attention runs at FLASH_ATTN_FRACTION of peak × the size factor of one kernel call: ring CP splits the
    rank's causal work into cp calls, so short chunks run below a whole sequence's efficiency (FlashAttention at
    short sequence lengths, Dao 2023 Fig. 4-5). What a ring's steps hide their transfers under
    (engine.cost.communication)."""
    a = r.attn
    # attention_span: windows, linear-attention layers and sparse attention's share (engine.config.model_facts).
    core = 2 * r.T * r.s * a.heads * (a.d_qk + a.d_v) / r.t * r.model.attention_span
    if r.model.use_flash_attention:
        causal = 0.5 * core  # causal blocks skipped
        calls = attention_calls(r)
        eff = size_factor(causal / calls)
        af = causal / (r.peak * r.attn_frac * np.maximum(eff, 1e-6))
        merge_f, merge_b = _ring_merge_time(r, calls)
        fwd, bwd = af + merge_f, K.BWD_FLASH_RATIO * af + merge_b
    else:
        # Megatron's fused softmax path runs the full s×s batched GEMMs (no causal skipping).
        fwd = gemm_time(core, np.full(r.n, float(min(a.d_qk, r.s))), r.gemm_rate)
        bwd = K.BWD_GEMM_RATIO * fwd
    return fwd, bwd


def _scan_time(r: Rows) -> np.ndarray:
    """(n,) forward seconds of one Mamba-2 mixer's selective scan over the rank's T/t share of d_inner, its
    FLOPs (model.mamba_scan_flops_per_token) at the attention kernel's rate: both are fused Triton/CUDA kernels
    of the same kind, and no shown run measures the scan apart ([U], docs/cost-model.md §6)."""
    return r.T * mamba_scan_flops_per_token(r.model) / r.t / (r.peak * r.attn_frac)


def fp8_cast_time(r: Rows, moe_layer: bool) -> tuple[np.ndarray | float, np.ndarray | float]:
    """(forward, backward) seconds of one layer's FP8 quantisation, one micro-batch (engine.cost.fp8): the FP8
    GEMMs' inputs cast in the forward and their output gradients in the backward, each element moving the
    recipe's cast bytes through HBM; the rank's share of the layer's T tokens (÷ tp). 0 without FP8."""
    if r.fp8_recipe is None:
        return 0.0, 0.0
    fwd_w, bwd_w = cast_widths(r.model, moe_layer)
    per = r.fp8_recipe.cast_bytes * r.T / r.t / r.hbm
    wf, wb = fp8_weight_cast_time(r, moe_layer)
    return fwd_w * per + wf, bwd_w * per + wb


def fp8_weight_cast_time(r: Rows, moe_layer: bool) -> tuple[np.ndarray | float, np.ndarray | float]:
    """(forward, backward) seconds one layer spends per micro-batch quantising its weights where the stack caches
    no FP8 copy (torchao, Framework.caches_fp8_weights; engine.cost.fp8): the rank's linear weights (÷ tp, the
    routed experts ÷ ep·etp) at the recipe's weight_cast_bytes, half in each pass; with the weights gathered in
    FP8 (fp8_param_gather) only the backward's transposed copy. 0 for TransformerEngine, which casts once a step."""
    if r.fp8_recipe is None or r.fw.caches_fp8_weights:
        return 0.0, 0.0
    lp = layer_params(r.model, moe_layer and r.model.is_moe)
    elems = lp.split / r.t + lp.routed / (r.ep * r.etp)
    if r.fp8_gather:
        return 0.0, FP8_GATHERED_WEIGHT_BYTES * elems / r.hbm
    half = 0.5 * r.fp8_recipe.weight_cast_bytes * elems / r.hbm
    return half, half


def layer_compute(r: Rows, act: np.ndarray) -> LayerCompute:
    """Forward and backward seconds of one layer, one micro-batch, per type; element-wise work streams the
    layer's kept activations ELEMENTWISE_TRAFFIC_PER_KEPT_BYTE times through HBM."""
    n = r.n
    fwd, gemm, attn_fwd, attn_bwd, compute, gemm_all = (np.zeros((n, 2)) for _ in range(6))
    tokens_rep = r.T / r.sp_div  # tokens a replicated (non-TP) GEMM sees
    g_attn = _attention_gemms(r, tokens_rep)
    layer = attention_layer_core(r)
    af, ab = _token_mixer(r, layer)
    mg = moe_gemms(r, tokens_rep) if r.is_moe else None
    for ty in r.types:
        g = _add_mlp_gemms(r, g_attn, mg if ty == MOE else None)
        e = r.elem_traffic * act[:, ty, OFF] / r.hbm
        perm = permutation_time(r) if ty == MOE else 0.0
        cast_f, cast_b = fp8_cast_time(r, ty == MOE)
        gemm[:, ty] = g
        attn_fwd[:, ty] = af
        attn_bwd[:, ty] = ab
        fwd[:, ty] = g + af + e + perm + cast_f
        bwd = K.BWD_GEMM_RATIO * g + ab + K.BWD_ELEMENTWISE_RATIO * e + perm + cast_b
        compute[:, ty] = fwd[:, ty] + bwd
        gemm_all[:, ty] = g + K.BWD_GEMM_RATIO * g
    if not r.is_moe:
        for arr in (fwd, gemm, attn_fwd, attn_bwd, compute, gemm_all):
            arr[:, MOE] = arr[:, DENSE]
    return LayerCompute(fwd, gemm, attn_fwd, attn_bwd, compute, gemm_all, layer, mg, g_attn)


def recompute_extra(r: Rows, act: np.ndarray, lc: LayerCompute) -> np.ndarray:
    """(n, 2, 3) extra seconds per layer and micro-batch each recompute mode adds: full repeats the forward;
    selective "attention" repeats the attention core and its score element-wise work (KOR22 §4.3); "op"
    (torchtitan) every second matmul and the element-wise work it dropped; "hyperparallel" the element-wise
    work of what it dropped."""
    rec = np.zeros((r.n, 2, 3))
    rec[:, :, FULL] = lc.fwd
    policy = r.policy
    if policy == "op":
        # torchtitan "op": every second matmul's forward again, plus the element-wise work it dropped.
        share = op_policy_recomputed_share(r.model)
        rec[:, :, SELECTIVE] = share * lc.gemm + r.elem_traffic * (act[:, :, OFF] - act[:, :, SELECTIVE]) / r.hbm
    elif policy == "modules":
        rec[:, :, SELECTIVE] = module_recompute(r, lc)
    elif policy == "attention":
        score_elem = np.zeros((r.n, 2))
        for ty in (DENSE, MOE):
            at = act_terms(r.model, ty == MOE and r.is_moe, OFF, policy)
            score_elem[:, ty] = r.elem_traffic * r.T * at.score / r.t / r.hbm
        rec[:, :, SELECTIVE] = lc.attn_fwd + score_elem
    else:
        rec[:, :, SELECTIVE] = r.elem_traffic * (act[:, :, OFF] - act[:, :, SELECTIVE]) / r.hbm
    return rec


def _mla_up_gemms(r: Rows) -> np.ndarray:
    """(n,) forward seconds of MLA's up-projections (q from the q latent, k_nope and v from the kv latent)."""
    m, a, T, t = r.model, r.attn, r.T, r.t
    nope = m.qk_nope_head_dim or m.head_dim_eff
    g = weight_gemm_time(r, 2 * T * m.kv_lora_rank * a.heads * (nope + a.d_v) / t,
                         np.minimum(a.heads * (nope + a.d_v) / t, m.kv_lora_rank))
    if m.q_lora_rank:
        g = g + weight_gemm_time(r, 2 * T * m.q_lora_rank * a.heads * a.d_qk / t,
                                 np.minimum(a.heads * a.d_qk / t, m.q_lora_rank))
    return g


def module_recompute(r: Rows, lc: LayerCompute) -> np.ndarray:
    """(n, 2) forward seconds Megatron's --recompute-modules repeat per layer and micro-batch: each module's
    forward GEMMs (mla_up_proj: the up-projections; mlp: the dense MLP; moe: router, routed and shared
    experts and the dispatcher's permutations; shared_experts: the shared experts), the attention core
    (core_attn) and the element-wise work over the bytes each module dropped (memory.module_bytes), streamed
    like every kept byte. The MoE all-to-alls a recomputed `moe` repeats are not priced ([U])."""
    m, T = r.model, r.T
    on = set(r.modules)
    out = np.zeros((r.n, 2))
    lse = K.FLASH_LSE_BYTES * r.attn.heads if m.use_flash_attention else 0.0
    stream = r.elem_traffic * T / r.hbm
    for ty in (DENSE, MOE):
        moe = ty == MOE and r.is_moe
        mb = module_bytes(m, moe, lse, r.lin_bytes)
        sec = np.zeros(r.n)
        if "core_attn" in on:
            sec = sec + lc.attn_fwd[:, ty] + stream * mb.core_attn / r.t
        if "layernorm" in on:
            sec = sec + stream * mb.layernorm / r.sp_div
        if "mla_up_proj" in on and m.is_mla:
            sec = sec + _mla_up_gemms(r) + stream * mb.mla_up_proj / r.t
        if "mlp" in on and not moe:
            sec = sec + dense_mlp_gemms(r) + stream * mb.mlp / r.t
        if moe and lc.moe is not None and "moe" in on:
            sec = sec + lc.moe.router + lc.moe.routed + lc.moe.shared + permutation_time(r)
            sec = sec + stream * (mb.moe / r.t + mb.moe_router / r.sp_div)
        elif moe and lc.moe is not None:
            if "moe_act" in on:
                sec = sec + stream * mb.moe_act / r.t
            if "shared_experts" in on:
                sec = sec + lc.moe.shared + stream * mb.shared_experts / r.t
        out[:, ty] = sec
    if not r.is_moe:
        out[:, MOE] = out[:, DENSE]
    return out


def _head_forward_parts(r: Rows) -> tuple[np.ndarray, np.ndarray]:
    """(n,) forward seconds of the output layer: the logits GEMM and the fp32 cross-entropy streaming."""
    T, t, h, V = r.T, r.t, r.h, r.V
    logit_g = gemm_time(2 * T * h * V / t, np.minimum(V / t, h), r.gemm_rate)
    logit_e = r.elem_traffic * r.logit_bytes * T * V / r.loss_div / r.hbm
    return logit_g, logit_e


def head_gemm_time(r: Rows) -> np.ndarray:
    """(n,) the GEMM share of head_time (the logits GEMM forward + backward, once per MTP depth more)."""
    logit_g, _e = _head_forward_parts(r)
    return (1 + K.BWD_GEMM_RATIO) * logit_g * (1 + r.model.mtp_depth)


def head_time(r: Rows) -> np.ndarray:
    """(n,) seconds of the output layer on the last stage: logits GEMM forward + backward and fp32
    cross-entropy streaming, once per MTP depth more."""
    logit_g, logit_e = _head_forward_parts(r)
    head_t = (1 + K.BWD_GEMM_RATIO) * logit_g + (1 + K.BWD_ELEMENTWISE_RATIO) * logit_e
    return head_t * (1 + r.model.mtp_depth)


def head_forward_time(r: Rows) -> np.ndarray:
    """(n,) the forward share of head_time (what the explain timeline draws as the last stage's forward)."""
    logit_g, logit_e = _head_forward_parts(r)
    return (logit_g + logit_e) * (1 + r.model.mtp_depth)


def optimizer_time(r: Rows, ne_stage: np.ndarray, ex_stage: np.ndarray, shard_o: np.ndarray) -> np.ndarray:
    """(n,) seconds of the optimizer step: it updates what each rank holds of the optimizer shard
    (ZeRO-1/FSDP divide it), streaming OPTIMIZER_BYTES_PER_PARAM per parameter through HBM."""
    opt_held = ne_stage / shard_o[:, None]
    if r.is_moe:
        opt_held = opt_held + ex_stage / np.minimum(shard_o, r.edp)[:, None]
    return opt_held.max(axis=1) * K.OPTIMIZER_BYTES_PER_PARAM / r.hbm


def grad_accumulation_time(r: Rows, ne_stage: np.ndarray, ex_stage: np.ndarray) -> np.ndarray:
    """(n, P) seconds per micro-batch each stage spends adding its weight gradients to the main gradients in
    separate kernels, when the stack keeps Megatron-style main gradients and the run turns the GEMM-epilogue
    accumulation off (RunOptions.gradient_accumulation_fusion / gemm_gradient_accumulation_fusion for the
    grouped expert GEMMs; unstated: the framework's recipes' usual setting, Framework.grad_accumulation_fused):
    unfused parameters × (2 × param bytes + 2 × grad bytes) through HBM (engine.cost.constants, "Unfused
    gradient accumulation"; [MCORE-DDP]). FSDP2 stacks reduce-scatter each micro-batch's gradient instead and
    are not priced here."""
    run, fw = r.run, r.fw
    if fw.fsdp2:
        return np.zeros_like(ne_stage)
    dense_fused, grouped_fused = fw.grad_accumulation_fused(run)
    unfused = ne_stage * float(not dense_fused) + ex_stage * float(not grouped_fused)
    return unfused * (2.0 * run.param_bytes + 2.0 * run.grad_bytes) / r.hbm


def ordered_sum(x: np.ndarray) -> np.ndarray:
    """Row sums over stages, left to right (numpy's pairwise sum depends on the padded width)."""
    out = x[:, 0].copy()
    for i in range(1, x.shape[1]):
        out += x[:, i]
    return out
