"""Completion of known keys (by enclosing section, from the reader's schema engine.config.schema) and
enum values (device types from the catalog; recompute modes, schedules, CP algorithms, dtypes from the
reader's own tables of accepted spellings; `true`/`false` for the keys the readers read as booleans).
Works on half-typed text: the context comes from the line scanner, not a parse."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from engine.catalog.devices import device_names
from engine.config.model_facts import BOOL_FIELDS, GATED_ACTS, PLAIN_ACTS
from engine.config.schema import SEARCH, SEARCH_DIMENSION_KEYS, TRAIN_AUTOMODELS, TRAIN_LEGACY, Section
from engine.config.search_config import RECOMPUTE_REQUESTS, SCHEDULES
from engine.config.stated_layout import LAYOUT_BOOLS
from engine.config.train import (
    CP_ALGOS,
    DTYPES,
    OVERLAP_KEYS,
    PIPELINE_SCHEDULERS,
    RECOMPUTE_MODES,
    SELECTIVE_POLICIES,
)
from hp_lsp.outline import Entry, enclosing


def _section(root: Section, path: tuple[str, ...]) -> Section | None:
    node: Section | None = root
    for part in path:
        node = node.children.get(part) if node is not None else None
    return node


_BOOL = {"true": "true", "false": "false"}
# Keys the readers type as booleans (`Source.bool_`: true/false, nothing else), from the readers' own tables:
# the model facts engine.config.model_facts reads as booleans (BOOL_FIELDS: tie_word_embeddings, use_flash_attention,
# ...), the run's overlap flags engine.config.train and .search read (OVERLAP_KEYS: `accelerator.*` in a
# train.yaml, top level in a search config), and the three the readers read one by one
# (accelerator.sequence_parallel, fsdp_config.reshard_after_forward, a search config's model.use_seq_parallel,
# a legacy train.yaml's train.accelerator.enable_parallel_optimizer, mixed_precision.enabled,
# estimator.master_weights).
# The schema tables record no types; tests/hp_lsp/test_completion_symbols.py derives this set from the readers'
# HP104 ("must be true or false") over every schema key, so a new boolean key the readers gain fails there.
BOOLEAN_KEYS = frozenset(BOOL_FIELDS | set(OVERLAP_KEYS) | {"sequence_parallel", "reshard_after_forward",
                                                              "use_seq_parallel", "enable_parallel_optimizer",
                                                              "compile", "fp8", "loss_parallel", "enabled",
                                                              "master_weights", "offload", "fp8_param_gather"}
                           | set(LAYOUT_BOOLS))
# key name (last path part) -> the reader's table of accepted spellings -> canonical value, so completion offers
# exactly what the reader accepts (engine.config.train / .search / .model are the one source of truth).
ENUMS: dict[str, dict[str, str]] = {
    "pipeline_scheduler": PIPELINE_SCHEDULERS,
    "context_parallel_algo": CP_ALGOS,
    "mode": RECOMPUTE_MODES,
    "selective_policy": SELECTIVE_POLICIES,
    "recompute": RECOMPUTE_REQUESTS,
    "pipeline_schedule": SCHEDULES,
    "torch_dtype": {k: k for k in DTYPES},
    "compute_dtype": {k: k for k in DTYPES},
    "model_init_dtype": {k: k for k in DTYPES},
    "param_init_type": {k: k for k in DTYPES},
    "param_dtype": {k: k for k in DTYPES},
    **{k: {d: d for d in DTYPES} for k in ("reduce_dtype", "grad_dtype", "optimizer_state_dtype")},
    "hidden_act": {k: k for k in sorted(GATED_ACTS | PLAIN_ACTS)},
    **{k: _BOOL for k in sorted(BOOLEAN_KEYS)},
}


_DIMS = tuple(SEARCH_DIMENSION_KEYS.split())


def schema_for(entries: Sequence[Entry]) -> Section:
    """Which file kind the text is, from its top-level keys (docs/formats.md §1 detection rules)."""
    tops = {e.path[0] for e in entries if len(e.path) == 1}
    if tops & {"training", "accelerator", "fsdp_config"}:
        return TRAIN_AUTOMODELS
    if tops & {"train_yaml", "cluster", "parallelism", "constraint", "pp_config"}:
        return SEARCH
    if "train" in tops or "data" in tops:
        return TRAIN_LEGACY
    return TRAIN_AUTOMODELS


def value_choices(key: str, path: tuple[str, ...]) -> dict[str, str]:
    """Accepted spellings -> what they mean, for the value of `key` under `path`."""
    if key == "device_type":
        return {name: name for name in device_names()}
    if path and path[0] == "parallelism" and key in _DIMS:
        return {"auto": "auto", **(_BOOL if key in BOOLEAN_KEYS else {})}
    return ENUMS.get(key, {})


def complete(entries: Sequence[Entry], line_text: str, line: int, character: int) -> list[types.CompletionItem]:
    """Items for the cursor at (line, character) in code points; `line_text` is that line."""
    before = line_text[:character]
    stripped = before.lstrip(" ")
    indent = len(before) - len(stripped)
    if stripped.startswith("- "):
        stripped = stripped[2:]
        indent += 2
    if ":" in stripped:  # completing a value
        key = stripped.split(":", 1)[0].strip().strip("'\"")
        parent = enclosing(list(entries), line, indent)
        return [
            types.CompletionItem(label=v, kind=types.CompletionItemKind.EnumMember,
                                 detail=f"{key} value" if v == meaning else f"{key} value (= {meaning})")
            for v, meaning in value_choices(key, parent).items()
        ]
    if stripped.startswith("#"):
        return []
    parent = enclosing(list(entries), line, indent)
    section = _section(schema_for(entries), parent)
    if section is None:
        return []
    present = {e.path[-1] for e in entries if e.path[:-1] == parent and e.line != line}
    items = []
    # Keys this project reads first, then sub-sections, then keys it only accepts (the trainer's own).
    ranked = [(0, k) for k in section.read] + [(1, k) for k in section.children] + [(2, k) for k in section.known]
    for rank, k in sorted(ranked):
        if k in present or k.startswith("_"):
            continue
        nested = k in section.children
        items.append(types.CompletionItem(
            label=k,
            kind=types.CompletionItemKind.Module if nested else types.CompletionItemKind.Property,
            detail=".".join((*parent, k)),
            sort_text=f"{rank}{k}",
            insert_text=f"{k}:" if nested else f"{k}: ",
        ))
    return items
