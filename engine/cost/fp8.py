"""FP8 as the stacks run it: per recipe, what runs in FP8, what it costs beyond the GEMM rate, what it keeps.

Every recipe runs the linear layers' three GEMMs (forward, input gradient, weight gradient) in FP8 and keeps the
attention core, the router, the embedding, the output layer and loss, the norms and the element-wise work in
BF16/FP32 (TransformerEngine's `fp8_autocast` covers its Linear / LayerNormLinear / GroupedLinear modules only;
torchao's Float8Linear swaps nn.Linear only; [TE-FP8], [CAL] §11 "FP8 on Blackwell"). What FP8 adds beyond the
GEMM rate is the quantisation of each GEMM operand: the linear layer's input in the forward and the gradient of
its output in the backward are read in BF16 and written in FP8 once per layout the GEMMs need (row-wise for
the forward, column-wise / transposed for the weight gradient), with the scale each recipe derives:

| recipe | scale | HBM bytes per quantised element | weight cache per parameter | weight casts per micro-batch |
|---|---|---|---|---|
| delayed | per tensor, from the amax history: one pass (read 2, write 1 + 1) | 4 | FP8 weight + transpose: 2 | 2 × 3 = 6 |
| tensorwise (current scaling) | per tensor, from this tensor's amax: an amax pass first (read 2), then the cast | 6 | 2 | 2 × 5 = 10 |
| blockwise | per 1×128 block, in the cast pass; fp32 scales per block for both layouts (+2·4/128) | 4.0625 | 2 | 6.0625 |
| mxfp8 | per 1×32 block in hardware (Blackwell only), E8M0 scales for both layouts (+2·1/32) | 4.0625 | 2.0625 | 6.0625 |

The byte counts follow from the data each cast kernel must move; none is fitted. The last column is what a stack
that caches no FP8 weight (torchao's Float8Linear on the FSDP2 stacks, `Framework.caches_fp8_weights`) moves per
weight element and micro-batch: it quantises the 16-bit weight in the forward and again, in the other layout, in
the backward, each a cast pass with the recipe's scale pass (read 2, write 1, plus the amax read for tensorwise);
with the weights all-gathered in FP8 (`fp8_param_gather`: torchao's FSDP float8 all-gather, the scales
precomputed once per step) only the backward's transposed copy remains (read 1, write 1 = 2). TransformerEngine
casts each weight once per step (its first micro-batch) and keeps the copies: not priced per micro-batch.

The weight caches are sharded as the weights are (a weight FSDP shards keeps its FP8 copy sharded too:
Megatron-FSDP and FSDP2 gather the FP8 weights, `--fp8-param-gather`). MFU stays the model's FLOPs over the device's dense BF16 peak
(engine.results.MFU_CONVENTION): an FP8 plan's MFU says how far it runs beyond BF16, never over 1 in practice
(the GEMMs' FP8 speed-up is diluted by the BF16 parts and these casts).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from engine.cost import constants as K
from engine.cost.model import attn_shape, mlp_mats, mlp_share, moe_share
from engine.specs import DeviceSpec, ModelSpec, RunOptions


@dataclass(frozen=True, slots=True)
class Fp8Recipe:
    """One FP8 recipe (module docstring's table). `generations`: device generations that run it (() = any
    device with FP8 GEMMs); `megatron`: Megatron-LM's `--fp8-recipe` value (MLM-ARGS)."""

    name: str
    cast_bytes: float
    weight_cache_bytes: float
    weight_cast_bytes: float
    generations: tuple[str, ...] = ()

    @property
    def megatron(self) -> str:
        return self.name


