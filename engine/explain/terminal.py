"""The terminal picture of an Explained plan: the stage table, what bounds the step, and one text lane per
stage of the timeline (a character is a slice of the step; its letter is the kind that fills most of it)."""

from __future__ import annotations

from engine.explain.types import Explained, Interval
from engine.results import MEMORY_TERMS

LETTER = {"forward": "F", "backward": "B", "recompute": "R", "comm": "c", "bubble": ".", "optimizer": "O"}
LEGEND = "F forward · B backward · R recompute · c exposed communication · . idle (bubble) · O optimizer; " \
         "digits: the micro-batch an operation starts (0-based)"
SHORT = {"parameters": "params", "gradients": "grads", "optimizer": "optim", "activations": "activ",
         "buffers": "buffers", "reserved": "reserved"}


def stage_table(ex: Explained) -> list[str]:
    """One row per stage: layers, memory by part and total (GiB), seconds per step by part."""
    heads = ["stage", "layers", *(SHORT[k] for k in MEMORY_TERMS), "total GiB", "fwd s", "bwd s", "recomp s",
             "comm s", "idle s"]
    rows = [heads]
    for r in ex.stages:
        mark = " *" if r.stage == ex.tightest_stage else ""
        rows.append([str(r.stage), r.layers_text(ex.chunk_detail), *(f"{r.memory_gib[k]:.2f}" for k in MEMORY_TERMS),
                     f"{r.total_gib:.2f}{mark}", *(f"{r.time_s[k]:.3f}" for k in
                                                    ("forward", "backward", "recompute", "comm", "idle"))])
    widths = [max(len(row[c]) for row in rows) for c in range(len(heads))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]


def lanes(ex: Explained, width: int = 96) -> list[str]:
    """The timeline as text: one lane per stage, `width` characters for the whole step."""
    step = ex.step_time_s
    width = max(width, 10)
    if step <= 0:
        return []
    per = [[{} for _ in range(width)] for _ in ex.stages]  # type: list[list[dict[str, float]]]
    starts: list[list[tuple[int, Interval]]] = [[] for _ in ex.stages]
    for iv in ex.timeline:
        a, b = iv.start_s / step * width, iv.end_s / step * width
        for c in range(int(a), min(int(b) + 1, width)):
            overlap = min(b, c + 1) - max(a, c)
            if overlap > 0:
                cell = per[iv.stage][c]
                cell[iv.kind] = cell.get(iv.kind, 0.0) + overlap
        if iv.micro_batch is not None and iv.kind in ("forward", "backward"):
            starts[iv.stage].append((int(a), iv))
    out = []
    for i, cells in enumerate(per):
        chars = [LETTER[max(c, key=lambda k: c[k])] if c else " " for c in cells]
        for col, iv in starts[i]:
            label = str(iv.micro_batch)
            span = (iv.end_s - iv.start_s) / step * width
            if span >= len(label) + 1 and col + len(label) <= width:
                chars[col:col + len(label)] = list(label)
        out.append(f"stage {i:>2} |{''.join(chars)}|")
    axis = f"{'':9}0 s{'':{max(width - 3 - len(f'{step:.3g} s'), 1)}}{step:.3g} s"
    return [*out, axis]


def render(ex: Explained, width: int = 96) -> list[str]:
    """Everything `hp-plan explain` prints for a plan (without the diagnostics)."""
    e = ex.estimate
    lines = [f"{e.short()} on {ex.framework}: step {e.step_time_s:.3f} s {e.step_band}, "
             f"{e.tokens_per_s:,.0f} tokens/s, MFU {100 * e.mfu:.1f}%, peak {e.peak_memory_gib:.2f} GiB "
             f"{e.memory_band} of {e.budget_gib:g} GiB: {e.verdict_text}", "", "Per stage (* = tightest memory):"]
    lines += ["  " + row for row in stage_table(ex)]
    note = e.offload_note()
    if note is not None:
        lines.append("  " + note)
    vt = e.vision_tower
    if vt is not None:  # stage 0's figures above include it (engine.cost.tower)
        lines.append(f"  stage 0 also holds the vision tower: {int(vt['layers'])} layers × {int(vt['visual_seq_len'])} "
                     f"visual tokens, {vt['memory_gib']:.2f} GiB, {vt['time_s']:.3f} s of its work per step")
    lines += ["", f"Bound: {ex.bound} ({ex.bound_detail})"]
    if ex.estimate.strategy.pp > 1:
        lines.append(f"Pipeline: {ex.schedule}, {e.strategy.micro_batch_num} micro-batches, bubble "
                     f"{e.time_breakdown_s['pp_bubble']:.3f} s = {100 * ex.bubble_fraction:.1f}% of the "
                     "busiest stage's work")
    lines += ["", f"Timeline ({ex.schedule}):"] + ["  " + ln for ln in lanes(ex, width)] + ["  " + LEGEND]
    return lines
