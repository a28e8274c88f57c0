"""Reading a stated pipeline layout (engine.specs.PipelineLayout) from the keys the frameworks read.

Megatron-Core's TransformerConfig names (`account_for_embedding_in_pipeline_split`,
`account_for_loss_in_pipeline_split`, `num_layers_in_first_pipeline_stage`, `num_layers_in_last_pipeline_stage`;
Megatron-LM's `decoder_first_pipeline_num_layers` / `decoder_last_pipeline_num_layers` spell the last two;
`pipeline_model_parallel_layout`, every chunk's layers, engine.config.layer_layout) and
HyperParallel's execution-spec keys (`offset`, `emb_out_in_offset`, `mtp_in_offset`; [HP] §2.8, §6.7) and
MindSpeed-LLM's no-op layers (`noop_layers`, its `--noop-layers`: a list of indices or its comma-separated text) are read
in a search config's `pp_config`, a train.yaml's `accelerator`, and (`offset`, as HyperParallel's recipes write
it) in `model` / `model.config_overrides`. Each value is kept with its position so diagnostics land on it.
"""

from __future__ import annotations

from typing import Any

from engine.config.layer_layout import LayerLayoutError, layout_from_names, layout_vpp, parse_layout_text
from engine.config.reader import Source, Val
from engine.document import Map, Scalar, Seq
from engine.specs import PipelineLayout, noop_text

LAYOUT_BOOLS = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "emb_out_in_offset",
                "mtp_in_offset")
LAYOUT_INTS = {"num_layers_in_first_pipeline_stage": "num_layers_in_first_pipeline_stage",
               "num_layers_in_last_pipeline_stage": "num_layers_in_last_pipeline_stage",
               "decoder_first_pipeline_num_layers": "num_layers_in_first_pipeline_stage",
               "decoder_last_pipeline_num_layers": "num_layers_in_last_pipeline_stage"}
LAYER_LAYOUT = "pipeline_model_parallel_layout"
NOOP_LAYERS = "noop_layers"
LAYOUT_KEYS = (*LAYOUT_BOOLS, *LAYOUT_INTS, "offset", LAYER_LAYOUT, NOOP_LAYERS)
# Which keys state each kind of layout (engine.cost.layout.chunk_layers tries them in this order): a refusal is
# reported at the key of the kind that was priced.
_KIND_KEYS = {
    "layers": (LAYER_LAYOUT,),
    "noop": (NOOP_LAYERS,),
    "offset": ("offset", "emb_out_in_offset", "mtp_in_offset"),
    "stages": ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
               "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"),
    "split": ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "emb_out_in_offset"),
}


def layout_paths(lay: PipelineLayout) -> tuple[str, ...]:
    """The dotted paths that may state the kind of layout `lay` prices, most specific first (a search config's
    pp_config, a train.yaml's accelerator, then the model sections that hold HyperParallel's offset)."""
    kind = ("layers" if lay.layer_layout else "noop" if lay.noop_layers else "offset" if lay.offset
            else "stages" if lay.first_stage_layers or lay.last_stage_layers else "split")
    keys = _KIND_KEYS[kind]
    paths = [f"{sec}.{k}" for sec in ("pp_config", "accelerator") for k in keys]
    if kind == "offset":
        paths[1:1] = ["model.offset", "model.config_overrides.offset"]
    return tuple(paths)


def read_layout(src: Source, section: Map | None, prefix: str, into: dict[str, Val]) -> None:
    """The layout keys of `section` into `into` (canonical name -> Val); bad values get a positioned
    diagnostic and are left out."""
    for key in LAYOUT_BOOLS:
        v = src.bool_(section, key, f"{prefix}.{key}")
        if v is not None:
            into[key] = v
    for key, canon in LAYOUT_INTS.items():
        v = src.int_(section, key, f"{prefix}.{key}")
        if v is not None:
            into[canon] = v
    off = read_offset(src, section, f"{prefix}.offset")
    if off is not None:
        into["offset"] = off
    chunks = read_layer_layout(src, section, f"{prefix}.{LAYER_LAYOUT}")
    if chunks is not None:
        into[LAYER_LAYOUT] = chunks
    noop = read_noop_layers(src, section, f"{prefix}.{NOOP_LAYERS}")
    if noop is not None:
        into[NOOP_LAYERS] = noop


