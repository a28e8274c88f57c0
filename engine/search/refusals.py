"""Refusals as positioned diagnostics, with numbers: what was asked, what works, and what to change.

They keep the meaning of HyperParallel's runner refusals ([HP] §5.11 and §5.7) and go further:
each lands on the list or value that causes it (config.locations), names the rule a listed value broke, and
says in numbers what would fit ([HP] §10.10).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from engine.config.types import DIMENSIONS, Config
from engine.diagnostics import Diagnostic
from engine.positions import DOCUMENT_START, Range
from engine.search.space import Space

# Each declared dimension's column in a Space.
DIM_COLUMN: dict[str, str] = {
    "dp": "dp", "fsdp": "fsdp", "tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "etp": "etp", "vpp": "vpp",
    "micro_batch_size": "mbs", "micro_batch_num": "mbn", "sequence_parallel": "sp",
}
# Where a dimension is usually written, when the config has no Location for it.
_FALLBACK_PATHS: dict[str, tuple[str, ...]] = {
    "dp": ("parallelism.dp",), "fsdp": ("parallelism.fsdp", "fsdp_config.dp_shard_size"),
    "tp": ("parallelism.tp", "accelerator.tp_size"), "pp": ("parallelism.pp", "accelerator.pp_size"),
    "cp": ("parallelism.cp", "accelerator.cp_size"), "ep": ("parallelism.ep", "accelerator.ep_size"),
    "etp": ("parallelism.etp", "accelerator.expert_tensor_parallel_degree"),
    "vpp": ("parallelism.vpp", "accelerator.pp_interleave_num"),
    "micro_batch_size": ("parallelism.micro_batch_size", "training.micro_batch_size"),
    "micro_batch_num": ("parallelism.micro_batch_num",),
    "sequence_parallel": ("parallelism.sequence_parallel", "accelerator.sequence_parallel"),
}
BATCH_PATHS = ("constraint.global_batch_size", "training.global_batch_size", "train.global_batch_size")
STRATEGY_ANCHORS = ("accelerator.tp_size", "train.accelerator.tp_degree", "parallelism.tp", "accelerator.pp_size",
                    "parallelism.pp")
BUDGET_PATHS = ("constraint.memory_limit_gb", "context.max_device_memory", "cluster.device_memory_gb",
                "cluster.device_type")


def fmt_value(dim: str, v: int) -> str:
    return ("true" if v else "false") if dim == "sequence_parallel" else str(v)


def fmt_values(dim: str, vs: Sequence[int], limit: int = 12) -> str:
    items = [fmt_value(dim, int(v)) for v in vs]
    if len(items) > limit:
        items = [*items[:limit], f"… ({len(vs)} in all)"]
    return "[" + ", ".join(items) + "]"


def gib(x: float) -> str:
    """GiB with one decimal, two below 10 GiB (where a tenth is a large share)."""
    return f"{x:.2f} GiB" if abs(x) < 10 else f"{x:.1f} GiB"


def position(config: Config, paths: Sequence[str]) -> tuple[Range, str, str | None]:
    """(value range, dotted path, file when not the checked file) of the first path the config located."""
    for p in paths:
        loc = config.locations.get(p)
        if loc is not None:
            return loc.value, p, (loc.file if loc.file and loc.file != config.path else None)
    return DOCUMENT_START, (paths[0] if paths else ""), None


def dim_position(config: Config, name: str) -> tuple[Range, str, str | None]:
    """Where dimension `name` was declared: its Location, found back in config.locations for the path."""
    dim = config.dimensions.get(name)
    loc = dim.location if dim is not None else None
    if loc is not None:
        path = next((p for p, at in config.locations.items() if at == loc), _FALLBACK_PATHS[name][0])
        return loc.value, path, (loc.file if loc.file and loc.file != config.path else None)
    return position(config, _FALLBACK_PATHS[name])


def _diag(code: str, message: str, where: tuple[Range, str, str | None], data: dict | None = None) -> Diagnostic:
    rng, path, file = where
    return Diagnostic(code, message, rng, path, file=file, data=dict(data or {}))


# -------------------------------------------------------------------------------------------- global batch
def batch_unreachable(space: Space, global_batch: int) -> bool:
    """True when no (dp, micro_batch_size) the space offers divides the global batch ([HP] §5.7)."""
    return bool(space.dp_values) and not any(
        global_batch % (d * m) == 0 for d in space.dp_values for m in space.mbs_values)


def batch_refusal(config: Config, space: Space, global_batch: int, causes: Sequence[str] = ()) -> Diagnostic:
    """HP600: which dp × micro_batch_size products exist, and which batch sizes would work. `causes` are the
    declared dimensions each of which, searched within its bounds instead, would reach the batch."""
    dps = list(space.dp_values)
    mbs = list(space.mbs_values)
    auto_mbs = config.dimensions.get("micro_batch_size") is None or \
        config.dimensions["micro_batch_size"].state in ("auto", "absent")
    bases = sorted({d * m for d in dps for m in ([1] if auto_mbs else mbs)})
    below = max(((global_batch // b) * b for b in bases if global_batch // b > 0), default=None)
    above = min((global_batch // b + 1) * b for b in bases)
    works = " or ".join(str(x) for x in (below, above) if x)
    if auto_mbs:
        products = f"dp × micro_batch_size is a multiple of one of the data-parallel degrees {fmt_values('dp', dps)}"
    else:
        products = (f"dp × micro_batch_size takes {fmt_values('dp', bases)} (dp in {fmt_values('dp', dps)}, "
                    f"micro_batch_size in {fmt_values('micro_batch_size', mbs)})")
    msg = (f"No strategy makes a global batch of {global_batch}: dp = devices ÷ (tp·pp·cp) "
           f"(here {fmt_values('dp', dps)}) and global_batch_size = dp × micro_batch_size × micro_batch_num, "
           f"so {products}, and none divides {global_batch}. Batch sizes that would work: {works}.")
    if causes:
        names = " or ".join(dim_position(config, d)[1] for d in causes)
        msg += f" Or widen {names}: searched within its bounds, it reaches {global_batch}."
    return _diag("HP600", msg, position(config, BATCH_PATHS),
                 {"dp": dps, "suggested_global_batch_size": [x for x in (below, above) if x]})


# -------------------------------------------------------------------------------------------- lists
def list_refusals(config: Config, restrict: Mapping[str, tuple[int, ...] | None], constrained: Space,
                  relaxed: Space, fits: np.ndarray, step: np.ndarray, peak: np.ndarray,
                  lightest_in_lists: float | None, budget: float, short_of: Callable[[int], str],
                  notes: Mapping[tuple[str, int], str] | None = None) -> list[Diagnostic]:
    """HP601, one per list no fitting strategy meets; else one saying the lists are never met at once.

    `fits`, `step`, `peak` are over `relaxed` (every list widened to its bounds); `short_of(row)` names a
    relaxed row (its strategy, step time and peak); `notes[(dim, value)]` says why a listed value yields no
    fitting strategy (the rules it breaks, or the lightest peak it reaches)."""
    fit_idx = np.nonzero(fits)[0]
    n = int(fit_idx.size)
    dims = [d for d in DIMENSIONS if restrict.get(d) is not None and d != "etp"]
    if lightest_in_lists is not None and math.isfinite(lightest_in_lists):
        within = f" Within the lists the lightest strategy needs {gib(lightest_in_lists)} of the {gib(budget)} budget."
    elif len(constrained) == 0 and constrained.refused:
        top = sorted(constrained.refused.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        within = f" Within the lists every candidate breaks a rule ({'; '.join(r for r, _ in top)})."
    else:
        within = ""
    out: list[Diagnostic] = []
    for d in dims:
        asked = sorted(set(restrict[d] or ()))
        found = sorted(set(relaxed.columns[DIM_COLUMN[d]][fit_idx].tolist()))
        if set(asked) & set(found):
            continue
        why = []
        reasons = constrained.value_reasons.get(DIM_COLUMN[d], {})
        for v in asked:
            note = (notes or {}).get((d, v))
            if v in reasons and not (DIM_COLUMN[d] in constrained.columns
                                     and (constrained.columns[DIM_COLUMN[d]] == v).any()):
                why.append(f"{d} {fmt_value(d, v)}: {', '.join(reasons[v])}")
            elif note:
                why.append(f"{d} {fmt_value(d, v)}: {note}")
        why_s = f" ({'; '.join(why)})" if why else ""
        where = dim_position(config, d)
        msg = (f"None of the {n} strategies that fit the memory budget is in the candidate lists: {where[1]} asks "
               f"{fmt_values(d, asked)}{why_s}, the strategies that fit take {fmt_values(d, found)}.{within} "
               f"Widen the list, or the budget.")
        out.append(_diag("HP601", msg, where, {"dimension": d, "asked": asked, "fitting": found}))
    if out or not dims:
        return out
    # Each list is met, never all at once: the closest strategy breaks the fewest lists, then is fastest.
    broken = np.zeros(n, dtype=np.int64)
    for d in dims:
        broken += ~np.isin(relaxed.columns[DIM_COLUMN[d]][fit_idx], np.asarray(restrict[d], dtype=np.int64))
    keys = np.lexsort((fit_idx, peak[fit_idx], step[fit_idx], broken))
    best = int(fit_idx[keys[0]])
    outside = [d for d in dims if int(relaxed.columns[DIM_COLUMN[d]][best]) not in set(restrict[d] or ())]
    clauses = ", ".join(f"{d} {fmt_value(d, int(relaxed.columns[DIM_COLUMN[d]][best]))} outside "
                        f"{fmt_values(d, sorted(set(restrict[d] or ())))}" for d in outside)
    where = dim_position(config, outside[0]) if outside else dim_position(config, dims[0])
    msg = (f"None of the {n} strategies that fit the memory budget is in the candidate lists: each list is met by "
           f"some of them, but never all at once. The closest, {short_of(best)}, takes {clauses}.{within} "
           f"Widen one of these lists, or the budget.")
    return [_diag("HP601", msg, where, {"dimensions": outside})]


# -------------------------------------------------------------------------------------------- budget
def budget_refusal(config: Config, budget: float, lightest_short: str, lightest_peak: float,
                   advice: Sequence[str]) -> Diagnostic:
    """HP602: the lightest strategy found and its peak, and what would make one fit, in numbers."""
    adv = " ".join(advice)
    source = f" (from {config.budget_source})" if config.budget_source else ""
    msg = (f"No strategy fits the memory budget of {gib(budget)}{source}; the lightest strategy found, "
           f"{lightest_short}, needs {gib(lightest_peak)}.{(' ' + adv) if adv else ''}")
    # A budget no file writes (editor settings, a flag) has no key to point at: the refusal then sits on the
    # first strategy key the file has, not at the top of the file.
    return _diag("HP602", msg, position(config, BUDGET_PATHS + STRATEGY_ANCHORS),
                 {"budget_gib": budget, "lightest_gib": lightest_peak})


def validity_refusal(config: Config, refused: Mapping[str, int]) -> Diagnostic:
    """HP603: every candidate broke a rule; the rules, most frequent first."""
    top = sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))
    rules = "; ".join(f"{reason}: {count}" for reason, count in top[:6]) or "no candidate at all"
    return _diag("HP603", f"Every candidate strategy breaks a rule, so there is nothing to price ({rules}).",
                 (DOCUMENT_START, "", None), {"refused": dict(refused)})


def cannot_search(config: Config, missing: Sequence[str], *, at_batch: bool) -> Diagnostic:
    """HP604: the search needs the model, the cluster and the global batch size; `at_batch` when the global
    batch is all that is missing, so the finding sits on it (the caller knows which item is which)."""
    where = position(config, BATCH_PATHS) if at_batch else (DOCUMENT_START, "", None)
    return _diag("HP604", f"The search cannot run: it needs {', '.join(missing)} (see the other diagnostics).",
                 where)


def round_up(x: float, step: float = 0.1) -> float:
    return math.ceil(x / step - 1e-9) * step
