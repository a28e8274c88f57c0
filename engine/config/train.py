"""Reading a trainer train.yaml (AutoModels and legacy schemas, docs/formats.md §1, [HP] §2.5-§2.6)
into `TrainFacts`: every value the planner uses, typed, with its Location.

Degrees are recorded only when the file writes them: a search config inherits exactly what its train.yaml
states, and what the file leaves unsaid stays searched ([HP] §2.2 "absent").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.catalog.models import resolve as resolve_model
from engine.config.kind import kind_of
from engine.config.model_facts import (
    FINITE_NUMBER,
    INTEGER,
    REQUIRED,
    TRUE_OR_FALSE,
    fact_kind_problem,
    read_model_fields,
)
from engine.config.reader import Source, Val, describe, did_you_mean, parse_memory_gb
from engine.config.schema import OVERLAP_KEYS
from engine.config.stated_layout import LAYER_LAYOUT, read_layout, read_offset, vpp_of_layer_layout
from engine.config.vision import read_vision, vision_anchor
from engine.document import Map, Scalar, Seq
from engine.specs import RECOMPUTE_MODULES

# How every "read by HyperParallel, not priced by hp-plan" information (HP112) begins.
NOT_PRICED = "read by HyperParallel, not priced by hp-plan"
RECOMPUTE_MODES = {"off": "off", "none": "off", "false": "off", "selective": "selective", "full": "full",
                   "true": "full"}
SELECTIVE_POLICIES = {"hyperparallel": "hyperparallel", "attention": "attention", "megatron": "attention",
                      "op": "op", "torchtitan": "op", "modules": "modules"}
# Pipeline schedules by the names the trainer (`pp_schedule`: gpipe | 1f1b) and the search (`pipeline_scheduler`)
# write them; HyperParallel runs ScheduleGPipe, Schedule1F1B and ScheduleInterleaved1F1B ([HP] Corrections 1);
# `dualpipev` is DeepSeek's V-shape DualPipe as MindSpeed-LLM runs it ([MS-DUALPIPEV]; other stacks: HP530).
PIPELINE_SCHEDULERS = {"1f1b": "1F1B", "interleaved_1f1b": "interleaved", "interleaved": "interleaved",
                       "vpp": "interleaved", "gpipe": "gpipe", "dualpipev": "dualpipev"}
# (ext) `allgather`: Megatron-Core / TransformerEngine's cp_comm_type "all_gather" ([TE-CP]).
# The trainer's root `activation_swap` ([HP] Corrections 4): `attention` swaps the attention activations to the
# host (RunOptions.swap_attention, engine.cost.swap).
ACTIVATION_SWAPS = {"none": "none", "attention": "attention"}
CP_ALGOS = {"ring": "ring", "colossalai_cp": "ring", "ulysses": "ulysses", "ulysses_cp": "ulysses",
            "hybrid": "hybrid", "hybrid_cp": "hybrid", "allgather": "allgather", "all_gather": "allgather"}
DTYPES = {"bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2, "float32": 4, "fp32": 4, "float": 4}
# `torch_dtype: auto` is Transformers' default: the checkpoint's own dtype, bf16 for every model upstream ships
# ([HP] Corrections, "Model fields pass through").
TORCH_DTYPES = {**{k: k for k in DTYPES}, **{f"torch.{k}": k for k in DTYPES}, "auto": "auto"}
AUTO_DTYPE_BYTES = 2


def detect_schema(root: Map) -> str | None:
    """'automodels' or 'legacy' for a train.yaml, None for anything else (engine.config.kind decides)."""
    kind = kind_of(root)
    return kind if kind in ("automodels", "legacy") else None


@dataclass
class TrainFacts:
    """What a train.yaml states. Degrees use the search-config names (tp, pp, cp, ep, etp, fsdp, vpp,
    micro_batch_size, sequence_parallel, and dp for a legacy replicate x shard)."""

    src: Source
    schema: str
    name: Val | None = None
    pretrained: Val | None = None
    catalog_fields: dict[str, Val] = field(default_factory=dict)
    resolution_error: str | None = None
    resolution_source: str = ""
    resolution_file: str = ""  # the local config.json read for the model (engine.catalog.models.Resolution.file)
    overrides: dict[str, Val] = field(default_factory=dict)
    model_anchor: Val | None = None  # the `model` key, for "missing field" diagnostics
    factory: Val | None = None  # model._target_ when it is no Hugging Face loader this planner reads (read_factory)
    overrides_anchor: Val | None = None  # the `config_overrides` key
    seq_len: Val | None = None
    degrees: dict[str, Val] = field(default_factory=dict)
    dp_replicate: Val | None = None  # legacy only
    global_batch_size: Val | None = None
    recompute: Val | None = None  # off | selective | full
    recompute_layers: tuple[tuple[int, int, str], ...] = ()
    selective_policy: Val | None = None
    recompute_modules: Val | None = None  # activation_checkpoint.recompute_modules (ext): Megatron's modules
    pipeline_schedule: Val | None = None
    cp_algo: Val | None = None
    reshard_after_forward: Val | None = None
    optimizer_shard: Val | None = None
    overlaps: dict[str, Val] = field(default_factory=dict)  # RunOptions overlap flags (accelerator.*, ext)
    layout: dict[str, Val] = field(default_factory=dict)  # pipeline layout keys (engine.config.stated_layout)
    param_bytes: Val | None = None
    # mixed_precision (the trainer's section; legacy train.mixed_precision): `enabled` false trains every state
    # in the weights' dtype (no fp32 master copy); `reduce_dtype` is the gradients' width (engine.config.resolve).
    mp_enabled: Val | None = None
    grad_dtype: Val | None = None
    optimizer_states: Val | None = None  # states per parameter of the named optimizer (read_optimizer)
    fp8: Val | None = None  # accelerator.fp8 (ext): FP8 GEMMs
    loss_parallel: Val | None = None  # accelerator.loss_parallel
    compile: Val | None = None  # compile.enabled: the AutoModels trainer's torch.compile of the model
    param_init: Val | None = None  # model.param_init_type (a dtype name)
    device_num: Val | None = None
    max_device_memory: Val | None = None
    # A multimodal model's vision tower (engine.config.vision): the config.json's vision_config, the file's own.
    catalog_vision: dict[str, Val] = field(default_factory=dict)
    vision: dict[str, Val] = field(default_factory=dict)
    vision_anchor: Val | None = None
    visual_seq_len: Val | None = None  # context.visual_seq_len, else model.config_overrides.visual_seq_len
    locations: dict[str, Val] = field(default_factory=dict)

    def note(self, *vals: Val | None) -> None:
        for v in vals:
            if v is not None:
                self.locations[v.path] = v


def read_train(src: Source, *, base_dir: str | None) -> TrainFacts | None:
    root = src.root
    if root is None:
        return None
    schema = detect_schema(root) or "automodels"
    facts = TrainFacts(src, schema)
    if schema == "legacy":
        _read_legacy(facts, root)
    else:
        _read_automodels(facts, root)
    _read_model(facts, root, base_dir)
    read_optimizer(facts, root)
    if schema == "legacy":  # enabled and param_dtype were read with the strategy (_read_legacy_precision)
        read_reduce_dtype(facts, facts.src.section(facts.src.section(root, "train", "train"), "mixed_precision",
                                                   "train.mixed_precision"), "train.mixed_precision")
    else:
        read_mixed_precision(facts, root)
    _read_recompute_layers(facts, root)
    return facts


def _read_model(facts: TrainFacts, root: Map, base_dir: str | None) -> None:
    src = facts.src
    model = src.section(root, "model", "model")
    if "model" in root:
        kn = root.key_node("model")
        if kn is not None:
            facts.model_anchor = Val(None, "model", src.location(kn, root.get("model")))
    facts.name = src.str_(model, "name", "model.name")
    facts.factory = read_factory(src, model) if facts.schema == "automodels" else None
    # config_path: the from-config factories' name for the same thing ([HP] §2.5, ttachon recipes).
    # The legacy trainer loads its model from `model.weights_path` ([HP] §2.6).
    facts.pretrained = (src.str_(model, "pretrained_model_name_or_path", "model.pretrained_model_name_or_path")
                        or src.str_(model, "config_path", "model.config_path")
                        or (_path_or_none(src, model, "weights_path") if facts.schema == "legacy" else None))
    overrides = src.section(model, "config_overrides", "model.config_overrides")
    if overrides is None and model is not None and isinstance(model.get("model_config"), Map):
        # MindFormers' layout (the fast-tuner's example configs, [HP] §5.15): the model's facts under model_config.
        overrides = src.section(model, "model_config", "model.model_config")
    if model is not None and "config_overrides" in model:
        okn = model.key_node("config_overrides")
        if okn is not None:
            facts.overrides_anchor = Val(None, "model.config_overrides", src.location(okn, model.get("config_overrides")))
    # Model facts beside `_target_` are the factory's (or from_pretrained's) keyword overrides of the named
    # config; config_overrides, when also given, win ([HP] §2.5: explicit overrides always win).
    direct = read_model_fields(src, model, "model") if facts.schema == "automodels" else {}
    mindformers = model is not None and "config_overrides" not in model and overrides is not None
    prefix = "model.model_config" if mindformers else "model.config_overrides"
    # A vision-language model's language facts may sit under config_overrides.text_config (Hugging Face's nesting).
    text_config = src.section(overrides, "text_config", f"{prefix}.text_config")
    facts.overrides = {**direct, **read_model_fields(src, text_config, f"{prefix}.text_config"),
                       **read_model_fields(src, overrides, prefix)}
    if mindformers and facts.seq_len is None:  # MindFormers' model_config.seq_length is the trained length
        facts.seq_len = src.int_(overrides, "seq_length", "model.model_config.seq_length")
    _read_vision(facts, model, overrides)
    if facts.pretrained is not None and facts.pretrained.path == "model.weights_path" and all(
            f in facts.overrides for f in REQUIRED):
        # Upstream's legacy reader builds the model from name + config_overrides alone ([HP] §2.6): a complete
        # one needs nothing from the weights' directory, which exists where the trainer runs.
        facts.pretrained = None
    _resolve_pretrained(facts, base_dir)
    # The compute width: torch_dtype, else compute_dtype (a run key beside it, or a model-spec field in the
    # overrides, [HP] §2.4-§2.5), else the legacy train.mixed_precision.param_dtype (_read_legacy).
    dtype = (src.choice(model, "torch_dtype", "model.torch_dtype", TORCH_DTYPES)
             or src.choice(model, "compute_dtype", "model.compute_dtype", {k: k for k in DTYPES})
             or src.choice(overrides, "compute_dtype", "model.config_overrides.compute_dtype", {k: k for k in DTYPES}))
    if dtype is not None:  # else keeps the legacy train.mixed_precision.param_dtype, read first
        facts.param_bytes = Val(DTYPES.get(dtype.value, AUTO_DTYPE_BYTES), dtype.path, dtype.loc)
    # The stored weights' width: the AutoModels root model_init_dtype (the dtype the trainer builds the model in,
    # above param_init_type in upstream's B_p precedence, [HP] §6.3), else model.param_init_type.
    init = (src.choice(root, "model_init_dtype", "model_init_dtype", {k: k for k in DTYPES})
            if facts.schema == "automodels" else None)
    facts.param_init = init or read_param_init(src, model, "model")
    attn = src.val(model, "attn_implementation", "model.attn_implementation")
    if attn is not None and str(attn.value).strip().lower() == "eager" and "use_flash_attention" not in facts.overrides:
        # Hugging Face's eager attention materialises the score matrix; sdpa / flash kernels do not.
        facts.overrides["use_flash_attention"] = Val(False, attn.path, attn.loc)
    for sec, prefix in ((overrides, "model.config_overrides"), (model, "model")):
        off = read_offset(src, sec, f"{prefix}.offset")  # HyperParallel's recipes state the offsets there
        if off is not None and "offset" not in facts.layout:
            facts.layout["offset"] = off
    facts.note(facts.name, facts.pretrained, facts.param_bytes, facts.param_init, *facts.overrides.values(),
               *facts.layout.values())


def _resolve_pretrained(facts: TrainFacts, base_dir: str | None) -> None:
    """The catalog entry or config.json the train.yaml names, as the model's base facts (a name this planner
    cannot resolve offline is kept as `resolution_error`: engine.config.stated_model says what it costs)."""
    src = facts.src
    if facts.pretrained is None:
        return
    res = resolve_model(str(facts.pretrained.value), base_dir=base_dir)
    facts.resolution_file = res.file
    if res.error is not None:
        facts.resolution_error = res.error
    else:
        facts.resolution_source = res.source
        if res.by_last_component:
            src.diag("HP214", f"'{facts.pretrained.value}' is not a directory here: priced as {res.model_id}, "
                     f"the catalog model its last component '{res.by_last_component}' names",
                     facts.pretrained.loc.value, facts.pretrained.path, data={"model": res.model_id})
        facts.catalog_fields = _typed_fields(facts, res.fields, res.source)
        tower = res.fields.get("vision")
        if isinstance(tower, dict):
            facts.catalog_vision = {k: Val(v, facts.pretrained.path, facts.pretrained.loc) for k, v in tower.items()}


def _typed_fields(facts: TrainFacts, fields: Mapping[str, Any], source: str) -> dict[str, Val]:
    """The resolved model's facts at the name that led to them; a config.json value of the wrong kind (NaN, a
    list, a string where a count belongs) is said at the name and left out, so the rules see only numbers."""
    pretrained = facts.pretrained
    assert pretrained is not None
    out: dict[str, Val] = {}
    for key, value in fields.items():
        if key == "vision":
            continue
        expected = fact_kind_problem(key, value)
        if expected is None:
            out[key] = Val(value, pretrained.path, pretrained.loc)
            continue
        msg = f"{source}: {key} must be {expected}, got {describe(value)}; not read from it"
        if expected == INTEGER:
            facts.src.diag("HP103", msg, pretrained.loc.value, pretrained.path)
        elif expected == FINITE_NUMBER:
            facts.src.diag("HP105", msg, pretrained.loc.value, pretrained.path)
        elif expected == TRUE_OR_FALSE:
            facts.src.diag("HP104", msg, pretrained.loc.value, pretrained.path)
        else:
            facts.src.diag("HP106", msg, pretrained.loc.value, pretrained.path)
    return out


# Loaders whose keyword arguments are the Hugging Face config's ([HP] §2.5): AutoModel classes' from_pretrained /
# from_config. Any other `_target_` is a factory with arguments of its own.
HF_LOADERS = (".from_pretrained", ".from_config")


def read_factory(src: Source, model: Map | None) -> Val | None:
    """`model._target_` when it names a factory this planner cannot read (not an AutoModel loader): the model it
    builds is unknown unless the file names a config or states the facts ([HP] Corrections: keys beside a
    `_target_` are the factory's arguments)."""
    v = src.val(model, "_target_", "model._target_")
    if v is None or not isinstance(v.value, str) or v.value.strip().endswith(HF_LOADERS):
        return None
    return v


def _path_or_none(src: Source, model: Map | None, key: str) -> Val | None:
    """A path the file states (`weights_path: null` states none)."""
    node = model.get(key) if model is not None else None
    if isinstance(node, Scalar) and node.value is None:
        return None
    return src.str_(model, key, f"model.{key}")


def read_mixed_precision(facts: TrainFacts, root: Map) -> None:
    """The AutoModels `mixed_precision: {enabled, param_dtype, reduce_dtype}` (HyperParallel's recipes; PyTorch
    FSDP2's MixedPrecisionPolicy names, [PT-FSDP2]), and the newer trainer's `fsdp_config.mix_precision` (the
    dtypes; the root section keeps only `enabled`, [HP] Corrections). `param_dtype` is the width weights are
    gathered and computed in ([HP] §6.3: it wins over torch_dtype); `reduce_dtype` the gradients' width
    (read_reduce_dtype); `enabled: false` keeps every state in the weights' own dtype
    (engine.config.resolve._state_widths)."""
    src = facts.src
    mp = src.section(root, "mixed_precision", "mixed_precision")
    fsdp = src.section(root, "fsdp_config", "fsdp_config")
    fmp = src.section(fsdp, "mix_precision", "fsdp_config.mix_precision")
    if mp is not None:
        facts.mp_enabled = src.bool_(mp, "enabled", "mixed_precision.enabled")
    for sec, prefix in ((fmp, "fsdp_config.mix_precision"), (mp, "mixed_precision")):
        pd = src.choice(sec, "param_dtype", f"{prefix}.param_dtype", {k: k for k in DTYPES})
        if pd is not None and (facts.mp_enabled is None or facts.mp_enabled.value):
            facts.param_bytes = Val(DTYPES[pd.value], pd.path, pd.loc)
        facts.note(pd)
        read_reduce_dtype(facts, sec, prefix)
    facts.note(facts.mp_enabled)


# States per parameter by optimizer family (the class name the trainer builds, case-insensitive substring):
# Adam/AdamW keep two moments; Muon one momentum buffer ([HP] §6.3: "Muon bf16 1·2 = 2"; its embedding and
# output tables, AdamW-like upstream, are priced with one state too: docs/cost-model.md §2.1).
OPTIMIZER_STATES = (("muon", 1), ("adam", 2))


def optimizer_states_of(name: str) -> int | None:
    """States per parameter the optimizer `name` keeps, or None for one this planner does not know."""
    low = name.lower()
    return next((n for key, n in OPTIMIZER_STATES if key in low), None)


def read_optimizer(facts: TrainFacts, root: Map) -> None:
    """`optimizer._target_` (AutoModels) / `train.optimizer.type` (legacy): how many states the optimizer keeps
    per parameter. An unknown optimizer stays priced as AdamW (HP112 says so: engine.validate.unpriced)."""
    src = facts.src
    if facts.schema == "legacy":
        opt = src.section(src.section(root, "train", "train"), "optimizer", "train.optimizer")
        v = src.val(opt, "type", "train.optimizer.type")
    else:
        opt = src.section(root, "optimizer", "optimizer")
        v = src.val(opt, "_target_", "optimizer._target_")
    n = optimizer_states_of(v.value) if v is not None and isinstance(v.value, str) else None
    if v is not None and n is not None:
        facts.optimizer_states = Val(n, v.path, v.loc)
        facts.note(facts.optimizer_states)


def read_reduce_dtype(facts: TrainFacts, mp: Map | None, prefix: str) -> None:
    """`<prefix>.reduce_dtype` (a mixed-precision section): the gradients' width while mixed precision is on."""
    rd = facts.src.choice(mp, "reduce_dtype", f"{prefix}.reduce_dtype", {k: k for k in DTYPES})
    if rd is not None and (facts.mp_enabled is None or facts.mp_enabled.value):
        facts.grad_dtype = Val(DTYPES[rd.value], rd.path, rd.loc)
    facts.note(rd)


def read_recompute_modules(src: Source, parent: Map | None, key: str, dotted: str, *,
                           allow_auto: bool = False) -> Val | None:
    """Megatron's `--recompute-modules` as a list (`[mla_up_proj, mlp]`, or one name) -> Val of a tuple in the
    order engine.specs.RECOMPUTE_MODULES lists them; an unknown name is HP106 at that item (with a "did you
    mean"), a value that is no name at the value. `auto` (a search config's: the search chooses,
    engine.search.modules) -> ("auto",) where `allow_auto`."""
    hit = src.raw(parent, key, dotted)
    if hit is None:
        return None
    kn, vn = hit
    if allow_auto and isinstance(vn, Scalar) and isinstance(vn.value, str) and vn.value.strip().lower() == "auto":
        return Val(("auto",), dotted, src.location(kn, vn))
    items = vn.items if isinstance(vn, Seq) else [vn]
    got: set[str] = set()
    ok = True
    for item in items:
        v = item.value if isinstance(item, Scalar) else None
        name = v.strip().lower() if isinstance(v, str) else None
        if name in RECOMPUTE_MODULES:
            got.add(name)
            continue
        ok = False
        near = did_you_mean(name, list(RECOMPUTE_MODULES), 0.6) if name else []
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        src.diag("HP106", f"{dotted}: unknown recompute module {describe(v) if v is not None else 'a collection'}"
                 f"{hint}; expected some of {', '.join(RECOMPUTE_MODULES)}", item.range, dotted,
                 data={"valid": list(RECOMPUTE_MODULES), **({"replace_value": near[0]} if near else {})})
    if not ok or not got:
        if ok:
            src.diag("HP106", f"{dotted} lists no recompute module; expected some of {', '.join(RECOMPUTE_MODULES)}",
                     vn.range, dotted, data={"valid": list(RECOMPUTE_MODULES)})
        return None
    return Val(tuple(x for x in RECOMPUTE_MODULES if x in got), dotted, src.location(kn, vn))


def _read_vision(facts: TrainFacts, model: Map | None, overrides: Map | None) -> None:
    """The tower a train.yaml states (`model.vision` beside an AutoModels factory's keywords, then
    `model.config_overrides.vision`, which wins) and its visual sequence (`context.visual_seq_len`, else
    `model.config_overrides.visual_seq_len`): engine.config.vision."""
    src = facts.src
    direct = read_vision(src, model, "model") if facts.schema == "automodels" else {}
    facts.vision = {**direct, **read_vision(src, overrides, "model.config_overrides")}
    facts.vision_anchor = (vision_anchor(src, overrides, "model.config_overrides")
                           or (vision_anchor(src, model, "model") if facts.schema == "automodels" else None))
    root = src.root
    context = src.section(root, "context", "context") if root is not None else None
    facts.visual_seq_len = (src.int_(context, "visual_seq_len", "context.visual_seq_len")
                            or src.int_(overrides, "visual_seq_len", "model.config_overrides.visual_seq_len"))
    facts.note(facts.visual_seq_len, *facts.vision.values())


def read_param_init(src: Source, model: Map | None, prefix: str) -> Val | None:
    """MindFormers' `param_init_type`: the width the weights are stored in. float32 weights are their own
    master copy (the optimizer updates them in place), so the run keeps 4-byte weights and no separate fp32
    copy; bfloat16 weights keep one (engine.specs.RunOptions.master_weights)."""
    return src.choice(model, "param_init_type", f"{prefix}.param_init_type", {k: k for k in DTYPES})


def _read_automodels(facts: TrainFacts, root: Map) -> None:
    src = facts.src
    training = src.section(root, "training", "training")
    acc = src.section(root, "accelerator", "accelerator")
    fsdp = src.section(root, "fsdp_config", "fsdp_config")
    ac = src.section(root, "activation_checkpoint", "activation_checkpoint")
    dataset = src.section(root, "dataset", "dataset")
    transform = src.section(dataset, "data_transform", "dataset.data_transform")
    data_config = src.section(dataset, "data_config", "dataset.data_config")
    context = src.section(root, "context", "context")

    facts.global_batch_size = src.int_(training, "global_batch_size", "training.global_batch_size")
    deg = facts.degrees
    for dim, key in (("tp", "tp_size"), ("pp", "pp_size"), ("cp", "cp_size"), ("ep", "ep_size"),
                     ("etp", "expert_tensor_parallel_degree"), ("vpp", "pp_interleave_num")):
        v = src.int_(acc, key, f"accelerator.{key}", allow=(0,) if dim == "etp" else ())
        if v is not None:
            deg[dim] = v
    # The trainer's pipeline keys (examples/dryrun/pp_fsdp.yaml): pp_vpp chunks per stage, pp_micro_batch_num.
    vpp = src.int_(acc, "pp_vpp", "accelerator.pp_vpp")
    if vpp is not None and "vpp" not in deg:
        deg["vpp"] = vpp
    # The trainer's micro-batch count: training.micro_batch_num (where HyperParallel's priced yaml puts it, [HP]
    # [HP] §4.2, like the legacy train.micro_batch_num), else the pipeline's accelerator.pp_micro_batch_num.
    mbn = (src.int_(training, "micro_batch_num", "training.micro_batch_num")
           or src.int_(acc, "pp_micro_batch_num", "accelerator.pp_micro_batch_num"))
    if mbn is not None:
        deg["micro_batch_num"] = mbn
    mbs = src.int_(training, "micro_batch_size", "training.micro_batch_size")
    if mbs is not None:
        deg["micro_batch_size"] = mbs
    sp = src.bool_(acc, "sequence_parallel", "accelerator.sequence_parallel")
    if sp is not None:
        deg["sequence_parallel"] = Val(int(bool(sp.value)), sp.path, sp.loc)
    # dp_shard_size: -1 = the whole data-parallel domain dp*cp (torchtitan's convention), kept as -1 here.
    shard = src.int_(fsdp, "dp_shard_size", "fsdp_config.dp_shard_size", allow=(-1,))
    if shard is not None:
        deg["fsdp"] = shard
    facts.reshard_after_forward = src.bool_(fsdp, "reshard_after_forward", "fsdp_config.reshard_after_forward")
    facts.pipeline_schedule = (src.choice(acc, "pipeline_scheduler", "accelerator.pipeline_scheduler",
                                          PIPELINE_SCHEDULERS) or _trainer_schedule(src, acc, "accelerator", vpp))
    facts.cp_algo = (src.choice(acc, "context_parallel_algo", "accelerator.context_parallel_algo", CP_ALGOS)
                     or read_plan_cp_algo(src, root))
    _read_parallel_optimizer(facts, acc, "accelerator")
    for key in OVERLAP_KEYS:
        ov = src.bool_(acc, key, f"accelerator.{key}")
        if ov is not None:
            facts.overlaps[key] = ov
    swap = src.choice(root, "activation_swap", "activation_swap", ACTIVATION_SWAPS)
    if swap is not None:
        facts.overlaps["swap_attention"] = Val(swap.value == "attention", swap.path, swap.loc)
    facts.fp8 = src.bool_(acc, "fp8", "accelerator.fp8")
    facts.loss_parallel = src.bool_(acc, "loss_parallel", "accelerator.loss_parallel")
    facts.compile = src.bool_(src.section(root, "compile", "compile"), "enabled", "compile.enabled")
    read_layout(src, acc, "accelerator", facts.layout)
    _vpp_from_layer_layout(facts)
    facts.recompute = src.choice(ac, "mode", "activation_checkpoint.mode", RECOMPUTE_MODES)
    facts.selective_policy = src.choice(ac, "selective_policy", "activation_checkpoint.selective_policy",
                                        SELECTIVE_POLICIES)
    facts.recompute_modules = read_recompute_modules(src, ac, "recompute_modules",
                                                     "activation_checkpoint.recompute_modules")
    facts.seq_len = (src.int_(transform, "max_seq_len", "dataset.data_transform.max_seq_len")
                     or src.int_(data_config, "seq_length", "dataset.data_config.seq_length"))
    data = src.section(root, "data", "data")
    if facts.seq_len is None:
        facts.seq_len = src.int_(data, "max_seq_len", "data.max_seq_len")
    _read_context(facts, context)
    facts.note(facts.global_batch_size, *deg.values(), facts.reshard_after_forward, facts.pipeline_schedule,
               facts.cp_algo, facts.optimizer_shard, facts.recompute, facts.selective_policy, facts.seq_len,
               facts.recompute_modules, facts.device_num, facts.max_device_memory, facts.fp8, facts.loss_parallel,
               facts.compile, *facts.overlaps.values(), *facts.layout.values())


# The trainer's CP wrappers (plan_overrides `inner_wrapper`: a registry name such as sdpa_hf_ulysses, or a Target
# such as ...cp_wrappers.sdpa_hf_ulysses_cp_wrapper) and the batcher's `cp_algorithm`, by the algorithm named in
# them ([HP] Corrections: plan_overrides is where the trainer chooses the CP algorithm).
CP_WRAPPER_WORDS = (("ulysses", "ulysses"), ("hybrid", "hybrid"), ("ring", "ring"), ("colossal", "ring"),
                    ("p2p", "ring"), ("allgather", "allgather"), ("all_gather", "allgather"))


def _cp_algo_named(text: str) -> str | None:
    low = text.lower()
    return next((algo for word, algo in CP_WRAPPER_WORDS if word in low), None)


def read_plan_cp_algo(src: Source, root: Map) -> Val | None:
    """The CP algorithm a trainer file chooses: a `plan_overrides` entry with `when: cp` and its `inner_wrapper`,
    else `dataloader.get_batch.cp_algorithm`. A wrapper whose name says no algorithm is said unpriced at the key
    (HP112) and priced as ring, the search's default ([HP] §3.5)."""
    po = root.get("plan_overrides")
    for item in po.items if isinstance(po, Seq) else []:
        hit = src.raw(item, "inner_wrapper", "plan_overrides.inner_wrapper") if isinstance(item, Map) else None
        if hit is None:
            continue
        kn, vn = hit
        when = item.get("when") if isinstance(item, Map) else None
        target = vn.get("_target_") if isinstance(vn, Map) else vn
        strategy = vn.get("strategy") if isinstance(vn, Map) else None  # a CP wrapper's own algorithm argument
        text = " ".join(str(n.value) for n in (target, strategy) if isinstance(n, Scalar) and isinstance(n.value, str))
        if not ((isinstance(when, Scalar) and when.value == "cp") or "cp_wrapper" in text):
            continue
        algo = _cp_algo_named(text)
        if algo is not None:
            return Val(algo, "plan_overrides.inner_wrapper", src.location(kn, vn))
        src.diag("HP112", f"{NOT_PRICED}: plan_overrides.inner_wrapper '{text}': a CP wrapper whose algorithm "
                 "hp-plan cannot tell is priced as ring attention", kn.range, "plan_overrides.inner_wrapper")
        return None
    loader = src.section(root, "dataloader", "dataloader")
    batch = src.section(loader, "get_batch", "dataloader.get_batch")
    v = src.val(batch, "cp_algorithm", "dataloader.get_batch.cp_algorithm")
    algo = _cp_algo_named(v.value) if v is not None and isinstance(v.value, str) else None
    return Val(algo, v.path, v.loc) if v is not None and algo is not None else None


def _read_context(facts: TrainFacts, context: Map | None) -> None:
    """`context.device_num` and `context.max_device_memory` ("54GB"): both schemas state them there."""
    src = facts.src
    facts.device_num = src.int_(context, "device_num", "context.device_num")
    mem = src.val(context, "max_device_memory", "context.max_device_memory")
    if mem is not None:
        gb = parse_memory_gb(mem.value)
        if gb is None or gb <= 0:
            src.diag("HP105", f"context.max_device_memory must be a size such as 76GB, got {mem.value!r}",
                     mem.loc.value, mem.path, data={"replace_value": "76GB"})
        else:
            facts.max_device_memory = Val(gb, mem.path, mem.loc)


def _vpp_from_layer_layout(facts: TrainFacts) -> None:
    """Megatron-LM takes vpp from `pipeline_model_parallel_layout` (its chunks over pp, MCORE-PPLAYOUT): where the
    accelerator states the layout and pp but no interleave count, the layout's is the plan's (positioned at the
    layout), so a file written as Megatron-LM takes it is priced as it runs, not refused for vpp 1."""
    pp = facts.degrees.get("pp")
    vpp = vpp_of_layer_layout(facts.layout.get(LAYER_LAYOUT), int(pp.value) if pp is not None else None)
    if vpp is not None and "vpp" not in facts.degrees:
        facts.degrees["vpp"] = vpp


def _trainer_schedule(src: Source, acc: Map | None, prefix: str, vpp: Val | None) -> Val | None:
    """The trainer's `pp_schedule` (gpipe | 1f1b; AutoModels `accelerator.`, legacy `train.accelerator.`); with
    `pp_vpp` > 1 a 1F1B schedule runs interleaved (ScheduleInterleaved1F1B, [HP] Corrections 1). A schedule this
    planner does not price is said so at the key and priced as 1F1B, not refused: the trainer runs it."""
    v = src.val(acc, "pp_schedule", f"{prefix}.pp_schedule")
    interleaved = vpp is not None and int(vpp.value) > 1
    if v is None:
        return Val("interleaved", vpp.path, vpp.loc) if vpp is not None and interleaved else None
    text = str(v.value).strip().lower() if isinstance(v.value, str) else None
    if text in PIPELINE_SCHEDULERS:
        name = PIPELINE_SCHEDULERS[text]
        return Val("interleaved" if name == "1F1B" and interleaved else name, v.path, v.loc)
    if text is None:
        src.diag("HP106", f"{prefix}.pp_schedule must be a schedule name such as 1f1b, got {v.value!r}",
                 v.loc.value, v.path)
        return None
    src.diag("HP112", f"{NOT_PRICED}: pipeline schedule '{v.value}' is priced as 1F1B (hp-plan prices gpipe, 1f1b "
             "and interleaved 1f1b)", v.loc.key, v.path)
    return None


def _read_parallel_optimizer(facts: TrainFacts, acc: Map | None, prefix: str) -> None:
    """MindFormers-style ZeRO-1 keys: `optimizer_weight_shard_size` shards the optimizer states, and
    `enable_parallel_optimizer: false` turns that sharding off whatever the size says."""
    src = facts.src
    facts.optimizer_shard = src.int_(acc, "optimizer_weight_shard_size", f"{prefix}.optimizer_weight_shard_size")
    enabled = src.bool_(acc, "enable_parallel_optimizer", f"{prefix}.enable_parallel_optimizer")
    if enabled is None:
        return
    facts.note(enabled)
    if not enabled.value:
        facts.optimizer_shard = Val(1, enabled.path, enabled.loc)
    elif facts.optimizer_shard is None:
        src.diag("HP112", f"{NOT_PRICED}: a parallel optimizer over the whole data-parallel group; hp-plan prices "
                 "the optimizer unsharded unless optimizer_weight_shard_size states the shard", enabled.loc.key,
                 enabled.path)


def _read_legacy(facts: TrainFacts, root: Map) -> None:
    src = facts.src
    train = src.section(root, "train", "train")
    acc = src.section(train, "accelerator", "train.accelerator")
    gc = src.section(train, "gradient_checkpointing", "train.gradient_checkpointing")
    data = src.section(root, "data", "data")
    facts.global_batch_size = src.int_(train, "global_batch_size", "train.global_batch_size")
    mbs = src.int_(train, "micro_batch_size", "train.micro_batch_size")
    deg = facts.degrees
    if mbs is not None:
        deg["micro_batch_size"] = mbs
    mbn = src.int_(train, "micro_batch_num", "train.micro_batch_num")  # upstream's writer writes it ([HP] §4.3)
    if mbn is not None:
        deg["micro_batch_num"] = mbn
    # train.accelerator rides into the priced yaml's accelerator verbatim ([HP] §2.6), where a stated
    # sequence_parallel wins over the model's use_seq_parallel ([HP] §4.2): read it first.
    sp = (src.bool_(acc, "sequence_parallel", "train.accelerator.sequence_parallel")
          or src.bool_(acc, "use_seq_parallel", "train.accelerator.use_seq_parallel"))
    if sp is not None:
        deg["sequence_parallel"] = Val(int(bool(sp.value)), sp.path, sp.loc)
    _read_parallel_optimizer(facts, acc, "train.accelerator")
    _read_legacy_degrees(facts, acc)
    facts.recompute = src.choice(gc, "activation_checkpoint", "train.gradient_checkpointing.activation_checkpoint",
                                 RECOMPUTE_MODES)
    _read_legacy_precision(facts, train)
    facts.seq_len = src.int_(data, "max_seq_len", "data.max_seq_len")
    _read_context(facts, src.section(root, "context", "context"))
    facts.note(facts.global_batch_size, facts.dp_replicate, *deg.values(), facts.recompute, facts.seq_len,
               facts.optimizer_shard, facts.device_num, facts.max_device_memory)


# The legacy trainer's own `train.accelerator` names ([HP] Corrections: dp, dp_shard, tp, cp, pp, ep, etp, pp_vpp,
# pp_micro_batch_num) and the names upstream's search reads there (tp_degree, ...): both spellings, the
# trainer's first.
LEGACY_DEGREES = (("tp", ("tp", "tp_degree")), ("pp", ("pp", "pipeline_parallel_degree")),
                  ("cp", ("cp", "context_parallel_degree")), ("ep", ("ep", "expert_parallel_degree")),
                  ("etp", ("etp", "expert_tensor_parallel_degree")), ("fsdp", ("dp_shard", "dp")),
                  ("vpp", ("pp_vpp",)))


def _read_legacy_degrees(facts: TrainFacts, acc: Map | None) -> None:
    """The legacy degrees. `dp_shard: -1` is every remaining rank (kept as -1: the whole data-parallel domain,
    engine.config.resolve), `etp: 0` means etp = tp; `dp` is the trainer's older name for `dp_shard`; a
    `pp_schedule` with `pp_vpp` > 1 runs interleaved."""
    src = facts.src
    deg = facts.degrees
    for dim, keys in LEGACY_DEGREES:
        allow = (0,) if dim == "etp" else (-1,) if dim == "fsdp" else ()
        v = next((x for x in (src.int_(acc, k, f"train.accelerator.{k}", allow=allow) for k in keys)
                  if x is not None), None)
        if v is not None:
            deg[dim] = v
    mbn = src.int_(acc, "pp_micro_batch_num", "train.accelerator.pp_micro_batch_num")
    if mbn is not None and "micro_batch_num" not in deg:
        deg["micro_batch_num"] = mbn
    facts.dp_replicate = src.int_(acc, "dp_replicate", "train.accelerator.dp_replicate")
    shard = int(deg["fsdp"].value) if "fsdp" in deg else 1
    if facts.dp_replicate is not None and shard > 0:
        deg["dp"] = Val(int(facts.dp_replicate.value) * shard, facts.dp_replicate.path, facts.dp_replicate.loc)
    facts.pipeline_schedule = _trainer_schedule(src, acc, "train.accelerator", deg.get("vpp"))
    facts.note(facts.pipeline_schedule)


def _read_legacy_precision(facts: TrainFacts, train: Map | None) -> None:
    """Legacy `train.mixed_precision.param_dtype`: the model's compute dtype when mixed precision is on (enabled
    defaults to true, [HP] §2.6). Read before the model's own dtypes, which win (engine.config.train._read_model)."""
    src = facts.src
    mp = src.section(train, "mixed_precision", "train.mixed_precision")
    enabled = src.bool_(mp, "enabled", "train.mixed_precision.enabled")
    facts.mp_enabled = enabled  # `enabled: false`: every state in the weights' dtype (resolve._state_widths)
    facts.note(enabled)
    if mp is None or (enabled is not None and not enabled.value):
        return
    dtype = src.choice(mp, "param_dtype", "train.mixed_precision.param_dtype", {k: k for k in DTYPES})
    if dtype is not None:
        facts.param_bytes = Val(DTYPES[dtype.value], dtype.path, dtype.loc)
        facts.note(facts.param_bytes)


# A trainer `layer_ranges` entry with `count: null` runs to the last layer (clamped where the model is known,
# engine.config.resolve._layers).
OPEN_END = 1 << 30


def _read_recompute_layers(facts: TrainFacts, root: Map) -> None:
    """`activation_checkpoint.layers: {"0-9": full, "40": off}` (docs/formats.md §1, ext), or the newer trainer's
    own `activation_checkpoint.layer_ranges: [{first, count, mode}]` ([HP] Corrections 2)."""
    src = facts.src
    ac = root.get("activation_checkpoint")
    if isinstance(ac, Map) and isinstance(ac.get("layer_ranges"), Seq):
        _read_layer_ranges(facts, ac)
        return
    layers = ac.get("layers") if isinstance(ac, Map) else None
    if layers is None or (isinstance(layers, Scalar) and layers.value is None):
        return
    if not isinstance(layers, Map):
        src.diag("HP107", "activation_checkpoint.layers must map layer ranges to modes, e.g. {\"0-9\": full}",
                 layers.range, "activation_checkpoint.layers")
        return
    out: list[tuple[int, int, str]] = []
    for key, kn, _vn in layers.items():
        dotted = f"activation_checkpoint.layers.{key}"
        first_last = _parse_range(key)
        if first_last is None:
            src.diag("HP106", f"layer range '{key}' must be 'first-last' or a layer number, e.g. \"0-9\"",
                     kn.range, dotted)
            continue
        mode = src.choice(layers, key, dotted, RECOMPUTE_MODES)
        if mode is not None:
            out.append((first_last[0], first_last[1], str(mode.value)))
    facts.recompute_layers = tuple(sorted(out))


def _read_layer_ranges(facts: TrainFacts, ac: Map) -> None:
    """`layer_ranges: [{first: 0, count: 8, mode: full}, {first: 8, count: null, mode: off}]`: ordered ranges that
    override `mode`; only the last `count` may be null (to the last layer)."""
    src = facts.src
    ranges = ac.get("layer_ranges")
    out: list[tuple[int, int, str]] = []
    for i, item in enumerate(ranges.items if isinstance(ranges, Seq) else []):
        dotted = f"activation_checkpoint.layer_ranges[{i}]"
        if not isinstance(item, Map):
            src.diag("HP107", f"{dotted} must be a mapping {{first, count, mode}}", item.range, dotted)
            continue
        first = src.int_(item, "first", f"{dotted}.first", minimum=0)
        count_node = item.get("count")
        to_end = count_node is None or (isinstance(count_node, Scalar) and count_node.value is None)
        count = None if to_end else src.int_(item, "count", f"{dotted}.count")
        mode = src.choice(item, "mode", f"{dotted}.mode", RECOMPUTE_MODES)
        if first is None or mode is None or (count is None and not to_end):
            continue
        a = int(first.value)
        b = a + int(count.value) - 1 if count is not None else OPEN_END
        out.append((a, b, str(mode.value)))
    facts.recompute_layers = tuple(sorted(out))


def _parse_range(text: str) -> tuple[int, int] | None:
    parts = text.replace(" ", "").split("-")
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        return None
    if len(nums) == 1 and nums[0] >= 0:
        return nums[0], nums[0]
    if len(nums) == 2 and 0 <= nums[0] <= nums[1]:
        return nums[0], nums[1]
    return None





def base_dir_of(path: str | None) -> str | None:
    return os.path.dirname(os.path.abspath(path)) if path else None
