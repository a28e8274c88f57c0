"""What kind of file a YAML mapping is: an AutoModels train.yaml, a legacy train.yaml, a search config, or
none of HyperParallel's (HP008). The one rule the reader, the key checker and the file editor all use.

Order ([HP] §2.5 "Detection", docs/formats.md §1): upstream calls any file with a root `training`,
`accelerator` or `fsdp_config`, or a named model (`model.pretrained_model_name_or_path`, or its from-config
alias `model.config_path`), an AutoModels train.yaml, whatever else it holds; so that test runs first. Only a
file that is no train.yaml by that rule is tested for the search config's own sections. Then the legacy
schema's marks; then a search config being written (model facts directly under `model`, nothing a trainer
reads beside it); then a trainer file being written. Anything else is left alone.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.document import Map, Node, Scalar

FileKind = Literal["automodels", "legacy", "search"]

AUTOMODELS_ROOTS = ("training", "accelerator", "fsdp_config")
MODEL_NAME_KEYS = ("pretrained_model_name_or_path", "config_path")
SEARCH_ROOTS = ("train_yaml", "parallelism", "cluster", "constraint", "pp_config", "estimator")
# Keys of `train:` that only HyperParallel's legacy schema writes ([HP] §2.6, §4.3).
LEGACY_TRAIN_KEYS = ("accelerator", "global_batch_size", "micro_batch_size", "micro_batch_num",
                     "gradient_checkpointing", "mixed_precision")
# Root sections a trainer file holds and a search config never does: beside model facts written directly
# under `model`, they make the file neither (e.g. a compile example's own config: model + train + parallel).
TRAINER_ROOTS = ("train", "data", "dataset", "dataloader", "optimizer", "lr_scheduler", "logging", "checkpoint",
                 "activation_checkpoint", "mixed_precision", "context", "parallel", "profiling", "debug")
# Model facts that, written directly under `model`, mark a search config's model section.
DIRECT_FACTS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size", "n_layers", "dim",
                "n_heads")


@dataclass(frozen=True, slots=True)
class Shape:
    """The facts the rule reads, from either a parsed Document (Map) or a loaded dict."""

    root: frozenset[str]
    model: frozenset[str] | None  # None: no model mapping
    model_named: bool  # pretrained_model_name_or_path or config_path holds a value
    train: frozenset[str] | None
    recompute_scalar: bool  # a root `recompute: <scalar>` (a search config's key)
    optimizer_target: bool = False  # `optimizer._target_` is set (engine.config.kind.trainer_runs)


def classify(shape: Shape) -> FileKind | None:
    """The kind of file (module docstring), or None when it is none of HyperParallel's."""
    if shape.model_named or _any(shape.root, AUTOMODELS_ROOTS):
        return "automodels"
    if _any(shape.root, SEARCH_ROOTS) or shape.recompute_scalar:
        return "search"
    model = shape.model
    if (model is not None and "config_overrides" in model) or "data" in shape.root or (
            shape.train is not None and _any(shape.train, LEGACY_TRAIN_KEYS)):
        return "legacy"
    direct = model is not None and _any(model, DIRECT_FACTS)
    if direct:
        return None if _any(shape.root, TRAINER_ROOTS) else "search"
    if model is not None or _any(shape.root, ("dataset", "activation_checkpoint")):
        return "automodels"
    return None


def _any(keys: Container[str], wanted: Iterable[str]) -> bool:
    return any(k in keys for k in wanted)


def shape_of_map(root: Map) -> Shape:
    """The Shape of a parsed document's root mapping."""
    model = root.get("model")
    train = root.get("train")
    rc = root.get("recompute")
    opt = root.get("optimizer")
    named = isinstance(model, Map) and any(_set(model.get(k)) for k in MODEL_NAME_KEYS)
    return Shape(
        root=frozenset(k for k, _kn, _vn in root.items()),
        model=frozenset(k for k, _kn, _vn in model.items()) if isinstance(model, Map) else None,
        model_named=named,
        train=frozenset(k for k, _kn, _vn in train.items()) if isinstance(train, Map) else None,
        recompute_scalar=isinstance(rc, Scalar) and rc.value is not None,
        optimizer_target=isinstance(opt, Map) and _set(opt.get("_target_")),
    )


def _set(node: Node | None) -> bool:
    return node is not None and not (isinstance(node, Scalar) and node.value is None)


def shape_of_data(data: Mapping[str, Any]) -> Shape:
    """The Shape of a loaded (plain dict) document, for the file editor."""
    model = data.get("model")
    train = data.get("train")
    rc = data.get("recompute")
    return Shape(
        root=frozenset(str(k) for k in data),
        model=frozenset(str(k) for k in model) if isinstance(model, dict) else None,
        model_named=isinstance(model, dict) and any(model.get(k) is not None for k in MODEL_NAME_KEYS),
        train=frozenset(str(k) for k in train) if isinstance(train, dict) else None,
        recompute_scalar=rc is not None and not isinstance(rc, dict | list),
        optimizer_target=isinstance(data.get("optimizer"), dict) and data["optimizer"].get("_target_") is not None,
    )


def kind_of(root: Map) -> FileKind | None:
    return classify(shape_of_map(root))


def trainer_runs(shape: Shape) -> bool:
    """Whether the file is one the AutoModels trainer itself runs, and so checks strictly ([HP] Corrections: its
    resolver refuses unknown root keys and unknown fields of its dataclass sections): its two required
    factories, `model._target_` and `optimizer._target_`, are stated. A train.yaml written for the search alone
    (model facts and degrees, [HP] Corrections 6) is no trainer input and is not held to its strictness."""
    return (classify(shape) == "automodels" and shape.model is not None and "_target_" in shape.model
            and shape.optimizer_target)
