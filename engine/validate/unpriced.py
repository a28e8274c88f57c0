"""Keys HyperParallel reads ([HP] §2, its loaders and its cost model's run keys) that this planner
accepts but does not price: each gets an Information diagnostic (HP112) at the key, "read by HyperParallel, not
priced by hp-plan: <why>", so a user never believes a number rests on a setting it ignores.

Every other key of [HP] §2 is read and priced (engine.config) or is validation-only upstream too. A key is flagged
only when its value changes the run (`activation_swap: none`, `recompute_slice_activation: false` and an
`offset` of zeros say nothing). Entries name the file kinds they apply to (engine.config.kind).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.catalog.models import ALIASES, MODEL_FIELDS
from engine.config.model_facts import HYBRID_KINDS
from engine.config.reader import did_you_mean
from engine.config.schema import SEARCH
from engine.config.train import NOT_PRICED, detect_schema, optimizer_states_of
from engine.diagnostics import Diagnostic
from engine.document import Map, Node, Scalar, Seq
from engine.validate.context import Ctx

When = Callable[[Node, Map], bool]


def _always(_v: Node, _parent: Map) -> bool:
    return True


def _meaningful(v: Node, _parent: Map) -> bool:
    """False for the values that mean "nothing": false, none/off, 0, empty, a list of zeros."""
    if isinstance(v, Scalar):
        val = v.value
        if val is None or val is False or val == 0:
            return False
        return not (isinstance(val, str) and val.strip().lower() in ("none", "off", "false", "", "0"))
    if isinstance(v, Seq):
        return any(_meaningful(i, _parent) for i in v.items)
    if isinstance(v, Map):
        return bool(v.items())
    return True


def _hybrid_unpriced(v: Node, parent: Map) -> bool:
    """A hybrid pattern the cost model cannot price as its layer kinds (engine.config.model_facts.hybrid_layers):
    a character beyond M, *, - and E, a length other than the num_hidden_layers beside it, or MoE layers beside
    MLP layers or without an expert count beside them."""
    if not isinstance(v, Scalar) or not isinstance(v.value, str) or not v.value.strip():
        return _meaningful(v, parent)
    pattern = v.value.strip()
    layers = parent.get("num_hidden_layers")
    n = layers.value if isinstance(layers, Scalar) else None
    experts = any(k in parent for k in ("num_experts", *ALIASES["num_experts"]))
    return bool(set(pattern) - HYBRID_KINDS) or (isinstance(n, int) and len(pattern) != n) \
        or ("E" in pattern and ("-" in pattern or not experts))


def _no_width(_v: Node, parent: Map) -> bool:
    return "intermediate_size" not in parent


def _moe_off(v: Node, parent: Map) -> bool:
    experts = parent.get("num_experts")
    n = experts.value if isinstance(experts, Scalar) else None
    return isinstance(v, Scalar) and v.value is False and isinstance(n, int) and n > 1


def _reshard_kept(v: Node, _parent: Map) -> bool:
    return isinstance(v, Scalar) and v.value is False


def _not_adam(v: Node, _parent: Map) -> bool:
    """An optimizer whose states the planner does not know (Adam/AdamW and Muon are priced: read_optimizer)."""
    return isinstance(v, Scalar) and isinstance(v.value, str) and optimizer_states_of(v.value) is None


def _mixed_precision(v: Node, _parent: Map) -> bool:
    """A policy that states something: `{enabled: false}` is the run hp-plan prices (weights at their dtype)."""
    if not isinstance(v, Map) or not v.items():
        return False
    enabled = v.get("enabled")
    return not (isinstance(enabled, Scalar) and enabled.value is False)


def _above_one(v: Node, _parent: Map) -> bool:
    return isinstance(v, Scalar) and isinstance(v.value, int) and not isinstance(v.value, bool) and v.value > 1


def _not_zero3(v: Node, _parent: Map) -> bool:
    """A ZeRO stage other than the full sharding hp-plan prices for dp_shard."""
    return isinstance(v, Scalar) and isinstance(v.value, int) and not isinstance(v.value, bool) and v.value != 3


def _not_alltoall(v: Node, _parent: Map) -> bool:
    return isinstance(v, Scalar) and isinstance(v.value, str) and v.value.strip().lower() not in ("alltoall", "")


@dataclass(frozen=True, slots=True)
class Unpriced:
    kinds: frozenset[str]
    path: str  # dotted from the root; a last part ending in `*` matches every key with that prefix
    why: str
    when: When = _meaningful


S, A, L = "search", "automodels", "legacy"
_ALL = frozenset({S, A, L})
_TRAIN = frozenset({A, L})
_SEARCH, _AUTO, _LEGACY = frozenset({S}), frozenset({A}), frozenset({L})
_STACK = "a per-layer stack (layer groups, op vectors) is priced as uniform decoder layers"
_LINEAR = ("linear-attention (Gated DeltaNet) layers are priced without softmax attention's score matrix, but their "
           "recurrence, state and own projections are not priced: they get the full-attention layers' projections")
# Qwen3-Next's Gated DeltaNet widths (its config.json). Named one by one: a `linear_*` prefix would also catch
# `linear_bias`, a key the reader prices.
_LINEAR_ATTENTION_KEYS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                          "linear_value_head_dim", "linear_conv_kernel_dim")
_HYBRID = ("a hybrid layer pattern with layer kinds beyond Mamba (M), attention (*), MLP (-) and MoE (E) layers "
           "(pipeline | or MTP / separators), MLP and MoE layers in one pattern, MoE layers without num_experts, or "
           "not one character per layer, is priced as num_hidden_layers uniform attention + MLP decoder layers, so "
           "the figures are not this model's")
_WIDTH = "the feed-forward width is intermediate_size; give it (Llama's rounding rule is not derived)"
_STAGE_RECOMPUTE = ("per-stage recompute layer counts (MindFormers' full_rec / sel_rec): hp-plan prices the stated "
                    "mode on every layer; activation_checkpoint.layers states a per-layer plan")
_SLICE = "slicing recomputed activations over tp is not priced"
_MASTER = "with fp32 gradients and an fp32 master copy"
_ADAM = "this optimizer's state is priced as AdamW's (two fp32 states and an fp32 master copy)"
_CENSUS = "a measured census of the model is not read: the formulas price it"

# model keys, read under model. in every file kind and under model.config_overrides. in a train.yaml
_MODEL_KEYS: tuple[tuple[str, str, When], ...] = (
    ("softmax_compute_type", "the softmax is priced at the compute width (flash attention keeps no score matrix)",
     _always),
    ("recompute_slice_activation", _SLICE, _meaningful),
    ("multiple_of", _WIDTH, _no_width),
    ("ffn_dim_multiplier", _WIDTH, _no_width),
    ("moe_enabled", "hp-plan prices the experts num_experts states whatever moe_enabled says", _moe_off),
    ("attn_output_gate", "the attention output gate's projection is not priced", _meaningful),
    ("hybrid_override_pattern", _HYBRID, _hybrid_unpriced),
    ("hybrid_layer_pattern", _HYBRID, _hybrid_unpriced),
    ("layers", _STACK, _meaningful),
    ("ops", _STACK, _meaningful),
    ("arch", _STACK, _meaningful),
    *((key, _LINEAR, _always) for key in _LINEAR_ATTENTION_KEYS),
    ("compress_ratios", "DeepSeek-V4's compressed attention is not priced: its layers are priced with the sliding "
     "window and the indexer's top-k keys", _meaningful),
    ("num_hash_layers", "hash-routed expert layers are priced as learned-router MoE layers", _meaningful),
    ("use_gmm", "grouped GEMM for the experts: each expert's GEMMs are priced at the same rate", _meaningful),
    ("full_rec", _STAGE_RECOMPUTE, _meaningful),
    ("sel_rec", _STAGE_RECOMPUTE, _meaningful),
)
# (file kinds, dotted path, why, when) of every other key
_OTHER_KEYS: tuple[tuple[frozenset[str], str, str, When], ...] = (
    (_SEARCH, "pp_config.stage_partition",
     "a manual stage partition: the layers are spread evenly (HyperParallel's search ignores it too)", _meaningful),
    (_SEARCH, "pp_config.layer_recompute_layers",
     "recompute by layer id: the stated mode is priced on every layer (HyperParallel's search ignores it too)",
     _meaningful),
    (_SEARCH, "pp_config.layer_offset_range", "a range of per-stage layer offsets: the layers are spread evenly "
     "(HyperParallel's search ignores it too; its validation checks it)", _meaningful),
    (_SEARCH, "pp_config.micro_batch_num", "the pipeline balancer's micro-batch count: the search's is "
     "parallelism.micro_batch_num (HyperParallel's search ignores this one too)", _meaningful),
    (_AUTO, "model.freeze_patterns", "frozen modules (no gradients, optimizer states or backward for them) are not "
     "priced: every weight is priced trainable", _meaningful),
    (_AUTO, "fsdp_config.enable_offload",
     "offloading FSDP's sharded parameters to the host is not priced: they are priced on the device", _meaningful),
    (_AUTO, "training.max_grad_norm",
     "gradient clipping (one norm reduction and a rescale per step) is not priced", _meaningful),
    (_AUTO, "fsdp_config.edp_shard_size", "the expert FSDP shard: the routed experts' states are priced sharded "
     "over the whole expert data-parallel group dp·cp·tp/(ep·etp)", _meaningful),
    (_AUTO, "fsdp_config.reshard_after_backward",
     "parameters kept gathered after backward are not priced: they are priced resharded", _reshard_kept),
    (_AUTO, "fsdp_config.mixed_precision",
     f"FSDP's mixed-precision policy: weights are priced at model.torch_dtype {_MASTER}", _mixed_precision),
    (_AUTO, "activation_checkpoint.recompute_slice_activation", _SLICE, _meaningful),
    (_AUTO, "activation_checkpoint.swap_inputs", "swapping checkpoint inputs to the host is not priced",
     _meaningful),
    (_TRAIN, "context.expert_shard", "an expert-shard group (HyperParallel's EP constraint C4) is not priced: the "
     "experts are priced over ep and the expert data-parallel group", _meaningful),
    (_TRAIN, "context.census", _CENSUS, _meaningful),
    (_TRAIN, "context.census_spec", _CENSUS, _meaningful),
    (_AUTO, "optimizer._target_", _ADAM, _not_adam),
    (_LEGACY, "train.optimizer.type", _ADAM, _not_adam),
    (_LEGACY, "train.gradient_checkpointing.recompute_slice_activation", _SLICE, _meaningful),
    # The legacy trainer's train.accelerator keys hp-plan reads none of ([HP] Corrections, "Legacy trainer").
    (_LEGACY, "train.accelerator.pp_layer_split",
     "a stated per-stage layer split is not priced: the layers are spread evenly over the stages", _meaningful),
    (_LEGACY, "train.accelerator.ulysses_degree", "Ulysses all-to-all over ulysses_degree of the cp ranks is not priced: "
     "context parallelism is priced as the ring over all cp ranks", _above_one),
    (_LEGACY, "train.accelerator.zero_stage", "the ZeRO stage is not priced apart: dp_shard is priced as full "
     "sharding of parameters, gradients and optimizer states (ZeRO-3)", _not_zero3),
    (_LEGACY, "train.accelerator.reshard_after_forward",
     "parameters kept gathered after forward are not priced: they are priced resharded", _reshard_kept),
    (_LEGACY, "train.accelerator.cpu_offload",
     "offloading sharded states to the host is not priced: they are priced on the device", _meaningful),
    (_LEGACY, "train.accelerator.async_cp",
     "asynchronous context-parallel communication is not priced apart: the ring's own overlap is", _meaningful),
    (_LEGACY, "train.accelerator.comm_fusion",
     "fused communication buckets are not priced apart: FSDP traffic is priced layer by layer", _meaningful),
    (_LEGACY, "train.accelerator.moe_token_dispatcher_type",
     "the MoE token dispatcher is priced as all-to-all", _not_alltoall),
    (_LEGACY, "train.max_grad_norm",
     "gradient clipping (one norm reduction and a rescale per step) is not priced", _meaningful),
    (_LEGACY, "train.optimizer.max_grad_norm",
     "gradient clipping (one norm reduction and a rescale per step) is not priced", _meaningful),
)

TABLE: tuple[Unpriced, ...] = (
    *(Unpriced(_ALL, f"model.{k}", why, when) for k, why, when in _MODEL_KEYS),
    *(Unpriced(_TRAIN, f"model.config_overrides.{k}", why, when) for k, why, when in _MODEL_KEYS),
    *(Unpriced(kinds, path, why, when) for kinds, path, why, when in _OTHER_KEYS),
)


# Keys of a train.yaml's `model` that load it rather than describe it (the factory's and from_pretrained's own).
_LOADER_TEXT = (
    "_target_ name pretrained_model_name_or_path config_path weights_path tokenizer_path torch_dtype compute_dtype "
    "param_init_type attn_implementation cache_dir local_files_only revision subfolder token trust_remote_code "
    "force_hf config_overrides vision visual_seq_len text_config vision_config offset emb_out_in_offset "
    "mtp_in_offset model_config")
_LOADER_KEYS = frozenset(_LOADER_TEXT.split())
_PRICED = frozenset(MODEL_FIELDS) | frozenset(a for al in ALIASES.values() for a in al)
_READ = _PRICED | _LOADER_KEYS
_SAID = tuple(k for k, _why, _when in _MODEL_KEYS)  # each gets its own HP112


def check(ctx: Ctx) -> None:
    for src in ctx.resolved.sources:
        root = src.root
        if root is None:
            continue
        kind = "search" if (src.primary and ctx.config.kind == "search") else (detect_schema(root) or A)
        for entry in TABLE:
            if kind in entry.kinds:
                _flag(ctx, src.path if not src.primary else None, root, entry)
        _passed_through(ctx, src.path if not src.primary else None, root, kind == "search")


def _said(key: str) -> bool:
    return any(key == k or (k.endswith("*") and key.startswith(k[:-1])) for k in _SAID)


# How many unpriced fields HP215 names, and looks up a near miss for, in its message (every one is in its data).
_NAMED = 20
# Keys of a search config's model section that are not model fields but are read there (engine.config.schema.SEARCH).
_SEARCH_MODEL_READ = frozenset(SEARCH.children["model"].read | SEARCH.children["model"].known
                               | frozenset(SEARCH.children["model"].children))


def _passed_through(ctx: Ctx, file: str | None, root: Map, search: bool) -> None:
    """HP215, once per section: the model fields this planner does not price, never an error, since new
    architectures add fields every month ([HP] Corrections, "Model fields pass through"). A train.yaml's go to the
    model as written; a search config's are dropped by HyperParallel's search ([HP] §2.7), so a misspelt priced
    field there is silently lost: the message names the priced field each unknown one is spelt like."""
    model = root.get("model")
    if not isinstance(model, Map):
        return
    read = _READ | _SEARCH_MODEL_READ if search else _READ
    for path, node, kn in (("model", model, root.key_node("model")),
                           ("model.config_overrides", model.get("config_overrides"),
                            model.key_node("config_overrides"))):
        if not isinstance(node, Map) or kn is None:
            continue
        keys = [k for k, _k, v in node.items() if k not in read and not _said(k)
                and not (isinstance(v, Scalar) and v.value is None)]
        if not keys:
            continue
        near = {k: m[0] for k in keys[:_NAMED] if (m := did_you_mean(k, _PRICED))} if search else {}
        named = ", ".join(f"{k} (did you mean {near[k]}?)" if k in near else k for k in keys[:_NAMED])
        more = f" and {len(keys) - _NAMED} more" if len(keys) > _NAMED else ""
        fate = ("HyperParallel's search drops model keys its spec does not know" if search
                else "passed to the model as written")
        data: dict[str, object] = {"keys": keys, **({"near": near} if near else {})}
        ctx.diags.append(Diagnostic("HP215", f"{path}: {fate}, not priced by hp-plan: {named}{more}", kn.range,
                                    path, None, file, data))


def _flag(ctx: Ctx, file: str | None, root: Map, entry: Unpriced) -> None:
    *parents, last = entry.path.split(".")
    node: Node | None = root
    for part in parents:
        node = node.get(part) if isinstance(node, Map) else None
    if not isinstance(node, Map):
        return
    prefix = last[:-1] if last.endswith("*") else None
    for key, kn, vn in node.items():
        if (key != last if prefix is None else not key.startswith(prefix)) or vn is None:
            continue
        if not entry.when(vn, node):
            continue
        dotted = ".".join([*parents, key])
        ctx.diags.append(Diagnostic("HP112", f"{NOT_PRICED}: {dotted}: {entry.why}", kn.range, dotted, None, file))
