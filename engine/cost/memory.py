"""Memory terms: the bytes each pipeline stage holds (docs/cost-model.md §2).

Stage memory = parameters + gradients + optimizer states (static, by how they shard) + activations (one
layer's kept bytes × layers × micro-batches in flight, plus the embedding/output side and one layer's
backward working set) + communication buffers + the allocator reserve. Every coefficient comes from
engine.cost.constants; the row context (engine.cost.rows.Rows) supplies the degrees.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from engine.cost import constants as K
from engine.cost.layout import effective_layout, layout_or_default
from engine.cost.model import (
    attention_share,
    attn_shape,
    embedding_params,
    head_params,
    layer_params,
    mlp_mats,
    moe_share,
    mtp_extra_params,
    routed_copies,
)
from engine.cost.rows import DENSE, FULL, MOE, OFF, SELECTIVE, Rows
from engine.cost.swap import swapped_bytes
from engine.specs import HYBRID_KIND_ORDER, ModelSpec, RunOptions

STATE_TERMS = ("parameters", "gradients", "optimizer")


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


def dropout(m: ModelSpec) -> bool:
    """Whether the residual-stream dropouts keep 1-byte masks: as the files state it (hidden_dropout /
    resid_pdrop > 0; at 0 PyTorch and Megatron skip the mask), else the recipe default: GPT-style recipes
    (plain GeLU MLP) train with dropout 0.1 (KOR22 §4.1), gated-MLP (Llama-style) recipes without."""
    if m.hidden_dropout is not None:
        return m.hidden_dropout > 0
    return not m.gated_mlp


def attention_dropout(m: ModelSpec) -> bool:
    """Whether the attention-probability dropout keeps its mask and output (non-flash path): as stated
    (attention_dropout / attn_pdrop > 0), else the same recipe default as `dropout`."""
    if m.attention_dropout is not None:
        return m.attention_dropout > 0
    return not m.gated_mlp


def act_terms(m: ModelSpec, moe: bool, mode: int, policy: str, modules: tuple[str, ...] = (),
              lin: float = K.ACT_BYTES, compiled: bool = False) -> ActTerms:
    """Activation bytes per token of one layer in a recompute mode (before dividing by tp and cp).

    KOR22 Table 2 / §4.1 generalised: attention keeps its input, norm output, Q, K, V (GQA widths),
    the output-projection input and (without flash attention) softmax output + dropout mask + dropout
    output (5·a·s bytes per token; 2·a·s without dropout); flash attention keeps an fp32 log-sum-exp per
    head instead. The GeLU MLP keeps its input, norm output, fc1 output and GeLU output (2 + 2 + 2f + 2f);
    a gated MLP keeps gate, up and their product (3 × 2f). MoE keeps, per routed copy of a token (top-k ×
    capacity), its permuted input, the expert's intermediates and its output, plus fp32 router logits and
    probabilities. Full recompute keeps only the layer input (2 bytes × h). Selective "attention" (KOR22)
    drops the score tensors; selective "hyperparallel" ([HP] §8.2) keeps matmul and
    communication outputs and drops norm outputs, activation outputs, softmax/dropout outputs and masks;
    selective "modules" drops what each listed Megatron submodule keeps (_module_terms). `lin` is the bytes
    of each element a linear layer saves of its input for the weight gradient (2; 1 where TransformerEngine
    FP8 saves the FP8 cast: Framework.fp8_saved_inputs). `compiled`: the checkpointed block runs under
    torch.compile, which keeps of the "op" policy's saved outputs only those the backward reads
    (_op_policy_terms).
    """
    h = float(m.hidden)
    a = attn_shape(m)
    B = K.ACT_BYTES
    mask = K.MASK_BYTES if dropout(m) else 0.0
    drop = attention_dropout(m)
    attn_mask = K.MASK_BYTES if drop else 0.0
    if mode == FULL:
        return ActTerms(B * h, 0.0, 0.0)
    # Attention block.
    norm_in = 2 * B * h  # two norm inputs (residual stream)
    norm_out = 2 * lin * h  # QKV input and MLP input (norm outputs)
    masks = 2 * mask * h  # block-output dropout masks
    latent = lin * a.latent
    qkv = B * (a.q_width + a.kv_width)
    proj_in = lin * a.out_width
    if m.use_flash_attention:
        score = 0.0
        lse = K.FLASH_LSE_BYTES * a.heads
    else:
        score = (2 * B + attn_mask) * a.heads * m.seq_len if drop else B * a.heads * m.seq_len
        lse = 0.0
    mlp_split, act_out, router = _mlp_act(m, moe, lin)
    unsplit = norm_in + norm_out + masks + latent + router
    split = qkv + proj_in + lse + mlp_split
    if m.hybrid is not None:  # one block and one pre-norm per layer, the pattern's mix of blocks
        share, d, mu = m.hybrid.shares()
        mlp = moe_share(m) if moe else d  # the MLP or MoE layers' share
        norm_in, norm_out, masks = norm_in / 2, norm_out / 2, masks / 2
        unsplit = norm_in + norm_out + masks + share * latent + mlp * router
        split = share * (qkv + proj_in + lse) + mlp * mlp_split + mu * mamba_act(m, lin)
        score, act_out = share * score, mlp * act_out
    if mode == SELECTIVE and policy == "op":
        return _op_policy_terms(m, moe, lse, compiled)
    if mode == SELECTIVE and policy == "modules":
        return _module_terms(m, moe, modules, ActTerms(unsplit, split, score), lse, lin)
    if mode == SELECTIVE:
        if policy == "attention":
            score = 0.0  # QKᵀ, softmax, dropout and attention·V are recomputed (KOR22 §4.3)
        else:
            unsplit -= norm_out + masks
            split -= act_out
            if score:  # keep the QKᵀ matmul output only
                score = B * a.heads * m.seq_len * attention_share(m)
    return ActTerms(unsplit, split, score)


def mamba_act(m: ModelSpec, lin: float = K.ACT_BYTES) -> float:
    """Bytes per token (÷ tp) one Mamba-2 mixer keeps for its backward (Megatron-Core's MambaMixer over the
    mamba_ssm kernels, [U] from their saved tensors): the in-projection's output (z, x, B, C, dt), the
    convolution's output (x, B, C), the scan's output y, its fp32 dt and cumulative decay (one per head each),
    and the gated norm's output, the out-projection's input (a linear input, at `lin` bytes)."""
    hy = m.hybrid
    if hy is None:
        return 0.0
    B = K.ACT_BYTES
    return B * (hy.in_proj + hy.conv_dim + hy.d_inner) + 2 * 4.0 * hy.mamba_heads + lin * hy.d_inner


def op_policy_recomputed_share(m: ModelSpec) -> float:
    """Share of a layer's forward weight-GEMM FLOPs that torchtitan's selective "op" policy recomputes.

    torchtitan (`torchtitan/distributed/activation_checkpoint.py`, `_save_list`) saves the outputs of
    matmuls and SDPA but, counting the layer's mm calls, recomputes every second one: for a Llama layer the
    order is wq, wk, wv, wo, w1, w3, w2 (wq, wv, w1, w2 saved; wk, wo, w3 recomputed); a GeLU MLP has
    fc1, fc2 (fc2 recomputed). Models of other shapes (MLA, MoE) are priced at half the matmuls."""
    if m.is_mla or m.is_moe or m.hybrid is not None:
        return 0.5
    a = attn_shape(m)
    h, f = float(m.hidden), float(m.ffn_eff)
    kv = a.kv_width / 2  # K and V projections are equal
    total = h * (a.q_width + a.kv_width) + a.out_width * h + mlp_mats(m) * h * f
    mlp_recomputed = h * f if m.gated_mlp else f * h  # w3 (gated) or fc2 (GeLU)
    return (h * kv + a.out_width * h + mlp_recomputed) / total


def _op_policy_terms(m: ModelSpec, moe: bool, lse: float, compiled: bool = False) -> ActTerms:
    """Bytes per token torchtitan's "op" policy keeps: the layer input, the saved matmul outputs (wq, wv,
    w1, w2 for a Llama layer; every other mm), the SDPA output and its log-sum-exp; norms, RoPE, SiLU and
    the gate product are recomputed from them (op_policy_recomputed_share).

    Eager, PyTorch's selective checkpoint (`torch.utils.checkpoint`, `_CachingTorchDispatchMode`, [PT-SAC])
    stores the output of every op its policy marks to save, whether or not the backward reads it: the last
    matmul's output (w2, the block output added to the residual stream, h per token) is kept though an add's
    backward reads neither input. Under torch.compile (torchtitan compiles each checkpointed block) the
    partitioner saves only what the joint graph's backward uses, the policy banning recomputation of the
    listed ops, not forcing unused outputs to be saved: that h is not kept."""
    B = K.ACT_BYTES
    h = float(m.hidden)
    a = attn_shape(m)
    if moe:
        f = routed_copies(m) * float(m.moe_ffn or m.ffn_eff) + m.num_shared_experts * float(m.shared_ffn or m.moe_ffn)
    else:
        f = float(m.ffn_eff)
    router = 2 * 4.0 * m.num_experts if moe else 0.0
    if m.hybrid is not None:  # the pattern's mix: attention's saved matmuls, the MLP's or MoE's, the Mamba mixer's
        share, d, mu = m.hybrid.shares()
        mlp = moe_share(m) if moe else d
        kept = share * (B * (a.q_width + a.kv_width / 2 + a.out_width) + lse) + mlp * B * f + mu * mamba_act(m)
        return ActTerms(B * h + mlp * router, kept + (0.0 if compiled else B * h), 0.0)
    saved_mm = a.q_width + a.kv_width / 2 + f + (0.0 if compiled else h)
    return ActTerms(B * h + router, B * (saved_mm + a.out_width) + lse, 0.0)


@dataclass(frozen=True, slots=True)
class ModuleBytes:
    """Bytes per token (before ÷ tp) one layer's Megatron submodules keep that recomputing them drops, by
    --recompute-modules name; `sp` says whether a term shards with sequence parallelism (unsplit) rather
    than always by tp. Zero where the layer has no such submodule (mla_up_proj on a non-MLA model, moe_act
    on a dense layer, mlp on a MoE layer)."""

    core_attn: float
    layernorm: float
    mla_up_proj: float
    mlp: float
    moe: float
    moe_router: float
    moe_act: float
    shared_experts: float


def module_bytes(m: ModelSpec, moe: bool, lse: float, lin: float = K.ACT_BYTES) -> ModuleBytes:
    """What each recompute module drops (Megatron-Core TransformerConfig.recompute_modules, [MLM-RECOMPUTE]):
    core_attn (normal checkpoint of the attention core) its saved score chain (no flash attention: softmax,
    dropout mask and output) or flash attention's log-sum-exp, keeping Q, K, V and the output the output
    projection saves; layernorm (output-discarding) the two norm outputs; mla_up_proj (output-discarding)
    the up-projected and RoPE-applied Q, K, V, keeping the latents; mlp (normal checkpoint of a dense MLP)
    its intermediates; moe (normal checkpoint of the MoE layer) the routed copies, expert intermediates,
    shared experts and router outputs; moe_act (output-discarding) the routed experts' activation outputs;
    shared_experts the shared experts' intermediates."""
    B, h = K.ACT_BYTES, float(m.hidden)
    a = attn_shape(m)
    drop = attention_dropout(m)
    score = ((2 * B + (K.MASK_BYTES if drop else 0.0)) * a.heads * m.seq_len if drop
             else B * a.heads * m.seq_len) if not m.use_flash_attention else 0.0
    mlp_split, _, router = _mlp_act(m, moe, lin)
    shared = 0.0
    routed_act = 0.0
    if moe:
        f_e = float(m.moe_ffn or m.ffn_eff)
        f_s = float(m.shared_ffn or f_e)
        shared = m.num_shared_experts * _mlp_inter(f_s, mlp_mats(m), lin)
        routed_act = lin * routed_copies(m) * f_e
    if m.hybrid is not None:  # one pre-norm per layer; attention's, the MLP's and the MoE's modules by their shares
        share, d, _ = m.hybrid.shares()
        e = moe_share(m) if moe else 0.0
        return ModuleBytes(core_attn=share * (score + lse), layernorm=lin * h,
                           mla_up_proj=share * B * (a.q_width + a.kv_width) if m.is_mla else 0.0,
                           mlp=0.0 if moe else d * mlp_split, moe=e * mlp_split, moe_router=e * router,
                           moe_act=e * routed_act, shared_experts=e * shared)
    return ModuleBytes(core_attn=score + lse, layernorm=2 * lin * h,
                       mla_up_proj=B * (a.q_width + a.kv_width) if m.is_mla else 0.0,
                       mlp=0.0 if moe else mlp_split, moe=mlp_split if moe else 0.0, moe_router=router,
                       moe_act=routed_act, shared_experts=shared)


