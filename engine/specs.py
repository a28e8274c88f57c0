"""The typed, immutable facts every stage exchanges: model, device, cluster, run options, strategy.

These are the contract between the reader (engine.config), the cost model (engine.cost), the search
(engine.search), the editors of files (engine.edit) and both front ends. They are frozen so a value handed
to one search can never leak into the next (HyperParallel needed guards for exactly that).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

RecomputeMode = Literal["off", "selective", "full"]
RECOMPUTE_MODES: tuple[RecomputeMode, ...] = ("off", "selective", "full")
PipelineSchedule = Literal["1F1B", "interleaved", "gpipe", "dualpipev"]
SelectivePolicy = Literal["hyperparallel", "attention", "op", "modules"]
# Megatron-Core's --recompute-modules (TransformerConfig.recompute_modules; docs/cost-model.md §2.2): the submodules
# `recompute: selective` recomputes where the framework offers them (engine.catalog.frameworks).
RECOMPUTE_MODULES: tuple[str, ...] = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                                      "shared_experts")
CpAlgo = Literal["ring", "ulysses", "hybrid", "allgather"]

GIB = float(1 << 30)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Architecture facts of a decoder-only transformer (Hugging Face config.json names in comments).

    Zero means "absent" for the optional families: `num_experts == 0` is a dense model, `kv_lora_rank == 0`
    is not MLA. `seq_len` is the trained sequence length (docs/formats.md: max_position_embeddings in a search
    config, dataset.data_transform.max_seq_len in a train.yaml), never the model's positional limit.
    """

    name: str
    num_layers: int  # num_hidden_layers
    hidden: int  # hidden_size
    heads: int  # num_attention_heads
    vocab: int  # vocab_size
    ffn: int = 0  # intermediate_size (dense MLP width; 0 -> 4*hidden for GeLU, 8/3*hidden rounded for SwiGLU)
    kv_heads: int = 0  # num_key_value_heads (0 -> heads)
    head_dim: int = 0  # head_dim (0 -> hidden // heads)
    seq_len: int = 4096  # trained sequence length
    tie_embeddings: bool = False  # tie_word_embeddings
    gated_mlp: bool = True  # hidden_act silu/swiglu -> True (3 matrices); gelu/relu -> False (2 matrices)
    learned_positions: bool = False  # GPT-style absolute position embeddings (s x h parameters)
    linear_bias: bool = False  # GPT-style biases on every linear layer
    use_flash_attention: bool = True  # no a*s*s score tensor kept for backward
    # Dropout probabilities the files state (hidden_dropout / resid_pdrop, attention_dropout / attn_pdrop);
    # None: not stated, the recipe default applies (engine.cost.memory.dropout).
    hidden_dropout: float | None = None
    attention_dropout: float | None = None
    # MoE
    num_experts: int = 0  # num_experts / n_routed_experts / num_local_experts
    experts_per_tok: int = 0  # num_experts_per_tok
    num_shared_experts: int = 0  # num_shared_experts / n_shared_experts
    moe_ffn: int = 0  # moe_intermediate_size (Mixtral: intermediate_size)
    shared_ffn: int = 0  # shared_expert_intermediate_size (0 -> moe_ffn)
    first_k_dense: int = 0  # first_k_dense_replace
    capacity_factor: float = 1.0
    # Group-limited routing (DeepSeek-V3 `n_group`, `topk_group`): a token's experts come from groups_per_tok of
    # expert_groups groups; 0 = free routing (engine.cost.communication.distinct_nodes).
    expert_groups: int = 0
    groups_per_tok: int = 0
    # A capacity factor the files state: the token-drop path (tokens past an expert's capacity dropped, experts
    # padded to it), so the busiest rank holds the capacity; unstated, routing is dropless (MOE_IMBALANCE).
    token_drop: bool = False
    # MLA (DeepSeek-V2/V3)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Multi-token prediction
    mtp_depth: int = 0  # num_nextn_predict_layers / mtp_num_hidden_layers
    # The mean share of full causal attention's score-matrix work its layers do (sliding windows, linear-attention
    # layers, sparse attention with an indexer): engine.config.model_facts.attention_span; 1.0 = every layer full.
    attention_span: float = 1.0
    # A multimodal model's vision tower (HyperParallel's model_spec["vision"], [HP] §2.5); None: text only.
    vision: VisionTower | None = None
    # A hybrid model's layer kinds (Mamba, attention and MLP layers apart: Nemotron-H); None: every layer is
    # attention + MLP (or MoE).
    hybrid: HybridLayers | None = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def kv_heads_eff(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim_eff(self) -> int:
        return self.head_dim or self.hidden // max(self.heads, 1)

    @property
    def ffn_eff(self) -> int:
        if self.ffn:
            return self.ffn
        return 4 * self.hidden if not self.gated_mlp else int(8 * self.hidden / 3)

    @property
    def num_moe_layers(self) -> int:
        return max(self.num_layers - self.first_k_dense, 0) if self.is_moe else 0


# The kinds of a hybrid pattern in the order per-kind arrays hold them (HybridLayers.only, Rows.kinds).
HYBRID_KIND_ORDER = ("M", "*", "-", "E")


@dataclass(frozen=True, slots=True)
class HybridLayers:
    """The layer kinds of a hybrid model, from its pattern (Nemotron-H's `hybrid_override_pattern`, Megatron-Core's
    hybrid layer pattern: one character per layer, `M` a Mamba-2 mixer, `*` self-attention, `-` an MLP, `E` a MoE
    block: Nemotron 3), and the Mamba-2 mixer's widths (Hugging Face NemotronHConfig names in comments;
    docs/cost-model.md §6). Each layer is one block with its own pre-norm. A pipeline stage's parameters are its own
    layers' kinds (`pattern`, engine.cost.memory.stage_params); the rest of a layer (activations, time) is priced as
    the pattern's mix (each kind weighted by its share of the layers), so a stage's layers run the model's average
    layer wherever the pattern puts them; a pattern with MoE layers has no MLP layers (engine.config.model_facts),
    and all its layers are of the MoE type, each holding the MoE block's share (moe_share)."""

    attention: int  # `*` layers
    mlp: int  # `-` layers
    mamba: int  # `M` layers
    mamba_heads: int  # mamba_num_heads
    mamba_head_dim: int  # mamba_head_dim
    state: int  # ssm_state_size
    groups: int  # n_groups
    conv_kernel: int  # conv_kernel
    moe: int = 0  # `E` layers
    # The pattern itself, one kind per layer in model order: which kinds a pipeline stage's layers are
    # (engine.cost.layout.chunk_kind_counts); "" where only the counts are known.
    pattern: str = ""

    @property
    def layers(self) -> int:
        return self.attention + self.mlp + self.mamba + self.moe

    def kind_shares(self) -> tuple[float, ...]:
        """Each kind's share of the layers, in HYBRID_KIND_ORDER."""
        n = max(self.layers, 1)
        return self.mamba / n, self.attention / n, self.mlp / n, self.moe / n

    def only(self, kind: str) -> HybridLayers:
        """The same widths with one layer, of `kind` (HYBRID_KIND_ORDER): its shares are 1 and 0, so what the cost
        model prices for "one layer of the mix" is one layer of that kind. Every per-layer figure is linear in the
        shares, so a stage's is the sum over its own layers' kinds (engine.cost.memory.stage_params)."""
        return replace(self, attention=int(kind == "*"), mlp=int(kind == "-"), mamba=int(kind == "M"),
                       moe=int(kind == "E"), pattern=kind)

    def shares(self) -> tuple[float, float, float]:
        """(attention, MLP, Mamba) shares of the layers."""
        n = max(self.layers, 1)
        return self.attention / n, self.mlp / n, self.mamba / n

    @property
    def moe_share(self) -> float:
        """The MoE layers' share of the layers."""
        return self.moe / max(self.layers, 1)

    @property
    def d_inner(self) -> int:
        """The mixer's inner width: heads × head dimension (expand × hidden in Megatron-Core's default)."""
        return self.mamba_heads * self.mamba_head_dim

    @property
    def in_proj(self) -> int:
        """The in-projection's output width: z and x (2·d_inner), B and C (2·groups·state), dt (one per head)."""
        return 2 * self.d_inner + 2 * self.groups * self.state + self.mamba_heads

    @property
    def conv_dim(self) -> int:
        """Channels of the depthwise causal convolution: x, B and C."""
        return self.d_inner + 2 * self.groups * self.state

    def cp_splits(self, tp: Any, cp: Any) -> Any:
        """Whether Megatron-Core's Mamba context parallelism can split the mixer over cp ranks at tensor parallelism
        tp (MCORE-MAMBA-CP): each cp rank takes whole heads of a tp rank's heads/tp, and whole groups of its
        groups/tp or, where there are fewer groups than cp ranks, an equal share of one group's heads. Element-wise
        on ints or arrays: the reader asks it of a stated cp, the search of its candidate columns (tp itself must
        divide the heads and groups: HP403, the search's tp rule)."""
        heads, groups = self.mamba_heads // tp, self.groups // tp
        groups = groups + (groups == 0)  # at least one
        return (heads % cp == 0) & ((groups % cp == 0) | (cp % groups == 0))


@dataclass(frozen=True, slots=True)
class VisionTower:
    """The vision tower of a multimodal model, as HyperParallel's search prices it ([HP] §2.5, §5.14): encoder
    layers of its own width that take the language model's degrees and sit, all of them, on pipeline stage 0
    (front-loaded, before the first decoder layer), each sample carrying `seq_len` visual tokens
    (`visual_seq_len`). Hugging Face vision_config names in comments.

    `merge` and `out_hidden` describe the patch merger that projects the tower into the language model
    (Qwen-VL's PatchMerger: a norm, then h·merge² → h·merge² → out_hidden); out_hidden 0 = no merger priced.
    """

    num_layers: int  # depth / num_hidden_layers
    hidden: int  # hidden_size / embed_dim
    heads: int  # num_heads / num_attention_heads
    seq_len: int  # visual_seq_len: visual tokens per sample
    ffn: int = 0  # intermediate_size (0 -> 4*hidden)
    gated_mlp: bool = False  # hidden_act silu (Qwen2.5-VL) -> True; gelu / quick_gelu (Qwen2-VL, Qwen3-VL) -> False
    out_hidden: int = 0  # out_hidden_size: the merger's output width (the language model's hidden size)
    merge: int = 1  # spatial_merge_size

    def layer_model(self) -> ModelSpec:
        """The tower's layers as a ModelSpec the cost model prices: an encoder of biased linears with flash
        attention, no vocabulary, `seq_len` tokens per sample."""
        return ModelSpec(name="vision", num_layers=self.num_layers, hidden=self.hidden, heads=self.heads, vocab=0,
                         ffn=self.ffn or 4 * self.hidden, seq_len=self.seq_len, gated_mlp=self.gated_mlp,
                         linear_bias=True, hidden_dropout=0.0, attention_dropout=0.0)

    @property
    def merger_params(self) -> int:
        """The patch merger's parameters: a norm over h, then (h·merge²)² and (h·merge²)·out_hidden weights with
        their biases (Qwen2-VL Qwen2VisionTransformer.merger)."""
        if self.out_hidden <= 0:
            return 0
        wide = self.hidden * self.merge * self.merge
        return 2 * self.hidden + wide * wide + wide + wide * self.out_hidden + self.out_hidden

    def to_json(self) -> dict[str, int]:
        return {"layers": self.num_layers, "hidden_size": self.hidden, "heads": self.heads,
                "visual_seq_len": self.seq_len}


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """One accelerator of the catalog ([HW]). Bandwidths are GB/s (1e9 B/s) per
    device, one direction; memory is GiB usable for the budget."""

    name: str
    peak_tflops: float  # dense BF16/FP16 tensor TFLOP/s
    memory_gib: float
    hbm_tb_s: float
    intra_node_gb_s: float
    inter_node_gb_s: float
    cards_per_node: int = 8
    aliases: tuple[str, ...] = ()
    notes: str = ""
    # Where the figures come from ([HW] tags): `source` names the rows' references; `unconfirmed`
    # lists the fields that are [U] (secondary sources only, or sources conflict), shown in the hover.
    source: str = ""
    unconfirmed: tuple[str, ...] = ()
    matmul_efficiency: float = 0.0  # best-shape BF16 matmul / peak ([HW] §3.1, §4); 0 = catalog default
    fp8_tflops: float = 0.0  # dense FP8 tensor TFLOP/s; 0 = no FP8 GEMMs on this device
    fp8_matmul_efficiency: float = 0.0  # best-shape FP8 matmul / FP8 peak
    # Sustained share of the peak clock under the part's power cap (1 = the datasheet clock holds).
    clock_fraction: float = 1.0
    # Scale-up links form a full mesh (HCCS, Infinity Fabric): a group of g < cards_per_node members uses
    # only its g − 1 links of the device's cards_per_node − 1, so it gets that share of intra_node_gb_s.
    full_mesh: bool = False
    coll_eff_intra: float = 0.0  # measured collective bus bandwidth / intra_node_gb_s; 0 = the NVLink default
    generation: str = ""  # kernel generation for attention rates: volta, ampere, hopper, blackwell, cdna3, ascend
    # Device <-> host memory link, GB/s one direction (offload, [HP] §8.6); 0 = the catalog states none.
    host_link_gb_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    device: DeviceSpec
    num_nodes: int
    cards_per_node: int
    memory_gib: float  # device memory (catalog value unless overridden)
    intra_node_gb_s: float
    inter_node_gb_s: float

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.cards_per_node


# Calibration ratio groups (docs/formats.md §6) and the time parts (engine.results.TIME_TERMS) each one scales.
# HyperParallel fits one ratio per group of its score parts ([HP] §7.8: COMPUTE covers FW, BW and
# RECOMPUTE; PP_COMM covers PP_COMM and BUBBLE); ours are the same groups over seconds.
RATIO_GROUPS: dict[str, tuple[str, ...]] = {
    "compute": ("compute", "recompute"),
    "tp_comm": ("tp_comm",),
    "cp_comm": ("cp_comm",),
    "ep_comm": ("ep_comm",),
    "dp_comm": ("dp_comm",),
    "pp": ("pp_bubble", "pp_p2p"),
    "optimizer": ("optimizer",),
}


# The parts of the priced step (engine.cost.step_parts prices the split; they sum to the step time), each -> the
# TIME_TERMS name it is a piece of: compute splits into its weight GEMMs, the attention core and the rest
# (element-wise work: norms, activations, the loss, permutations, casts), and every collective kind into the
# link class its group crosses (intra-node: all ranks on one node; inter-node: the group spans nodes). The
# parts calibration fits one ratio each (docs/calibration.md, "The parts rule").
PRICED_PARTS: dict[str, str] = {
    "gemm": "compute", "attention": "compute", "elementwise": "compute", "recompute": "recompute",
    **{f"{kind}.{link}": kind for kind in ("tp_comm", "cp_comm", "ep_comm", "dp_comm", "pp_p2p")
       for link in ("intra", "inter")},
    "pp_bubble": "pp_bubble", "optimizer": "optimizer",
}


# The additive part (docs/calibration.md, "Host overhead"): host-side time the model does not price (kernel
# launches the device waits on, [CUDA-GRAPH]), 0 s until a calibration gives it seconds per launch unit (one
# decoder layer's kernels for one micro-batch on the slowest stage: engine.cost.step_parts.host_launches). It is
# no PRICED_PARTS part: a ratio on zero seconds means nothing, so it is fitted and applied in seconds.
HOST_PART = "host"
# Seconds per launch unit beyond which a ratios file's host_s_per_launch is refused (HP810): a layer's eager
# kernels for one micro-batch are tens of launches of the order of microseconds each ([CUDA-GRAPH]); 10 ms per
# unit is 100× and more of that: a number in other units.
HOST_S_PER_LAUNCH_MAX = 0.01


def group_of_part(part: str) -> str:
    """The ratio group (RATIO_GROUPS) a PRICED_PARTS part, a TIME_TERMS name or a group name belongs to."""
    term = PRICED_PARTS.get(part, part)
    return next((g for g, terms in RATIO_GROUPS.items() if term in terms or g == part), "compute")

# The plan features the local part of a calibration compares (engine.ratios.local), each as log2 of a
# positive count: the model's shape, the trained sequence, the parallel degrees, the micro-batch, the nodes.
PLAN_FEATURES: tuple[str, ...] = ("hidden", "layers", "experts", "seq_len", "tp", "pp", "cp", "ep", "dp",
                                  "micro_batch_size", "nodes")


@dataclass(frozen=True, slots=True)
class LocalCorrection:
    """The plan-specific part of a calibration (the `local` rule, docs/calibration.md): at a plan x the parts in
    `moved` are multiplied, on top of their stack-wide ratio, by exp(clip(Σ_i weight_i · k(x, anchor_i))), where
    k(x, a) = exp(−|f(x) − f(a)|² / (2 · length_scale²)) over the log2 PLAN_FEATURES. A plan like an anchor gets
    that anchor's own misfit back; a distant one gets nothing beyond the stack-wide ratio. `own` is the part of
    an anchor's misfit that belongs to that plan alone (its exposed communication, a fixed per-step overhead):
    added only where the features equal the anchor's, so the anchor is reproduced and no neighbour inherits it."""

    moved: tuple[str, ...]
    length_scale: float
    anchors: tuple[tuple[float, ...], ...]  # log2 PLAN_FEATURES of each run fitted on
    weights: tuple[float, ...]  # log-factor weight of each anchor
    log_bound: float  # |Σ weight·k| is clipped to this (the time ratio bounds, log 10)
    own: tuple[float, ...] = ()  # log-factor each anchor adds at its own plan only (empty: none)


@dataclass(frozen=True, slots=True)
class Ratios:
    """Calibration read from a ratios file (`hp-plan calibrate`, docs/formats.md §6): each time part is multiplied
    by its group's ratio and every memory term by `memory`. `file`, `runs`, `framework` and `device_type` say
    where the ratios come from, so every calibrated output can say so."""

    time: tuple[tuple[str, float], ...] = tuple((g, 1.0) for g in RATIO_GROUPS)
    memory: float = 1.0
    file: str = ""
    runs: int = 0
    framework: str = ""
    device_type: str = ""
    local: LocalCorrection | None = None  # the plan-specific part (rule `local`); None: one ratio per group
    # One ratio per PRICED_PARTS part (rule `parts`; docs/formats.md §6 `parts`); () = each part takes its group's.
    parts: tuple[tuple[str, float], ...] = ()
    # The host part's seconds per launch unit (HOST_PART; docs/formats.md §6 `parts.host_s_per_launch`): a plan
    # adds this × its launch units to its step; 0: nothing added.
    host_s_per_launch: float = 0.0

    def of(self, group: str) -> float:
        return dict(self.time).get(group, 1.0)

    def of_part(self, part: str) -> float:
        """The ratio of one PRICED_PARTS part: its own where the file gives one, else its group's."""
        return dict(self.parts).get(part) or self.of(group_of_part(part))

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "runs": self.runs}


