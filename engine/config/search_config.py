"""Reading a search config (docs/formats.md §2, [HP] §2.1-§2.2) into `SearchFacts`.

Each `parallelism` entry becomes a `Decl`: an int is fixed, a list holds candidates, `auto` (case- and
space-insensitive) is searched over the dimension's own bounds. Unlike HyperParallel, which silently ignores
anything else (floats, other strings, `true` read as 1), every other form is a positioned type error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.catalog.frameworks import FRAMEWORK_ALIASES, FRAMEWORKS
from engine.config.cluster import ClusterFacts, read_cluster_section
from engine.config.model_facts import read_model_fields
from engine.config.reader import Source, Val, as_int, describe
from engine.config.schema import OVERLAP_KEYS, SEARCH_DIMENSION_KEYS
from engine.config.stated_layout import read_layout, read_offset
from engine.config.train import (
    CP_ALGOS,
    DTYPES,
    SELECTIVE_POLICIES,
    read_param_init,
    read_recompute_modules,
)
from engine.config.vision import read_vision, vision_anchor
from engine.document import Map, Node, Scalar, Seq
from engine.integers import MAX_CANDIDATES, MAX_CONFIG_INT, shown_int

DIMENSION_KEYS = tuple(SEARCH_DIMENSION_KEYS.split())
MODE_ORDER = ("off", "selective", "full")
SEQ_KEYS = ("max_position_embeddings", "seq_length", "seq_len", "max_seq_len")
RECOMPUTE_REQUESTS = {"none": "none", "off": "none", "false": "none", "selective": "selective", "full": "full",
                      "true": "full", "auto": "auto", "per_layer": "per_layer"}
FRAMEWORK_NAMES = {**{k: k for k in FRAMEWORKS}, **FRAMEWORK_ALIASES}
SCHEDULES = {"1f1b": "1F1B", "interleaved": "interleaved", "interleaved_1f1b": "interleaved", "gpipe": "gpipe",
             "dualpipev": "dualpipev"}


@dataclass(frozen=True, slots=True)
class Decl:
    """One declared dimension: state fixed / list / auto, its values, and the Val it was read from."""

    state: str
    values: tuple[int, ...]
    val: Val


@dataclass
class SearchFacts:
    src: Source
    train_yaml: Val | None = None
    model_anchor: Val | None = None
    model_fields: dict[str, Val] = field(default_factory=dict)
    name: Val | None = None
    seq_len: Val | None = None
    local_batch_size: Val | None = None
    use_seq_parallel: Val | None = None
    optimizer_shard: Val | None = None
    param_bytes: Val | None = None
    param_init: Val | None = None  # model.param_init_type (a dtype name)
    cluster: ClusterFacts | None = None
    dims: dict[str, Decl] = field(default_factory=dict)
    global_batch_size: Val | None = None
    memory_limit_gb: Val | None = None
    recompute: Val | None = None
    selective_policy: Val | None = None
    recompute_modules: Val | None = None  # recompute_modules (ext): Megatron's --recompute-modules
    moe_dispatcher: Val | None = None  # estimator.moe_dispatcher (ext): alltoall | deepep
    fp8_recipe: Val | None = None  # estimator.fp8_recipe (ext): delayed | tensorwise | blockwise | mxfp8
    fp8_param_gather: Val | None = None  # estimator.fp8_param_gather (ext): weights held in FP8 (Megatron)
    loss_chunks: Val | None = None  # estimator.loss_chunks (ext): token chunks the loss runs in
    # cpu_offloading_num_layers (ext): Megatron-Core's --cpu-offloading-num-layers (RunOptions.cpu_offload_layers)
    cpu_offload_layers: Val | None = None
    overlaps: dict[str, Val] = field(default_factory=dict)  # RunOptions overlap flags (top-level keys, ext)
    layout: dict[str, Val] = field(default_factory=dict)  # pipeline layout keys (engine.config.stated_layout)
    pipeline_schedule: Val | None = None
    pp_interleave_num: Val | None = None
    pp_degree: Decl | None = None
    # constraint.global_batch_size stated as 0: "unset" to HyperParallel's search, which then does not take the
    # train.yaml's ([HP] Corrections 5); hp-plan does (engine.config.resolve says so, HP114)
    global_batch_unset: Val | None = None
    ratios_file: Val | None = None  # estimator.ratios_file (docs/formats.md §6), as written
    # estimator section (ext, docs/formats.md §2 / §5): the framework that runs the plan, torch.compile, FP8.
    framework: Val | None = None
    # estimator.framework_version (ext): the framework's release (engine.catalog.frameworks.Releases); checked
    # against the framework's known releases where the strategy is priced (HP535).
    framework_version: Val | None = None
    compile: Val | None = None
    fp8: Val | None = None
    cp_algo: Val | None = None  # estimator.cp_algo
    # estimator.grad_dtype / optimizer_state_dtype / master_weights (ext): the widths the optimizer keeps
    grad_dtype: Val | None = None
    optimizer_state_dtype: Val | None = None
    master_weights: Val | None = None
    recompute_modes: Val | None = None  # a tuple of off/selective/full
    # offload (ext, [HP] §8.6): Val(True) for the device's host link, Val(<GB/s>) for a stated one; None = off.
    offload: Val | None = None
    vision: dict[str, Val] = field(default_factory=dict)  # model.vision (engine.config.vision)
    vision_anchor: Val | None = None
    visual_seq_len: Val | None = None  # model.visual_seq_len
    locations: dict[str, Val] = field(default_factory=dict)

    def note(self, *vals: Val | None) -> None:
        for v in vals:
            if v is not None:
                self.locations[v.path] = v


def _read_tower(facts: SearchFacts, model: Map | None) -> None:
    """A multimodal model's `model.vision` and `model.visual_seq_len` (engine.config.vision)."""
    src = facts.src
    facts.vision = read_vision(src, model, "model")
    facts.vision_anchor = vision_anchor(src, model, "model")
    facts.visual_seq_len = src.int_(model, "visual_seq_len", "model.visual_seq_len")
    facts.note(facts.visual_seq_len, *facts.vision.values())