def _module_terms(m: ModelSpec, moe: bool, modules: tuple[str, ...], off: ActTerms, lse: float,
                  lin: float = K.ACT_BYTES) -> ActTerms:
    """The layer's no-recompute terms less what the listed modules drop (module_bytes). `moe` covers
    `moe_act` and `shared_experts` (a module inside a recomputed module drops nothing more)."""
    mb = module_bytes(m, moe, lse, lin)
    on = set(modules)
    unsplit, split, score = off.unsplit, off.split, off.score
    if "core_attn" in on:
        split -= lse * attention_share(m)
        score = 0.0
    if "layernorm" in on:
        unsplit -= mb.layernorm
    if "mla_up_proj" in on:
        split -= mb.mla_up_proj
    if "mlp" in on:
        split -= mb.mlp
    if "moe" in on:
        split -= mb.moe
        unsplit -= mb.moe_router
    else:
        split -= (mb.moe_act if "moe_act" in on else 0.0) + (mb.shared_experts if "shared_experts" in on else 0.0)
    return ActTerms(unsplit, max(split, 0.0), score)


def _mlp_act(m: ModelSpec, moe: bool, lin: float = K.ACT_BYTES) -> tuple[float, float, float]:
    """(tp-split bytes, activation-output bytes, router bytes) per token the MLP block keeps (act_terms); the
    activation output and a routed copy's permuted input are linear inputs, saved at `lin` bytes."""
    B = K.ACT_BYTES
    h = float(m.hidden)
    nm = mlp_mats(m)
    if moe:
        f_e = float(m.moe_ffn or m.ffn_eff)
        f_s = float(m.shared_ffn or f_e)
        copies = routed_copies(m)
        per_copy_inter = _mlp_inter(f_e, nm, lin)
        routed_io = 2 * B * h if lin == B else (B + lin) * h
        mlp_split = copies * (routed_io + per_copy_inter) + m.num_shared_experts * _mlp_inter(f_s, nm, lin)
        act_out = lin * (copies * f_e + m.num_shared_experts * f_s)  # GeLU output / gated product
        router = 2 * 4.0 * m.num_experts  # fp32 logits + probabilities
        return mlp_split, act_out, router
    f = float(m.ffn_eff)
    return _mlp_inter(f, nm, lin), lin * f, 0.0