# The most no-op layers read: MindSpeed pads a layer count by a few (DeepSeek-V3's 3 of 64); a longer list is no
# padding, and reading one element by element would be a hostile file's unbounded work.
MAX_NOOP_LAYERS = 4096


def noop_indices(raw: object) -> tuple[int, ...] | None:
    """No-op layer indices as MindSpeed-LLM's `--noop-layers` takes them (MS-NOOP): a list of non-negative integers,
    one integer, or its comma-separated text ("61,62,63"); the sorted distinct indices, or None where `raw` is not
    that ("1,,2", a negative index, more than MAX_NOOP_LAYERS). The reader (read_noop_layers) and `apply`'s
    read-back (engine.edit.strategy) both take them so."""
    items: list[object]
    if isinstance(raw, str):
        items = [int(t) if t.strip().isdigit() else t for t in raw.split(",", MAX_NOOP_LAYERS)]
    elif isinstance(raw, list | tuple):
        items = list(raw[:MAX_NOOP_LAYERS + 1])
    else:
        items = [raw]
    ints = [i for i in items if isinstance(i, int) and not isinstance(i, bool) and i >= 0]
    if len(items) > MAX_NOOP_LAYERS or len(ints) != len(items):
        return None
    return tuple(sorted(set(ints)))


def noop_pad(layers: int, parts: int) -> tuple[int, ...]:
    """The fewest no-op layers that make `layers` split into `parts` equal ones, at the end of the count, as
    MindSpeed-LLM's DeepSeek-V3 scripts place them (61 layers into 16: 61, 62, 63); () where it splits already."""
    return tuple(range(layers, layers + (-layers) % parts))


def noop_fills(layers: Any, chunks: Any) -> Any:
    """Whether noop_pad's padding of `layers` into `chunks` equal ones is a plan to run: some padding is needed
    and every chunk keeps a real layer (the padding, at the end of the count, fills less than the last chunk: a
    chunk of no-op layers alone is a pipeline slot the schedule runs, hops and waits for with nothing in it).
    Element-wise on ints or numpy arrays: the search's padding passes (engine.search.passes) and its space, which
    leaves those candidates to them (engine.search.space), read the same rule."""
    pad = (-layers) % chunks
    return (pad > 0) & (pad * chunks < layers + pad)


def noop_fix(pad: tuple[int, ...]) -> dict[str, object]:
    """The quick-fix data that states `pad` in a search config (`set_at` pp_config.noop_layers, in MindSpeed's
    text): for the findings whose fix is the padding (HP416, HP505, HP614)."""
    return {"set_at": {"path": f"pp_config.{NOOP_LAYERS}", "value": noop_text(pad)}}


def read_noop_layers(src: Source, section: Map | None, dotted: str) -> Val | None:
    """MindSpeed-LLM's `--noop-layers` (noop_indices). The Val's value is the sorted tuple of distinct indices
    (empty: nothing stated); what is not that is HP103 at the value (whether the indices fit the model and the split
    is HP422's, engine.validate.pipeline)."""
    v = src.val(section, dotted.rsplit(".", 1)[-1], dotted)
    if v is None:
        return None
    node = v.value
    if node is None or (isinstance(node, str) and not node.strip()):
        return None  # MindSpeed's default: no no-op layers
    raw = [i.value if isinstance(i, Scalar) else i for i in node.items[:MAX_NOOP_LAYERS + 1]] \
        if isinstance(node, Seq) else node
    idx = noop_indices(raw)
    if idx is None:
        src.diag("HP103", f"{dotted} must list the no-op layers' indices in the padded layer count: non-negative "
                 f"integers (at most {MAX_NOOP_LAYERS}), as a list or as MindSpeed's text \"61,62,63\"",
                 v.loc.value, dotted)
        return None
    return Val(idx, v.path, v.loc) if idx else None


