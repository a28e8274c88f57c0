"""Completion of known keys (by enclosing section, from the reader's schema engine.config.schema) and
enum values (device types, recompute modes, schedules: FORMATS.md §1-§2). Works on half-typed text: the
context comes from the line scanner, not a parse."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from engine.catalog.devices import device_names
from engine.config.schema import SEARCH, SEARCH_DIMENSION_KEYS, TRAIN_AUTOMODELS, TRAIN_LEGACY, Section
from hp_lsp.outline import Entry, enclosing


def _section(root: Section, path: tuple[str, ...]) -> Section | None:
    node: Section | None = root
    for part in path:
        node = node.children.get(part) if node is not None else None
    return node


_BOOL = ("true", "false")
# key name (last path part) -> allowed values
ENUMS: dict[str, tuple[str, ...]] = {
    "pipeline_scheduler": ("1f1b", "interleaved_1f1b"),
    "context_parallel_algo": ("ring", "ulysses", "hybrid"),
    "mode": ("off", "selective", "full"),
    "selective_policy": ("hyperparallel", "attention"),
    "recompute": ("none", "selective", "full", "auto", "per_layer"),
    "pipeline_schedule": ("1F1B", "interleaved"),
    "torch_dtype": ("bfloat16", "float16", "float32"),
    "compute_dtype": ("bfloat16", "float16", "float32"),
    "hidden_act": ("silu", "swiglu", "gelu", "gelu_new", "relu"),
    "sequence_parallel": ("true", "false", "auto"),
    "reshard_after_forward": _BOOL,
    "tie_word_embeddings": _BOOL,
    "use_flash_attention": _BOOL,
    "use_seq_parallel": _BOOL,
}


_DIMS = tuple(SEARCH_DIMENSION_KEYS.split())


def schema_for(entries: Sequence[Entry]) -> Section:
    """Which file kind the text is, from its top-level keys (FORMATS.md §1 detection rules)."""
    tops = {e.path[0] for e in entries if len(e.path) == 1}
    if tops & {"training", "accelerator", "fsdp_config"}:
        return TRAIN_AUTOMODELS
    if tops & {"train_yaml", "cluster", "parallelism", "constraint", "pp_config"}:
        return SEARCH
    if "train" in tops or "data" in tops:
        return TRAIN_LEGACY
    return TRAIN_AUTOMODELS


def value_choices(key: str, path: tuple[str, ...]) -> tuple[str, ...]:
    if key == "device_type":
        return tuple(device_names())
    if path and path[0] == "parallelism" and key in _DIMS and key != "sequence_parallel":
        return ("auto",)
    return ENUMS.get(key, ())


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
            types.CompletionItem(label=v, kind=types.CompletionItemKind.EnumMember, detail=f"{key} value")
            for v in value_choices(key, parent)
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
