"""`recompute_modules: auto`: the search chooses what `selective` recomputes, by module, where the framework
offers Megatron's --recompute-modules (engine.catalog.frameworks; docs/cost-model.md §2.2).

The cost model prices one module list per search (it is a run option, like the framework). So the search runs
once per candidate list and keeps the fastest plan that fits. The candidates are the framework's default
(`core_attn`) and the prefixes of the applicable modules ordered from the cheapest to recompute to the
dearest: the output-discarding element-wise ones first (layernorm, moe_act), then the small MLA
up-projection GEMMs, the attention core, and the whole submodules (shared_experts, mlp, moe). A prefix that
adds nothing the model has is skipped, so a dense Llama gets at most four lists and DeepSeek-V3 eight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from engine.catalog.frameworks import framework_of
from engine.config.types import Config
from engine.results import SearchResult
from engine.specs import ModelSpec

AUTO = ("auto",)
# Cheapest to recompute first (what each recomputes: docs/cost-model.md §2.2's table).
ORDER = ("layernorm", "moe_act", "mla_up_proj", "core_attn", "shared_experts", "mlp", "moe")


def wants_choice(config: Config) -> bool:
    """The files ask the search to choose the modules, the framework offers them, and a selective mode may be
    priced (recompute selective, auto or per_layer)."""
    return (config.run.recompute_modules == AUTO and bool(framework_of(config.run).recompute_modules)
            and config.recompute in ("selective", "auto", "per_layer"))


def applies(module: str, m: ModelSpec) -> bool:
    """Whether the model has what `module` recomputes (a dense model has no moe_act, a GQA model no MLA)."""
    if module == "mla_up_proj":
        return m.is_mla
    if module in ("moe", "moe_act"):
        return m.is_moe
    if module == "shared_experts":
        return m.is_moe and m.num_shared_experts > 0
    if module == "mlp":
        return not m.is_moe or m.first_k_dense > 0
    return True


def candidate_lists(config: Config) -> list[tuple[str, ...]]:
    """The module lists the search prices: the default, then every applicable prefix of ORDER."""
    fw = framework_of(config.run)
    m = config.model
    out: list[tuple[str, ...]] = [("core_attn",)]
    prefix: list[str] = []
    for mod in ORDER:
        if mod not in fw.recompute_modules or m is None or not applies(mod, m):
            continue
        prefix.append(mod)
        listed = tuple(x for x in fw.recompute_modules if x in prefix)  # the framework's order
        if listed not in out:
            out.append(listed)
    return out


def search_modules(config: Config, run_search: Callable[[Config, Callable[[float], None] | None], SearchResult],
                   progress: Callable[[float], None] | None = None,
                   cancelled: Callable[[], bool] | None = None) -> SearchResult:
    """Run `run_search` once per candidate list and keep the result whose best plan is fastest (on a tie the
    earlier, cheaper list); its estimates say which list they priced (Estimate.recompute_modules). Progress
    runs once from 0 to 1 over all the lists; a cancelled search returns the empty result."""
    best: SearchResult | None = None
    chosen: tuple[str, ...] = ()
    lists = candidate_lists(config)
    for i, mods in enumerate(lists):
        part = None if progress is None else (lambda f, i=i: progress((i + f) / len(lists)))  # type: ignore[misc]
        res = run_search(replace(config, run=replace(config.run, recompute_modules=mods)), part)
        if cancelled is not None and cancelled():
            return SearchResult(None, (), 0, 0, 0.0, {})
        if best is None or (res.best is not None and (best.best is None
                                                      or res.best.step_time_s < best.best.step_time_s)):
            best, chosen = res, mods
    assert best is not None
    top = tuple(replace(e, recompute_modules=chosen) for e in best.top)
    return replace(best, best=top[0] if top else None, top=top)
