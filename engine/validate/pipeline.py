"""Pipeline layout options against the layer count ([HP] §3.2 checks 8-10) and the per-layer
recompute ranges of a train.yaml (docs/formats.md §1 `activation_checkpoint.layers`, ext)."""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any

from engine.catalog.frameworks import FRAMEWORKS, framework_of, taken_layout
from engine.config.layer_layout import layout_vpp
from engine.config.reader import Source, Val
from engine.config.stated_layout import layout_paths
from engine.config.types import Location
from engine.document import Map, Node, Scalar, Seq, find
from engine.specs import PipelineLayout
from engine.validate.context import Ctx, Declared

if TYPE_CHECKING:
    from engine.cost.layout import LayoutError


def check(ctx: Ctx) -> None:
    _untaken_layout(ctx)
    m = ctx.model
    if m is None or m.num_layers <= 0:  # every rule here compares with the layer count
        return
    layers = m.num_layers
    _partition(ctx, layers)
    _offsets(ctx, layers)
    _layout(ctx, layers)
    _recompute_ids(ctx, layers)
    _train_layer_ranges(ctx, layers)


def _pp_config(ctx: Ctx) -> tuple[Map | None, str | None]:
    for src in ctx.resolved.sources:
        if src.primary and ctx.config.kind == "search" and src.root is not None:
            node = src.root.get("pp_config")
            return (node if isinstance(node, Map) else None), src.path
    return None, None


def _ints(node: object) -> list[int] | None:
    if isinstance(node, Seq) and all(isinstance(i, Scalar) and type(i.value) is int for i in node.items):
        return [int(i.value) for i in node.items if isinstance(i, Scalar)]
    return None


def _partition(ctx: Ctx, layers: int) -> None:
    ppc, _ = _pp_config(ctx)
    if ppc is None:
        return
    mode = ppc.get("stage_partition_mode")
    part = ppc.get("stage_partition")
    if not (isinstance(mode, Scalar) and str(mode.value).lower() == "manual") or not isinstance(part, Seq):
        return
    if not part.items:
        return
    pps = sorted({d.value for d in ctx.declared.get("pp", [])} | _pp_degree_values(ctx))
    stages = len(part.items)
    for p in pps:
        if p > 1 and p != stages:
            ctx.emit("HP419", f"stage_partition has {stages} stages, but pp_degree is {p}: give one entry per "
                     "pipeline stage", _loc(ctx, part), "pp_config.stage_partition")
    counts = _ints(part)
    if counts is not None:  # layers per stage
        if sum(counts) != layers:
            ctx.emit("HP419", f"stage_partition places {sum(counts)} layers, but the model has {layers}",
                     _loc(ctx, part), "pp_config.stage_partition")
        return
    covered: list[int] = []
    for stage in part.items:
        ids = _ints(stage)
        if ids is None:
            ctx.emit("HP419", "stage_partition must list layer counts per stage, or the layer ids of each stage",
                     _loc(ctx, stage), "pp_config.stage_partition")
            return
        covered += ids
    missing = sorted(set(range(layers)) - set(covered))
    extra = sorted({i for i in covered if not 0 <= i < layers})
    if missing:
        ctx.emit("HP419", f"stage_partition does not cover layers: {missing[:20]}", _loc(ctx, part),
                 "pp_config.stage_partition")
    if extra:
        ctx.emit("HP419", f"stage_partition references non-existent layers: {extra[:20]} (valid: 0-{layers - 1})",
                 _loc(ctx, part), "pp_config.stage_partition")


def _pp_degree_values(ctx: Ctx) -> set[int]:
    s = ctx.resolved.search
    return set(s.pp_degree.values) if s is not None and s.pp_degree is not None else set()


def _loc(ctx: Ctx, node: object):  # type: ignore[no-untyped-def]
    from engine.config.types import Location

    rng = node.range  # type: ignore[attr-defined]
    return Location(ctx.config.path, rng, rng)