def _mlp_inter(f: float, nm: int, lin: float) -> float:
    """Bytes per token an MLP of width f keeps between its matrices: fc1 output(s) in 16 bits (gate and up,
    or the GeLU input) and the activation output, the fc2 input, at `lin` bytes."""
    B = K.ACT_BYTES
    if lin == B:
        return B * f * (3 if nm == 3 else 2)
    return B * f * (2 if nm == 3 else 1) + lin * f


def unsaved_expert_outputs(r: Rows) -> np.ndarray:
    """(n, 2, 3) bytes of one layer and micro-batch that act_terms counts as kept but the stack does not keep:
    each routed copy's expert output (16 bits × h) where the router's probabilities are applied in the experts'
    activation (Framework.probs_in_activation), so nothing in the backward reads it. They still stream through
    HBM (the combine reads them), so the element-wise time keeps them; only what the device holds drops. None
    for a fully recomputed layer or one whose `moe` module is recomputed (act_terms drops them there)."""
    out = np.zeros((r.n, 2, 3))
    if not (r.is_moe and r.fw.probs_in_activation):
        return out
    per_token = K.ACT_BYTES * r.h * routed_copies(r.model) * moe_share(r.model)
    out[:, MOE, OFF] = r.T * per_token / r.t
    if not (r.policy == "modules" and "moe" in r.modules):
        out[:, MOE, SELECTIVE] = out[:, MOE, OFF]
    return out


