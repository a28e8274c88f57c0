"""Plan view: the command "Show plan" (hpLsp.showPlan [uri, "best" | "stated"]) returns the explain data of
a document's plan (engine.explain: per-stage rows, the bound, the pipeline timeline, docs/formats.md §7) with its
text lanes and SVG picture, for the editors' plan views; the code lens "▸ Plan view" beside "Apply"; the
hover line on a strategy key that says what bounds the plan and the tightest stage's headroom.

Which plan: "best" is the document's latest search result (what Apply would write), "stated" the plan the
file states; without a choice, the best when there is one (a search config's plan is its best), else the
stated one. The pricing, simulation and drawing run in a thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from engine.config.types import Config
from engine.positions import Range
from engine.results import Estimate
from hp_lsp.session import DocState

SHOW_PLAN_COMMAND = "hpLsp.showPlan"
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
    from engine.explain.text import render as render_text

    ex = explain_estimate(config, est)
    doc = ex.to_json()
    doc.update({"which": which, "text": "\n".join(render_text(ex)) + "\n", "svg": render_svg(ex)})
    return doc


async def show_plan_command(ls: Any, args: Sequence[Any]) -> dict[str, Any]:
    """workspace/executeCommand hpLsp.showPlan [uri, which?] -> the plan view, or {"error": why}."""
    from hp_lsp.features.code_actions import _uri_arg

    uri = _uri_arg(args)
    state = ls.session.get(uri) if uri else None
    if uri is None or state is None:
        return {"error": "document not open", "uri": uri}
    which = args[1] if len(args) > 1 and args[1] in ("best", "stated") else None
    config = _config(state)
    est, what = choose(state, which)
    if config is None:
        return {"error": "the model or the cluster is not known yet (see the diagnostics)", "uri": uri}
    if est is None:
        return {"error": what, "uri": uri}
    doc = await asyncio.to_thread(plan_view, config, est, what)
    doc.update({"uri": uri, "version": state.version, "stale": what == "best" and state.search_stale})
    return doc


def plan_lens(state: DocState, rng: Range) -> Any:
    """The "▸ Plan view" lens (a code_lens.Lens) when there is a plan to show, else None."""
    from hp_lsp.features.code_lens import Lens

    est, which = choose(state)
    if est is None or _config(state) is None:
        return None
    return Lens(rng, LENS_TITLE, SHOW_PLAN_COMMAND, (state.uri, which))


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
