"""A multimodal model's vision tower and its visual sequence length, read as HyperParallel reads them ([HP] §2.4
`vision`, `visual_seq_len`; [HP] §2.5 "Vision-language configs" and "Vision sequence length"; [HP] §3.4 "Vision").

Where a tower is stated: a search config's `model.vision`; a train.yaml's `model.config_overrides.vision` (or,
in the AutoModels schema, `model.vision` beside the factory's other keyword overrides); a local config.json's
`vision_config`, which upstream maps into model_spec["vision"] (depth → num_hidden_layers, num_heads →
num_attention_heads). Later layers win key by key, as for the language model's facts.

The visual sequence: a search config's `model.visual_seq_len`, else a train.yaml's `context.visual_seq_len` (or
`model.config_overrides.visual_seq_len`), else ⌊num_position_embeddings ÷ spatial_merge_size²⌋, else 1024
with a warning (HP213), upstream's order and default.
"""

from __future__ import annotations

from typing import Any

from engine.catalog.models import VISION_REQUIRED, vision_canonical
from engine.config.model_facts import GATED_ACTS, _foreign
from engine.config.reader import Source, Val
from engine.document import Map
from engine.positions import DOCUMENT_START
from engine.specs import VisionTower

# Upstream's visual sequence when nothing states it and nothing derives it ([HP] §2.5).
DEFAULT_VISUAL_SEQ_LEN = 1024


def read_vision(src: Source, parent: Map | None, prefix: str) -> dict[str, Val]:
    """The tower facts of `parent.vision` (a mapping; anything else is HP107 through Source.section), typed."""
    section = src.section(parent, "vision", f"{prefix}.vision")
    out: dict[str, Val] = {}
    if section is None:
        return out
    for key, _kn, _vn in section.items():
        canon = vision_canonical(key)
        if canon is None or (canon in out and key != canon):
            continue
        dotted = f"{prefix}.vision.{key}"
        v = src.str_(section, key, dotted) if canon == "hidden_act" else src.int_(section, key, dotted, minimum=0)
        if v is not None:
            out[canon] = v
    return out


def vision_anchor(src: Source, parent: Map | None, prefix: str) -> Val | None:
    """The `vision` key itself, where a missing-field diagnostic points."""
    if parent is None or "vision" not in parent:
        return None
    kn = parent.key_node("vision")
    return Val(None, f"{prefix}.vision", src.location(kn, parent.get("vision"))) if kn is not None else None


def build_vision(layers: list[dict[str, Val]], seq: Val | None, report: Source, anchor: Val | None
                 ) -> tuple[VisionTower | None, bool]:
    """Merge the tower's field layers (lowest priority first) into a VisionTower: (tower or None, ok). Missing or
    non-positive required fields are HP212 errors (upstream refuses the model: "vision tower is missing required
    fields", "vision.{name} is required and must be positive"); an unstated visual sequence is HP213."""
    merged: dict[str, Val] = {}
    for layer in layers:
        merged.update(layer)
    if not merged:
        return None, True
    def emit(code: str, msg: str, v: Val | None, *, data: dict[str, Any] | None = None) -> None:
        at = v if v is not None else anchor
        if at is None:
            report.diag(code, msg, DOCUMENT_START, "model.vision", data=data)
            return
        sink = report if at.loc.file == report.path else _foreign(report, at)
        sink.diag(code, msg, at.loc.value if v is not None else at.loc.key, at.path, data=data)
        if sink is not report:
            report.diags.extend(sink.diags)

    missing = [f for f in VISION_REQUIRED if f not in merged]
    if missing:
        emit("HP212", f"vision tower is missing required fields: {', '.join(missing)} (a multimodal run prices its "
             "tower: state them, or remove the vision section)", None, data={"missing": missing})
        return None, False
    ok = True
    for f in (*VISION_REQUIRED, "spatial_merge_size"):
        v = merged.get(f)
        if v is not None and int(v.value) <= 0:
            emit("HP212", f"vision.{f} is required and must be positive, got {v.value!r}", v)
            ok = False
    if not ok:
        return None, False

    def iv(key: str, default: int = 0) -> int:
        v = merged.get(key)
        return int(v.value) if v is not None else default

    act = merged.get("hidden_act")
    return VisionTower(
        num_layers=iv("num_hidden_layers"), hidden=iv("hidden_size"), heads=iv("num_attention_heads"),
        seq_len=_visual_seq_len(seq, merged, emit), ffn=iv("intermediate_size"),
        gated_mlp=act is not None and str(act.value).strip().lower() in GATED_ACTS,
        out_hidden=iv("out_hidden_size"), merge=iv("spatial_merge_size", 1)), True


def _visual_seq_len(seq: Val | None, merged: dict[str, Val], emit: Any) -> int:
    if seq is not None and int(seq.value) > 0:
        return int(seq.value)
    npe, merge = merged.get("num_position_embeddings"), merged.get("spatial_merge_size")
    if npe is not None and merge is not None and int(npe.value) > 0 and int(merge.value) > 0:
        derived = int(npe.value) // (int(merge.value) ** 2)
        if derived > 0:
            return derived
    emit("HP213", f"no visual sequence length stated: pricing the vision tower at {DEFAULT_VISUAL_SEQ_LEN} "
                "visual tokens per sample, as HyperParallel does. Set visual_seq_len (a search config's model, a "
         "train.yaml's context), or the tower's num_position_embeddings and spatial_merge_size", None,
         data={"assumed": DEFAULT_VISUAL_SEQ_LEN})
    return DEFAULT_VISUAL_SEQ_LEN