_CACHE = K.FP8_WEIGHT_CACHE_BYTES  # the FP8 weight and its transpose
RECIPES = MappingProxyType({
    "delayed": Fp8Recipe("delayed", 4.0, _CACHE, 2 * 3.0),
    "tensorwise": Fp8Recipe("tensorwise", 6.0, _CACHE, 2 * 5.0),
    "blockwise": Fp8Recipe("blockwise", 4.0 + 2 * 4 / 128, _CACHE, 2 * 3.0 + 2 * 4 / 128),
    "mxfp8": Fp8Recipe("mxfp8", 4.0 + 2 * 1 / 32, _CACHE + 2 * 1 / 32, 2 * 3.0 + 2 * 1 / 32, ("blackwell",)),
})
# The bytes per weight element a stack that caches no FP8 weight moves per micro-batch when the weights arrive in FP8
# (fp8_param_gather): the backward's transposed copy, read 1 and write 1 (module docstring).
FP8_GATHERED_WEIGHT_BYTES = 2.0
# The recipe each stack runs when the files name none: Megatron-LM's `--fp8-recipe` defaults to delayed
# (MLM-ARGS core_v0.16.0 to core_v0.19.0); torchao's Float8 training (torchtitan's `float8` converter) to tensorwise dynamic
# scaling ([TT-SRC]); HyperParallel's FP8 linear layers are priced as torchao's [U].
DEFAULT_RECIPE = MappingProxyType({"megatron": "delayed", "mindspeed": "delayed", "torchtitan": "tensorwise",
                                   "hyperparallel": "tensorwise"})


def recipe_name(run: RunOptions) -> str:
    """The recipe named or, unnamed, the stack's default."""
    return run.fp8_recipe or DEFAULT_RECIPE.get(run.framework, "tensorwise")


def recipe_of(run: RunOptions, device: DeviceSpec) -> Fp8Recipe | None:
    """The FP8 recipe priced, or None where the plan runs in BF16: FP8 off, a device without FP8 GEMMs (HP532),
    or a recipe the device cannot run (MXFP8 before Blackwell, HP532)."""
    if not run.fp8 or device.fp8_tflops <= 0:
        return None
    recipe = RECIPES[recipe_name(run)]
    if recipe.generations and device.generation not in recipe.generations:
        return None
    return recipe


def cast_widths(m: ModelSpec, moe_layer: bool) -> tuple[float, float]:
    """(forward, backward) elements quantised per token in one layer, before tensor parallelism divides them:
    the input width of every FP8 GEMM (forward) and its output width (backward, the gradient cast). Attention
    projections by their widths (MLA's down and up projections as its q, kv and output widths [U]); the MLP's
    gated pair counts its fused output; a MoE layer's routed experts count once per routed copy, the router
    stays BF16."""
    a = attn_shape(m)
    h = float(m.hidden)
    qkv_out = a.q_width + a.kv_width
    fwd, bwd = h + a.out_width, qkv_out + h  # qkv (input h) and output projection (input out_width)
    hy = m.hybrid
    if hy is not None:  # a hybrid layer's mixer: attention's projections and the Mamba mixer's in and out, by share
        share, _, mu = hy.shares()
        fwd, bwd = share * fwd + mu * (h + hy.d_inner), share * bwd + mu * (hy.in_proj + h)
    nm = mlp_mats(m)
    if moe_layer and m.is_moe:
        copies = m.experts_per_tok * max(m.capacity_factor, 1.0)
        f_e = float(m.moe_ffn or m.ffn_eff)
        e = moe_share(m)
        fwd += e * copies * (h + f_e)
        bwd += e * copies * ((nm - 1) * f_e + h)
        if m.num_shared_experts:
            f_s = float(m.shared_ffn or m.moe_ffn or m.ffn_eff) * m.num_shared_experts
            fwd += e * (h + f_s)
            bwd += e * ((nm - 1) * f_s + h)
        return fwd, bwd
    f = float(m.ffn_eff)
    if hy is not None:  # the MLP layers' share
        d = mlp_share(m)
        return fwd + d * (h + f), bwd + d * ((nm - 1) * f + h)
    return fwd + h + f, bwd + (nm - 1) * f + h
