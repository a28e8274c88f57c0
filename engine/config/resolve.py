"""Resolve a train.yaml, or a search config laid over its train.yaml, into one frozen `Config`: read the
files (each once per request, engine.document.Reads), lay the search config's keys over the train.yaml's, and
record where every value was written. What the files state is assembled beside it: the model in
engine.config.stated_model, the strategy in engine.config.stated_strategy, the pipeline layout in
engine.config.stated_layout, the cluster in engine.config.cluster.

Semantics (docs/formats.md §1-§2, [HP] §2.2-§2.3):
* A bare train.yaml: every dimension is searched (state "absent"); `stated` is the strategy the file states,
  with dp = world / (tp·pp·cp) where the world size is known (context.device_num, or the cluster flags and
  settings); None when it cannot be derived.
* A search config: its keys override the train.yaml's key by key; a parallelism int is fixed, a list holds
  candidates, `auto` is searched, an absent dimension is inherited as fixed from what the train.yaml writes
  (origin "train.yaml") or else searched. etp is never searched (fixed 1 by default). `stated` exists when
  nothing is left to search: tp, pp, cp (and ep for a MoE model) fixed, no dimension `auto` or a list of
  several; dp and micro_batch_num may be derived from the world size and the batch rule, and dimensions
  nobody mentions take their defaults (fsdp 1, vpp 1, micro_batch_size 1, no sequence parallelism).
  (The arithmetic that derives that strategy is engine.config.stated_strategy.)
* FSDP shard when a file does not say: an AutoModels train.yaml (an FSDP trainer) shards over the whole
  data-parallel domain dp·cp, like `dp_shard_size: -1`; a legacy train.yaml or a search config uses 1.

`Config.locations` holds, for every value read, its literal dotted path in its file (`accelerator.tp_size`,
`model.config_overrides.hidden_size`) and canonical paths that do not depend on the file kind:
`model.<field>` (for catalog facts: where the model is named), `model.max_position_embeddings` (the trained
sequence length, wherever it was written), `parallelism.<dim>`, `constraint.global_batch_size`,
`constraint.memory_limit_gb`, `cluster.<key>`, `recompute`, `train_yaml`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from engine.catalog.frameworks import DEFAULT_FRAMEWORK, FRAMEWORK_ALIASES
from engine.config.cluster import build_cluster
from engine.config.kind import kind_of
from engine.config.reader import Source, Val
from engine.config.search_config import Decl, SearchFacts, read_search
from engine.config.stated_layout import LAYER_LAYOUT, layout_of, vpp_of_layer_layout
from engine.config.stated_model import seq_location, stated_model
from engine.config.stated_strategy import search_stated, stack_optimizer, strategy_of
from engine.config.train import DTYPES, OPEN_END, TrainFacts, base_dir_of, read_train
from engine.config.types import DIMENSIONS, ClusterOverrides, Config, Dimension, Loaded, Location
from engine.diagnostics import Diagnostic
from engine.document import DEFAULT_MAX_BYTES, Document, Map, Reads, clamp
from engine.positions import DOCUMENT_START, Position, Range
from engine.specs import ClusterSpec, ModelSpec, RecomputePlan, RunOptions


@dataclass
class Resolved:
    """Everything the reader learnt: the Config plus the parsed sources and facts the validators need."""

    config: Config | None
    diagnostics: list[Diagnostic]
    files: list[str]
    sources: list[Source] = field(default_factory=list)
    train: TrainFacts | None = None
    search: SearchFacts | None = None
    kind: str | None = None
    # The model facts that resolved, also when `config.model` is None because some are missing: the degree
    # rules check what is known (an editor's half-written file is normal input). None: no model facts at all.
    model_facts: ModelSpec | None = None
    # Whether the files say if the model has experts: not for a model an unreadable factory builds, or facts
    # written beside a name that did not resolve (the rest of the model is the name's): no "dense model" rule.
    experts_known: bool = True

    def loaded(self) -> Loaded:
        return Loaded(self.config, tuple(self.diagnostics), tuple(self.files))


def overlay_text(texts: Mapping[str, str] | None, path: str) -> str | None:
    """The text an editor holds for `path` in `texts` (absolute paths -> unsaved buffer text), else None (read
    the disk). Keys match by normalised absolute path, then by real path (a symlinked folder or a differently
    spelt path names the same file: the buffer must still win over the disk)."""
    if not texts:
        return None
    hit = texts.get(path)
    if hit is not None:
        return hit
    norm = os.path.normpath(os.path.abspath(path))
    hit = texts.get(norm)
    if hit is not None:
        return hit
    real = os.path.normcase(os.path.realpath(norm))
    for key, text in texts.items():
        if os.path.normcase(os.path.realpath(os.path.abspath(key))) == real:
            return text
    return None


def _open(path: str, text: str | None, max_bytes: int,
          reads: Reads | None = None) -> tuple[Document | None, list[Diagnostic]]:
    """The file's Document (`text`: its editor buffer; else the disk), through the request's `reads` when it
    has them (a file met twice in one request is read and parsed once: engine.document.Reads)."""
    reads = reads if reads is not None else Reads()
    if text is None:
        text, diags = reads.read(path, max_bytes)
        if text is None:
            return None, list(diags)
    doc = reads.parse(text, path, max_bytes)
    return doc, list(doc.diagnostics)


def _only_comments(text: str) -> bool:
    return all(not ln.strip() or ln.lstrip().startswith("#") or ln.strip() in ("---", "...")
               for ln in text.splitlines())


def resolve(path: str, text: str | None = None, overrides: ClusterOverrides | None = None, *,
            max_bytes: int = DEFAULT_MAX_BYTES, texts: Mapping[str, str] | None = None,
            reads: Reads | None = None) -> Resolved:
    """`texts` is the editor's overlay: absolute path -> unsaved buffer text, read instead of the disk for
    `path` (when `text` is None) and for the train.yaml a search config references; `reads` what the request
    has read and parsed already (engine.document.Reads)."""
    if text is None:
        text = overlay_text(texts, path)
    doc, diags = _open(path, text, max_bytes, reads)
    out = Resolved(None, diags, [path])
    if doc is None:
        return out
    if doc.root is None:
        if not diags and _only_comments(doc.text):
            out.diagnostics.append(Diagnostic("HP010", "empty file: nothing to check", DOCUMENT_START))
        return out
    if not isinstance(doc.root, Map):
        # An empty scalar after `---` starts past the text's end: clamp both ends so the range stays ordered.
        start = clamp(doc.text, doc.root.range.start)
        out.diagnostics.append(Diagnostic(
            "HP002", "a config must hold a YAML mapping (key: value) at the top level, got a "
            f"{'list' if type(doc.root).__name__ == 'Seq' else 'scalar'}",
            Range(start, clamp(doc.text, Position(start.line, start.character + 1)))))
        return out
    src = Source(doc, path, primary=True)
    out.sources.append(src)
    root = doc.root
    kind = kind_of(root)
    if kind == "search":
        out.kind = "search"
        _resolve_search(out, src, overrides, max_bytes, texts, reads)
    elif kind is not None:
        out.kind = "train"
        _resolve_train(out, src, overrides)
    else:
        out.diagnostics.append(Diagnostic(
            "HP008", "not a HyperParallel train.yaml (no training, accelerator or fsdp_config section, no named "
            "model, no model.config_overrides) nor a search config (no parallelism, cluster, constraint or "
            "train_yaml): left alone", DOCUMENT_START))
        return out
    for s in out.sources:
        out.diagnostics.extend(s.diags)
        s.diags.clear()
    return out


def load(path: str, text: str | None = None, overrides: ClusterOverrides | None = None, *,
         max_bytes: int = DEFAULT_MAX_BYTES, texts: Mapping[str, str] | None = None) -> Loaded:
    """Read and resolve a train.yaml or search config without the cross-field rules (engine.check adds
    them); `texts` as in `resolve`. Never raises: an internal failure is an HP900 diagnostic."""
    try:
        return resolve(path, text, overrides, max_bytes=max_bytes, texts=texts).loaded()
    except Exception as exc:  # the contract: never a traceback
        return Loaded(None, (internal_error(exc),), (path,))


def internal_error(exc: BaseException) -> Diagnostic:
    return Diagnostic("HP900", f"internal error while analysing the file: {type(exc).__name__}: {exc}. "
                      "Please report it with the file", DOCUMENT_START)


# -- train.yaml ------------------------------------------------------------------------------------------------


def _resolve_train(out: Resolved, src: Source, overrides: ClusterOverrides | None) -> None:
    facts = read_train(src, base_dir=base_dir_of(src.path))
    assert facts is not None
    out.train = facts
    _note_model_file(out, facts)
    model = stated_model(src, facts, None)
    out.model_facts = model.facts
    out.experts_known = model.experts_known
    cluster, cluster_locs = build_cluster(src, None, facts.device_num, overrides)
    locations = _locations(facts, None)
    locations.update(cluster_locs)
    locations.update(model.locations)
    seq_location(locations, facts, None)
    for dim, v in facts.degrees.items():
        locations[f"parallelism.{dim}"] = v.loc
    gbs = facts.global_batch_size
    _canonical(locations, "constraint.global_batch_size", gbs)
    _canonical(locations, "constraint.memory_limit_gb", facts.max_device_memory)
    _canonical(locations, "recompute", facts.recompute)
    dims = {d: Dimension(d, "absent", (), "default", None) for d in DIMENSIONS}
    # etp has no search dimension ([HP] §2.2): the file's value, else 1, is fixed.
    etp = facts.degrees.get("etp")
    dims["etp"] = (Dimension("etp", "fixed", (int(etp.value),), "train.yaml", etp.loc) if etp is not None
                   else Dimension("etp", "fixed", (1,), "default", None))
    plan = RecomputePlan(_mode(facts.recompute), _layers(facts))  # type: ignore[arg-type]
    schedule = _schedule(None, facts)
    world = cluster.world_size if cluster is not None else (int(facts.device_num.value) if facts.device_num else None)
    os_shard = int(facts.optimizer_shard.value) if facts.optimizer_shard else 1
    stated = strategy_of(
        {d: int(v.value) for d, v in facts.degrees.items()},
        world=world,
        gbs=int(gbs.value) if gbs is not None else None,
        full_shard_default=facts.schema == "automodels",
        plan=plan,
        schedule=schedule,
        optimizer_shard=os_shard,
        model=model.spec,
        require=(),
    )
    run = _run(facts, None, overrides)
    stated = stack_optimizer(stated, run, facts.optimizer_shard is not None, "fsdp" in facts.degrees)
    out.config = Config(
        kind="train",
        path=src.path,
        model=model.spec,
        cluster=cluster,
        run=run,
        dimensions=MappingProxyType(dims),
        global_batch_size=int(gbs.value) if gbs is not None else None,
        memory_limit_gb=_memory_limit(facts.max_device_memory, overrides),
        recompute=_request(None, facts),  # type: ignore[arg-type]
        stated_recompute=plan,
        pipeline_schedule=schedule,  # type: ignore[arg-type]
        stated=stated,
        optimizer_shard=os_shard,
        budget_source=_budget_source(overrides, cluster, facts.max_device_memory),
        device_what_if=_device_what_if(overrides, cluster),
        memory_assumed=_memory_assumed(cluster_locs, overrides, facts.max_device_memory),
        train_yaml=None,
        model_file=facts.resolution_file or None,
        locations=MappingProxyType(locations),
    )


# -- search config -----------------------------------------------------------------------------------------------


def train_yaml_path(search_path: str | None, ref: str) -> str:
    """Where a search config's `train_yaml:` points: `~` expanded, relative to the search config's folder
    (docs/formats.md §2; the working directory for an unnamed buffer). The server's workspace index links a
    train.yaml to its search config with this too."""
    rel = os.path.expanduser(ref.strip())
    base = base_dir_of(search_path) or os.getcwd()
    return os.path.normpath(rel if os.path.isabs(rel) else os.path.join(base, rel))


def _resolve_search(out: Resolved, src: Source, overrides: ClusterOverrides | None, max_bytes: int,
                    texts: Mapping[str, str] | None = None, reads: Reads | None = None) -> None:
    sf = read_search(src)
    out.search = sf
    train: TrainFacts | None = None
    train_path: str | None = None
    if sf.train_yaml is not None:
        train_path = train_yaml_path(src.path, str(sf.train_yaml.value))
        train = _read_referenced(out, src, sf.train_yaml, train_path, max_bytes, overlay_text(texts, train_path),
                                 reads)
        out.train = train
    model = stated_model(src, train, sf)
    out.model_facts = model.facts
    out.experts_known = model.experts_known
    device_num = train.device_num if train is not None else None
    cluster, cluster_locs = build_cluster(src, sf.cluster, device_num, overrides)
    locations = _locations(train, sf)
    locations.update(cluster_locs)
    locations.update(model.locations)
    seq_location(locations, train, sf)

    dims: dict[str, Dimension] = {}
    for d in DIMENSIONS:
        dims[d] = _dimension(d, sf, train)
        if dims[d].location is not None:
            locations[f"parallelism.{d}"] = dims[d].location  # type: ignore[assignment]
    gbs = sf.global_batch_size or (train.global_batch_size if train else None)
    if sf.global_batch_unset is not None and gbs is not None:
        src.diag("HP114", f"global_batch_size 0 leaves the batch unset in HyperParallel's search, which then does not "
                 f"take the train.yaml's ([HP] Corrections 5); hp-plan searches at the train.yaml's {gbs.value}, the "
                 "batch the trainer runs: state it here to make both search the same", sf.global_batch_unset.loc.value,
                 "constraint.global_batch_size", data={"replace_value": int(gbs.value)})
    mem = sf.memory_limit_gb or (train.max_device_memory if train else None)
    _canonical(locations, "constraint.global_batch_size", gbs)
    _canonical(locations, "constraint.memory_limit_gb", mem)
    _canonical(locations, "recompute", sf.recompute or (train.recompute if train else None))
    _canonical(locations, "train_yaml", sf.train_yaml)
    _canonical(locations, "estimator.ratios_file", sf.ratios_file)

    request = _request(sf, train)
    plan = _search_recompute_plan(sf, train)
    schedule = _schedule(sf, train)
    opt = sf.optimizer_shard or (train.optimizer_shard if train else None)
    stated = search_stated(dims, cluster, gbs, plan, schedule, int(opt.value) if opt is not None else 1,
                            model.spec)
    run = _run(train, sf, overrides)
    stated = stack_optimizer(stated, run, opt is not None)
    out.config = Config(
        kind="search",
        path=src.path,
        model=model.spec,
        cluster=cluster,
        run=run,
        dimensions=MappingProxyType(dims),
        global_batch_size=int(gbs.value) if gbs is not None else None,
        memory_limit_gb=_memory_limit(mem, overrides),
        recompute=request,  # type: ignore[arg-type]
        stated_recompute=plan,
        recompute_modes=tuple(sf.recompute_modes.value) if sf.recompute_modes is not None else (),
        pipeline_schedule=schedule,  # type: ignore[arg-type]
        stated=stated, offload_gb_s=_offload(src, sf, request, cluster),
        optimizer_shard=int(opt.value) if opt is not None else 1,
        budget_source=_budget_source(overrides, cluster, mem),
        device_what_if=_device_what_if(overrides, cluster),
        memory_assumed=_memory_assumed(cluster_locs, overrides, mem),
        train_yaml=train_path,
        model_file=(train.resolution_file or None) if train is not None else None,
        ratios_file=(train_yaml_path(src.path, str(sf.ratios_file.value))
                     if sf.ratios_file is not None and str(sf.ratios_file.value).strip() else None),
        locations=MappingProxyType(locations),
    )


def _search_recompute_plan(sf: SearchFacts, train: TrainFacts | None) -> RecomputePlan:
    """The recompute a search config states: its own fixed `recompute`, else its train.yaml's (per layer)."""
    if sf.recompute is not None and sf.recompute.value in ("none", "selective", "full"):
        return RecomputePlan("off" if sf.recompute.value == "none" else sf.recompute.value)
    if train is not None:
        return RecomputePlan(_mode(train.recompute), _layers(train))  # type: ignore[arg-type]
    return RecomputePlan()