def read_search(src: Source) -> SearchFacts:
    """Every fact a search config states, typed and located, in the order its diagnostics are said: train_yaml,
    model, cluster, parallelism, constraint, the run options; then which of them the file states (`note`)."""
    root = src.root
    facts = SearchFacts(src)
    if root is None:
        return facts
    _read_train_yaml(facts, root)
    model = src.section(root, "model", "model")
    _read_model_section(facts, root, model)
    facts.cluster = read_cluster_section(src, root)
    par = src.section(root, "parallelism", "parallelism")
    _read_parallelism(facts, par)
    _read_constraint(facts, root)
    _read_run_options(facts, root, par, model)
    _note_stated(facts)
    return facts


def _read_train_yaml(facts: SearchFacts, root: Map) -> None:
    """`train_yaml`: a path string (HP106 otherwise)."""
    src = facts.src
    tv = src.val(root, "train_yaml", "train_yaml")
    if tv is None:
        return
    if isinstance(tv.value, str) and tv.value.strip():
        facts.train_yaml = tv
    else:
        shown = describe(tv.value) if not isinstance(tv.value, Node) else "a collection"
        src.diag("HP106", f"'train_yaml' must be a file path string, got {shown}", tv.loc.value, "train_yaml")


def _read_model_section(facts: SearchFacts, root: Map, model: Map | None) -> None:
    """`model`: the architecture's facts, a vision tower, the trained sequence, the batch and the state widths."""
    src = facts.src
    if "model" in root:
        kn = root.key_node("model")
        if kn is not None:
            facts.model_anchor = Val(None, "model", src.location(kn, root.get("model")))
    facts.model_fields = read_model_fields(src, model, "model", skip=frozenset(SEQ_KEYS))
    _read_tower(facts, model)
    facts.name = src.str_(model, "name", "model.name")
    # In a search config max_position_embeddings IS the trained sequence length ([HP] §2.1); older
    # examples write it seq_len (beside n_layers, dim, n_heads: [HP] §3.2 "older versions"), some seq_length.
    for key in SEQ_KEYS:
        facts.seq_len = facts.seq_len or src.int_(model, key, f"model.{key}")
    facts.local_batch_size = src.int_(model, "local_batch_size", "model.local_batch_size")
    facts.use_seq_parallel = src.bool_(model, "use_seq_parallel", "model.use_seq_parallel")
    facts.optimizer_shard = src.int_(model, "optimizer_weight_shard_size", "model.optimizer_weight_shard_size")
    for key in ("compute_dtype", "torch_dtype"):
        dv = src.choice(model, key, f"model.{key}", {k: k for k in DTYPES})
        if dv is not None:
            facts.param_bytes = Val(DTYPES[dv.value], dv.path, dv.loc)
    facts.param_init = read_param_init(src, model, "model")