def _offsets(ctx: Ctx, layers: int) -> None:
    ppc, _ = _pp_config(ctx)
    node = ppc.get("layer_offset_range") if ppc is not None else None
    vals = _ints(node)
    if node is None or vals is None or len(vals) != 2 or vals == [0, 0]:
        return
    lo, hi = vals
    if lo > hi:
        ctx.emit("HP420", f"layer_offset_range min ({lo}) must be <= max ({hi})", _loc(ctx, node),
                 "pp_config.layer_offset_range")
    if abs(lo) >= layers or abs(hi) >= layers:
        ctx.emit("HP420", f"layer_offset_range ({lo}, {hi}) exceeds num_layers ({layers})", _loc(ctx, node),
                 "pp_config.layer_offset_range")


def _untaken_layout(ctx: Ctx) -> None:
    """HP533 at the key of a layout option the stack cannot be told (a per-chunk layer layout, no-op layers:
    engine.catalog.frameworks.taken_layout drops it, and its own split is priced instead). Said here, where the
    files are checked, not when a plan is priced, so that a train.yaml checked alone hears it too."""
    fw = framework_of(ctx.config.run)
    lay = ctx.config.run.pipeline_layout
    options = ((PipelineLayout(layer_layout=lay.layer_layout), attrgetter("layer_layout"),
                "per-chunk layer layout (pipeline_model_parallel_layout; offered by {} from Megatron-Core 0.13): "
                "priced with its own split"),
               (PipelineLayout(noop_layers=lay.noop_layers), attrgetter("noop_layers"),
                "no-op layers (noop_layers; offered by {}, --noop-layers): priced with its own split of the "
                "model's layers"))
    for part, offers, what in options:
        if not part.stated or offers(fw):
            continue
        key = next((k for k in layout_paths(part) if k in ctx.config.locations), None)
        by = ", ".join(f.name for f in FRAMEWORKS.values() if offers(f))
        ctx.emit("HP533", f"{fw.qualified} has no " + what.format(by),
                 ctx.config.locations.get(key) if key is not None else None, key or "pp_config")


def _layout(ctx: Ctx, layers: int) -> None:
    """A stated layout (offsets, first/last-stage layers, embedding/loss in the split) against the fixed pp and
    vpp: what the framework would refuse (engine.cost.layout.chunk_layers) is an error at the layout key."""
    lay = taken_layout(ctx.config.run)  # a layout option the stack cannot take is HP533's, priced without it
    pp, vpp = ctx.fixed.get("pp"), ctx.fixed.get("vpp")
    if not lay.stated or pp is None or pp.value < 1:
        return
    p = pp.value
    v = vpp.value if vpp is not None and vpp.value > 1 and p > 1 else 1
    if vpp is None and lay.layer_layout:  # vpp searched: the candidates of the layout's own vpp carry it
        v = layout_vpp(len(lay.layer_layout), p) or v
    if p == 1 and not (lay.offset or lay.layer_layout or lay.noop_layers):
        return
    m = ctx.model
    from engine.cost.layout import LayoutError, chunk_layers  # numpy only where a layout is stated

    try:
        chunk_layers(layers, m.mtp_depth if m is not None else 0, p, v, lay,
                     ctx.config.pipeline_schedule == "dualpipev" and p > 1)
    except LayoutError as exc:
        key = next((k for k in layout_paths(lay) if k in ctx.config.locations), None)
        loc = ctx.config.locations.get(key) if key is not None else None
        ctx.emit("HP422", f"pipeline layout for pp {p}" + (f" × vpp {v}" if v > 1 else "") + f": {exc}",
                 loc, key or "pp_config", data=_vpp_fix(exc, vpp, loc))


