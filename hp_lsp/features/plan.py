"""Plan view: the command "Show plan" (hpLsp.showPlan [uri, "best" | "stated"]) returns the explain data of
a document's plan (engine.explain: per-stage rows, the bound, the pipeline timeline, docs/formats.md §7) with its
text lanes and SVG picture, for the editors' plan views; "Save as trace" (hpLsp.savePlanTrace [uri, path,
"best" | "stated"]) writes its predicted step as a Chrome trace; the code lens "▸ Plan view" beside "Apply"; the
hover line on a strategy key that says what bounds the plan and the tightest stage's headroom.

Which plan: "best" is the document's latest search result (what Apply would write), "stated" the plan the
file states; without a choice, the best when there is one (a search config's plan is its best), else the
stated one. The pricing, simulation and drawing (`plan_view`) run in a thread, off the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.config.types import Config
from engine.results import Estimate
from hp_lsp.session import DocState

SHOW_PLAN_COMMAND = "hpLsp.showPlan"
SAVE_TRACE_COMMAND = "hpLsp.savePlanTrace"  # [uri, path, which?]: the plan's predicted step as a Chrome trace
SHOW_PLAN_TITLE = "Show plan"
LENS_TITLE = "▸ Plan view"


def _config(state: DocState) -> Config | None:
    config = state.good.config if state.good is not None else None
    if config is None or config.model is None or config.cluster is None:
        return None
    return config


def _best(state: DocState) -> Estimate | None:
    result = state.search.result if state.search is not None else None
    return result.best if result is not None else None


def choose(state: DocState, which: str | None = None) -> tuple[Estimate | None, str]:
    """(the plan to show, "best" | "stated"); (None, why) when there is none yet."""
    best, stated = _best(state), state.stated
    if which == "stated" or (which is None and best is None):
        return (stated, "stated") if stated is not None else (None, "the file states no complete plan yet")
    if best is not None:
        return best, "best"
    return None, "searching…" if state.searching else "no plan fits the budget (or no search yet)"


def plan_view(config: Config, est: Estimate, which: str) -> dict[str, Any]:
    """The explain data the editors draw: docs/formats.md §7 `explain` plus `which`, `text` (the terminal
    picture, what Neovim shows) and `svg` (the timeline and memory chart, what the VS Code panel shows)."""
    from engine.explain import explain_estimate
    from engine.explain.svg import render as render_svg
    from engine.explain.terminal import render as render_text

    ex = explain_estimate(config, est)
    doc = ex.to_json()
    doc.update({"which": which, "text": "\n".join(render_text(ex)) + "\n", "svg": render_svg(ex)})
    return doc


def save_trace(config: Config, est: Estimate, path: str, kept: Sequence[str] = ()) -> dict[str, Any]:
    """Write the plan's predicted step as a Chrome trace (engine.explain.chrome_trace, what `hp-plan explain --trace`
    writes) to `path` through the project's one safe writer: {"written": path} or {"error": why}. The document,
    its train.yaml and `kept` (Session.kept_files: the files its analysis read, every open document) are never the
    target (a path typed by mistake replaced the saved config, then a linked search config, with a trace)."""
    from engine.explain import explain_estimate
    from engine.explain.chrome_trace import render
    from engine.files import write_text

    read = (config.path or "", config.train_yaml or "", *kept)
    failure = write_text(path, render(explain_estimate(config, est)), inputs=read)
    return {"written": path} if failure is None else {"error": failure.reason}


@dataclass(frozen=True, slots=True)
class PlanChoice:
    """The plan hpLsp.showPlan draws: the document's config, the estimate and which one it is."""

    config: Config
    estimate: Estimate
    which: str


def choose_for_command(uri: str | None, state: DocState | None, args: Sequence[Any],
                       which_at: int = 1) -> PlanChoice | dict[str, Any]:
    """hpLsp.showPlan [uri, which?] (hpLsp.savePlanTrace [uri, path, which?]: `which_at` 2): the plan to draw,
    or the answer {"error": why, "uri": uri}."""
    if uri is None or state is None:
        return {"error": "document not open", "uri": uri}
    which = args[which_at] if len(args) > which_at and args[which_at] in ("best", "stated") else None
    config = _config(state)
    est, what = choose(state, which)
    if config is None:
        return {"error": "the model or the cluster is not known yet (see the diagnostics)", "uri": uri}
    if est is None:
        return {"error": what, "uri": uri}
    return PlanChoice(config, est, what)


def view_meta(uri: str, state: DocState, choice: PlanChoice) -> dict[str, Any]:
    """What the command's answer says beside `plan_view` (which is slow: the handler runs it off the loop):
    the document, its version, and whether the best plan is of an older version."""
    return {"uri": uri, "version": state.version, "stale": choice.which == "best" and state.search_stale}


def has_plan(state: DocState) -> str | None:
    """Which plan the "▸ Plan view" lens would show ("best" | "stated"), or None when there is none."""
    est, which = choose(state)
    return which if est is not None and _config(state) is not None else None


def bound_markdown(state: DocState) -> str:
    """One hover line: what bounds the stated plan (else the best) and its tightest stage's headroom; ""
    when there is no plan. A one-row pricing at most (engine.explain.bound_of), never the timeline."""
    from engine.explain import bound_of

    config = _config(state)
    est, which = choose(state, "stated" if state.stated is not None else None)
    if config is None or est is None:
        return ""
    try:
        b = bound_of(config, est)
    except Exception:  # a half-written config the pricing cannot take: the rest of the hover still shows
        return ""
    head = (f"tightest stage {b.tightest_stage}: {b.headroom_gib:.1f} GiB headroom" if b.headroom_gib >= 0 else
            f"stage {b.tightest_stage} is {-b.headroom_gib:.1f} GiB over the budget")
    return f"{which} plan bound by **{b.bound}** · {head}\n\n"