def _note_model_file(out: Resolved, train: TrainFacts) -> None:
    """The local config.json the train.yaml's model came from is a file this request read (Loaded.files): no
    output of the request may replace it, and the server re-checks when it changes."""
    if train.resolution_file:
        out.files.append(train.resolution_file)


def _read_referenced(out: Resolved, src: Source, ref: Val, path: str, max_bytes: int,
                     text: str | None = None, reads: Reads | None = None) -> TrainFacts | None:
    """Read the train.yaml a search config names (`text`: its unsaved editor buffer, which wins over the
    disk, also when the file is not saved yet); problems in it carry `file=` that path."""
    shown = str(ref.value)
    if text is None and not os.path.exists(path):
        src.diag("HP009", f"train_yaml '{shown}' not found (looked for {path}); fix the path, relative to this "
                 "file, or remove the key", ref.loc.value, "train_yaml", data={"resolved": path})
        return None
    if text is None and os.path.isdir(path):
        src.diag("HP009", f"train_yaml '{shown}' is a directory ({path}), not a train.yaml", ref.loc.value,
                 "train_yaml", data={"resolved": path})
        return None
    doc, diags = _open(path, text, max_bytes, reads)
    out.files.append(path)
    out.diagnostics.extend(replace(d, file=path) for d in diags)
    if doc is None or doc.root is None:
        why = diags[0].message if diags else "it is empty"
        src.diag("HP009", f"train_yaml '{shown}' cannot be read: {why}", ref.loc.value, "train_yaml",
                 data={"resolved": path})
        return None
    if not isinstance(doc.root, Map) or kind_of(doc.root) == "search":
        what = "a search config" if isinstance(doc.root, Map) else "not a YAML mapping"
        src.diag("HP009", f"train_yaml '{shown}' is {what}, not a trainer train.yaml", ref.loc.value, "train_yaml",
                 data={"resolved": path})
        return None
    tsrc = Source(doc, path, primary=False)
    out.sources.append(tsrc)
    facts = read_train(tsrc, base_dir=base_dir_of(path))
    if facts is not None:
        _note_model_file(out, facts)
    return facts


