"""Hover: the numbers behind a key, from cached results only (never waits for a search).

- strategy keys: the stated plan's peak memory (per stage), step time, tokens/s and MFU, the best plan's
  figures beside them;
- model keys: parameter count (total / active) and training FLOPs per token, and a hybrid model's layer kinds;
- `device_type`: the device's specs from the catalog;
- a candidate list: which of its values appear in the plans that fit.
Markdown, short, the most important number first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.catalog.devices import find_device, unconfirmed_note
from engine.results import MFU_LABEL, Estimate, SearchResult
from hp_lsp.outline import Entry, entry_at
from hp_lsp.session import DocState

STRATEGY_SECTIONS = ("accelerator", "fsdp_config", "activation_checkpoint", "parallelism", "pp_config",
                     "recompute", "constraint")
STRATEGY_KEYS = ("training.micro_batch_size", "training.global_batch_size")
MODEL_SECTIONS = ("model",)
# search-config dimension name -> Strategy attribute (docs/formats.md §2 / §3)
DIM_ATTR = {"dp": "dp", "fsdp": "dp_shard", "tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "etp": "etp",
            "vpp": "vpp", "micro_batch_size": "micro_batch_size", "micro_batch_num": "micro_batch_num",
            "sequence_parallel": "sequence_parallel"}


def _gib(x: float) -> str:
    return f"{x:.1f} GiB"


def _tokens(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k" if x >= 1e3 else f"{x:.0f}"


def _count(x: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f}"


def _stages(e: Estimate) -> str:
    stages = e.stage_memory_gib
    if len(stages) <= 1:
        return ""
    return ", ".join(f"{s:.1f}" for s in stages[:8]) + (", …" if len(stages) > 8 else "")


def plan_table(stated: Estimate | None, best: Estimate | None, *, stale: bool = False) -> str:
    """A two-column table: the stated plan and the best plan."""
    cols = [(name, e) for name, e in (("stated", stated), ("best", best)) if e is not None]
    if not cols:
        return ""
    head = "| | " + " | ".join(n for n, _ in cols) + " |\n|---|" + "---|" * len(cols) + "\n"

    def row(label: str, fn: Any) -> str:
        return f"| {label} | " + " | ".join(fn(e) for _, e in cols) + " |\n"

    body = (
        row("peak memory", lambda e: f"**{_gib(e.peak_memory_gib)}**{'' if e.fits else ' ✗'} / {e.budget_gib:.0f}")
        + row("step time", lambda e: f"{e.step_time_s:.2f} s {e.step_band}")
        + row("tokens/s", lambda e: _tokens(e.tokens_per_s))
        + row(MFU_LABEL, lambda e: f"{e.mfu:.0%} (causal {e.causal_mfu:.0%})")
    )
    return head + body + (f"\nstated plan per stage (GiB): {_stages(stated)}\n" if stated and _stages(stated) else "") \
        + (f"\nbest: `{best.short()}`\n" if best else "") \
        + f"\npriced for {cols[0][1].priced_for}\n" \
        + _band_line(cols[0][1]) \
        + (_band_line(cols[1][1], "the best plan's") if len(cols) > 1
           and cols[1][1].band_basis != cols[0][1].band_basis else "") \
        + ("\n*best plan from an earlier version; save to refresh*\n" if stale else "")


def _band_line(e: Estimate, whose: str = "the measured") -> str:
    """What set the step time's band (engine.cost.band: the runs it was read from, the features and anything
    the plan has that no run was checked on), as `hp-plan estimate` says it; said again for the best plan where
    its basis differs (a context parallelism no run checked is one plan's alone)."""
    if not e.band_basis:
        return ""
    return (f"\n{whose} step should fall within {e.step_band} about four times out of five "
            f"({'; '.join(e.band_basis)})\n")


def strategy_hover(state: DocState) -> str | None:
    stated = state.stated
    result: SearchResult | None = state.search.result if state.search else None
    best = result.best if result else None
    if stated is None and best is None:
        if state.searching:
            return "Searching for the best strategy…"
        return None
    lead = ""
    if stated is not None and best is not None and best.step_time_s > 0:
        from engine.search.gain import gain

        ratio = gain(stated, best).ratio  # tokens/s, as HP611 and hp-plan apply say it
        lead = f"**{stated.peak_memory_gib:.1f} GiB** peak · best plan {ratio:.2f}× faster\n\n" if ratio > 1.005 \
            else f"**{stated.peak_memory_gib:.1f} GiB** peak · this is the best plan found\n\n"
    elif stated is not None:
        lead = f"**{stated.peak_memory_gib:.1f} GiB** peak ({stated.fit_words(lambda w: f'**{w}**')})\n\n"
    from hp_lsp.features.plan import bound_markdown

    return lead + bound_markdown(state) + plan_table(stated, best, stale=state.search_stale)


def model_hover(state: DocState) -> str | None:
    from engine.cost import model_stats

    config = state.good.config if state.good else None
    if config is None or config.model is None:
        return None
    m = config.model
    stats = model_stats(m)
    total, active, flops = stats.total_params, stats.active_params, stats.flops_per_token
    parts = [f"**{m.name}**: **{_count(total)}** parameters" if total else f"**{m.name}**"]
    if active and total and active < total:
        parts.append(f"{_count(active)} active per token")
    lines = [" · ".join(parts)]
    if flops:
        # The MFU column counts the non-causal figure (results.MFU_CONVENTION); "causal MFU" counts this one.
        lines.append(f"training FLOPs/token: {_count(flops)} with causal attention halved "
                     f"({_count(stats.flops_per_token_noncausal)} non-causal, what the MFU counts)")
    shape = f"{m.num_layers} layers · hidden {m.hidden} · {m.heads} heads"
    if m.kv_heads and m.kv_heads != m.heads:
        shape += f" ({m.kv_heads} KV)"
    if m.hybrid is not None:  # the layer kinds the pattern was read as (engine.specs.HybridLayers)
        hy = m.hybrid
        kinds = [f"{n} {what}" for n, what in ((hy.mamba, "Mamba-2"), (hy.attention, "attention"), (hy.mlp, "MLP"),
                                               (hy.moe, "MoE")) if n]
        shape += f" ({', '.join(kinds)})"
    if m.is_moe:
        shape += f" · {m.num_experts} experts, top-{m.experts_per_tok}"
    lines.append(shape + f" · seq {m.seq_len}")
    return "\n\n".join(lines)


def device_hover(name: str) -> str | None:
    dev = find_device(name.strip().strip("'\""))
    if dev is None:
        return None
    return (
        f"**{dev.name}**: **{dev.memory_gib:.0f} GiB**, {dev.peak_tflops:.0f} TFLOP/s dense BF16\n\n"
        f"HBM {dev.hbm_tb_s:.2f} TB/s · intra-node {dev.intra_node_gb_s:.0f} GB/s · "
        f"inter-node {dev.inter_node_gb_s:.0f} GB/s · {dev.cards_per_node} per node"
        + (f" · host link {dev.host_link_gb_s:.1f} GB/s (offload)" if dev.host_link_gb_s > 0 else "")
        + (f"\n\n{dev.notes}" if dev.notes else "")
        + (f"\n\n{unconfirmed_note(dev)}" if unconfirmed_note(dev) else "")
    )


def layout_hover(state: DocState) -> str | None:
    """Megatron-Core's layer layout as the stated plan's stages by virtual chunks (engine.config.layer_layout
    stage_rows, the table Megatron-Core logs when it parses one), so the string reads as the stages it builds."""
    from engine.config.layer_layout import stage_rows

    config = state.good.config if state.good else None
    chunks = config.run.pipeline_layout.layer_layout if config is not None else ()
    if not chunks:
        return None
    pp = state.stated.strategy.pp if state.stated is not None else 0
    rows = stage_rows(chunks, pp)
    if not rows:
        return f"**{len(chunks)} chunks** listed" + (f", which do not divide over pp {pp}" if pp else "")
    v = len(chunks) // pp
    head = "| stage | " + " | ".join(f"chunk {c}" for c in range(v)) + " |\n|---|" + "---|" * v
    body = "\n".join(f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows)
    return f"**{len(chunks)} chunks**: pp {pp} × vpp {v}\n\n{head}\n{body}"


def list_hover(state: DocState, dim: str) -> str | None:
    """Which values of a candidate list can fit: per value, the best plan's step time with that value fixed
    (the list job's facts); until those arrive, the values seen among the search's top plans."""
    result = state.search.result if state.search else None
    attr = DIM_ATTR.get(dim)
    if result is None or attr is None:
        return None
    facts = state.list_facts.values.get(dim) if state.list_facts is not None else None
    if facts:
        fastest = min((t for t in facts.values() if t is not None), default=None)
        cells = []
        for v, t in facts.items():
            if t is None:
                cells.append(f"{v} ✗")
            else:
                cells.append(f"**{v}** {t:.2f} s" + (" (best)" if t == fastest else ""))
        fit = [v for v, t in facts.items() if t is not None]
        head = f"`{dim}`: {len(fit)} of {len(facts)} values fit" if fit else f"`{dim}`: no value fits"
        return head + "\n\n" + " · ".join(cells) + "\n\n(best step time with that value fixed)"
    fits = [e for e in result.top if e.fits]
    if not fits:
        return f"`{dim}`: no candidate fits (searched {result.evaluated:,}, {result.feasible:,} valid)"
    values = sorted({int(getattr(e.strategy, attr)) for e in fits})
    best = int(getattr(result.best.strategy, attr)) if result.best else None
    return (f"`{dim}` values in the {len(fits)} best plans that fit: **{', '.join(map(str, values))}**"
            + (f" (best: {best})" if best is not None else "")
            + f"\n\n{result.feasible:,} of {result.evaluated:,} candidates valid"
            + (f" ({result.unpriced:,} slower ones not priced)" if result.unpriced else ""))


def hover_markdown(state: DocState, entries: Sequence[Entry], line: int, character: int) -> str | None:
    """The hover text for the key or value at a position, or None."""
    from engine.positions import Position

    entry = entry_at(list(entries), Position(line, character))
    if entry is None:
        return None
    path = entry.dotted
    top = entry.path[0]
    if entry.path[-1] == "device_type":
        return device_hover(entry.value) if entry.value else None
    if entry.path[-1] == "pipeline_model_parallel_layout":
        return "\n\n".join(t for t in (layout_hover(state), strategy_hover(state)) if t) or None
    if top == "parallelism" and len(entry.path) == 2 and (entry.value.startswith("[") or not entry.value):
        return list_hover(state, entry.path[1]) or strategy_hover(state)
    if top in STRATEGY_SECTIONS or path in STRATEGY_KEYS:
        return strategy_hover(state)
    if top in MODEL_SECTIONS:
        return model_hover(state)
    return None
