"""Write a Strategy into a trainer train.yaml, as HyperParallel's `write_resolved_yaml` does
([HP] §4.3) but round-trip and going further: we also write what HyperParallel never writes and
we search (pp_interleave_num, pipeline_scheduler, sequence_parallel, micro_batch_size, per-layer recompute).

Keys (docs/formats.md §1). AutoModels: accelerator.{tp_size, pp_size, cp_size, ep_size,
expert_tensor_parallel_degree, sequence_parallel, pp_interleave_num, pipeline_scheduler,
optimizer_weight_shard_size}, fsdp_config.dp_shard_size, training.{global_batch_size, micro_batch_size,
micro_batch_num (where stated)},
activation_checkpoint.{mode, layers}. Legacy ([HP] §2.6, §4.3): train.{global_batch_size,
micro_batch_size, micro_batch_num}, train.accelerator.{dp_shard, dp_replicate, tp_degree,
pipeline_parallel_degree, context_parallel_degree, expert_parallel_degree, expert_tensor_parallel_degree,
use_seq_parallel, optimizer_weight_shard_size (and enable_parallel_optimizer, set true when a shard is written)},
train.gradient_checkpointing.activation_checkpoint. The legacy data-parallel degree is
dp_replicate x dp_shard (world = dp_replicate x dp_shard x tp x pp x cp, docs/formats.md §1, as engine.config reads
it), so a legacy file cannot hold an FSDP shard that spans context parallelism.

A key that is absent and whose value would be the reader's default is not added (a 1-way cp, sequence
parallelism off): the smallest diff that reads back as the strategy. Degrees the trainer always needs
(tp, pp, the FSDP shard, the global batch) are always written, as HyperParallel does. micro_batch_num is
not added to an AutoModels file: the trainer derives it as gbs / (mbs * dp) ([HP] §4.3), which the check enforces;
where the file states it (training.micro_batch_num, accelerator.pp_micro_batch_num) the stated key is rewritten,
so the file never keeps a count the new plan contradicts.

Before returning, the new text is read back with PyYAML (safe) and every field compared to the strategy,
and the batch rule global_batch_size = dp * micro_batch_size * micro_batch_num checked ([HP] §4.4); any
mismatch refuses the whole edit.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from engine.config.kind import classify, shape_of_data, trainer_runs  # the reader's rule
from engine.config.stated_layout import noop_indices  # the reader's rule
from engine.config.train import LEGACY_DEGREES, PIPELINE_SCHEDULERS, RECOMPUTE_MODES  # the reader's values
from engine.edit.core import (
    MISSING,
    Change,
    EditResult,
    apply_changes,
    collateral_refusal,
    finish,
    keeps_bom,
    shared_value_hint,
    value_at,
)
from engine.edit.yamltext import Doc, EditError, FlowMap, Order, Word, untouched_equal
from engine.results import Estimate
from engine.specs import PipelineLayout, RecomputeMode, RecomputePlan, Strategy, noop_text

Schema = Literal["automodels", "legacy"]

AUTOMODELS_ORDER: Order = {
    (): ("model", "training", "accelerator", "fsdp_config", "mixed_precision", "activation_checkpoint",
         "dataset", "context"),
    ("training",): ("train_iters", "global_batch_size", "micro_batch_size", "micro_batch_num"),
    ("accelerator",): ("tp_size", "pp_size", "cp_size", "ep_size", "expert_tensor_parallel_degree",
                       "sequence_parallel", "pp_micro_batch_num", "pp_schedule", "pp_vpp", "pp_interleave_num",
                       "pipeline_scheduler", "context_parallel_algo",
                       "optimizer_weight_shard_size", "account_for_embedding_in_pipeline_split",
                       "account_for_loss_in_pipeline_split"),
    ("fsdp_config",): ("dp_shard_size", "edp_shard_size", "reshard_after_forward"),
    ("activation_checkpoint",): ("mode", "selective_policy", "recompute_modules", "layers", "layer_ranges"),
}
LEGACY_ORDER: Order = {
    (): ("model", "train", "data"),
    ("train",): ("global_batch_size", "micro_batch_size", "micro_batch_num", "mixed_precision", "accelerator",
                 "gradient_checkpointing"),
    ("train", "accelerator"): ("dp", "dp_shard", "dp_replicate", "tp", "tp_degree", "cp", "pp",
                               "pipeline_parallel_degree", "pp_micro_batch_num", "pp_schedule", "pp_vpp",
                               "context_parallel_degree", "ep", "expert_parallel_degree", "etp",
                               "expert_tensor_parallel_degree", "use_seq_parallel", "enable_parallel_optimizer",
                               "optimizer_weight_shard_size"),
    ("train", "gradient_checkpointing"): ("activation_checkpoint",),
}

SCHEDULER_NAMES = {"1F1B": "1f1b", "interleaved": "interleaved_1f1b", "gpipe": "gpipe", "dualpipev": "dualpipev"}
# The trainer's own `pp_schedule` names ([HP] Corrections 1: gpipe | 1f1b; interleaved = 1f1b with pp_vpp > 1).
TRAINER_SCHEDULES = {"1F1B": "1f1b", "interleaved": "1f1b", "gpipe": "gpipe", "dualpipev": "dualpipev"}


def runs_in_trainer(data: Any) -> bool:
    """Whether the AutoModels trainer itself runs the loaded file (engine.config.kind.trainer_runs)."""
    return isinstance(data, dict) and trainer_runs(shape_of_data(data))


def detect_schema(data: Any) -> Schema:
    """The schema of a loaded train.yaml, decided by the reader's own rule (engine.config.train.classify_schema);
    a file that says nothing yet gets the current (AutoModels) schema."""
    if not isinstance(data, dict):
        return "automodels"
    return "legacy" if classify(shape_of_data(data)) == "legacy" else "automodels"


# ---------------------------------------------------------------------------------------------- reading


def as_int(v: Any) -> int | None:
    """An integer as the reader accepts one: `4`, never `4.0` or `"4"` (HP103), which are rewritten."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return None


