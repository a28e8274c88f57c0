"""Code lens above the strategy section: the best plan with an Apply command, and the stated plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.positions import Range
from engine.results import SearchResult
from hp_lsp.features import plan
from hp_lsp.features.code_actions import APPLY_COMMAND, apply_target
from hp_lsp.outline import Entry
from hp_lsp.session import DocState

# Where the strategy lives, per file kind (docs/formats.md §1 AutoModels and legacy, §2 search config).
ANCHORS = ("accelerator", "train.accelerator", "parallelism", "train")


@dataclass(frozen=True, slots=True)
class Lens:
    range: Range
    title: str
    command: str  # "" = informational (no action)
    arguments: tuple[str, ...] = ()


def anchor(entries: Sequence[Entry]) -> Range:
    by_path = {e.dotted: e for e in entries}
    for name in ANCHORS:
        if name in by_path:
            return by_path[name].key_range
    return Range.point(0, 0)


def lenses(state: DocState, entries: Sequence[Entry]) -> list[Lens]:
    rng = anchor(entries)
    out: list[Lens] = []
    outcome = state.search
    stale = " (stale: save to refresh)" if state.search_stale else ""
    if outcome is not None and outcome.result is not None:
        best = outcome.result.best
        if best is None:
            out.append(Lens(rng, f"{no_best(state, outcome.result)}{stale}", ""))
        else:
            figures = (f"{best.peak_memory_gib:.1f} GiB · {best.step_time_s:.2f} s/step {best.step_band} · MFU {best.mfu:.0%} · "
                       f"{best.framework} on {best.device}{'' if best.calibrated_framework else ', uncalibrated'}")
            written = outcome.written
            if apply_target(state) is None:
                out.append(Lens(rng, f"Best: {best.short()} — {figures}{stale}", ""))
            elif written is not None and written.why:  # the best offloads what no trainer key states
                out.append(Lens(rng, f"Best: {best.short()} — {figures}{stale} (offloads: the trainer has no key "
                                     "for it)", ""))
                if written.estimate is not None:
                    w = written.estimate
                    out.append(Lens(rng, f"Without offload: {w.short()} — {w.peak_memory_gib:.1f} GiB · "
                                         f"{w.step_time_s:.2f} s/step {w.step_band}{stale} ▸ Apply", APPLY_COMMAND,
                                    (state.uri,)))
            else:
                out.append(Lens(rng, f"Best: {best.short()} — {figures}{stale} ▸ Apply", APPLY_COMMAND,
                                (state.uri,)))
    elif state.searching:
        out.append(Lens(rng, "Searching for the best strategy…", ""))
    stated = state.stated
    if stated is not None:
        whose = "Stated" if state.good is not None and state.good.estimate is not None else "Stated (train_yaml)"
        out.append(Lens(rng, f"{whose}: {stated.peak_memory_gib:.1f} GiB ({stated.fit_words()}) · "
                             f"{stated.step_time_s:.2f} s/step {stated.step_band} · MFU {stated.mfu:.0%} · {stated.framework} on "
                             f"{stated.device}{'' if stated.calibrated_framework else ', uncalibrated'}", ""))

    which = plan.has_plan(state)
    if which is not None:
        out.append(Lens(rng, plan.LENS_TITLE, plan.SHOW_PLAN_COMMAND, (state.uri, which)))
    return out


def no_best(state: DocState, result: SearchResult) -> str:
    """Why a search has no best plan. "No strategy fits the budget" only when strategies were priced: a search
    that could not run (no cluster, no model, no batch: HP604) or whose every candidate broke a rule says so,
    rather than "(0 evaluated)" as though the budget were the reason."""
    if result.evaluated:
        return f"No strategy fits the budget ({result.evaluated:,} evaluated)"
    config = state.good.config if state.good is not None else None
    if config is not None and config.cluster is None:
        return "No search: the file states no cluster (device, device count)"
    cannot = next((d.message for d in result.diagnostics if d.code == "HP604"), None)
    if cannot is not None:
        return "No search: " + cannot.removeprefix("The search cannot run: ").split(" (see")[0].rstrip(".")
    if result.refused:
        reasons = ", ".join(f"{n:,} {why}" for why, n in sorted(result.refused.items(), key=lambda kv: -kv[1])[:2])
        return f"No valid strategy: every candidate breaks a rule ({reasons})"
    return "No strategy to evaluate: the search space is empty"
