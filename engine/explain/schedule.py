"""The pipeline schedule as intervals: the order each stage runs its micro-batches in, simulated with the
cost model's own per-stage durations.

Orders (what the trainers execute): 1F1B (PipeDream-Flush, NAR21 §2.1; Megatron-LM
`forward_backward_pipelining_without_interleaving`): stage i runs min(p − 1 − i, m) warm-up forwards, then
alternates one forward and one backward, then drains its backwards. Interleaved 1F1B (NAR21 §2.2; Megatron
`forward_backward_pipelining_with_interleaving`): each stage holds v model chunks; micro-batches go in groups
of p, a group's forwards run chunk by chunk (chunk 0 for the p micro-batches, then chunk 1, ...), backwards
in reverse chunk order; warm-up is (p − i − 1)·2 + (v − 1)·p forward units (all of them when m = p).

Dependencies: the forward of (chunk c, micro-batch j) on stage i needs the same on stage i − 1 (on the last
stage of chunk c − 1 for i = 0); a backward needs the backward of stage i + 1 (of stage 0, chunk c + 1 for the
last stage; the last forward for the last chunk). Each operation starts when its stage is free and its input
has arrived (the point-to-point time is part of the stage time the cost model prices, so edges carry none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FORWARD, BACKWARD = "forward", "backward"


@dataclass(frozen=True, slots=True)
class Op:
    """One scheduled unit: the forward or the backward of one micro-batch on one model chunk of a stage."""

    stage: int
    kind: str  # FORWARD | BACKWARD
    micro_batch: int
    chunk: int
    start_s: float
    end_s: float


def stage_order(stage: int, pp: int, vpp: int, micro_batches: int, *,
                all_forward_first: bool = False) -> list[tuple[str, int, int]]:
    """The (kind, micro_batch, chunk) sequence stage `stage` executes (module docstring); with
    all_forward_first every forward before any backward (GPipe's order, the fallback for an interleaved
    order that cannot run: micro-batches not a multiple of pp, HP507)."""
    m, p, v = micro_batches, pp, vpp
    fwd = _unit_order(p, v, m, reverse=False)
    bwd = _unit_order(p, v, m, reverse=True)
    total = len(fwd)
    if all_forward_first:
        warm = total
    elif v == 1:
        warm = min(p - 1 - stage, m)
    elif m == p:
        warm = total
    else:
        warm = min((p - stage - 1) * 2 + (v - 1) * p, total)
    out: list[tuple[str, int, int]] = [(FORWARD, j, c) for j, c in fwd[:warm]]
    fi, bi = warm, 0
    while fi < total:
        out.append((FORWARD, *fwd[fi]))
        fi += 1
        out.append((BACKWARD, *bwd[bi]))
        bi += 1
    out.extend((BACKWARD, j, c) for j, c in bwd[bi:])
    return out


def _unit_order(p: int, v: int, m: int, *, reverse: bool) -> list[tuple[int, int]]:
    """(micro_batch, chunk) units in Megatron's interleaved order: groups of p micro-batches, chunk by chunk
    (reversed for backwards); with v = 1 simply micro-batch order. A last group smaller than p keeps the
    same rule (newer Megatron relaxes m % p == 0 this way)."""
    units: list[tuple[int, int]] = []
    for g0 in range(0, m, p):
        group = range(g0, min(g0 + p, m))
        chunks = range(v - 1, -1, -1) if reverse else range(v)
        for c in chunks:
            units.extend((j, c) for j in group)
    return units


def simulate(fwd_s: Sequence[float], bwd_s: Sequence[float], vpp: int, micro_batches: int, *,
             all_forward_first: bool = False) -> list[Op]:
    """Run every stage's order with per-chunk forward / backward durations fwd_s[i], bwd_s[i] (seconds of
    one micro-batch on one chunk of stage i) and return the operations with their times.

    Stages advance in turn, each as far as its next operation's input is ready; an order that could never
    finish (it cannot happen for the orders above) raises ValueError instead of looping."""
    p = len(fwd_s)
    orders = [stage_order(i, p, vpp, micro_batches, all_forward_first=all_forward_first) for i in range(p)]
    done: dict[tuple[str, int, int, int], float] = {}
    free = [0.0] * p
    pos = [0] * p
    ops: list[Op] = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for i in range(p):
            while pos[i] < len(orders[i]):
                kind, j, c = orders[i][pos[i]]
                dep = _dependency(kind, i, j, c, p, vpp)
                ready = done.get(dep) if dep is not None else 0.0
                if ready is None:
                    break
                start = max(free[i], ready)
                end = start + (fwd_s[i] if kind == FORWARD else bwd_s[i])
                done[(kind, i, j, c)] = end
                free[i] = end
                ops.append(Op(i, kind, j, c, start, end))
                pos[i] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise ValueError("pipeline order deadlocks")
    return ops


def _dependency(kind: str, i: int, j: int, c: int, p: int, v: int) -> tuple[str, int, int, int] | None:
    """The operation whose end this one waits for (module docstring), None for the very first forward."""
    if kind == FORWARD:
        if i > 0:
            return (FORWARD, i - 1, j, c)
        return (FORWARD, p - 1, j, c - 1) if c > 0 else None
    if i < p - 1:
        return (BACKWARD, i + 1, j, c)
    return (BACKWARD, 0, j, c + 1) if c < v - 1 else (FORWARD, p - 1, j, v - 1)
