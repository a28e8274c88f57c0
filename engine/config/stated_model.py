"""The model a train.yaml (and a search config over it) states, assembled from what the files wrote.

Layers, most specific last: the catalog entry or config.json the train.yaml names, its config_overrides, a
search config's model keys; then the vision tower (engine.config.vision) and the trained sequence length
([HP] §2.1: max_position_embeddings defaults to 4096). A model this offline planner cannot know (a name it
cannot resolve, a factory it cannot read) stays None with a warning that says what would let it price it
(HP205), never judged dense or MoE. engine.config.resolve reads the files and puts this model in the Config.
"""

from __future__ import annotations

from dataclasses import replace

from engine.config.model_facts import REQUIRED, ModelResult, build_model
from engine.config.reader import Source, Val
from engine.config.search_config import SearchFacts
from engine.config.train import NOT_PRICED, TrainFacts
from engine.config.types import Location
from engine.config.vision import build_vision
from engine.diagnostics import Severity
from engine.positions import DOCUMENT_START

DEFAULT_SEQ_LEN = 4096  # [HP] §2.1: max_position_embeddings defaults to 4096


def stated_model(src: Source, train: TrainFacts | None, sf: SearchFacts | None) -> ModelResult:
    """The model the files state: the train.yaml's catalog entry and overrides, under a search config's model
    keys; None (with the finding that says why, HP205/HP206) when it cannot be known offline."""
    layers: list[dict[str, Val]] = []
    if train is not None:
        layers += [train.catalog_fields, train.overrides]
    if sf is not None:
        layers.append(sf.model_fields)
    written = {k for layer in layers for k in layer}
    if train is not None and train.pretrained is not None and train.resolution_error is not None:
        explicit = set(train.overrides) | (set(sf.model_fields) if sf else set())
        covered = all(f in explicit for f in REQUIRED)
        tsrc = train.src
        # A warning, not an error: the file is right (the trainer resolves the name where it runs, as upstream
        # does online); only this offline planner cannot know the model, and says what would let it price it.
        tail = ("; using the facts written in the file instead" if covered else
                ". The trainer resolves it where it runs; hp-plan prices nothing until it knows the model")
        tsrc.diag("HP205", train.resolution_error + tail, train.pretrained.loc.value, train.pretrained.path,
                  severity=Severity.WARNING, data={"name": str(train.pretrained.value)})
        if not covered:
            # The model is whatever the name resolves to: the facts written beside it only override some of
            # it, so neither "missing" errors nor a dense/MoE judgement can be made without it.
            return ModelResult(None, {}, experts_known=False)
    unread = _unread_factory(train, sf)
    if unread is not None:
        return unread
    if not written and (train is None or train.pretrained is None):
        anchor = (sf.model_anchor if sf is not None and sf.model_anchor else
                  (train.model_anchor if train is not None and train.src is src else None))
        if sf is not None and sf.train_yaml is not None and train is None:
            return ModelResult(None, {})  # the missing train_yaml is the diagnostic
        src.diag("HP206", "no model stated: set model.pretrained_model_name_or_path (a catalog id or a local "
                 "config.json; from-config factories call it model.config_path) or model.config_overrides with "
                 "num_hidden_layers, hidden_size, num_attention_heads and vocab_size", anchor.loc.key if anchor else DOCUMENT_START, "model")
        return ModelResult(None, {})
    seq = _seq_len(src, train, sf, layers)
    name = (sf.name.value if sf is not None and sf.name is not None else None) or (
        train.name.value if train is not None and train.name is not None else None) or (
        train.pretrained.value if train is not None and train.pretrained is not None else None) or "custom"
    if sf is not None and sf.model_anchor is not None:
        anchor_val: Val | None = sf.model_anchor
    elif train is not None and train.src is src:
        anchor_val = train.overrides_anchor or train.pretrained or train.model_anchor
    else:
        anchor_val = sf.train_yaml if sf is not None else None
    result = build_model(layers, name=str(name), seq_len=seq, report=src,
                         anchor=anchor_val.loc if anchor_val else None, anchor_path="model")
    if train is not None and (train.factory is not None or train.resolution_error is not None) and not any(
            "num_experts" in layer for layer in layers):
        result = replace(result, experts_known=False)
    return _with_vision(result, src, train, sf)