# -- pieces ------------------------------------------------------------------------------------------------------


def _dimension(d: str, sf: SearchFacts, train: TrainFacts | None) -> Dimension:
    decl: Decl | None = sf.dims.get(d)
    if decl is not None:
        state = "list" if decl.state == "list" else decl.state
        return Dimension(d, state, decl.values, "declared", decl.val.loc)  # type: ignore[arg-type]
    model_level = {"micro_batch_size": sf.local_batch_size, "vpp": sf.pp_interleave_num}.get(d)
    if model_level is not None:
        return Dimension(d, "fixed", (int(model_level.value),), "declared", model_level.loc)
    sched = sf.pipeline_schedule if sf.pipeline_schedule is not None else (
        train.pipeline_schedule if train is not None else None)
    if d == "vpp" and sched is not None and sched.value in ("1F1B", "gpipe", "dualpipev"):
        # A stated plain 1F1B or GPipe schedule has one chunk per stage, DualPipeV its own two (a V): no
        # interleaved vpp.
        return Dimension(d, "fixed", (1,), "declared" if sched is sf.pipeline_schedule else "train.yaml", sched.loc)
    if d == "sequence_parallel" and sf.use_seq_parallel is not None:
        return Dimension(d, "fixed", (int(bool(sf.use_seq_parallel.value)),), "declared", sf.use_seq_parallel.loc)
    # micro_batch_num is no search-space key of either train.yaml reader ([HP] §2.5-§2.6): it
    # follows the searched dp through the batch rule, so a train.yaml's value is not inherited.
    # A train.yaml's dp_shard_size -1 (the whole data-parallel domain dp·cp, torchtitan's convention) is kept as
    # -1: the search gives each candidate its whole domain (engine.search.space).
    if (train is not None and d in train.degrees and d != "micro_batch_num"
            and int(train.degrees[d].value) >= {"etp": 0, "fsdp": -1}.get(d, 1)):
        v = train.degrees[d]
        return Dimension(d, "fixed", (int(v.value),), "train.yaml", v.loc)
    if d == "etp":
        return Dimension(d, "fixed", (1,), "default", None)
    from_layout = _layout_vpp(sf, train) if d == "vpp" else None
    if from_layout is not None:
        return Dimension(d, "fixed", (int(from_layout.value),), "declared", from_layout.loc)
    return Dimension(d, "absent", (), "default", None)