def _read_parallelism(facts: SearchFacts, par: Map | None) -> None:
    """`parallelism`: each dimension's declaration (fixed, a list, auto)."""
    if par is None:
        return
    for key in DIMENSION_KEYS:
        # etp 0 is HyperParallel's default and means "the experts follow tp" ([HP] §4.2, §5.5).
        decl = read_decl(facts.src, par, key, f"parallelism.{key}", boolean=(key == "sequence_parallel"),
                         minimum=0 if key == "etp" else 1)
        if decl is not None:
            facts.dims[key] = decl


def _read_constraint(facts: SearchFacts, root: Map) -> None:
    """`constraint`: the global batch and the memory budget (0 = unset, as upstream writes it)."""
    src = facts.src
    cons = src.section(root, "constraint", "constraint")
    gbs = src.int_(cons, "global_batch_size", "constraint.global_batch_size", minimum=0)
    facts.global_batch_size = gbs if gbs is not None and gbs.value > 0 else None
    facts.global_batch_unset = gbs if gbs is not None and gbs.value == 0 else None
    mem = src.number(cons, "memory_limit_gb", "constraint.memory_limit_gb", minimum=0.0)
    facts.memory_limit_gb = mem if mem is not None and mem.value > 0 else None


def _read_run_options(facts: SearchFacts, root: Map, par: Map | None, model: Map | None) -> None:
    """How the run executes: recompute, `estimator` (the framework and its options), overlaps, pp_config."""
    src = facts.src
    facts.recompute = src.choice(root, "recompute", "recompute", RECOMPUTE_REQUESTS)
    est = src.section(root, "estimator", "estimator")
    facts.cp_algo = src.choice(est, "cp_algo", "estimator.cp_algo", CP_ALGOS)
    # newest upstream writes recompute_modes at the top level too (its tests); estimator's wins
    facts.recompute_modes = (read_modes(src, est, "recompute_modes", "estimator.recompute_modes")
                             or read_modes(src, root, "recompute_modes", "recompute_modes"))
    _read_recompute_dimension(facts, par)
    _read_selective(facts, root)
    facts.moe_dispatcher = src.choice(est, "moe_dispatcher", "estimator.moe_dispatcher",
                                      {"alltoall": "alltoall", "deepep": "deepep", "allgather": "allgather"})
    for key in OVERLAP_KEYS:
        ov = src.bool_(root, key, key)
        if ov is not None:
            facts.overlaps[key] = ov
    facts.cpu_offload_layers = src.int_(root, "cpu_offloading_num_layers", "cpu_offloading_num_layers", minimum=0)
    _read_pp_config(facts, src.section(root, "pp_config", "pp_config"), model)
    facts.ratios_file = src.str_(est, "ratios_file", "estimator.ratios_file")
    facts.note(facts.ratios_file)
    facts.framework = src.choice(est, "framework", "estimator.framework", FRAMEWORK_NAMES)
    facts.framework_version = src.str_(est, "framework_version", "estimator.framework_version")
    facts.compile = src.bool_(est, "compile", "estimator.compile")
    facts.fp8 = src.bool_(est, "fp8", "estimator.fp8")
    facts.fp8_recipe = src.choice(est, "fp8_recipe", "estimator.fp8_recipe",
                                  {name: name for name in ("delayed", "tensorwise", "blockwise", "mxfp8")})
    facts.fp8_param_gather = src.bool_(est, "fp8_param_gather", "estimator.fp8_param_gather")
    facts.loss_chunks = src.int_(est, "loss_chunks", "estimator.loss_chunks", minimum=1)
    _read_state_widths(facts, est)


def _note_stated(facts: SearchFacts) -> None:
    """Record every fact the file states (facts.note), for the dependency and hover maps."""
    facts.note(facts.train_yaml, facts.name, facts.seq_len, facts.local_batch_size, facts.use_seq_parallel,
               facts.optimizer_shard, facts.param_bytes, facts.global_batch_size, facts.memory_limit_gb,
               facts.recompute, facts.selective_policy, facts.pipeline_schedule, facts.pp_interleave_num,
               facts.framework, facts.framework_version, facts.compile, facts.fp8, facts.grad_dtype, facts.optimizer_state_dtype,
               facts.master_weights, facts.recompute_modules,
               facts.cp_algo, facts.recompute_modes, facts.param_init, facts.moe_dispatcher, facts.offload, facts.fp8_recipe,
               facts.fp8_param_gather, facts.loss_chunks, facts.cpu_offload_layers,
               *facts.model_fields.values(), *(d.val for d in facts.dims.values()), *facts.overlaps.values(),
               *facts.layout.values())
    if facts.cluster is not None:
        facts.note(*facts.cluster.values.values())