def as_bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def as_mode(v: Any) -> RecomputeMode | None:
    """activation_checkpoint.mode as the trainer reads it: off/none (and YAML 1.1's `off` = false, null) ->
    off; selective; full ([HP] §2.5); true -> full, as engine.config reads it."""
    if v is None or v is False or v is MISSING:
        return "off"
    if v is True:
        return "full"
    if isinstance(v, str):
        s = v.strip().lower()
        return "off" if not s else RECOMPUTE_MODES.get(s)  # type: ignore[return-value]
    return None


def as_schedule(v: Any) -> str | None:
    if v is MISSING or v is None:
        return "1F1B"
    return PIPELINE_SCHEDULERS.get(str(v).strip().lower())


def as_layers(v: Any) -> tuple[tuple[int, int, RecomputeMode], ...] | None:
    """`{"0-9": full, "12": selective}` -> ((0, 9, "full"), (12, 12, "selective")), sorted."""
    if v is None or v is MISSING:
        return ()
    if not isinstance(v, dict):
        return None
    out: list[tuple[int, int, RecomputeMode]] = []
    for k, m in v.items():
        mt = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", str(k))
        mode = as_mode(m)
        if not mt or mode is None:
            return None
        a = int(mt.group(1))
        out.append((a, int(mt.group(2)) if mt.group(2) else a, mode))
    return tuple(sorted(out))


def _int_or(data: Any, path: tuple[str, ...], default: int) -> int | None:
    v = value_at(data, path)
    return default if v is MISSING or v is None else as_int(v)