def read_layer_layout(src: Source, section: Map | None, dotted: str) -> Val | None:
    """Megatron-Core's `pipeline_model_parallel_layout`: a string ("Et|(tt|)*30mL") or a list of lists of layer
    names, as its TransformerConfig takes either. The Val's value is the tuple of per-chunk symbol strings; what
    Megatron-Core could not parse is HP106 at the value (whether it fits pp, vpp and the model is HP422's,
    engine.validate.pipeline)."""
    v = src.val(section, dotted.rsplit(".", 1)[-1], dotted)
    if v is None:
        return None
    node = v.value
    try:
        if isinstance(node, str):
            chunks = parse_layout_text(node)
        elif isinstance(node, Seq) and node.items and all(
                isinstance(row, Seq) and all(isinstance(i, Scalar) and isinstance(i.value, str) for i in row.items)
                for row in node.items):
            chunks = layout_from_names([[str(i.value) for i in row.items if isinstance(i, Scalar)]
                                        for row in node.items if isinstance(row, Seq)])
        else:
            src.diag("HP106", f"{dotted} must be a layout string such as \"Et|(tt|)*30mL\" or a list of lists of "
                     "layer names (embedding, decoder, mtp, loss), one list per pipeline chunk", v.loc.value, dotted)
            return None
    except LayerLayoutError as exc:
        src.diag("HP106", f"{dotted}: {exc}", v.loc.value, dotted)
        return None
    return Val(chunks, v.path, v.loc)


def vpp_of_layer_layout(lay: Val | None, pp: int | None) -> Val | None:
    """The vpp a read layer layout sets at a fixed `pp` where nothing else states one (Megatron-LM takes it from the
    layout, MCORE-PPLAYOUT), positioned at the layout; None without a layout, a fixed pp or interleaving."""
    vpp = layout_vpp(len(lay.value), pp) if lay is not None and pp else None
    return Val(vpp, lay.path, lay.loc) if vpp is not None and lay is not None else None


def read_offset(src: Source, section: Map | None, dotted: str) -> Val | None:
    """HyperParallel's `offset`: 0, a list with one integer per stage, or a list of per-chunk lists. The Val's
    value is the normalised tuple of per-stage tuples (empty for 0: nothing stated)."""
    v = src.val(section, dotted.rsplit(".", 1)[-1], dotted)
    if v is None:
        return None
    node = v.value
    if isinstance(node, int) and not isinstance(node, bool):
        if node:
            src.diag("HP112", f"{dotted} = {node}: a single offset for every stage is not priced (give one entry per "
                     "pipeline stage)", v.loc.value, dotted)
        return None
    rows: list[tuple[int, ...]] = []
    items = node.items if isinstance(node, Seq) else None
    for item in items or ():
        if isinstance(item, Scalar) and _is_int(item.value):
            rows.append((int(item.value),))
        elif isinstance(item, Seq) and item.items and all(isinstance(i, Scalar) and _is_int(i.value)
                                                           for i in item.items):
            rows.append(tuple(int(i.value) for i in item.items if isinstance(i, Scalar)))
        else:
            items = None
            break
    if items is None:
        src.diag("HP103", f"{dotted} must be a list with one integer (or one list of integers per virtual chunk) per "
                 "pipeline stage", v.loc.value, dotted)
        return None
    if not any(any(r) for r in rows):
        return None
    return Val(tuple(rows), v.path, v.loc)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def layout_of(vals: dict[str, Val]) -> PipelineLayout:
    """The PipelineLayout the read keys state (HyperParallel's emb_out_in_offset accounts both the embedding and
    the output)."""
    def flag(k: str) -> bool:
        return k in vals and bool(vals[k].value)

    emb_out = flag("emb_out_in_offset")
    return PipelineLayout(
        embedding_in_split=flag("account_for_embedding_in_pipeline_split") or emb_out,
        loss_in_split=flag("account_for_loss_in_pipeline_split") or emb_out,
        first_stage_layers=int(vals["num_layers_in_first_pipeline_stage"].value)
        if "num_layers_in_first_pipeline_stage" in vals else 0,
        last_stage_layers=int(vals["num_layers_in_last_pipeline_stage"].value)
        if "num_layers_in_last_pipeline_stage" in vals else 0,
        offset=tuple(vals["offset"].value) if "offset" in vals else (),
        mtp_in_offset=flag("mtp_in_offset"),
        layer_layout=tuple(vals[LAYER_LAYOUT].value) if LAYER_LAYOUT in vals else (),
        noop_layers=tuple(vals[NOOP_LAYERS].value) if NOOP_LAYERS in vals else (),
    )