def _vpp_fix(exc: LayoutError, vpp: Declared | None, layout_at: Location | None) -> dict[str, Any]:
    """HP422's quick fix where the layer layout is right and the stated vpp is not (Megatron-LM takes vpp from
    the layout): set the vpp key, in the layout's own file, to the layout's chunks per stage."""
    if exc.vpp is None or vpp is None or vpp.location is None or layout_at is None \
            or vpp.location.file != layout_at.file:
        return {}
    return {"set_at": {"path": vpp.path, "value": exc.vpp}}


def _recompute_ids(ctx: Ctx, layers: int) -> None:
    ppc, _ = _pp_config(ctx)
    node = ppc.get("layer_recompute_layers") if ppc is not None else None
    vals = _ints(node)
    if node is None or vals is None:
        return
    bad = sorted({i for i in vals if not 0 <= i < layers})
    if bad:
        ctx.emit("HP421", f"layer_recompute_layers references non-existent layers: {bad[:20]}. Valid range: "
                 f"[0, {layers - 1}]", _loc(ctx, node), "pp_config.layer_recompute_layers")


def _train_layer_ranges(ctx: Ctx, layers: int) -> None:
    train = ctx.resolved.train
    if train is None or not train.recompute_layers:
        return
    root = train.src.root
    _trainer_layer_ranges(ctx, train.src, find(root, "activation_checkpoint.layer_ranges")[1], layers)
    sec = find(root, "activation_checkpoint.layers")[1]
    if not isinstance(sec, Map):
        return
    for key, kn, _vn in sec.items():
        parts = key.replace(" ", "").split("-")
        try:
            last = int(parts[-1])
        except ValueError:
            continue
        if last >= layers:
            v = Val(None, f"activation_checkpoint.layers.{key}", train.src.location(kn, kn))
            ctx.emit("HP421", f"recompute range '{key}' goes past the last layer ({layers - 1})", v.loc, v.path,
                     data={"valid": [0, layers - 1]})


def _trainer_layer_ranges(ctx: Ctx, src: Source, ranges: Node | None, layers: int) -> None:
    """The trainer's `activation_checkpoint.layer_ranges: [{first, count | null, mode}]` ([HP] Corrections 2):
    ordered and non-overlapping (HP424 where a range starts inside or before the one before it), only the last may
    run to the end (`count: null`, HP424), and every range on the model's layers (HP421)."""
    if not isinstance(ranges, Seq):
        return
    items = ranges.items
    prev_end = -1
    for i, item in enumerate(items):
        if not isinstance(item, Map):
            continue
        first, count = item.get("first"), item.get("count")
        a = first.value if isinstance(first, Scalar) else None
        n = count.value if isinstance(count, Scalar) else None
        if not isinstance(a, int) or isinstance(a, bool) or (n is not None and (not isinstance(n, int) or n < 1)):
            continue  # the reader said what is wrong with the entry
        dotted = f"activation_checkpoint.layer_ranges[{i}]"
        at_first = src.location(item.key_node("first") or first, first)
        at_count = src.location(item.key_node("count") or count or item, count or item)
        if n is None and i < len(items) - 1:
            ctx.emit("HP424", f"{dotted} runs to the last layer (count: null) but is not the last range: only the "
                     "last range may leave its count open", at_count, f"{dotted}.count")
        if a <= prev_end:
            ctx.emit("HP424", f"{dotted} starts at layer {a}, inside or before the range before it (which ends at "
                     f"layer {prev_end}): the trainer takes ranges in order, without overlap", at_first,
                     f"{dotted}.first")
        if a >= layers:
            ctx.emit("HP421", f"{dotted} starts at layer {a}, past the last layer ({layers - 1})", at_first,
                     f"{dotted}.first", data={"valid": [0, layers - 1]})
        elif n is not None and a + n - 1 >= layers:
            ctx.emit("HP421", f"{dotted} runs to layer {a + n - 1}, past the last layer ({layers - 1})", at_count,
                     f"{dotted}.count", data={"valid": [0, layers - 1]})
        prev_end = max(prev_end, layers - 1 if n is None else a + n - 1)