def _layout_vpp(sf: SearchFacts, train: TrainFacts | None) -> Val | None:
    """The vpp a stated `pipeline_model_parallel_layout` sets where nothing states one (Megatron-LM takes vpp from
    it, MCORE-PPLAYOUT): its chunks over a fixed pp, positioned at the layout. None where pp is not fixed or the
    chunks do not divide (HP422 says so)."""
    lay = sf.layout.get(LAYER_LAYOUT) or (train.layout.get(LAYER_LAYOUT) if train is not None else None)
    decl = sf.dims.get("pp")
    if decl is not None:
        pp = decl.values[0] if decl.state == "fixed" and decl.values else None
    else:
        pp = int(train.degrees["pp"].value) if train is not None and "pp" in train.degrees else None
    return vpp_of_layer_layout(lay, pp)


def _canonical(locations: dict[str, Location], key: str, v: Val | None) -> None:
    if v is not None:
        locations[key] = v.loc


def _locations(train: TrainFacts | None, sf: SearchFacts | None) -> dict[str, Location]:
    out: dict[str, Location] = {}
    if train is not None:
        out.update({p: v.loc for p, v in train.locations.items()})
        if train.pretrained is not None:
            out["model.pretrained_model_name_or_path"] = train.pretrained.loc
    if sf is not None:
        out.update({p: v.loc for p, v in sf.locations.items()})
    return out