def read_back(data: Any, schema: Schema) -> dict[str, Any]:
    """The strategy fields a train.yaml states, read as the trainer would (defaults for absent keys)."""
    if schema == "legacy":
        acc = ("train", "accelerator")
        return {
            "dp_shard": _int_or(data, (*acc, legacy_key(data, "fsdp")), 1),
            "dp_replicate": _int_or(data, (*acc, "dp_replicate"), 1),
            **{dim: _int_or(data, (*acc, legacy_key(data, dim)), 1) for dim in ("tp", "pp", "cp", "ep", "etp")},
            "vpp": _int_or(data, (*acc, "pp_vpp"), 1),
            "pipeline_schedule": _read_schedule(data, acc, "pipeline_scheduler"),
            "micro_batch_size": _int_or(data, ("train", "micro_batch_size"), 1),
            "micro_batch_num": _int_or(data, ("train", "micro_batch_num"), 1),
            "global_batch_size": _int_or(data, ("train", "global_batch_size"), 0),
            "recompute": RecomputePlan(
                mode=as_mode(value_at(data, ("train", "gradient_checkpointing", "activation_checkpoint")))
                or "off"
            ),
            "sequence_parallel": _legacy_sp(data),
            # enable_parallel_optimizer: false turns the shard off whatever its size (engine.config.train)
            "optimizer_shard": 1 if value_at(data, (*acc, "enable_parallel_optimizer")) is False
            else _int_or(data, (*acc, "optimizer_weight_shard_size"), 1),
        }
    mode = as_mode(value_at(data, ("activation_checkpoint", "mode")))
    ranges = value_at(data, ("activation_checkpoint", "layer_ranges"))
    layers = as_ranges(ranges) if ranges is not MISSING else as_layers(value_at(data, ("activation_checkpoint",
                                                                                     "layers")))
    return {
        "tp": _int_or(data, ("accelerator", "tp_size"), 1),
        "pp": _int_or(data, ("accelerator", "pp_size"), 1),
        "cp": _int_or(data, ("accelerator", "cp_size"), 1),
        "ep": _int_or(data, ("accelerator", "ep_size"), 1),
        "etp": _int_or(data, ("accelerator", "expert_tensor_parallel_degree"), 1),
        "vpp": _int_or(data, ("accelerator", "pp_interleave_num"), 0) or _int_or(data, ("accelerator", "pp_vpp"), 1),
        "sequence_parallel": as_bool(value_at(data, ("accelerator", "sequence_parallel")))
        if value_at(data, ("accelerator", "sequence_parallel")) is not MISSING
        else False,
        "pipeline_schedule": _read_schedule(data, ("accelerator",), "pipeline_scheduler"),
        "optimizer_shard": _int_or(data, ("accelerator", "optimizer_weight_shard_size"), 1),
        "dp_shard": _int_or(data, ("fsdp_config", "dp_shard_size"), -1),
        "micro_batch_size": _int_or(data, ("training", "micro_batch_size"), 1),
        "global_batch_size": _int_or(data, ("training", "global_batch_size"), 0),
        "recompute": RecomputePlan(mode, layers) if mode is not None and layers is not None else None,
        **_stated_micro_batch_num(data),
    }


def as_ranges(v: Any) -> tuple[tuple[int, int, RecomputeMode], ...] | None:
    """The trainer's `layer_ranges: [{first, count, mode}]` as (first, last, mode) ranges, sorted."""
    if v is None or v is MISSING:
        return ()
    if not isinstance(v, list):
        return None
    out: list[tuple[int, int, RecomputeMode]] = []
    for item in v:
        first, count = (as_int(item.get("first")), as_int(item.get("count"))) if isinstance(item, dict) else (None, None)
        mode = as_mode(item.get("mode")) if isinstance(item, dict) else None
        if first is None or count is None or mode is None:
            return None
        out.append((first, first + count - 1, mode))
    return tuple(sorted(out))


def _read_schedule(data: Any, acc: tuple[str, ...], search_key: str) -> str | None:
    """The schedule as engine.config.train reads it: the search's key where stated, else the trainer's
    `pp_schedule` (1f1b with `pp_vpp` > 1 runs interleaved)."""
    stated = value_at(data, (*acc, search_key))
    if stated is not MISSING and stated is not None:
        return as_schedule(stated)
    name = as_schedule(value_at(data, (*acc, "pp_schedule")))
    vpp = as_int(value_at(data, (*acc, "pp_vpp")))
    return "interleaved" if name == "1F1B" and vpp is not None and vpp > 1 else name


def _stated_micro_batch_num(data: Any) -> dict[str, Any]:
    """An AutoModels file's micro_batch_num where it states one (engine.config.train reads training.micro_batch_num,
    else accelerator.pp_micro_batch_num); nothing when unsaid (the trainer derives it)."""
    for path in (("training", "micro_batch_num"), ("accelerator", "pp_micro_batch_num")):
        v = value_at(data, path)
        if v is not MISSING and v is not None:
            return {"micro_batch_num": as_int(v)}
    return {}