def _unread_factory(train: TrainFacts | None, sf: SearchFacts | None) -> ModelResult | None:
    """A model built by a factory this planner cannot read, from its own arguments alone (no config named, no
    config_overrides, no search-config model): unknown, said once (HP205), never judged dense or MoE."""
    if train is None or train.factory is None or train.pretrained is not None or train.overrides_anchor is not None:
        return None
    if sf is not None and sf.model_fields:
        return None
    f = train.factory
    train.src.diag("HP205", f"model built by the factory '{f.value}', which hp-plan cannot read offline: the keys "
                   "beside it are its own arguments, so the model stays unknown. State its facts in "
                   "model.config_overrides (num_hidden_layers, hidden_size, num_attention_heads, vocab_size, and the "
                   "experts if any) to price it", f.loc.value, f.path, severity=Severity.WARNING,
                   data={"factory": str(f.value)})
    return ModelResult(None, {}, experts_known=False)


def _with_vision(result: ModelResult, src: Source, train: TrainFacts | None, sf: SearchFacts | None) -> ModelResult:
    """The language model with its vision tower, when the files state one (engine.config.vision): a search config's
    model.vision over the train.yaml's over its config.json's; an incomplete tower refuses the model as upstream
    does (HP212)."""
    layers: list[dict[str, Val]] = []
    if train is not None:
        layers += [train.catalog_vision, train.vision]
    if sf is not None:
        layers.append(sf.vision)
    seq = (sf.visual_seq_len if sf is not None else None) or (train.visual_seq_len if train is not None else None)
    anchor = ((sf.vision_anchor if sf is not None else None) or (train.vision_anchor if train is not None else None)
              or (train.pretrained if train is not None and train.catalog_vision else None))
    tower, ok = build_vision(layers, seq, src, anchor)
    if seq is not None and not any(layers):
        sink = src if seq.loc.file == src.path else Source(src.doc, seq.loc.file, primary=False)
        sink.diag("HP112", f"{NOT_PRICED}: {seq.path}: the visual tokens of a vision tower, and no tower is stated "
                  "(model.vision, or a config.json's vision_config): a text-only model prices nothing multimodal",
                  seq.loc.key, seq.path)
        if sink is not src:
            src.diags.extend(sink.diags)
    if not ok:
        return ModelResult(None, result.locations, result.facts)
    if tower is None or result.spec is None:
        return result
    spec = replace(result.spec, vision=tower)
    return replace(result, spec=spec, facts=spec if result.facts is result.spec else result.facts)


def _seq_len(src: Source, train: TrainFacts | None, sf: SearchFacts | None, layers: list[dict[str, Val]]) -> int:
    v = (sf.seq_len if sf is not None else None) or (train.seq_len if train is not None else None)
    if v is not None:
        return int(v.value)
    limit: Val | None = None
    if train is not None:
        limit = train.overrides.get("max_position_embeddings") or train.catalog_fields.get("max_position_embeddings")
    value = int(limit.value) if limit is not None and int(limit.value) > 0 else DEFAULT_SEQ_LEN
    where = "model.max_position_embeddings (the trained length in a search config)" if sf is not None else \
        "dataset.data_transform.max_seq_len"
    origin = "the model's context limit" if limit is not None else "the default"
    oom = ", which for a long-context model puts every candidate out of memory" if value > 32768 else ""
    rng = DOCUMENT_START
    if sf is not None and sf.model_anchor is not None:
        rng = sf.model_anchor.loc.key
    elif train is not None and train.src is src and train.model_anchor is not None:
        rng = train.model_anchor.loc.key
    src.diag("HP207", f"no trained sequence length stated: costing {origin} of {value} tokens{oom}. Set {where}",
             rng, where.split(" ")[0], data={"assumed": value})
    return value


def seq_location(locations: dict[str, Location], train: TrainFacts | None, sf: SearchFacts | None) -> None:
    """`model.max_position_embeddings` and `model.seq_len` at the trained length wherever a file wrote it."""
    v = (sf.seq_len if sf is not None else None) or (train.seq_len if train is not None else None)
    if v is not None:
        locations["model.max_position_embeddings"] = v.loc
        locations["model.seq_len"] = v.loc
    else:
        locations.pop("model.max_position_embeddings", None)