def read_offload(src: Source, root: Map) -> Val | None:
    """`offload` (ext; HyperParallel's run_nd -ao / search_strategies(offload=), [HP] §8.6): false (or absent)
    offloads nothing; true offloads over the device's host link; {host_link_gb_s: N} over a link of N GB/s one
    direction (HyperParallel's HostLink.of: the figures stated replace the device's). Returns Val(True),
    Val(N) or None; a bad value is a positioned HP104/HP105/HP101 error and offloads nothing."""
    hit = src.raw(root, "offload", "offload")
    if hit is None:
        return None
    kn, vn = hit
    if isinstance(vn, Map):
        for key, knode, _ in vn.items():
            if key != "host_link_gb_s":
                src.diag("HP101", f"unknown key 'offload.{key}': offload states only host_link_gb_s (GB/s, one "
                         "direction)", knode.range, f"offload.{key}")
        link = src.number(vn, "host_link_gb_s", "offload.host_link_gb_s", minimum=0.0, strict=True)
        return Val(float(link.value), "offload", src.location(kn, vn)) if link is not None else None
    v = src.bool_(root, "offload", "offload")
    return v if v is not None and v.value is True else None


def _read_pp_config(facts: SearchFacts, ppc: Map | None, model: Map | None) -> None:
    """`pp_config`: the schedule, chunks per stage, HyperParallel's pp_degree list, and the pipeline layout
    keys (engine.config.stated_layout; HyperParallel's recipes write `offset` in `model`)."""
    src = facts.src
    facts.pipeline_schedule = src.choice(ppc, "pipeline_schedule", "pp_config.pipeline_schedule", SCHEDULES)
    facts.pp_interleave_num = src.int_(ppc, "pp_interleave_num", "pp_config.pp_interleave_num")
    facts.pp_degree = read_decl(src, ppc, "pp_degree", "pp_config.pp_degree", allow_auto=False)
    model_offset = read_offset(src, model, "model.offset")
    if model_offset is not None:
        facts.layout["offset"] = model_offset
    read_layout(src, ppc, "pp_config", facts.layout)


def _read_selective(facts: SearchFacts, root: Map) -> None:
    """What `selective` recomputes: `selective_policy`, and `recompute_modules` (a list, or `auto`: the search
    chooses, engine.search.modules); and `offload` (read_offload), which widens what per_layer may choose."""
    facts.offload = read_offload(facts.src, root)
    src = facts.src
    facts.selective_policy = src.choice(root, "selective_policy", "selective_policy", SELECTIVE_POLICIES)
    facts.recompute_modules = read_recompute_modules(src, root, "recompute_modules", "recompute_modules",
                                                     allow_auto=True)


def _read_state_widths(facts: SearchFacts, est: Map | None) -> None:
    """estimator.grad_dtype / optimizer_state_dtype (dtype names) and master_weights (a boolean): the widths
    the optimizer keeps (engine.config.resolve._state_widths; docs/formats.md §2)."""
    src = facts.src
    dtypes = {k: k for k in DTYPES}
    facts.grad_dtype = src.choice(est, "grad_dtype", "estimator.grad_dtype", dtypes)
    facts.optimizer_state_dtype = src.choice(est, "optimizer_state_dtype", "estimator.optimizer_state_dtype", dtypes)
    facts.master_weights = src.bool_(est, "master_weights", "estimator.master_weights")


def read_modes(src: Source, parent: Map | None, key: str, dotted: str) -> Val | None:
    """A list of recompute modes (`[off, full]`; YAML's bare `off` is a boolean false) -> Val of a tuple in
    off/selective/full order. Anything else is refused, as HyperParallel does: `unknown recompute modes [...];
    expected some of off, selective, full` ([HP] §5.14)."""
    hit = src.raw(parent, key, dotted)
    if hit is None:
        return None
    kn, vn = hit
    loc = src.location(kn, vn)
    items = vn.items if isinstance(vn, Seq) else [vn]
    got: set[str] = set()
    bad: list[str] = []
    for item in items:
        v = item.value if isinstance(item, Scalar) else None
        name = "off" if v is False else (v.strip().lower() if isinstance(v, str) else None)
        name = {"none": "off"}.get(name or "", name)
        if name in MODE_ORDER:
            got.add(name)
        else:
            bad.append(str(v) if isinstance(item, Scalar) else "a collection")
    if bad or not got:
        src.diag("HP106", f"unknown recompute modes {bad or '[]'}; expected some of off, selective, full",
                 vn.range, dotted, data={"valid": list(MODE_ORDER)})
        return None
    return Val(tuple(m for m in MODE_ORDER if m in got), dotted, loc)


