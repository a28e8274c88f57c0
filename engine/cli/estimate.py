"""`hp-plan estimate FILE [--json] [cluster flags]`: price the strategy a file states (docs/formats.md §3).

Exit 0 when the strategy is priced and fits, 1 when the input has errors or the strategy does not fit.
`--json` prints exactly one JSON document: the docs/formats.md `estimate` object, or `{"file", "diagnostics"}`
when nothing could be priced.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from engine.cli.check import format_line
from engine.cli.plan_flags import cluster_overrides, ratios_request
from engine.config.types import Config
from engine.cost.strategy_rules import estimate_config
from engine.diagnostics import Diagnostic, has_errors
from engine.facts import merge
from engine.jsonout import write_json
from engine.results import MEMORY_TERMS, MFU_LABEL, TIME_TERMS, Estimate


def stage_table(est: Estimate) -> list[str]:
    """Rows of the per-stage memory table (GiB), from the pricing that made the estimate (Estimate.stages)."""
    stages = est.stages
    assert stages is not None, "estimate_config prices the stated plan on its own, stage by stage"
    heads = ["stage", "layers", *MEMORY_TERMS, "total"]
    lines = ["  ".join(f"{h:>11}" for h in heads)]
    worst = max(range(len(est.stage_memory_gib)), key=lambda i: est.stage_memory_gib[i])
    for i, total in enumerate(est.stage_memory_gib):
        cells = [f"{i:>11d}", f"{stages.layers[i]:>11d}"]
        cells += [f"{stages.memory[k][i]:>11.2f}" for k in MEMORY_TERMS]
        cells.append(f"{total:>11.2f}{' *' if i == worst else ''}")
        lines.append("  ".join(cells))
    return lines


def render_text(path: str, config: Config | None, est: Estimate | None, diags: tuple[Diagnostic, ...],
                out: TextIO) -> None:
    for d in diags:
        print(format_line(d, path), file=out)
    if est is None or config is None:
        return
    s = est.strategy
    print(f"{path}: {s.short()}", file=out)
    print(f"\nMemory per device (GiB): peak {est.peak_memory_gib:.2f} {est.memory_band} of {est.budget_gib:g} budget: "
          f"{est.verdict_text}", file=out)
    for line in stage_table(est):
        print("  " + line, file=out)
    tot = est.step_time_s
    print(f"\nStep {tot:.3f} s {est.step_band} · {est.tokens_per_s:,.0f} tokens/s · {est.tokens_per_s_per_device:,.1f} tokens/s/device"
          f" · {MFU_LABEL} {100 * est.mfu:.1f}% (causal {100 * est.causal_mfu:.1f}%)", file=out)
    print(f"priced for {est.priced_for}", file=out)
    lo, hi = est.step_time_range_s
    print(f"error band: the measured step should fall in {lo:.3f}-{hi:.3f} s about four times out of five "
          f"({'; '.join(est.band_basis)})", file=out)
    for k in TIME_TERMS:
        v = est.time_breakdown_s[k]
        if v > 0:
            print(f"  {k:<10} {v:10.3f} s  {100 * v / tot:5.1f}%", file=out)
    note = est.offload_note()
    if note is not None:
        print(note, file=out)
    vt = est.vision_tower
    if vt is not None:
        # Inside the figures above (stage 0's memory, its stage time): its share, said apart.
        print(f"  of which the vision tower ({int(vt['layers'])} layers × {int(vt['visual_seq_len'])} visual tokens, "
              f"on stage 0): {vt['memory_gib']:.2f} GiB, {vt['time_s']:.3f} s of stage 0's work per step", file=out)


def _time_to_train(args: argparse.Namespace, loaded: Any, est: Estimate) -> Any:
    """`--tokens N`: the plan's TimeToTrain (engine.explain.tokens), None without the flag."""
    tokens = getattr(args, "tokens", None)
    if tokens is None or loaded is None or loaded.config is None or loaded.config.model is None:
        return None
    from engine.explain.tokens import time_to_train

    return time_to_train(est, tokens, loaded.config.model.seq_len)


def run(args: argparse.Namespace) -> int:
    """Entry point used by engine.cli.main for the `estimate` subcommand."""
    path: str = args.file
    as_json = bool(getattr(args, "json", False))
    out = sys.stdout
    try:
        from engine.check import check_file

        loaded = check_file(path, overrides=cluster_overrides(args), ratios=ratios_request(args))
        diags = tuple(loaded.diagnostics)
        est: Estimate | None = None
        if loaded.config is not None and not has_errors(diags):
            est, more = estimate_config(loaded.config)
            diags = merge(diags, more)  # each fact once, whichever stage found it (engine.facts)
    except Exception as exc:  # never a traceback to the user (docs/formats.md §3)
        from engine.diagnostics import Diagnostic as D

        diags = (D("HP900", f"internal error while pricing: {type(exc).__name__}: {exc}"),)
        est = None
        loaded = None  # type: ignore[assignment]
    if as_json:
        doc: dict[str, Any]
        if est is not None:
            doc = est.to_json()
            doc["diagnostics"] = [d.to_json() for d in diags]
            ttt = _time_to_train(args, loaded, est)
            if ttt is not None:
                doc["time_to_train"] = ttt.to_json()
        else:
            doc = {"file": path, "diagnostics": [d.to_json() for d in diags]}
        write_json(out, doc)
    else:
        render_text(path, loaded.config if loaded is not None else None, est, diags, out)
        ttt = _time_to_train(args, loaded, est) if est is not None else None
        if ttt is not None:
            print(f"\nTime to train: {ttt.line()}", file=out)
    if est is None or has_errors(diags) or not est.fits:
        return 1
    return 0