def _mode(v: Val | None) -> str:
    return str(v.value) if v is not None else "off"


def _layers(train: TrainFacts) -> tuple[tuple[int, int, Any], ...]:
    """The per-layer ranges; a trainer range with `count: null` runs to the model's last layer."""
    n = train.overrides.get("num_hidden_layers") or train.catalog_fields.get("num_hidden_layers")
    last = int(n.value) - 1 if n is not None and isinstance(n.value, int) and n.value > 0 else None
    return tuple((a, min(b, last) if b == OPEN_END and last is not None else b, m)
                 for a, b, m in train.recompute_layers)


def _offload(src: Source, sf: SearchFacts, request: str, cluster: ClusterSpec | None) -> float:
    """The host link offload is priced over (GB/s), or 0 with an HP431 error on `offload` where it cannot be:
    HyperParallel's refusals ([HP] §3.6, §5.14): offload is priced only in a choice of a mode per layer, and
    over a host link the device states or the config gives."""
    if sf.offload is None:
        return 0.0
    where = sf.offload.loc.value
    if request != "per_layer":
        src.diag("HP431", "offload is priced in a choice of a recompute mode per layer: give the search config "
                 f"recompute: per_layer (it is {request})", where, "offload")
        return 0.0
    if sf.offload.value is not True:
        return float(sf.offload.value)
    link = cluster.device.host_link_gb_s if cluster is not None else 0.0
    if cluster is not None and link <= 0:
        src.diag("HP431", f"device {cluster.device.name} states no host link to offload over; give "
                 "offload: {host_link_gb_s: <GB/s one direction>}", where, "offload")
    return float(link)