def layer_activations(r: Rows) -> np.ndarray:
    """(n, 2, 3) bytes one layer keeps for one micro-batch, per layer type and recompute mode."""
    act = np.zeros((r.n, 2, 3))
    for ty in r.types:
        for mode in (OFF, SELECTIVE, FULL):
            at = act_terms(r.model, ty == MOE, mode, r.policy, r.modules, r.lin_bytes, r.compiled)
            if mode == FULL:
                # The checkpointed layer input is the (sequence-parallel sharded) residual stream.
                act[:, ty, mode] = r.T * at.unsplit / r.sp_div
            else:
                act[:, ty, mode] = r.T * (at.unsplit / r.sp_div + at.split / r.t + at.score / r.t)
    if not r.is_moe:
        act[:, MOE, :] = act[:, DENSE, :]
    return act


@dataclass(frozen=True, slots=True)
class StageParams:
    """Parameters each stage holds on one rank and the bytes each costs after sharding.

    ne_layer / ex_layer (n, 2): non-expert / routed-expert parameters of one layer per type on one rank;
    ne_stage / ex_stage (n, P): per stage (zero past a row's pp), apart because they shard over different
    data-parallel groups; coef_ne / coef_ex: bytes per held parameter for each STATE_TERMS name (n,);
    shard_o (n,): the optimizer-state shard; e_split: the tp-split embedding parameters (tied copy, its
    all-reduce); io_stage (n, P): the part of ne_stage that is the embedding and the output layer, which no FP8
    recipe casts (Megatron-Core builds them as its own modules, not TransformerEngine's: they are gathered 16-bit
    where the layers' weights are gathered in FP8, gather_ne); io_adjust_b (n, P): bytes the stage's parameters
    hold beyond what
    coef_ne counts on those two, which FP8 never touches (signed: no TransformerEngine FP8 copy of them, and kept
    whole 16-bit where the layers' weights are kept whole as the FP8 gather); static_b (n, P): parameters +
    gradients + optimizer bytes per stage; grad_share (n, P): the
    share of the stage's gradient bytes alive at its peak (unsharded_grad_share; 1 but for one-round
    interleaved torchtitan pipelines); gather_ne / gather_ex (n, P): the bytes a weight all-gather of the stage
    moves on one rank (gathered_bytes), what the FSDP and the ZeRO-1 gathers both read
    (engine.cost.communication).
    """

    ne_layer: np.ndarray
    ex_layer: np.ndarray
    ne_stage: np.ndarray
    ex_stage: np.ndarray
    coef_ne: dict[str, np.ndarray]
    coef_ex: dict[str, np.ndarray]
    shard_o: np.ndarray
    e_split: float
    io_stage: np.ndarray
    io_adjust_b: np.ndarray
    static_b: np.ndarray
    grad_share: np.ndarray
    gather_ne: np.ndarray
    gather_ex: np.ndarray


