"""Distinct alternatives: the top K shows distinct plan shapes, not one plan at five FSDP degrees.

Why: a reviewer choosing a plan needs alternatives that differ in what decides how the job runs (tp, pp, vpp,
cp, ep, the micro-batch, the recompute), not the same shape with FSDP over 8, 16 or 32 ranks at the same step
time. Ranked plans (engine.cost.equivalence) are walked best first; a plan whose shape an earlier one already
shows joins that row, which keeps its own numbers (the best of its shape) and names the range of the degrees its
members differ in (`Variants`: FSDP degree, optimizer shard, sequence parallelism, the pipeline layout).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.cost.equivalence import Ranked
from engine.results import Estimate

# The degrees a row's collapsed members may differ in, as the strategy's JSON names them.
VARIANT_FIELDS: tuple[str, ...] = ("dp_shard", "optimizer_shard", "sequence_parallel")


def shape(e: Estimate) -> tuple[object, ...]:
    """What makes two plans different alternatives: tp, pp, vpp (interleaved), cp, ep, the micro-batch size and
    the recompute (its mode, whether it varies per layer, whether it offloads)."""
    s = e.strategy
    vpp = s.vpp if s.pipeline_schedule == "interleaved" else 1
    rc = s.recompute
    return (s.tp, s.pp, vpp, s.cp, s.ep, s.micro_batch_size, rc.mode, bool(rc.layers), bool(rc.offload))


@dataclass(frozen=True, slots=True)
class Distinct:
    """The ranked rows, one per shape, with the values of VARIANT_FIELDS (and "layout") each row's collapsed
    members take where they differ from one another (empty mapping: the row stands alone)."""

    ranked: Ranked
    variants: tuple[Mapping[str, tuple[object, ...]], ...]


def _values(e: Estimate) -> dict[str, object]:
    s = e.strategy
    out: dict[str, object] = {f: getattr(s, f) for f in VARIANT_FIELDS}
    out["layout"] = e.layout_text() or "even"
    return out


def distinct(ranked: Ranked, top: int) -> Distinct:
    """The first `top` distinct shapes of `ranked`, best first, each with the variants it stands for."""
    rows: list[int] = []
    members: dict[tuple[object, ...], list[Estimate]] = {}
    for i, e in enumerate(ranked.estimates):
        key = shape(e)
        if key not in members:
            members[key] = []
            rows.append(i)
        members[key].append(e)
    rows = rows[:top]
    kept = [ranked.estimates[i] for i in rows]
    return Distinct(Ranked(tuple(kept), tuple(ranked.equivalent[i] for i in rows), ranked.band, ranked.reach),
                    tuple(_spread(members[shape(e)]) for e in kept))


def _spread(group: Sequence[Estimate]) -> dict[str, tuple[object, ...]]:
    """Per variant field, the sorted distinct values a row's members take, where there are several."""
    out: dict[str, tuple[object, ...]] = {}
    values = [_values(e) for e in group]
    for name in (*VARIANT_FIELDS, "layout"):
        seen = _ordered({v[name] for v in values})
        if len(seen) > 1:
            out[name] = seen
    return out


def _ordered(values: set[object]) -> tuple[object, ...]:
    """Integers in numeric order, anything else by its text."""
    ints = [v for v in values if isinstance(v, int)]
    if len(ints) == len(values):
        return tuple(sorted(ints))
    return tuple(sorted(values, key=str))


def describe(variants: Mapping[str, tuple[object, ...]]) -> str:
    """`fsdp 8-64 (5 degrees)`, `sp on/off`: what a collapsed row stands for, for the text table."""
    parts = []
    names = {"dp_shard": "fsdp", "optimizer_shard": "zero-1", "sequence_parallel": "sp", "layout": "layout"}
    for name, vals in variants.items():
        if name == "sequence_parallel":
            parts.append("sp on/off")
        elif all(isinstance(v, int) for v in vals):
            parts.append(f"{names[name]} {vals[0]}-{vals[-1]}" + (f" ({len(vals)} values)" if len(vals) > 2 else ""))
        else:
            parts.append(f"{names[name]}: " + " / ".join(str(v) for v in vals))
    return ", ".join(parts)


def merge_variants(picked: Distinct, passes: Sequence[tuple[Sequence[Estimate], Sequence[Mapping[str, tuple[object, ...]]]]]
                   ) -> tuple[Mapping[str, tuple[object, ...]], ...]:
    """Each picked row's variants with those its members already stood for in the search pass they came from
    (the pipeline-layout pass of engine.search ranks two passes' rows together)."""
    out = []
    for e, mine in zip(picked.ranked.estimates, picked.variants, strict=True):
        merged = {k: set(v) for k, v in mine.items()}
        for rows, variants in passes:
            for row, var in zip(rows, variants, strict=False):
                if shape(row) == shape(e):
                    for k, v in var.items():
                        merged.setdefault(k, set()).update(v)
        out.append({k: _ordered(v) for k, v in merged.items() if len(v) > 1})
    return tuple(out)