def _request(sf: SearchFacts | None, train: TrainFacts | None) -> str:
    if sf is not None and sf.recompute is not None:
        return str(sf.recompute.value)
    if train is not None and train.recompute is not None:
        mode = str(train.recompute.value)
        return "none" if mode == "off" else mode
    return "none"


def _schedule(sf: SearchFacts | None, train: TrainFacts | None) -> str:
    if sf is not None and sf.pipeline_schedule is not None:
        return str(sf.pipeline_schedule.value)
    if train is not None and train.pipeline_schedule is not None:
        return str(train.pipeline_schedule.value)
    if train is not None and "vpp" in train.degrees and int(train.degrees["vpp"].value) > 1:
        return "interleaved"
    if sf is not None and "vpp" not in sf.dims and sf.pp_interleave_num is None and _layout_vpp(sf, train):
        return "interleaved"
    return "1F1B"


def _framework(sf: SearchFacts | None, overrides: ClusterOverrides | None) -> str:
    """The framework priced: --framework (explicit) > estimator.framework > hpLsp.framework > the default."""
    stated = str(sf.framework.value) if sf is not None and sf.framework is not None else None
    ov = overrides.framework if overrides is not None else None
    if ov and ((overrides is not None and overrides.explicit) or stated is None):
        return FRAMEWORK_ALIASES.get(ov.strip().lower(), ov.strip().lower())
    return stated or DEFAULT_FRAMEWORK


