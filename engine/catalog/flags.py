"""The command-line flags each stack's launcher accepts, as data read from its argument definitions at a pinned
commit (engine/catalog/data/<stack>_flags.txt; scripts/stack_flags.py reads them): what `hp-plan export` may
print. Megatron-LM at core_v0.19.0; MindSpeed-LLM as Megatron-LM core_v0.12.1 (the release MindSpeed pins) plus
MindSpeed's own feature flags. Each file's header names the repository and commit."""

from __future__ import annotations

from functools import cache
from importlib.resources import files


def _lines(stack: str) -> list[str]:
    return files("engine.catalog").joinpath("data", f"{stack}_flags.txt").read_text(encoding="utf-8").splitlines()


@cache
def accepted_flags(stack: str) -> frozenset[str]:
    """Every flag the stack's launcher accepts (`--name`); empty for a stack without a flag list."""
    try:
        return frozenset(x.strip() for x in _lines(stack) if x.startswith("--"))
    except FileNotFoundError:
        return frozenset()


def flags_source(stack: str) -> str:
    """The header of the stack's flag list: the repository, release and commit it was read at."""
    return " ".join(x.lstrip("# ").strip() for x in _lines(stack) if x.startswith("#"))