def _read_recompute_dimension(facts: SearchFacts, par: Map | None) -> None:
    """`parallelism.recompute` (newest upstream, recompute as a search dimension): a list ranks every candidate
    under each listed mode and keeps the best, which is recompute auto among those modes; `auto` is auto over
    all three; one mode prices that mode."""
    src = facts.src
    hit = src.raw(par, "recompute", "parallelism.recompute")
    if hit is None:
        return
    kn, vn = hit
    if _is_auto(vn):
        facts.recompute = Val("auto", "parallelism.recompute", src.location(kn, vn))
        return
    modes = read_modes(src, par, "recompute", "parallelism.recompute")
    if modes is None:
        return
    if len(modes.value) == 1:
        one = modes.value[0]
        facts.recompute = Val("none" if one == "off" else one, modes.path, modes.loc)
        return
    keep = facts.recompute is not None and facts.recompute.value == "per_layer"
    facts.recompute = Val("per_layer" if keep else "auto", modes.path, modes.loc)
    facts.recompute_modes = modes


def _is_auto(node: Node) -> bool:
    return isinstance(node, Scalar) and isinstance(node.value, str) and node.value.strip().lower() == "auto"


def read_decl(src: Source, parent: Map | None, key: str, dotted: str, *, boolean: bool = False,
              allow_auto: bool = True, minimum: int = 1) -> Decl | None:
    """int -> fixed; list -> candidates; auto -> searched. Wrong forms are HP103/HP108/HP109/HP111."""
    hit = src.raw(parent, key, dotted)
    if hit is None:
        return None
    kn, vn = hit
    loc = src.location(kn, vn)
    val = Val(vn.value if isinstance(vn, Scalar) else None, dotted, loc)
    if allow_auto and _is_auto(vn):
        return Decl("auto", (), val)
    if isinstance(vn, Seq):
        if len(vn.items) > MAX_CANDIDATES:  # refused whole: one diagnostic, not one per item
            src.diag("HP110", f"{dotted} lists {len(vn.items):,} candidates: at most {MAX_CANDIDATES:,}, or write "
                     "auto", vn.range, dotted, data={"replace_value": "auto"} if allow_auto else {})
            return None
        values: list[int] = []
        for i, item in enumerate(vn.items):
            iv = _item(src, item, f"{dotted}.{i}", boolean, minimum=minimum)
            if iv is not None:
                values.append(iv)
        if not vn.items:
            src.diag("HP111", f"{dotted} is an empty list: give at least one candidate, or write auto",
                     vn.range, dotted, data={"replace_value": "auto"})
            return None
        if not values:
            return None
        return Decl("list", tuple(sorted(set(values))), val)
    if isinstance(vn, Scalar):
        iv = _item(src, vn, dotted, boolean, scalar=True, allow_auto=allow_auto, minimum=minimum)
        if iv is None:
            return None
        return Decl("fixed", (iv,), val)
    src.diag("HP108", f"{dotted} must be an integer, a list of integers{' or auto' if allow_auto else ''}, "
             "got a mapping", vn.range, dotted)
    return None


def _item(src: Source, node: Node, dotted: str, boolean: bool, *, scalar: bool = False,
          allow_auto: bool = True, minimum: int = 1) -> int | None:
    if not isinstance(node, Scalar):
        src.diag("HP108", f"{dotted} must be {'true or false' if boolean else 'an integer'}, got a collection",
                 node.range, dotted)
        return None
    v = node.value
    if boolean:
        if isinstance(v, bool):
            return int(v)
        src.diag("HP104", f"{dotted} must be true, false{' or auto' if scalar and allow_auto else ''}, "
                 f"got {describe(v)}", node.range, dotted)
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        if v > MAX_CONFIG_INT:  # every integer a file states is bounded (engine.integers)
            src.diag("HP110", f"{dotted} must be at most {MAX_CONFIG_INT:,}, got {shown_int(v)}", node.range, dotted)
            return None
        if v >= minimum:
            return v
        what = "a positive degree" if minimum == 1 else "a degree >= 0 (0: follow tp)"
        src.diag("HP109", f"{dotted} must be {what}, got {shown_int(v)}", node.range, dotted,
                 data={"replace_value": 1})
        return None


    fix = as_int(v)
    forms = "an integer, a list of integers or auto" if scalar and allow_auto else "an integer"
    data = {"replace_value": fix} if fix is not None and fix >= 1 else {}
    code = "HP103" if (fix is not None or isinstance(v, bool | float)) else "HP108"
    hint = f"; write {fix}" if data else ""
    src.diag(code, f"{dotted} must be {forms}, got {describe(v)}{hint}", node.range, dotted, data=data)
    return None
