"""Model-only quantities: parameter counts by how they shard, and model FLOPs per token.

Parameter counts follow [MODELS] §5 (GPT-style layer = 12h² + 13h, NAR21 Eq. 2). FLOPs follow KOR22 Eq. 7
generalised to GQA, gated MLPs, MoE and MLA the way Megatron's counter does ([CAL] §7, MLM-FLOPS).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.specs import ModelSpec


@dataclass(frozen=True, slots=True)
class LayerParams:
    """Parameters of one layer of a type, split by how they shard.

    split: divided by tp (column/row-parallel weights); rep: replicated across tp (norms, router, MLA down
    projections, row-parallel biases); routed: routed-expert weights, divided by ep·etp.
    active_routed: routed weights one token uses (top-k experts).
    """

    split: float
    rep: float
    routed: float = 0.0
    active_routed: float = 0.0

    @property
    def total(self) -> float:
        return self.split + self.rep + self.routed

    @property
    def active(self) -> float:
        return self.split + self.rep + self.active_routed


@dataclass(frozen=True, slots=True)
class AttnShape:
    """Widths that drive attention memory and FLOPs. Non-MLA: d_qk = d_v = head_dim and kv heads as
    configured. MLA: K and V are up-projected per head (n_kv = heads), q/k width nope + rope."""

    heads: int
    kv_heads: int
    d_qk: int
    d_v: int
    latent: int  # MLA latents kept per token (q latent + kv latent + rope key), 0 otherwise

    @property
    def q_width(self) -> int:
        return self.heads * self.d_qk

    @property
    def kv_width(self) -> int:  # K plus V per token
        return self.kv_heads * (self.d_qk + self.d_v)

    @property
    def out_width(self) -> int:  # attention output = output-projection input
        return self.heads * self.d_v


def attn_shape(m: ModelSpec) -> AttnShape:
    if m.is_mla:
        d_qk = (m.qk_nope_head_dim or m.head_dim_eff) + m.qk_rope_head_dim
        d_v = m.v_head_dim or m.head_dim_eff
        return AttnShape(m.heads, m.heads, d_qk, d_v, m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim)
    dh = m.head_dim_eff
    return AttnShape(m.heads, m.kv_heads_eff, dh, dh, 0)


def mlp_mats(m: ModelSpec) -> int:
    """Weight matrices of one MLP: 3 for gated (SwiGLU), 2 for GeLU/ReLU."""
    return 3 if m.gated_mlp else 2


def routed_copies(m: ModelSpec) -> float:
    """Copies of each token a MoE layer routes: top-k experts, padded to the capacity factor when it
    drops (a capacity factor below 1 still moves every chosen copy)."""
    return m.experts_per_tok * max(m.capacity_factor, 1.0)


def _norm(m: ModelSpec) -> float:
    return 2.0 * m.hidden if m.linear_bias else float(m.hidden)  # LayerNorm (γ, β) or RMSNorm (γ)


def mamba_params(m: ModelSpec) -> float:
    """Parameters of one Mamba-2 mixer, all split by tp (Megatron-Core's MambaMixer shards the inner width, the
    heads and the groups): the in-projection h × in_proj, the depthwise convolution (conv_dim × kernel, and its
    bias), dt_bias, A_log and D (one per head), the gated RMSNorm over d_inner, the out-projection d_inner × h."""
    hy = m.hybrid
    if hy is None:
        return 0.0
    h = m.hidden
    return float(h * hy.in_proj + hy.conv_dim * (hy.conv_kernel + 1) + 3 * hy.mamba_heads + hy.d_inner
                 + hy.d_inner * h)


def attention_params(m: ModelSpec) -> tuple[float, float]:
    """(split, rep) of one attention block plus the layer's two norms ([MODELS] §5). A hybrid model's layer is
    one block with one pre-norm: its mix of attention and Mamba mixers (HybridLayers.shares; the MLP share is
    dense_mlp_params')."""
    split, rep = _attention_block_params(m)
    if m.hybrid is None:
        return split, rep + 2 * _norm(m)
    a, _, mu = m.hybrid.shares()
    return a * split + mu * mamba_params(m), a * rep + _norm(m)


def _attention_block_params(m: ModelSpec) -> tuple[float, float]:
    """(split, rep) of one attention block without the norms."""
    h = m.hidden
    a = attn_shape(m)
    if m.is_mla:
        nope = m.qk_nope_head_dim or m.head_dim_eff
        q_rep: float
        q_split: float
        if m.q_lora_rank:
            q_rep = h * m.q_lora_rank + m.q_lora_rank
            q_split = m.q_lora_rank * m.heads * a.d_qk
        else:
            q_rep, q_split = 0.0, h * m.heads * a.d_qk
        kv_rep = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv_split = m.kv_lora_rank * m.heads * (nope + a.d_v)
        split: float = q_split + kv_split + a.out_width * h
        rep: float = q_rep + kv_rep
    else:
        split = float(h * a.q_width + 2 * h * a.kv_heads * a.d_qk + a.out_width * h)
        rep = 0.0
        if m.linear_bias:
            split += a.q_width + 2 * a.kv_heads * a.d_qk
            rep += h  # output-projection bias (row parallel: replicated)
    return float(split), float(rep)


def dense_mlp_params(m: ModelSpec) -> tuple[float, float]:
    """(split, rep) of one dense MLP; a hybrid model's layer holds its MLP share of one."""
    h, f = m.hidden, m.ffn_eff
    split = mlp_mats(m) * h * f + (f * (mlp_mats(m) - 1) if m.linear_bias else 0)
    rep = h if m.linear_bias else 0
    d = mlp_share(m)
    return float(split) * d, float(rep) * d


def attention_share(m: ModelSpec) -> float:
    """The share of a layer its attention block is: 1, or a hybrid model's attention layers' share of the layers."""
    return m.hybrid.shares()[0] if m.hybrid is not None else 1.0


def mlp_share(m: ModelSpec) -> float:
    """The share of a dense layer its MLP is: 1, or a hybrid model's MLP layers' share of the layers."""
    return m.hybrid.shares()[1] if m.hybrid is not None else 1.0


def moe_share(m: ModelSpec) -> float:
    """The share of a MoE-type layer its MoE block is: 1, or a hybrid model's MoE layers' share of the layers (its
    layers are all of the MoE type, each the pattern's mix: engine.specs.HybridLayers)."""
    return m.hybrid.moe_share if m.hybrid is not None else 1.0


def moe_params(m: ModelSpec) -> tuple[float, float, float, float]:
    """(shared split, router rep, routed total, routed active) of one MoE block (a hybrid layer: its share)."""
    h = m.hidden
    f_e = m.moe_ffn or m.ffn_eff
    f_s = m.shared_ffn or f_e
    per_expert = mlp_mats(m) * h * f_e
    shared = m.num_shared_experts * mlp_mats(m) * h * f_s
    e = moe_share(m)
    return (float(shared) * e, float(h * m.num_experts) * e, float(m.num_experts * per_expert) * e,
            float(m.experts_per_tok * per_expert) * e)


def layer_params(m: ModelSpec, moe: bool) -> LayerParams:
    a_split, a_rep = attention_params(m)
    if moe:
        sh, router, routed, active = moe_params(m)
        return LayerParams(a_split + sh, a_rep + router, routed, active)
    d_split, d_rep = dense_mlp_params(m)
    return LayerParams(a_split + d_split, a_rep + d_rep)


def mtp_extra_params(m: ModelSpec) -> tuple[float, float]:
    """(split, rep) of what one MTP module adds beyond its transformer layer: the 2h×h projection and two
    norms (DeepSeek-V3 §2.2); its embedding and head are shared with the main model."""
    h = m.hidden
    return float(2 * h * h), float(2 * h)


def embedding_params(m: ModelSpec) -> tuple[float, float]:
    """(split, rep) of the input side: vocabulary-parallel embedding V·h, learned positions s·h."""
    return float(m.vocab * m.hidden), float(m.seq_len * m.hidden if m.learned_positions else 0)


def head_params(m: ModelSpec) -> tuple[float, float]:
    """(split, rep) of the output side without the tied case: final norm + untied output projection."""
    return float(0 if m.tie_embeddings else m.vocab * m.hidden), _norm(m)


@dataclass(frozen=True, slots=True)
class ModelStats:
    """What a hover shows about a model. Params exclude MTP modules (reported apart), as [MODELS] §2 does.

    flops_per_token: model FLOPs per trained token, forward + backward, no recompute, attention counted
      with causal masking (half of the s² products), KOR22 Eq. 7 generalised (MLM-FLOPS form).
    flops_per_token_noncausal: the same without causal halving (Megatron's logged counter, KOR22 Eq. 7;
      the basis of the MFU this engine reports, so it compares with published MFU).
    flops_per_token_full_recompute: hardware FLOPs with full recompute (NAR21 Eq. 3 form: 4 passes per
      layer, 3 for the logits), non-causal like Eq. 3.
    """

    total_params: float
    active_params: float
    mtp_params: float
    embedding_params: float
    flops_per_token: float
    flops_per_token_noncausal: float
    flops_per_token_full_recompute: float


def attention_gemm_macs_per_token(m: ModelSpec) -> float:
    """Multiply-adds per token of one attention block's weight GEMMs (QKV, MLA down/up, output); a hybrid
    model's layer: its mix of attention blocks and Mamba mixers (mamba_gemm_macs_per_token)."""
    h = m.hidden
    a = attn_shape(m)
    if m.is_mla:
        nope = m.qk_nope_head_dim or m.head_dim_eff
        q = (h * m.q_lora_rank + m.q_lora_rank * a.heads * a.d_qk) if m.q_lora_rank else h * a.heads * a.d_qk
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * a.heads * (nope + a.d_v)
        return float(q + kv + a.out_width * h)
    macs = float(h * a.q_width + 2 * h * a.kv_heads * a.d_qk + a.out_width * h)
    if m.hybrid is None:
        return macs
    share, _, mu = m.hybrid.shares()
    return share * macs + mu * mamba_gemm_macs_per_token(m)


def mamba_gemm_macs_per_token(m: ModelSpec) -> float:
    """Multiply-adds per token of one Mamba-2 mixer's projections, in (h × in_proj) and out (d_inner × h), as
    Megatron-Core's FLOPs counter has them (MLM-FLOPS, `mamba_layer_flops`)."""
    hy = m.hybrid
    return 0.0 if hy is None else float(m.hidden * (hy.in_proj + hy.d_inner))


def mamba_scan_flops_per_token(m: ModelSpec) -> float:
    """Forward FLOPs per token of one Mamba-2 mixer's selective scan: 7 · d_inner · state, Megatron-Core's count
    (MLM-FLOPS `mamba_layer_flops`, which notes that it underestimates the chunked SSD kernels)."""
    hy = m.hybrid
    return 0.0 if hy is None else 7.0 * hy.d_inner * hy.state


def mlp_gemm_macs_per_token(m: ModelSpec, moe: bool) -> float:
    """Multiply-adds per token of one MLP / MoE block (router + top-k routed + shared experts); a hybrid
    model's layer holds its MLP share of one."""
    h = m.hidden
    if not moe:
        return float(mlp_mats(m) * h * m.ffn_eff) * mlp_share(m)
    f_e = m.moe_ffn or m.ffn_eff
    f_s = m.shared_ffn or f_e
    macs = float(h * m.num_experts + mlp_mats(m) * h * (m.experts_per_tok * f_e + m.num_shared_experts * f_s))
    return macs if m.hybrid is None else moe_share(m) * macs


def layer_matmul_flops_per_token(m: ModelSpec, moe: bool) -> float:
    """Forward FLOPs per token of one layer's weight GEMMs (2 per multiply-add), active experts only."""
    return 2.0 * (attention_gemm_macs_per_token(m) + mlp_gemm_macs_per_token(m, moe))


def attention_core_flops_per_token(m: ModelSpec) -> float:
    """Forward FLOPs per token of QKᵀ and attention·V over a full (non-causal) sequence: 2·s·(d_qk + d_v)·a; a
    hybrid model's layer: its attention share of it."""
    a = attn_shape(m)
    return 2.0 * m.seq_len * a.heads * (a.d_qk + a.d_v) * attention_share(m)


def model_stats(m: ModelSpec) -> ModelStats:
    n_moe = m.num_moe_layers
    n_dense = m.num_layers - n_moe
    dense = layer_params(m, False)
    moe = layer_params(m, True) if m.is_moe else dense
    e_split, e_rep = embedding_params(m)
    h_split, h_rep = head_params(m)
    outside = e_split + e_rep + h_split + h_rep
    total = n_dense * dense.total + n_moe * moe.total + outside
    active = n_dense * dense.active + n_moe * moe.active + outside
    mtp_layer = moe if m.is_moe else dense
    x_split, x_rep = mtp_extra_params(m)
    mtp = m.mtp_depth * (mtp_layer.total + x_split + x_rep)

    gemm_fwd = n_dense * layer_matmul_flops_per_token(m, False)
    if n_moe:
        gemm_fwd += n_moe * layer_matmul_flops_per_token(m, True)
    attn_fwd = m.num_layers * attention_core_flops_per_token(m)
    if m.hybrid is not None:  # the scans count with the weight GEMMs: no causal halving applies to them
        gemm_fwd += m.hybrid.mamba * mamba_scan_flops_per_token(m)
    logits_fwd = 2.0 * m.vocab * m.hidden
    # fwd + bwd = 3 × forward (KOR22 Eq. 7: 72 = 3 · 24); Eq. 3 adds one more forward of the layers.
    noncausal = 3.0 * (gemm_fwd + attn_fwd + logits_fwd)
    causal = 3.0 * (gemm_fwd + 0.5 * attn_fwd + logits_fwd)
    full = 4.0 * (gemm_fwd + attn_fwd) + 3.0 * logits_fwd
    return ModelStats(total, active, mtp, e_split + e_rep, causal, noncausal, full)