def _same(value: Any) -> Any:
    return value


# The run options each file kind states as a field of the same name (TrainFacts, SearchFacts) and how each value
# converts; their overlap flags (`overlaps`) come after. Where both files state one, the search config's wins.
_TRAIN_RUN_FIELDS: tuple[tuple[str, Any], ...] = (
    ("fp8", bool), ("reshard_after_forward", bool), ("cp_algo", _same), ("selective_policy", _same),
    ("recompute_modules", tuple), ("param_bytes", int), ("loss_parallel", bool), ("compile", bool))
_SEARCH_RUN_FIELDS: tuple[tuple[str, Any], ...] = (
    ("compile", bool), ("fp8", bool), ("cp_algo", _same), ("selective_policy", _same), ("recompute_modules", tuple),
    ("moe_dispatcher", _same), ("framework_version", str), ("fp8_recipe", _same), ("fp8_param_gather", bool),
    ("loss_chunks", int), ("param_bytes", int), ("cpu_offload_layers", int))


def _stated_run(facts: TrainFacts | SearchFacts, fields: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """The run options one file states: its `fields` that are set, then its overlap flags."""
    out = {name: convert(getattr(facts, name).value) for name, convert in fields
           if getattr(facts, name) is not None}
    out.update({k: bool(v.value) for k, v in facts.overlaps.items()})
    return out


def _run(train: TrainFacts | None, sf: SearchFacts | None, overrides: ClusterOverrides | None = None) -> RunOptions:
    kw: dict[str, Any] = {"framework": _framework(sf, overrides)}
    if train is not None:
        kw.update(_stated_run(train, _TRAIN_RUN_FIELDS))
    if sf is not None:  # estimator.cp_algo and the other search-config keys win over the train.yaml's ([HP] §4.2)
        kw.update(_stated_run(sf, _SEARCH_RUN_FIELDS))
    layout = {**(train.layout if train is not None else {}), **(sf.layout if sf is not None else {})}
    if layout:  # the search config's keys win over the train.yaml's, key by key
        kw["pipeline_layout"] = layout_of(layout)
    init = (sf.param_init if sf is not None else None) or (train.param_init if train is not None else None)
    if init is not None:  # stored weights' width wins over the compute dtype (read_param_init)
        kw["param_bytes"] = DTYPES[str(init.value)]
        kw["master_weights"] = DTYPES[str(init.value)] < 4
    kw.update(_state_widths(train, sf, int(kw.get("param_bytes", 2))))
    return RunOptions(**kw)


def _state_widths(train: TrainFacts | None, sf: SearchFacts | None, param_bytes: int) -> dict[str, Any]:
    """Gradient and optimizer-state widths as the files state them (docs/formats.md §1-§2).

    `mixed_precision.enabled: false` trains in the weights' own dtype: gradients and Adam states as wide as
    the weights, no fp32 master copy (a bf16 recipe then keeps 2 + 2 + 4 bytes per parameter); else
    `mixed_precision.reduce_dtype` is the gradients' width. The search config's estimator.grad_dtype,
    optimizer_state_dtype and master_weights win over the train.yaml's."""
    out: dict[str, Any] = {}
    if train is not None and train.mp_enabled is not None and not train.mp_enabled.value:
        out.update(grad_bytes=param_bytes, optimizer_state_bytes=param_bytes, master_weights=False)
    if train is not None and train.grad_dtype is not None:
        out["grad_bytes"] = int(train.grad_dtype.value)
    if train is not None and train.optimizer_states is not None:
        out["optimizer_states"] = int(train.optimizer_states.value)
    if sf is not None:
        if sf.grad_dtype is not None:
            out["grad_bytes"] = DTYPES[str(sf.grad_dtype.value)]
        if sf.optimizer_state_dtype is not None:
            out["optimizer_state_bytes"] = DTYPES[str(sf.optimizer_state_dtype.value)]
        if sf.master_weights is not None:
            out["master_weights"] = bool(sf.master_weights.value)
    return out


def _memory_assumed(cluster_locs: Mapping[str, Location], overrides: ClusterOverrides | None,
                    stated_limit: Val | None) -> bool:
    """Whether a budget the files state is priced on the assumed default device's memory (Config.memory_assumed):
    a limit the files state, and no device type or device memory from the files, the flags or the settings. An
    editor setting's limit only narrows the budget (hp_lsp.settings), so it is capped as ever."""
    if stated_limit is None:
        return False
    ov = overrides or ClusterOverrides()
    stated = ("cluster.device_type" in cluster_locs or "cluster.device_memory_gb" in cluster_locs)
    return not (stated or ov.device_type or ov.memory_gb)


def _device_what_if(overrides: ClusterOverrides | None, cluster: ClusterSpec | None) -> str | None:
    """The command-line flags that set the priced device memory (`--device-type H200 --memory-gb 140`), or
    None: editor settings only fill gaps, and flags that did not reach the cluster changed nothing."""
    if overrides is None or not overrides.explicit or cluster is None:
        return None
    flags = []
    if overrides.device_type:
        flags.append(f"--device-type {overrides.device_type}")
    if overrides.memory_gb and abs(cluster.memory_gib - float(overrides.memory_gb)) <= 1e-9:
        flags.append(f"--memory-gb {overrides.memory_gb:g}")
    return " ".join(flags) or None


def _memory_limit(stated: Val | None, overrides: ClusterOverrides | None) -> float | None:
    """The memory limit: the files' own, else the overrides' (an editor setting); Config.budget_gib caps it at
    the device memory either way."""
    if stated is not None:
        return float(stated.value)
    return overrides.memory_limit_gb if overrides is not None else None


def _budget_source(overrides: ClusterOverrides | None, cluster: ClusterSpec | None, stated: Val | None) -> str | None:
    """Where the budget comes from when no file states it: the overrides, when the limit or the device memory
    priced is theirs (messages then name the setting or flag, since the file has no key to point at)."""
    if stated is not None or overrides is None or cluster is None:
        return None
    limit = overrides.memory_limit_gb
    if limit and limit < cluster.memory_gib:
        return overrides.memory_limit_source or "the cluster overrides"
    if not overrides.memory_gb:
        return None
    if abs(cluster.memory_gib - float(overrides.memory_gb)) > 1e-9:
        return None
    return overrides.memory_source or ("the command line" if overrides.explicit else "the cluster overrides")
