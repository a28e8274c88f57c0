"""The AutoModels trainer's own refusals, said where it would say them ([HP] Corrections): its strict resolver
refuses unknown root keys and unknown fields of its dataclass sections ("unknown configuration fields: [...]",
HP113) in a file it runs (engine.config.kind.trainer_runs), and its configuration refuses two combinations in
any AutoModels file (HP423): `compile.enabled` with `pp_size > 1`, and `optimizer.fp32_main_params` without
`fsdp_config.mix_precision.reduce_dtype: float32`; a file it runs needs exactly one of `training.train_iters` and
`training.train_samples` (HP423).

Keys only a search reads (root `context`, `accelerator.pipeline_scheduler`, `training.micro_batch_num`, ...) are
trainer errors in such a file too: they belong in a search config that names the train.yaml. A train.yaml
written for the search alone (no `model._target_` / `optimizer._target_`) holds them rightly and is not checked.
The world-size and FSDP-shard rules the trainer shares with the search are HP412 / HP413 (engine.validate.degrees).
"""

from __future__ import annotations

from engine.config.kind import shape_of_map, trainer_runs
from engine.config.reader import did_you_mean
from engine.config.schema import KNOWN_ANYWHERE, SEARCH_ONLY_KEYS, TRAINER_SECTION_FIELDS
from engine.config.train import detect_schema
from engine.diagnostics import Diagnostic
from engine.document import Map, Node, Scalar
from engine.positions import Range
from engine.validate.context import Ctx

UNKNOWN = "unknown configuration fields"
FLOAT32 = frozenset({"float32", "fp32", "float"})


def check(ctx: Ctx) -> None:
    for src in ctx.resolved.sources:
        root = src.root
        if root is None or (src.primary and ctx.config.kind == "search") or detect_schema(root) != "automodels":
            continue
        file = None if src.primary else src.path
        _combinations(ctx, root, file)
        if trainer_runs(shape_of_map(root)):
            _strict(ctx, root, file)
            _run_length(ctx, root, file)


def strict_problems(root: Map) -> list[tuple[str, str]]:
    """(dotted key, reason) for every key the trainer that runs this file refuses in every build: a key only a
    search reads, and in its dataclass sections a near miss of one of their fields that no section of any build
    has (`tp_sise`). Its builds differ in their other fields (an older one has root `tokenizer`, `fsdp_config.
    defer_fsdp_grad_sync`; a section with its own `_target_` is checked against its callable), so a key that is
    merely unknown here is never called refused. engine.edit checks a rewritten train.yaml by the same rule."""
    out: list[tuple[str, str]] = []
    sections: list[tuple[str, Map]] = [("", root)]
    sections += [(name, node) for name in ("accelerator", "fsdp_config", "activation_checkpoint", "training")
                 if isinstance(node := root.get(name), Map) and node.get("_target_") is None]
    for name, node in sections:
        fields = TRAINER_SECTION_FIELDS.get(name)
        search_only = SEARCH_ONLY_KEYS.get(name, frozenset())
        for key, _kn, _vn in node.items():
            dotted = f"{name}.{key}" if name else key
            if key in search_only:
                out.append((dotted, f"the trainer refuses it ({UNKNOWN}: ['{key}']): only a search reads it; "
                                    "state it in a search config whose train_yaml names this file"))
            elif fields is not None and key not in fields and key not in KNOWN_ANYWHERE:
                near = did_you_mean(key, sorted(fields), 0.85)
                if near:
                    out.append((dotted, f"the trainer refuses it ({UNKNOWN}: ['{key}'] in {name}); did you mean "
                                        f"'{near[0]}'?"))
    return out


def _strict(ctx: Ctx, root: Map, file: str | None) -> None:
    for dotted, why in strict_problems(root):
        *parents, key = dotted.split(".")
        parent = root.get(parents[0]) if parents else root
        kn = parent.key_node(key) if isinstance(parent, Map) else None
        if kn is not None:
            ctx.diags.append(Diagnostic("HP113", f"{dotted}: {why}", kn.range, dotted, None, file))


def _run_length(ctx: Ctx, root: Map, file: str | None) -> None:
    """HP423 where the trainer that runs the file has both `training.train_iters` and `training.train_samples`
    ([HP] Corrections 6: it requires exactly one), at the second; neither is its own error too, at `training`."""
    iters, _ = _value(root, "training", "train_iters")
    samples, at_samples = _value(root, "training", "train_samples")
    stated = [n for n in (iters, samples) if n is not None and _scalar(n) is not None]
    if len(stated) == 2 and at_samples is not None:
        ctx.diags.append(Diagnostic("HP423", "the trainer needs exactly one of training.train_iters and "
                                    "training.train_samples; this file states both: remove one", at_samples,
                                    "training.train_samples", None, file))
    elif not stated and (key := root.key_node("training")) is not None:
        ctx.diags.append(Diagnostic("HP423", "the trainer needs exactly one of training.train_iters and "
                                    "training.train_samples; this file states neither", key.range, "training", None,
                                    file))


def _value(root: Map, *path: str) -> tuple[Node | None, Range | None]:
    """The node at `path` and its range (None, None when absent)."""
    node: Node | None = root
    for part in path:
        node = node.get(part) if isinstance(node, Map) else None
    return node, node.range if node is not None else None


def _scalar(node: Node | None) -> object:
    return node.value if isinstance(node, Scalar) else None


def _combinations(ctx: Ctx, root: Map, file: str | None) -> None:
    compiled, where = _value(root, "compile", "enabled")
    pp = _scalar(_value(root, "accelerator", "pp_size")[0])
    if _scalar(compiled) is True and isinstance(pp, int) and not isinstance(pp, bool) and pp > 1 and where:
        ctx.diags.append(Diagnostic("HP423", f"the trainer refuses compile.enabled with pipeline parallelism "
                                    f"(accelerator.pp_size {pp}): \"compile is not supported together with "
                                    "pipeline parallelism\"; set compile.enabled: false or pp_size: 1", where,
                                    "compile.enabled", None, file, {"replace_value": False}))
    fp32, where = _value(root, "optimizer", "fp32_main_params")
    reduce = _scalar(_value(root, "fsdp_config", "mix_precision", "reduce_dtype")[0])
    if _scalar(fp32) is True and isinstance(reduce, str) and reduce.strip().lower() not in FLOAT32 and where:
        ctx.diags.append(Diagnostic("HP423", "the trainer refuses optimizer.fp32_main_params: true unless "
                                    "fsdp_config.mix_precision.reduce_dtype is float32 (it is "
                                    f"'{reduce}')", where, "optimizer.fp32_main_params", None, file))
