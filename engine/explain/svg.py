"""The SVG picture of an Explained plan: the pipeline timeline (one lane per stage, every interval a box
coloured by kind, micro-batch numbers where they fit, a time axis in seconds) and a memory-per-stage chart
(stacked bars by memory part in GiB, the budget as a dashed line), each with a legend.

Written by hand with xml.sax.saxutils escaping rather than a plotting library: the picture is a few hundred
rectangles and lines, the output must be deterministic and byte-identical offline in the CLI and the
editor's webview, and a dependency (matplotlib, plotly, d3) would add megabytes and a network-loading or
font-cache surface for no drawing this needs. Colours: the Tableau 10 palette."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape, quoteattr

from engine.explain.types import KINDS, Explained
from engine.results import MEMORY_TERMS

KIND_COLOR = {"forward": "#4e79a7", "backward": "#f28e2b", "recompute": "#e15759", "comm": "#76b7b2",
              "bubble": "#e8e8e8", "optimizer": "#59a14f"}
MEMORY_COLOR = {"parameters": "#4e79a7", "gradients": "#f28e2b", "optimizer": "#59a14f", "activations": "#e15759",
                "buffers": "#76b7b2", "reserved": "#bab0ac"}
WIDTH = 1000
LEFT = 78  # room for "stage 12"
RIGHT = 24
LANE = 22
GAP = 6
FONT = "font-family='Helvetica, Arial, sans-serif'"
# Above this many intervals the boxes carry no hover titles (the file stays a few MB at most).
TITLES_UP_TO = 4000


def nice_ticks(top: float, count: int = 6) -> list[float]:
    """Round tick values from 0 to at least `top` (1, 2, 2.5 or 5 × a power of ten apart)."""
    if top <= 0 or not math.isfinite(top):
        return [0.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(k * mag for k in (1, 2, 2.5, 5, 10) if k * mag >= raw)
    n = math.floor(top / step + 1e-9)
    return [round(i * step, 12) for i in range(n + 1)]


def _text(x: float, y: float, s: str, *, size: int = 12, anchor: str = "start", weight: str = "normal",
          fill: str = "#222") -> str:
    return (f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' font-weight='{weight}' "
            f"fill='{fill}' {FONT}>{escape(s)}</text>")


def _legend(x: float, y: float, items: list[tuple[str, str]]) -> list[str]:
    out = []
    for label, color in items:
        out.append(f"<rect x='{x:.1f}' y='{y - 10:.1f}' width='12' height='12' fill='{color}' stroke='#888' "
                   "stroke-width='0.5'/>")
        out.append(_text(x + 16, y, label, size=11))
        x += 16 + 7 * len(label) + 18
    return out


def _timeline(ex: Explained, top: float) -> tuple[list[str], float]:
    step = ex.step_time_s
    plot_w = WIDTH - LEFT - RIGHT
    sx = plot_w / step if step > 0 else 0.0
    out = [_text(LEFT, top + 14, f"Pipeline timeline: {ex.schedule}, {ex.estimate.strategy.micro_batch_num} "
                 f"micro-batches, step {step:.3f} s", size=13, weight="bold")]
    y0 = top + 26
    titles = len(ex.timeline) <= TITLES_UP_TO
    for r in ex.stages:
        y = y0 + r.stage * (LANE + GAP)
        out.append(_text(LEFT - 8, y + LANE / 2 + 4, f"stage {r.stage}", anchor="end"))
    for iv in ex.timeline:
        x = LEFT + iv.start_s * sx
        w = max((iv.end_s - iv.start_s) * sx, 0.0)
        y = y0 + iv.stage * (LANE + GAP)
        tip = ""
        if titles:
            what = iv.kind if iv.micro_batch is None else f"{iv.kind} micro-batch {iv.micro_batch} chunk {iv.chunk}"
            tip = f"<title>{escape(f'stage {iv.stage}: {what}, {iv.start_s:.4g}-{iv.end_s:.4g} s')}</title>"
        odd = " fill-opacity='0.6'" if iv.chunk and iv.chunk % 2 else ""  # interleaved: odd chunks lighter
        out.append(f"<rect class={quoteattr(iv.kind)} x='{x:.2f}' y='{y:.1f}' width='{w:.2f}' height='{LANE}' "
                   f"fill='{KIND_COLOR[iv.kind]}'{odd}>{tip}</rect>")
        label = str(iv.micro_batch) if iv.micro_batch is not None and iv.kind in ("forward", "backward") else ""
        if label and w >= 7 * len(label) + 4:
            out.append(_text(x + w / 2, y + LANE / 2 + 4, label, size=10, anchor="middle", fill="#fff"))
    axis_y = y0 + len(ex.stages) * (LANE + GAP)
    out.append(f"<line x1='{LEFT}' y1='{axis_y:.1f}' x2='{LEFT + plot_w}' y2='{axis_y:.1f}' stroke='#444'/>")
    for t in nice_ticks(step):
        x = LEFT + t * sx
        out.append(f"<line x1='{x:.1f}' y1='{axis_y:.1f}' x2='{x:.1f}' y2='{axis_y + 4:.1f}' stroke='#444'/>")
        out.append(_text(x, axis_y + 16, f"{t:g}", size=10, anchor="middle"))
    out.append(_text(LEFT + plot_w, axis_y + 30, "time in the step (s)", size=11, anchor="end"))
    out += _legend(LEFT, axis_y + 48, [(k if k != "comm" else "exposed comm", KIND_COLOR[k]) for k in KINDS])
    if any(iv.chunk for iv in ex.timeline):
        out.append(_text(LEFT + plot_w, axis_y + 48, "lighter: odd model chunks; numbers: micro-batch", size=11,
                         anchor="end"))
    else:
        out.append(_text(LEFT + plot_w, axis_y + 48, "numbers: micro-batch", size=11, anchor="end"))
    return out, axis_y + 62


def _memory(ex: Explained, top: float) -> tuple[list[str], float]:
    budget = ex.estimate.budget_gib
    totals = [r.total_gib for r in ex.stages]
    scale_top = max([*totals, budget if math.isfinite(budget) else 0.0, 1e-9])
    ticks = nice_ticks(scale_top)
    if ticks[-1] < scale_top:
        ticks.append(ticks[-1] + (ticks[1] - ticks[0] if len(ticks) > 1 else scale_top))
    plot_w = WIDTH - LEFT - RIGHT
    sx = plot_w / ticks[-1]
    out = [_text(LEFT, top + 14, f"Memory per stage (GiB per device), budget {budget:g} GiB", size=13,
                 weight="bold")]
    y0 = top + 26
    for r in ex.stages:
        y = y0 + r.stage * (LANE + GAP)
        out.append(_text(LEFT - 8, y + LANE / 2 + 4, f"stage {r.stage}", anchor="end"))
        x = float(LEFT)
        for k in MEMORY_TERMS:
            w = max(r.memory_gib[k], 0.0) * sx
            out.append(f"<rect class='mem-{k}' x='{x:.2f}' y='{y:.1f}' width='{w:.2f}' height='{LANE}' "
                       f"fill='{MEMORY_COLOR[k]}'><title>{escape(f'stage {r.stage} {k}: {r.memory_gib[k]:.2f} GiB')}"
                       "</title></rect>")
            x += w
        out.append(_text(x + 4, y + LANE / 2 + 4, f"{r.total_gib:.1f}", size=10))
    axis_y = y0 + len(ex.stages) * (LANE + GAP)
    if math.isfinite(budget):
        bx = LEFT + budget * sx
        out.append(f"<line class='budget' x1='{bx:.1f}' y1='{y0 - 4:.1f}' x2='{bx:.1f}' y2='{axis_y:.1f}' "
                   "stroke='#c00' stroke-dasharray='5,3' stroke-width='1.5'/>")
    out.append(f"<line x1='{LEFT}' y1='{axis_y:.1f}' x2='{LEFT + plot_w}' y2='{axis_y:.1f}' stroke='#444'/>")
    for t in ticks:
        x = LEFT + t * sx
        out.append(f"<line x1='{x:.1f}' y1='{axis_y:.1f}' x2='{x:.1f}' y2='{axis_y + 4:.1f}' stroke='#444'/>")
        out.append(_text(x, axis_y + 16, f"{t:g}", size=10, anchor="middle"))
    out.append(_text(LEFT + plot_w, axis_y + 30, "GiB per device", size=11, anchor="end"))
    items = [(k, MEMORY_COLOR[k]) for k in MEMORY_TERMS] + ([("budget", "#c00")] if math.isfinite(budget) else [])
    out += _legend(LEFT, axis_y + 48, items)
    return out, axis_y + 62


def render(ex: Explained) -> str:
    """The whole picture as one SVG document (UTF-8 text)."""
    e = ex.estimate
    head = [_text(12, 22, f"{e.short()} ({ex.framework})", size=15, weight="bold"),
            _text(12, 40, f"{e.tokens_per_s:,.0f} tokens/s · MFU {100 * e.mfu:.1f}% · bound: {ex.bound} · "
                  f"peak {e.peak_memory_gib:.1f} of {e.budget_gib:g} GiB", size=12)]
    tl, y = _timeline(ex, 52)
    mem, y = _memory(ex, y + 10)
    height = math.ceil(y + 8)
    body = "\n".join([*head, *tl, *mem])
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' "
            f"viewBox='0 0 {WIDTH} {height}' role='img'>\n<rect width='100%' height='100%' fill='#fff'/>\n"
            f"{body}\n</svg>\n")