def expected(strategy: Strategy, schema: Schema) -> dict[str, Any]:
    s = strategy
    if schema == "legacy":
        return {
            "dp_shard": s.dp_shard, "dp_replicate": s.dp // s.dp_shard, "tp": s.tp, "pp": s.pp, "cp": s.cp,
            "ep": s.ep, "etp": s.etp, "vpp": s.vpp if s.pipeline_schedule == "interleaved" else 1,
            "pipeline_schedule": s.pipeline_schedule, "micro_batch_size": s.micro_batch_size,
            "micro_batch_num": s.micro_batch_num, "global_batch_size": s.global_batch_size,
            "recompute": RecomputePlan(s.recompute.mode), "sequence_parallel": s.sequence_parallel,
            "optimizer_shard": s.optimizer_shard,
        }
    return {
        "tp": s.tp, "pp": s.pp, "cp": s.cp, "ep": s.ep, "etp": s.etp, "vpp": s.vpp,
        "sequence_parallel": s.sequence_parallel, "pipeline_schedule": s.pipeline_schedule,
        "optimizer_shard": s.optimizer_shard, "dp_shard": s.dp_shard,
        "micro_batch_size": s.micro_batch_size, "global_batch_size": s.global_batch_size,
        "recompute": RecomputePlan(s.recompute.mode, tuple(sorted(s.recompute.layers))),
    }


def verify(data: Any, strategy: Strategy, schema: Schema) -> str | None:
    """None when `data` (the edited file, read back) states `strategy` exactly and keeps the batch rule;
    else the first mismatch."""
    got, want = read_back(data, schema), expected(strategy, schema)
    if schema == "legacy" and got["dp_shard"] == -1 and got["dp_replicate"]:
        got["dp_shard"] = strategy.dp // got["dp_replicate"]  # -1: every remaining rank ([HP] Corrections)
    if schema == "automodels" and got["dp_shard"] == -1:
        # absent or -1: the whole data-parallel domain dp*cp (engine.config.resolve, torchtitan's convention)
        got["dp_shard"] = strategy.dp * strategy.cp
    if schema == "automodels" and got.get("micro_batch_num") is not None:
        # stated: it must read back as the plan's; unsaid, the trainer derives it from the batch rule (below)
        want = {**want, "micro_batch_num": strategy.micro_batch_num}
    for k, v in want.items():
        if got.get(k) != v:
            return f"the edited file reads back {k} = {got.get(k)!r}, not {v!r}"
    # [HP] §4.4: global_batch_size = micro_batch_num * micro_batch_size * dp (dp = world/(tp*pp*cp))
    gbs, mbs = got["global_batch_size"], got["micro_batch_size"]
    if gbs != strategy.dp * mbs * strategy.micro_batch_num:
        return (
            "the strategy is inconsistent with the trainer batch derivation: "
            f"global_batch_size={gbs} != micro_batch_num={strategy.micro_batch_num} * "
            f"micro_batch_size={mbs} * dp={strategy.dp}"
        )
    device_num = as_int(value_at(data, ("context", "device_num")))
    if device_num is not None and device_num != strategy.world_size:
        return f"context.device_num is {device_num}, the strategy uses {strategy.world_size} devices"
    return None


# ---------------------------------------------------------------------------------------------- writing


def _int_change(path: tuple[str, ...], value: int, always: bool = True, default: int = 1) -> Change:
    def ok(now: Any) -> bool:
        if now is MISSING:
            return not always and value == default
        return as_int(now) == value

    return Change(path, value, satisfied=ok)


def _legacy_sp(data: Any) -> bool | None:
    """A legacy file's sequence parallelism as engine.config.train reads it: train.accelerator.sequence_parallel,
    else use_seq_parallel, else off."""
    for key in ("sequence_parallel", "use_seq_parallel"):
        v = value_at(data, ("train", "accelerator", key))
        if v is not MISSING and v is not None:
            return as_bool(v)
    return False


