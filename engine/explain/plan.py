"""Which plan a file means: the strategy it states, or, when a search config leaves dimensions open, the
best one the search finds (docs/formats.md §7)."""

from __future__ import annotations

from collections.abc import Callable

from engine.config.types import Config
from engine.cost.strategy_rules import estimate_config
from engine.diagnostics import Diagnostic, has_errors
from engine.explain.build import explain_estimate
from engine.explain.types import Explained
from engine.facts import merge
from engine.results import Estimate, SearchResult

SearchFn = Callable[..., SearchResult]


def _searched(config: Config) -> bool:
    """Whether the search config leaves a dimension to search: dp and micro_batch_num left unsaid follow from
    the world size and the batch rule (engine.config.stated_strategy.search_stated), so they alone do not."""
    return any(dim.searched and not (name in ("dp", "micro_batch_num") and dim.state == "absent")
               for name, dim in config.dimensions.items())


def pick_plan(config: Config, *, best: bool = False,
              search_fn: SearchFn | None = None) -> tuple[Estimate | None, tuple[Diagnostic, ...]]:
    """The plan to explain: the stated one when the file states a complete strategy and `best` is False,
    else the search's best (None with the reasons when nothing can be priced or nothing fits)."""
    if not best and config.stated is not None and not (config.kind == "search" and _searched(config)):
        return estimate_config(config)
    if config.model is None or config.cluster is None:
        return estimate_config(config)  # the same "model/cluster unknown" finding
    from engine.search import search

    result = (search_fn or search)(config, top=1)
    return result.best, tuple(result.diagnostics)


def explain_config(config: Config, *, best: bool = False,
                   search_fn: SearchFn | None = None) -> tuple[Explained | None, tuple[Diagnostic, ...]]:
    """Explain the plan `config` means (pick_plan). A plan that does not fit is still explained (its memory
    is the point); None only when nothing could be priced."""
    est, diags = pick_plan(config, best=best, search_fn=search_fn)
    if est is None or has_errors(tuple(d for d in diags if d.code != "HP520")):
        return None, diags
    ex = explain_estimate(config, est)
    return ex, merge(diags, ex.diagnostics)