def noop_text(indices: tuple[int, ...]) -> str:
    """No-op layers as MindSpeed-LLM's `--noop-layers` writes them ("61,62,63"), the text
    engine.config.stated_layout.read_noop_layers reads."""
    return ",".join(map(str, indices))


@dataclass(frozen=True, slots=True)
class PipelineLayout:
    """Where the decoder layers sit over the pipeline stages and virtual chunks, as a file states it
    (docs/cost-model.md §1; engine.cost.layout prices it). The default (nothing stated) is the planner's even
    split. The keys are the frameworks' own:

    embedding_in_split / loss_in_split: Megatron-Core's `account_for_embedding_in_pipeline_split` /
      `account_for_loss_in_pipeline_split`: the embedding (loss) counts as one layer of the split, so the first
      chunk of the first stage builds one decoder layer fewer (the last chunk of the last stage likewise);
      (L + e + l) must divide by pp·vpp. HyperParallel's `emb_out_in_offset` sets both.
    first_stage_layers / last_stage_layers: Megatron-Core's `num_layers_in_first_pipeline_stage` /
      `num_layers_in_last_pipeline_stage` (Megatron-LM `--decoder-first-pipeline-num-layers` / `-last-`);
      0 = not stated. The other stages share the rest evenly.
    offset: HyperParallel's per-stage `offset` ([HP] §6.7): one entry per stage, either (o,) (added to the
      stage's last chunk) or one per virtual chunk; each chunk holds ⌊L_eff/(pp·vpp)⌋ + its offset, with
      L_eff = L (+ the MTP layers when `mtp_in_offset`, + 2 when the embedding and output are in it).
    layer_layout: Megatron-Core's `pipeline_model_parallel_layout` (engine.config.layer_layout): the symbols
      every chunk builds, one string per chunk in model order (chunk j = vpp rank · pp + pp rank), E embedding,
      t decoder layer, m MTP layer, L output layer and loss; its length is pp·vpp. Megatron-Core takes it alone.
    noop_layers: MindSpeed-LLM's `--noop-layers` (MS-NOOP): identity layers that pad the layer count so it splits
      evenly (DeepSeek-V3's 61 layers + 3 over DualPipeV's 2·pp stages), given as their indices in the padded count
      (`--num-layers` = L + their number). They take places in the split and cost nothing.
    """

    embedding_in_split: bool = False
    loss_in_split: bool = False
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    offset: tuple[tuple[int, ...], ...] = ()
    mtp_in_offset: bool = False
    # torchtitan's split (`generate_llm_fqn_per_model_part`): the embedding and output count as layers and the
    # (L + e + l) mod (pp·vpp) extra go to the first chunks, so nothing needs to divide.
    remainder_first: bool = False
    layer_layout: tuple[str, ...] = ()
    noop_layers: tuple[int, ...] = ()

    @property
    def stated(self) -> bool:
        return self != PipelineLayout()

    def to_json(self) -> dict[str, Any]:
        return {"embedding_in_split": self.embedding_in_split, "loss_in_split": self.loss_in_split,
                "first_stage_layers": self.first_stage_layers, "last_stage_layers": self.last_stage_layers,
                "offset": [list(o) for o in self.offset], "mtp_in_offset": self.mtp_in_offset,
                "remainder_first": self.remainder_first, "layer_layout": list(self.layer_layout),
                "noop_layers": list(self.noop_layers)}


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How the run trains, beyond the parallel degrees: precision, optimizer, FSDP and recompute policy."""

    param_bytes: int = 2  # bf16/fp16 weights
    grad_bytes: int = 4  # fp32 main gradients (Megatron default); 2 when accumulating in bf16
    master_weights: bool = True  # fp32 master copy kept by the optimizer
    optimizer_states: int = 2  # Adam: m and v (fp32 each); SGD with momentum: 1
    optimizer_state_bytes: int = 4
    reshard_after_forward: bool = True  # FSDP ZeRO-3 when True, ZeRO-2-like when False
    selective_policy: SelectivePolicy = "hyperparallel"
    # The submodules selective recompute recomputes (Megatron/MindSpeed --recompute-modules, RECOMPUTE_MODULES);
    # () = the framework's own selective policy. Stated modules make the policy "modules" where offered.
    recompute_modules: tuple[str, ...] = ()
    cp_algo: CpAlgo = "ring"
    # How MoE tokens are dispatched (estimator.moe_dispatcher): "alltoall" sends every routed copy (Megatron's
    # alltoall dispatcher); "deepep" sends a token once per destination node and fans it out over NVLink
    # there (DeepEP, Megatron --moe-enable-deepep; [CAL] §10); "allgather" gathers every token of the expert
    # tensor-and-expert-parallel group to every member and reduce-scatters the outputs back (Megatron's
    # MoEAllGatherTokenDispatcher, `--moe-token-dispatcher-type allgather`).
    moe_dispatcher: str = "alltoall"
    fp8: bool = False
    # The FP8 recipe (estimator.fp8_recipe; engine.cost.fp8): "delayed", "tensorwise" (current scaling),
    # "blockwise", "mxfp8"; "" = the stack's default (engine.cost.fp8.recipe_of).
    fp8_recipe: str = ""
    # Megatron's --fp8-param-gather (estimator.fp8_param_gather; Megatron-Bridge's FP8 current-scaling precision
    # config sets it): the model holds its linear weights as FP8 tensors (TransformerEngine fp8_model_init), with
    # the transpose the backward GEMM reads, and no 16-bit copy; the fp32 master copy stays in the optimizer.
    fp8_param_gather: bool = False
    # Token chunks the loss runs in (estimator.loss_chunks): the output layer and loss run one chunk at a time,
    # each chunk's backward before the next, so one chunk's logits are alive (torchtitan's ChunkedLossWrapper);
    # 0 = the framework's own (Framework.loss_chunks).
    loss_chunks: int = 0
    # The stack that runs the plan (docs/formats.md §5; engine.catalog.frameworks) and whether torch.compile / graph
    # mode fuses its element-wise kernels (estimator.compile).
    framework: str = "hyperparallel"
    # The framework's release (estimator.framework_version; "" = its current one): facts that changed between
    # releases are priced as that release ran them (engine.catalog.frameworks.Releases).
    framework_version: str = ""
    compile: bool = False
    # Megatron-style overlaps (docs/cost-model.md "Overlap"): TP collectives pipelined with their GEMMs
    # (--tp-comm-overlap, TransformerEngine userbuffers); data-parallel gradient reduction bucketed and
    # launched during the last micro-batch's backward (--overlap-grad-reduce); the distributed optimizer's
    # weight all-gather bucketed under the first forward (--overlap-param-gather). Unstated: no TP comm-GEMM
    # overlap, the gradient reduction overlapped (what the cost model priced before these options existed), and
    # the weight all-gather as the stack's recipes usually run it (None: Framework.param_gather_overlap).
    tp_comm_overlap: bool = False
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool | None = None
    # Expert-parallel overlaps the framework offers (engine.catalog.frameworks, docs/cost-model.md §3.2 "EP"):
    # the shared expert computed while the dispatch / combine all-to-alls run (Megatron and MindSpeed
    # --moe-shared-expert-overlap), and the framework's all-to-all overlap (Megatron-Core
    # --overlap-moe-expert-parallel-comm: another micro-batch's compute; MindSpeed --moe-alltoall-overlap-comm:
    # the same micro-batch's expert compute, chunked). Off unless stated: none of the [CAL] runs sets them.
    moe_shared_expert_overlap: bool = False
    moe_a2a_overlap: bool = False
    # Weight-gradient GEMMs accumulate straight into the fp32 main gradients in their epilogue (Megatron
    # --gradient-accumulation-fusion, on by default; MindSpeed maps it to npu_matmul_add_fp32). Off
    # (--no-gradient-accumulation-fusion, as every MindSpeed-LLM script in [CAL] §10 passes): each micro-batch's
    # 16-bit weight gradient is written, then added to main_grad by a separate kernel (engine.cost.timing.
    # grad_accumulation_time). `gemm_gradient_accumulation_fusion`: the same for the grouped expert GEMMs
    # (MindSpeed --gemm-gradient-accumulation-fusion, npu_groupmatmul_add_fp32). None: the framework's
    # usual setting (engine.catalog.frameworks).
    gradient_accumulation_fusion: bool | None = None
    gemm_gradient_accumulation_fusion: bool | None = None
    # MindSpeed's --swap-attention (docs/features/swap_attention.md): every layer's attention-block activations
    # are copied to the host after its forward and prefetched before its backward (engine.cost.swap); priced on
    # the stacks that run it (Framework.swaps_attention), ignored elsewhere.
    swap_attention: bool = False
    # Megatron-Core's --cpu-offloading-num-layers (a search config's `cpu_offloading_num_layers`): the first N
    # decoder layers' saved activations go to the host after their forward and come back for their backward
    # (engine.cost.offload). Every plan its stack can run it with (StackSpace.layer_offload_refusals) is priced
    # with it, and its Estimate's strategy names those layers (RecomputePlan.offload); 0 = none.
    cpu_offload_layers: int = 0
    # Megatron-Core's --moe-router-force-load-balancing (a benchmark switch: the router's scores replaced by random
    # ones, so every expert receives the mean load; Megatron-Bridge's MoE benchmarks run it, "we force-balance the
    # token distribution among experts"): the busiest expert rank moves and computes the mean copies, not
    # MOE_IMBALANCE × them (engine.cost.rows.busiest_rank_copies).
    moe_router_force_load_balancing: bool = False
    # The trainer's accelerator.loss_parallel: the loss over the vocabulary-parallel logits (÷ tp) or, false,
    # over the whole vocabulary on every TP rank; None: the framework's own (engine.catalog.frameworks).
    loss_parallel: bool | None = None
    # Calibration applied over the priced parts (engine.cost.ratio_scaling.apply_ratios); None = uncalibrated.
    ratios: Ratios | None = None
    # How the layers are split over the pipeline stages and chunks (the frameworks' layout keys); the
    # default is the even split (engine.cost.layout).
    pipeline_layout: PipelineLayout = field(default_factory=PipelineLayout)


@dataclass(frozen=True, slots=True)
class RecomputePlan:
    """A recompute mode for every layer, with optional per-layer overrides as inclusive ranges.

    `layers` maps "first-last" (or "n") to a mode, as docs/formats.md writes it: {"0-9": "full"}.
    """

    mode: RecomputeMode = "off"
    layers: tuple[tuple[int, int, RecomputeMode], ...] = ()
    # Inclusive ranges of layers that run with recompute off and move what they keep to host memory over the
    # host link while later layers compute ([HP] §8.6; docs/cost-model.md "Offload"). They run "off"
    # (mode_of says so: that is what the trainer runs, it runs no offload yet); only memory differs.
    offload: tuple[tuple[int, int], ...] = ()

    def mode_of(self, layer: int) -> RecomputeMode:
        for first, last, mode in self.layers:
            if first <= layer <= last:
                return mode
        return self.mode

    def offloaded(self, layer: int) -> bool:
        return any(first <= layer <= last for first, last in self.offload)

    def for_trainer(self) -> RecomputePlan:
        """The plan HyperParallel's trainer is given ([HP] §8.6, §8.7): it runs no offload yet, so offloaded layers
        stay `off` (as mode_of already says), with adjacent ranges of one mode merged."""
        if not self.offload:
            return self
        merged: list[tuple[int, int, RecomputeMode]] = []
        for a, b, m in sorted(self.layers):
            if merged and merged[-1][2] == m and merged[-1][1] + 1 == a:
                merged[-1] = (merged[-1][0], b, m)
            else:
                merged.append((a, b, m))
        return RecomputePlan(self.mode, tuple(merged))

    def to_json(self) -> str | dict[str, Any]:
        """docs/formats.md §3: a mode, or {mode, layers}; offloaded layers are marked "offload" there."""
        if not self.layers and not self.offload:
            return self.mode
        marks: dict[tuple[int, int], str] = {(a, b): m for a, b, m in self.layers
                                             if not any(x <= a and b <= y for x, y in self.offload)}
        marks.update({(a, b): "offload" for a, b in self.offload})
        return {
            "mode": self.mode,
            "layers": {(f"{a}" if a == b else f"{a}-{b}"): m for (a, b), m in sorted(marks.items())},
        }


@dataclass(frozen=True, slots=True)
class Strategy:
    """One parallel strategy (docs/formats.md §3 STRATEGY). dp = world / (tp*pp*cp); dp_shard divides dp*cp;
    dp_replicate = dp*cp / dp_shard. Batch rule: global_batch_size = dp * micro_batch_size * micro_batch_num."""

    dp: int = 1
    dp_shard: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 1
    micro_batch_size: int = 1
    micro_batch_num: int = 1
    sequence_parallel: bool = False
    recompute: RecomputePlan = field(default_factory=RecomputePlan)
    pipeline_schedule: PipelineSchedule = "1F1B"
    optimizer_shard: int = 1

    @property
    def dp_replicate(self) -> int:
        return max(self.dp * self.cp // max(self.dp_shard, 1), 1)

    @property
    def global_batch_size(self) -> int:
        return self.dp * self.micro_batch_size * self.micro_batch_num

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    def to_json(self) -> dict[str, Any]:
        return {
            "dp": self.dp,
            "dp_shard": self.dp_shard,
            "dp_replicate": self.dp_replicate,
            "tp": self.tp,
            "pp": self.pp,
            "cp": self.cp,
            "ep": self.ep,
            "etp": self.etp,
            "vpp": self.vpp,
            "micro_batch_size": self.micro_batch_size,
            "micro_batch_num": self.micro_batch_num,
            "global_batch_size": self.global_batch_size,
            "sequence_parallel": self.sequence_parallel,
            "recompute": self.recompute.to_json(),
            "pipeline_schedule": self.pipeline_schedule,
            "optimizer_shard": self.optimizer_shard,
        }

    def for_trainer(self) -> Strategy:
        """This strategy as the trainer is given it: offloaded layers off (RecomputePlan.for_trainer)."""
        if not self.recompute.offload:
            return self
        return replace(self, recompute=self.recompute.for_trainer())

    def short(self) -> str:
        """`tp 8 · pp 4 · dp 32 · mbs 1 · recompute selective`: what a code lens or a table row shows."""
        parts = [f"dp {self.dp}", f"tp {self.tp}", f"pp {self.pp}"]
        if self.vpp > 1:
            parts.append(f"vpp {self.vpp}")
        if self.cp > 1:
            parts.append(f"cp {self.cp}")
        if self.ep > 1:
            parts.append(f"ep {self.ep}")
        if self.dp_shard > 1:
            parts.append(f"fsdp {self.dp_shard}")
        parts.append(f"mbs {self.micro_batch_size}")
        if self.sequence_parallel:
            parts.append("sp")
        rc = self.recompute.to_json()
        parts.append(f"rc {rc if isinstance(rc, str) else rc['mode'] + '+'}")
        if self.recompute.offload:
            parts.append("offload")
        return " · ".join(parts)