def expert_shard(s: Strategy) -> int:
    """The expert FSDP shard (`fsdp_config.edp_shard_size`) consistent with the plan's FSDP and expert degrees:
    the routed experts shard like the dense weights within their data-parallel group dp·cp·tp/(ep·etp), so
    min(dp_shard, that group) where it divides the group (HyperParallel's recipes: dp_shard = world, edp_shard =
    world / ep, [HP]; the cost model prices the experts' states over min(dp_shard, group),
    engine.cost.memory), else their greatest common divisor."""
    group = max(s.dp * s.cp * s.tp // max(s.ep * s.etp, 1), 1)
    shard = min(max(s.dp_shard, 1), group)
    return shard if group % shard == 0 else math.gcd(max(s.dp_shard, 1), group)


def _stated_int_change(path: tuple[str, ...], value: int) -> Change:
    """Rewrite the key where the file states it; never add it (the trainer derives what it leaves unsaid)."""
    return Change(path, value, satisfied=lambda now: now is MISSING or now is None or as_int(now) == value)


def _bool_change(path: tuple[str, ...], value: bool) -> Change:
    return Change(path, value, satisfied=lambda now: (not value) if now is MISSING else as_bool(now) == value)


def _sanity(s: Strategy) -> str | None:
    for name in ("dp", "dp_shard", "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size",
                 "micro_batch_num", "optimizer_shard"):
        v = getattr(s, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            return f"the strategy's {name} is {v!r}, not a positive integer"
    if (s.dp * s.cp) % s.dp_shard:
        return f"the FSDP shard {s.dp_shard} does not divide dp*cp = {s.dp * s.cp}"
    if s.pipeline_schedule not in SCHEDULER_NAMES:
        return f"unknown pipeline schedule {s.pipeline_schedule!r}"
    return None


def _changes_automodels(s: Strategy, data: Any) -> list[Change]:
    """The AutoModels keys: the trainer's own where the trainer runs the file (engine.config.kind.trainer_runs:
    its strict resolver refuses the search's keys, [HP] Corrections), else the search's."""
    acc, rc = ("accelerator",), s.recompute
    changes = [
        _int_change((*acc, "tp_size"), s.tp),
        _int_change((*acc, "pp_size"), s.pp),
        _int_change((*acc, "cp_size"), s.cp, always=False),
        _int_change((*acc, "ep_size"), s.ep, always=False),
        _bool_change((*acc, "sequence_parallel"), s.sequence_parallel),
        Change(  # `-1` (the whole dp*cp domain) is kept when that is the shard
            ("fsdp_config", "dp_shard_size"), s.dp_shard,
            satisfied=lambda now: as_int(now) == s.dp_shard or (as_int(now) == -1 and s.dp_shard == s.dp * s.cp),
        ),
        _stated_int_change(("fsdp_config", "edp_shard_size"), expert_shard(s)),
        _int_change(("training", "global_batch_size"), s.global_batch_size),
        _int_change(("training", "micro_batch_size"), s.micro_batch_size, always=False),
        _stated_int_change(("training", "micro_batch_num"), s.micro_batch_num),
        _stated_int_change((*acc, "pp_micro_batch_num"), s.micro_batch_num),
        Change(
            ("activation_checkpoint", "mode"), Word(rc.mode),
            satisfied=lambda now: (rc.mode == "off") if now is MISSING else as_mode(now) == rc.mode,
        ),
    ]
    return changes + (_trainer_keys(s, data) if runs_in_trainer(data) else _search_keys(s, data))


def _states(data: Any, *paths: tuple[str, ...]) -> bool:
    return any(value_at(data, p) is not MISSING for p in paths)


def _search_keys(s: Strategy, data: Any) -> list[Change]:
    """The search-side keys of a train.yaml written for the search (engine.config.train reads them), in the file's
    own dialect where it writes the trainer's spelling of a setting and not the search's (`pp_schedule` / `pp_vpp`,
    `layer_ranges`): the reader reads both, so writing the other spelling beside it would not change the plan."""
    acc, rc = ("accelerator",), s.recompute
    changes = [
        _int_change((*acc, "expert_tensor_parallel_degree"), s.etp, always=False),
        _int_change((*acc, "optimizer_weight_shard_size"), s.optimizer_shard, always=False),
    ]
    if _states(data, (*acc, "pp_schedule"), (*acc, "pp_vpp")) and not _states(
            data, (*acc, "pipeline_scheduler"), (*acc, "pp_interleave_num")):
        changes += _trainer_pipeline(s)
    else:
        changes += [_int_change((*acc, "pp_interleave_num"), s.vpp, always=False),
                    Change((*acc, "pipeline_scheduler"), SCHEDULER_NAMES[s.pipeline_schedule],
                           satisfied=lambda now: as_schedule(now) == s.pipeline_schedule)]
    if _states(data, ("activation_checkpoint", "layer_ranges")) and not _states(
            data, ("activation_checkpoint", "layers")):
        return changes + _trainer_ranges(s, data)
    if rc.layers:
        layers = FlowMap({(f"{a}" if a == b else f"{a}-{b}"): Word(m) for a, b, m in sorted(rc.layers)})
        changes.append(Change(("activation_checkpoint", "layers"), layers,
                              satisfied=lambda now: as_layers(now) == tuple(sorted(rc.layers))))
    else:
        changes.append(Change(("activation_checkpoint", "layers"), remove=True))
    return changes


def _trainer_pipeline(s: Strategy) -> list[Change]:
    """The trainer's pipeline keys: `pp_vpp` (interleaved when > 1) and `pp_schedule` (gpipe | 1f1b)."""
    acc = ("accelerator",)
    vpp = s.vpp if s.pipeline_schedule == "interleaved" else 1
    sched = TRAINER_SCHEDULES[s.pipeline_schedule]
    return [_int_change((*acc, "pp_vpp"), vpp, always=False),
            Change((*acc, "pp_schedule"), sched, satisfied=lambda now: (sched == "1f1b") if now is MISSING
                   else str(now).strip().lower() == sched)]


def _trainer_ranges(s: Strategy, data: Any) -> list[Change]:
    """A per-layer plan as the trainer's `activation_checkpoint.layer_ranges`; none: the file's removed. A range's
    mode is written as a string (`"off"` quoted): the trainer maps a bare `off` (YAML's false) back to the word only
    for the top-level `mode` ([HP] Corrections 2)."""
    rc = s.recompute
    if rc.layers:
        ranges = [FlowMap({"first": a, "count": b - a + 1, "mode": m}) for a, b, m in sorted(rc.layers)]
        return [Change(("activation_checkpoint", "layer_ranges"), ranges,
                       satisfied=lambda now: as_ranges(now) == tuple(sorted(rc.layers)))]
    if value_at(data, ("activation_checkpoint", "layer_ranges")) is not MISSING:
        return [Change(("activation_checkpoint", "layer_ranges"), remove=True)]
    return []


def _trainer_keys(s: Strategy, data: Any) -> list[Change]:
    """The trainer's own keys: `pp_vpp` (interleaved when > 1) and `pp_schedule` (gpipe | 1f1b) where the plan
    needs them or the file states them, a per-layer plan as `activation_checkpoint.layer_ranges`; the search's
    spellings of the same settings are removed (the trainer refuses them). A plan needing a setting the trainer
    has no key for (a ZeRO-1 shard, an expert TP degree other than 1) is refused."""
    missing = [what for cond, what in ((s.optimizer_shard != 1, f"an optimizer shard of {s.optimizer_shard} "
                                        "(FSDP shards the optimizer states)"),
                                       (s.etp != 1, f"expert tensor parallelism {s.etp}")) if cond]
    if missing:
        raise EditError("the trainer that runs this file has no key for " + ", ".join(missing)
                        + ": search with it fixed to 1, or write the plan into a search config")
    acc = ("accelerator",)
    return [
        *_trainer_pipeline(s),
        *(Change((*acc, k), remove=True) for k in ("pipeline_scheduler", "pp_interleave_num",
                                                   "expert_tensor_parallel_degree", "optimizer_weight_shard_size")),
        Change(("activation_checkpoint", "layers"), remove=True),
        *_trainer_ranges(s, data),
    ]


def legacy_key(data: Any, dim: str) -> str:
    """The key a legacy file uses for `dim` under train.accelerator: the one it states (the trainer's name first,
    as engine.config.train reads them); else the spelling the file writes its other degrees in (upstream's search
    names, tp_degree, ..., where it uses them), else the trainer's own (LEGACY_DEGREES)."""
    def stated(k: str) -> bool:
        return value_at(data, ("train", "accelerator", k)) not in (MISSING, None)

    names = dict(LEGACY_DEGREES)[dim]
    hit = next((k for k in names if stated(k)), None)
    if hit is not None:
        return hit
    search_spelling = any(stated(ks[1]) for d, ks in LEGACY_DEGREES if d != "fsdp" and len(ks) > 1)
    return names[1] if search_spelling and len(names) > 1 and dim != "fsdp" else names[0]


def _changes_legacy(s: Strategy, data: Any) -> list[Change]:
    unsupported = [
        (bool(s.recompute.layers), "per-layer recompute"),
        (s.dp % s.dp_shard != 0, f"an FSDP shard of {s.dp_shard} spanning context parallelism (dp {s.dp})"),
    ]
    missing = [what for cond, what in unsupported if cond]
    if missing:
        raise EditError(
            "the legacy train.yaml schema (train.accelerator) has no key for " + ", ".join(missing)
            + ": move the file to the AutoModels schema (training/accelerator/fsdp_config) or search without it"
        )
    acc = ("train", "accelerator")
    mode = s.recompute.mode
    extra = [_int_change((*acc, "optimizer_weight_shard_size"), s.optimizer_shard, always=False)]
    if s.optimizer_shard != 1:  # a stated `enable_parallel_optimizer: false` would turn the shard off
        extra.append(Change((*acc, "enable_parallel_optimizer"), True,
                            satisfied=lambda now: now is MISSING or as_bool(now) is True))
    sched = TRAINER_SCHEDULES[s.pipeline_schedule]
    return [
        *extra,
        # the file's own spelling: sequence_parallel where it states it (it wins), else use_seq_parallel
        _bool_change((*acc, "sequence_parallel" if value_at(data, (*acc, "sequence_parallel")) not in (MISSING, None)
                      else "use_seq_parallel"), s.sequence_parallel),
        _int_change(("train", "global_batch_size"), s.global_batch_size),
        _int_change(("train", "micro_batch_size"), s.micro_batch_size, always=False),
        _int_change(("train", "micro_batch_num"), s.micro_batch_num),
        _stated_int_change((*acc, "pp_micro_batch_num"), s.micro_batch_num),
        Change((*acc, legacy_key(data, "fsdp")), s.dp_shard,  # `-1` (every remaining rank) kept when it is that
               satisfied=lambda now: as_int(now) == s.dp_shard or (as_int(now) == -1 and s.dp_shard == s.dp)),
        _int_change((*acc, "dp_replicate"), s.dp // s.dp_shard),
        _int_change((*acc, legacy_key(data, "tp")), s.tp),
        _int_change((*acc, legacy_key(data, "pp")), s.pp),
        _int_change((*acc, legacy_key(data, "cp")), s.cp, always=False),
        _int_change((*acc, legacy_key(data, "ep")), s.ep, always=False),
        _int_change((*acc, legacy_key(data, "etp")), s.etp, always=False),
        _int_change((*acc, "pp_vpp"), s.vpp if s.pipeline_schedule == "interleaved" else 1, always=False),
        Change((*acc, "pp_schedule"), sched, satisfied=lambda now: (sched == "1f1b") if now is MISSING
               else str(now).strip().lower() == sched),
        Change(
            ("train", "gradient_checkpointing", "activation_checkpoint"), Word(mode),
            satisfied=lambda now: (mode == "off") if now is MISSING else as_mode(now) == mode,
        ),
    ]


def _layout_key(layout: PipelineLayout) -> str:
    """The key that names a layout the search chose, for the refusals of a file that has none for it."""
    return "noop_layers" if layout.noop_layers else "account_for_embedding_in_pipeline_split"


def _layout_changes(layout: PipelineLayout | None, data: Any) -> list[Change]:
    """The layout a search chose (engine.search: Megatron-Core's embedding/loss accounting, or MindSpeed-LLM's
    no-op layers padding a DualPipeV split), in the keys the reader reads (engine.config.stated_layout); nothing
    when the plan keeps the run's own layout. A file the trainer runs has no key for it (refused)."""
    if layout is None:
        return []
    if runs_in_trainer(data):
        raise EditError(f"the trainer that runs this file has no key for the pipeline layout the plan needs "
                        f"({_layout_key(layout)})")
    acc = ("accelerator",)
    if layout.noop_layers:
        want = layout.noop_layers
        return [Change((*acc, "noop_layers"), noop_text(want), satisfied=lambda now: noop_indices(now) == want)]
    return [_bool_change((*acc, "account_for_embedding_in_pipeline_split"), layout.embedding_in_split),
            _bool_change((*acc, "account_for_loss_in_pipeline_split"), layout.loss_in_split)]


def _module_changes(s: Strategy, modules: tuple[str, ...], schema: str, data: Any) -> list[Change]:
    """`activation_checkpoint.recompute_modules: [..]` for a plan that recomputes selectively with a chosen
    list; nothing otherwise (a stated list on a plan without selective layers does no harm)."""
    selective = s.recompute.mode == "selective" or any(m == "selective" for *_, m in s.recompute.layers)
    if not modules or not selective:
        return []
    if schema == "legacy" or runs_in_trainer(data):
        raise EditError("the trainer of this train.yaml has no key for recompute modules "
                        f"{list(modules)}: write the plan into a search config")
    want = list(modules)
    return [Change(("activation_checkpoint", "recompute_modules"), [Word(x) for x in want],
                   satisfied=lambda now: isinstance(now, list) and [str(x).strip().lower() for x in now] == want)]


def plan_edits(text: str, plan: Estimate, *, path: str | None = None) -> EditResult:
    """strategy_edits for a priced plan as the search priced it: its strategy with the recompute modules and the
    pipeline layout the search chose for it (Estimate.recompute_modules, Estimate.pipeline_layout), so no front
    end writes one without the others."""
    return strategy_edits(text, plan.strategy, path=path, recompute_modules=plan.recompute_modules,
                          layout=plan.pipeline_layout)


@keeps_bom
def strategy_edits(text: str, strategy: Strategy, *, path: str | None = None,
                   recompute_modules: tuple[str, ...] = (), layout: PipelineLayout | None = None) -> EditResult:
    """Minimal round-trip edits writing `strategy` into the train.yaml `text`; never raises. `layout`: the
    pipeline layout the search chose for it (Estimate.pipeline_layout), written as the stack's keys.

    Returns an EditResult: its `edits` (empty when the file already states the strategy), `new_text`, the
    dotted keys changed, or `error` with the reason nothing may be written (invalid YAML, a section that is
    not a mapping, an alias in the way, a strategy the legacy schema cannot express, or a read-back that
    differs from the strategy). `path` only names the file in messages. `recompute_modules` (the search's
    choice, engine.search.modules) is written as `activation_checkpoint.recompute_modules` where the plan
    recomputes selectively (AutoModels schema; the legacy schema has no key for it: refused). Layers the plan
    offloads are written `off`: the trainer runs no offload yet ([HP] §8.6; the front ends say the plan).
    """
    where = f"{path}: " if path else ""
    strategy = strategy.for_trainer()
    bad = _sanity(strategy)
    if bad:
        return EditResult.refused(text, where + bad)
    try:
        doc = Doc.parse(text)
        if doc.root is not None and not isinstance(doc.data, dict):
            raise EditError("the file's top level is not a mapping")
        schema = detect_schema(doc.data)
        if schema == "legacy" and layout is not None:
            raise EditError(f"the legacy schema has no key for the pipeline layout the plan needs "
                            f"({_layout_key(layout)})")
        changes = _changes_legacy(strategy, doc.data) if schema == "legacy" else \
            _changes_automodels(strategy, doc.data) + _layout_changes(layout, doc.data)
        changes += _module_changes(strategy, recompute_modules, schema, doc.data)
        order = LEGACY_ORDER if schema == "legacy" else AUTOMODELS_ORDER
        if as_int(value_at(doc.data, ("context", "device_num"))) not in (None, strategy.world_size):
            changes.append(_int_change(("context", "device_num"), strategy.world_size))
        new, changed = apply_changes(doc, changes, order)
        collateral = untouched_equal(doc, new, {c.path for c in changes})
    except EditError as e:
        return EditResult.refused(text, where + str(e))
    if collateral:
        return EditResult.refused(text, where + collateral_refusal(text, collateral))
    problem = verify(new.data, strategy, schema)
    if problem:
        return EditResult.refused(text, where + problem + shared_value_hint(text))
    return finish(text, new.text, changed)