def gathered_bytes(r: Rows, ne_stage: np.ndarray, ex_stage: np.ndarray,
                   io_stage: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, P) bytes a weight all-gather moves per stage on one rank, (non-expert, routed-expert): the 16-bit
    weights, or one byte per linear-layer weight where the weights are gathered in FP8 (`fp8_param_gather` with FP8
    on: Megatron's --fp8-param-gather, "perform the param all-gather in fp8", for its distributed optimizer and
    Megatron-FSDP alike (MLM-FP8PARAM); torchao's FSDP float8 all-gather on the FSDP2 stacks). The embedding and
    the output layer (`io_stage`) are never FP8 (TransformerEngine casts only its linear modules, [TE-FP8]): they
    stay 16-bit."""
    Bp = float(r.run.param_bytes)
    if not r.fp8_gather:
        return Bp * ne_stage, Bp * ex_stage
    return K.FP8_GATHER_BYTES * (ne_stage - io_stage) + Bp * io_stage, K.FP8_GATHER_BYTES * ex_stage


def state_bytes(run: RunOptions) -> tuple[float, float, float]:
    """Bytes per parameter of (weights, gradients, optimizer states + fp32 master copy) before sharding."""
    Bo = float(run.optimizer_states * run.optimizer_state_bytes + (4 if run.master_weights else 0))
    return float(run.param_bytes), float(run.grad_bytes), Bo


def held_state_bytes(run: RunOptions, fsdp2: bool) -> tuple[float, float, float, float]:
    """Bytes per parameter each state term holds: (sharded weights, weights kept whole, gradients, optimizer).

    Megatron-style stacks keep the 16-bit weights and a separate fp32 master copy in the optimizer ([CAL]
    §6.1: 2 + 4 + 4 + 8 = 18). FSDP2 (`fully_shard` with a MixedPrecisionPolicy, [PT-FSDP2]) keeps the
    sharded parameter itself in full precision and casts it to the compute dtype only in the all-gather
    buffer, so the master copy *is* the parameter (4 + 4 + 8 = 16) and the 16-bit weights exist only
    gathered (counted in `buffers`, or whole when `reshard_after_forward` is off). A run without master
    weights (fp32 weights, or pure 16-bit training: `mixed_precision.enabled: false`) is the same either way.
    """
    Bp, Bg, Bo = state_bytes(run)
    if fsdp2 and run.master_weights:
        # the sharded gradient takes the sharded parameter's dtype (fp32); reduce_dtype sets only what the
        # reduce-scatter moves (engine.cost.communication)
        whole = Bp if not run.reshard_after_forward else 0.0
        return 4.0, whole, 4.0, Bo - 4.0
    return Bp, 0.0, Bg, Bo


def _hybrid_stage_layers(r: Rows, ne_layer: np.ndarray, ex_layer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, P) non-expert and routed-expert parameters of a hybrid model's decoder layers per stage: each stage's
    layers of each kind (Rows.kinds) × one layer of that kind (HybridLayers.only), where the pattern's mix per
    layer would give a Mamba-heavy stage an attention-heavy stage's parameters (Nemotron-H 8B at pp 8: −10 % to
    +10 % of the mean); layers past the pattern (MTP) at the mix (`ne_layer`, `ex_layer`, the layers' type)."""
    m, ty = r.model, MOE if r.is_moe else DENSE
    hy = m.hybrid
    assert hy is not None and r.kinds is not None
    placed = r.kinds.sum(axis=2)
    rest = r.counts.sum(axis=2) - placed
    ne = rest * ne_layer[:, None, ty]
    ex = rest * ex_layer[:, None, ty]
    for k, kind in enumerate(HYBRID_KIND_ORDER):
        lp = layer_params(replace(m, hybrid=hy.only(kind)), r.is_moe)
        ne = ne + r.kinds[:, :, k] * (lp.split / r.t + lp.rep)[:, None]
        ex = ex + r.kinds[:, :, k] * (lp.routed / (r.ep * r.etp))[:, None]
    return ne, ex


def stage_params(r: Rows, tower_params: np.ndarray | None = None) -> StageParams:
    """Parameters per stage and their bytes by how weights, gradients and optimizer states shard
    (docs/cost-model.md §2.1)."""
    m, t, n = r.model, r.t, r.n
    lp_d = layer_params(m, False)
    lp_m = layer_params(m, True) if r.is_moe else lp_d
    e_split, e_rep = embedding_params(m)
    h_split, h_rep = head_params(m)
    x_split, x_rep = mtp_extra_params(m)
    ne_layer = np.stack([lp_d.split / t + lp_d.rep, lp_m.split / t + lp_m.rep], axis=1)  # (n, 2)
    ex_layer = np.stack([np.zeros(n), lp_m.routed / (r.ep * r.etp)], axis=1)
    if r.kinds is not None:
        ne_stage, ex_stage = _hybrid_stage_layers(r, ne_layer, ex_layer)
    else:
        ne_stage = r.counts[:, :, 0] * ne_layer[:, None, 0]
        if r.is_moe:
            ne_stage = ne_stage + r.counts[:, :, 1] * ne_layer[:, None, 1]
            ex_stage = r.counts[:, :, 1] * ex_layer[:, None, 1]
        else:
            ex_stage = np.zeros_like(ne_stage)
    tied_copy = e_split if m.tie_embeddings else 0.0
    head_local = (h_split / t + h_rep) + np.where(r.p > 1, tied_copy / t, 0.0)
    io_stage = np.where(r.first, np.broadcast_to(e_split / t + e_rep, (n,))[:, None], 0.0) \
        + np.where(r.last, head_local[:, None], 0.0)
    ne_stage = ne_stage + io_stage
    if tower_params is not None:  # a vision tower's weights sit on stage 0 and shard like the decoder's (engine.cost.tower)
        ne_stage += np.where(r.first, tower_params[:, None], 0.0)
    if m.mtp_depth:  # the MTP modules' projections and norms, beside their transformer layers
        mtp_local = np.broadcast_to(m.mtp_depth * (x_split / t + x_rep), (n,))
        ne_stage = ne_stage + np.where(r.last, mtp_local[:, None], 0.0)
    coef_ne, coef_ex, shard_o, whole = _state_coefs(r)
    # kept whole as the FP8 gather (_state_coefs), the embedding and output layer at their 16 bits all the same
    io_adjust_b = io_stage * np.where(r.fp8_gather & (whole > 0), float(r.run.param_bytes) - whole, 0.0)[:, None]
    if r.fp8_recipe is not None and r.fw.caches_fp8_weights:
        # TransformerEngine FP8 caches each local weight in FP8 and its transpose for the backward GEMM (the
        # recipe's bytes per parameter, engine.cost.fp8), sharded as the weights are: a weight FSDP shards
        # (Megatron-FSDP, reshard after forward) keeps its FP8 copy sharded and gathers it in FP8
        # (--fp8-param-gather); torchao's dynamic casting (FSDP2 stacks) caches none. With --fp8-param-gather the
        # weights are FP8 tensors (TransformerEngine fp8_model_init): the FP8 weight and its transpose are the
        # parameter, no 16-bit copy is held (the fp32 master copy stays in the optimizer).
        shard_w = np.where(r.fs > 1, r.fs if r.run.reshard_after_forward else 1.0, 1.0)
        cache = r.fp8_recipe.weight_cache_bytes - (float(r.run.param_bytes) if r.fp8_gather else 0.0)
        coef_ne["parameters"] = coef_ne["parameters"] + cache / shard_w
        coef_ex["parameters"] = coef_ex["parameters"] + cache / np.minimum(shard_w, r.edp)
        # TransformerEngine casts only its linear modules ([TE-FP8]): the embedding and output layer keep no copy
        io_adjust_b = io_adjust_b - io_stage * (cache / shard_w)[:, None]
    share = unsharded_grad_share(r, ne_layer + ex_layer, ne_stage + ex_stage)
    static_b = (ne_stage * (coef_ne["parameters"] + coef_ne["optimizer"])[:, None] + io_adjust_b
                + ne_stage * coef_ne["gradients"][:, None] * share)
    if r.is_moe:
        static_b = (static_b + ex_stage * (coef_ex["parameters"] + coef_ex["optimizer"])[:, None]
                    + ex_stage * coef_ex["gradients"][:, None] * share)
    return StageParams(ne_layer, ex_layer, ne_stage, ex_stage, coef_ne, coef_ex, shard_o, e_split, io_stage, io_adjust_b,
                       static_b, share, *gathered_bytes(r, ne_stage, ex_stage, io_stage))


def unsharded_grad_share(r: Rows, layer_local: np.ndarray, stage_local: np.ndarray) -> np.ndarray:
    """(n, P) share of each stage's unsharded gradients alive at once under Framework.pp_unsharded (1 elsewhere).

    torch.distributed.pipelining reduce-scatters a chunk's gradients, and frees its unsharded ones, at that
    chunk's last micro-batch's backward (PipelineScheduleMulti: `last_backward` counted per stage; the stage's
    FSDP post-backward then runs, [PT-PP]). ScheduleInterleaved1F1B runs backwards in groups of
    `microbatches_per_round` micro-batches per chunk, last chunk first, over max(1, m // p) rounds: with one
    round (m < 2p; torchtitan's default m = p) each chunk runs all its backwards before the next begins, so only
    one chunk's unsharded gradients exist at a time: the largest chunk's share of the stage. With more rounds
    every chunk accumulates across rounds and all are alive. `layer_local` (n, 2): one layer's parameters on a
    rank per type; `stage_local` (n, P): the stage's; what the layers do not hold (embedding, head, MTP, vision
    tower) sits on the model's first chunk (stage 0) or last chunk (last stage)."""
    share = np.ones((r.n, r.P))
    one_round = r.fw.pp_unsharded & (r.p > 1) & (r.fs > 1) & (r.v > 1) & (r.mb < 2 * r.p)
    if not one_round.any():
        return share
    m, lay = r.model, effective_layout(r.run)
    first_dense = m.first_k_dense if m.is_moe else m.num_layers
    for row in np.flatnonzero(one_round).tolist():
        p, v = int(r.p_i[row]), int(r.v[row])
        chunks, _ = layout_or_default(m.num_layers, m.mtp_depth, p, v, lay)  # (p, v) layers per chunk
        order = chunks.T.reshape(-1).astype(np.float64)  # model order j = c·p + i
        starts = np.concatenate([[0.0], np.cumsum(order)[:-1]])
        dense = np.clip(np.minimum(starts + order, first_dense) - starts, 0.0, order)
        params = (dense * layer_local[row, DENSE] + (order - dense) * layer_local[row, MOE]).reshape(v, p).T
        extra = stage_local[row, :p] - params.sum(axis=1)
        params[0, 0] += extra[0]
        params[p - 1, v - 1] += extra[p - 1]
        total = np.maximum(stage_local[row, :p], 1.0)
        share[row, :p] = np.where(stage_local[row, :p] > 0, params.max(axis=1) / total, 1.0)
    return share


def _state_coefs(r: Rows) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Bytes per held parameter of each STATE_TERMS name, non-expert and routed-expert (n,), the optimizer shard,
    and the bytes per parameter of the weights kept whole (n,): held_state_bytes sharded as docs/cost-model.md
    §2.1 states (FSDP2's fp32 sharded parameter; torchtitan under PP, Framework.pp_unsharded). Weights gathered
    in FP8 (Rows.fp8_gather) are kept whole as the gather left them, 1 byte a linear weight (the embedding and
    output layer: stage_params's io_adjust_b)."""
    fs = r.fs
    shard_o = np.maximum(fs, r.os_)
    Bp, whole_b, Bg, Bo = held_state_bytes(r.run, r.fw.fsdp2)
    whole = np.full(r.n, whole_b)
    if r.fw.fsdp2 and r.run.master_weights:
        shard_p = fs  # the fp32 sharded parameter stays sharded; `whole` is the gathered 16-bit copy kept
    else:
        shard_p = np.where(fs > 1, fs if r.run.reshard_after_forward else 1.0, 1.0)
    g_ne, g_ex = Bg / fs, Bg / np.minimum(fs, r.edp)
    if r.fw.pp_unsharded:  # gathered 16-bit weights and unsharded gradients between micro-batches (PP)
        piped = (r.p > 1) & (fs > 1)
        whole = np.where(piped, float(r.run.param_bytes), whole)
        g_ne = np.where(piped, r.fw.fsdp_reduce_bytes, g_ne)
        g_ex = np.where(piped, r.fw.fsdp_reduce_bytes, g_ex)
    if r.fp8_gather:
        whole = np.where(whole > 0, K.FP8_GATHER_BYTES, 0.0)
    coef_ne = {"parameters": Bp / shard_p + whole, "gradients": g_ne, "optimizer": Bo / shard_o}
    coef_ex = {"parameters": Bp / np.minimum(shard_p, r.edp) + whole, "gradients": g_ex,
               "optimizer": Bo / np.minimum(shard_o, r.edp)}
    return coef_ne, coef_ex, shard_o, whole


def buffers(r: Rows, sp_: StageParams) -> np.ndarray:
    """(n,) communication buffers each stage holds beside its activations."""
    T, t, h = r.T, r.t, r.h
    Bp = float(r.run.param_bytes)
    ne_l, ex_l = sp_.ne_layer, sp_.ex_layer
    layer_local = np.maximum(ne_l[:, DENSE] + ex_l[:, DENSE], ne_l[:, MOE] + ex_l[:, MOE])
    buf = np.where(r.sp, 2 * K.ACT_BYTES * T * h, 0.0)  # all-gathered norm output (sequence parallel)
    if not r.fw.pp_recv_per_microbatch:  # torch.distributed.pipelining's buffers: pipeline_buffers, per stage
        buf = buf + np.where(r.p > 1, 2 * K.ACT_BYTES * T * h / t, 0.0)  # pipeline send + receive
    # FSDP working buffer: one gathered layer plus its unsharded gradient in the reduce (parameter) dtype,
    # DS-EST's "4 × largest layer's params" at 16-bit ([CAL] §6.3), the layer at 1 byte where the weights are
    # gathered in FP8 (gathered_bytes); ZeRO-2-like keeps the weights whole (counted as
    # parameters) and needs only the gradient buffer.
    unit = gather_unit(r, layer_local)
    gathered = K.FP8_GATHER_BYTES if r.fp8_gather else Bp
    buf = buf + np.where(r.fs > 1, (gathered + Bp) * unit if r.run.reshard_after_forward else Bp * layer_local, 0.0)
    if r.is_moe and r.dispatcher == "allgather":  # the whole expert tensor-and-expert-parallel group's tokens
        n = r.ep * r.etp
        buf = buf + np.where(n > 1, 2 * K.ACT_BYTES * T / t * n * h, 0.0)
    elif r.is_moe:
        buf = buf + np.where(r.ep > 1, 2 * K.ACT_BYTES * T / t * r.moe_copies * h, 0.0)
    return buf + np.where(r.cp > 1, 2 * K.ACT_BYTES * T * r.attn.kv_width / t, 0.0)  # ring KV double buffer


def gather_unit(r: Rows, layer_local: np.ndarray) -> np.ndarray:
    """(n,) parameters one ZeRO-3 gather holds on a rank at once: the whole transformer layer (FSDP2's
    `fully_shard` per block), or, where the stack gathers module by module (Framework.zero3_gathers_modules:
    DeepSpeed ZeRO-3 as NAR21 ran it), the largest module's own parameters (DS-EST's "largest layer",
    `parameters(recurse=False)`): the fused QKV, the output projection, the MLP's first and second matrices (÷ t)
    or the vocabulary table (÷ t). MoE layers keep the whole layer [U]."""
    if not r.fw.zero3_gathers_modules or r.is_moe:
        return layer_local
    m = r.model
    a = attn_shape(m)
    h, f = float(m.hidden), float(m.ffn_eff)
    largest = max(h * (a.q_width + a.kv_width), a.out_width * h, h * f * (mlp_mats(m) - 1), h * f, float(m.vocab) * h)
    return np.minimum(largest / r.t, layer_local)


def pipeline_buffers(r: Rows) -> np.ndarray:
    """(n, P) bytes torch.distributed.pipelining holds per pipeline rank beyond the layers' own activations
    (Framework.pp_recv_per_microbatch; zero elsewhere and without pipeline parallelism).

    Its PipelineStage allocates, at the schedule's first step, one receive buffer per micro-batch for the
    stage input of every chunk that is not the model's first and one for the output gradient of every chunk
    that is not its last (`_prepare_forward_infra` / `_prepare_backward_infra` over n_microbatches, [PT-PP]),
    and keeps them; each is one micro-batch's residual stream (sequence-parallel sharded). A received input is
    also the first layer's checkpointed input (already counted with the layers); the first rank's stage
    outputs, kept in the stage's forward cache for each micro-batch in flight until its backward, are not."""
    if not r.fw.pp_recv_per_microbatch:
        return np.zeros((r.n, r.P))
    one = K.ACT_BYTES * r.T * r.h / r.sp_div  # (n,) one micro-batch's stage input or output gradient
    chunks = 2 * r.v[:, None] - r.first - r.last  # receive-buffer sets per micro-batch on each rank
    per_rank = one[:, None] * (r.mb[:, None] * chunks + r.mf * r.first)
    return np.where((r.p[:, None] > 1) & r.valid, per_rank, 0.0)


def allocator_ratio(r: Rows) -> float:
    """Reserved over allocated bytes of the framework's allocator (1 + Framework.allocator_overhead): the
    PyTorch caching allocator's high-water mark of reserved memory exceeds the peak of live tensors by the
    freed blocks it keeps cached and cannot reuse for later requests (docs/cost-model.md §2.4)."""
    return 1.0 + r.fw.allocator_overhead


def loss_peak_bytes(r: Rows) -> np.ndarray:
    """(n,) bytes per logit alive at the loss's peak (Framework.loss_peak_bytes): the vocabulary-parallel
    loss's own figure where it runs over tp > 1 (loss_parallel_peak_bytes), else the plain one, or the compiled
    one where the release compiles its one-chunk loss with the model (compiled_loss_peak_bytes)."""
    fw = r.fw
    compiled = fw.compiled_loss_peak_bytes and r.run.compile and loss_chunks(r) == 1
    plain = np.full(r.n, fw.compiled_loss_peak_bytes if compiled else fw.loss_peak_bytes)
    parallel = fw.loss_parallel if r.run.loss_parallel is None else r.run.loss_parallel  # accelerator.loss_parallel
    if parallel and fw.loss_parallel_peak_bytes:
        return np.where(r.t > 1, fw.loss_parallel_peak_bytes, plain)
    return plain


def loss_chunks(r: Rows) -> int:
    """Token chunks the output layer and loss run in (RunOptions.loss_chunks as stated, else
    Framework.loss_chunks): each chunk's logits are made, reduced to a loss and back-propagated to the hidden
    states before the next chunk's, so one chunk's logits are alive at the loss's peak."""
    return r.run.loss_chunks or r.fw.loss_chunks


def fixed_activations(r: Rows, act: np.ndarray, tower_act: np.ndarray | None = None) -> np.ndarray:
    """(n, P) activation bytes that do not depend on the recompute choice: one layer's backward working set
    (one micro-batch), the embedding dropout mask and a vision tower's activations (stage 0, per micro-batch in
    flight; one recompute mode for the whole multimodal model, engine.cost.tower) and the output side
    (last stage; KOR22 §4.3: final-norm input 2h, output-projection input 2h, and the loss's logits as the
    framework computes them: the bytes per logit alive at the loss's peak, loss_peak_bytes, for one of the
    loss_chunks chunks, with a chunked loss's hidden-state copies and gradient accumulator)."""
    T, h = r.T, r.h
    m = r.model
    emb_act = T * (K.MASK_BYTES * h if dropout(m) else 0.0) / r.sp_div
    chunks = loss_chunks(r)
    chunk_side = K.CHUNKED_LOSS_HIDDEN_BYTES * h if chunks > 1 else 0.0
    logits = loss_peak_bytes(r) * r.V / (r.loss_div * chunks)
    head_act = T * (4.0 * h / r.sp_div + chunk_side + logits) * (1 + m.mtp_depth)
    working = act[:, MOE if r.is_moe else DENSE, OFF]
    if tower_act is not None:  # a vision tower's kept activations, per micro-batch in flight on stage 0
        emb_act = emb_act + tower_act
    return working[:, None] + np.where(r.first, (emb_act[:, None] * r.mf), 0.0) + np.where(r.last, head_act[:, None], 0.0)


@dataclass(frozen=True, slots=True)
class Memory:
    """The priced memory of a block: per-stage bytes and GiB, the peak stage and its MEMORY_TERMS (GiB)."""

    act: np.ndarray  # (n, 2, 3) bytes one layer keeps per micro-batch
    params: StageParams
    buf: np.ndarray
    fixed_b: np.ndarray
    peak_gib: np.ndarray
    stage_gib: np.ndarray
    peak_stage: np.ndarray
    terms: dict[str, np.ndarray]
    stage_parts: dict[str, np.ndarray]
    alloc_ratio: float  # allocator_ratio: what PricedTable.layer_act_one_gib carries over `act`
    held: np.ndarray  # (n, 2, 3) of `act` the device holds between forward and backward (less what swaps out)
    swapped: np.ndarray  # (n, 2, 3) of `act` swap-attention copies to the host (swap.swapped_bytes)


def price_memory(r: Rows, tower_params: np.ndarray | None = None, tower_act: np.ndarray | None = None) -> Memory:
    """Every stage's memory, its peak, and the peak stage's breakdown. Allocator-held bytes (states,
    activations, buffers) are scaled by allocator_ratio, the overhead reported as part of `reserved` with the
    fixed RESERVED_GIB that lies outside the allocator; the per-layer kept bytes the search sums
    (PricedTable.layer_act_one_gib) carry the same ratio, so static + fixed + Σ layers stays the stage total."""
    act = layer_activations(r)
    swapped = swapped_bytes(r)  # swap-attention: the attention block's saved tensors wait on the host
    held = act - swapped - unsaved_expert_outputs(r)
    sp_ = stage_params(r, tower_params)
    buf_stage = buffers(r, sp_)[:, None] + pipeline_buffers(r)
    fixed_act = fixed_activations(r, act, tower_act)
    ratio = allocator_ratio(r)
    over = ratio - 1.0
    reserved_b = K.RESERVED_GIB * K.GIB
    fixed_b = ratio * (fixed_act + buf_stage) + over * sp_.static_b + reserved_b
    act_stage = fixed_act + r.mf * r.stage_sum(held)
    alloc = sp_.static_b + act_stage + buf_stage
    res_stage = reserved_b + over * alloc
    tot = alloc + res_stage
    tot[~r.valid] = -np.inf
    peak_stage = np.argmax(tot, axis=1)
    pick = (r.rows, peak_stage)
    stage_gib = tot / K.GIB
    stage_gib[~r.valid] = np.nan
    ne_pk, ex_pk = sp_.ne_stage[pick], sp_.ex_stage[pick]
    terms = {k: (ne_pk * sp_.coef_ne[k] + ex_pk * sp_.coef_ex[k]) / K.GIB for k in STATE_TERMS}
    terms["parameters"] = terms["parameters"] + sp_.io_adjust_b[pick] / K.GIB
    terms["gradients"] = terms["gradients"] * sp_.grad_share[pick]
    terms["activations"] = act_stage[pick] / K.GIB
    terms["buffers"] = buf_stage[pick] / K.GIB
    terms["reserved"] = res_stage[pick] / K.GIB
    stage_parts = {"ne": sp_.ne_stage, "ex": sp_.ex_stage, "io_adjust": sp_.io_adjust_b, "act": act_stage, "buf": buf_stage, "res": res_stage,
                   "valid": r.valid, "grad_share": sp_.grad_share,
                   **{f"ne_{k}": v for k, v in sp_.coef_ne.items()}, **{f"ex_{k}": v for k, v in sp_.coef_ex.items()}}
    return Memory(act, sp_, buf_stage, fixed_b, tot[pick] / K.GIB, stage_gib, peak_stage, terms, stage_parts,
                  ratio, held, swapped)
