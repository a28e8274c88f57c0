"""The strategy search: the fastest strategy that fits, over every dimension, or a refusal that says why.

`search(config)` enumerates the space (engine.search.space), prices it through the cost model
(engine.search.rank), re-prices the top strategies through `engine.cost.estimate` (the path `hp-plan
estimate` takes, so both print the same digits) and, when nothing fits, explains why with positioned HP6xx
diagnostics (engine.search.nothing_fits works out which and the numbers behind them; engine.search.refusals
words them). It keeps no state between calls: identical inputs give identical
results ([HP] §10.8).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from engine.catalog.frameworks import framework_of
from engine.config.stated_layout import noop_fix
from engine.config.types import DIMENSIONS, Config, Dimension
from engine.cost.equivalence import POOL, rank_equivalent
from engine.diagnostics import Diagnostic, Severity
from engine.integers import TRIAL_DIVISION_MAX
from engine.results import Estimate, SearchResult
from engine.search import refusals
from engine.search.distinct import distinct, merge_variants
from engine.search.modules import search_modules, wants_choice
from engine.search.nothing_fits import refuse
from engine.search.passes import LayoutPass, layout_passes
from engine.search.pricing import Pricer
from engine.search.rank import (
    Cancelled,
    Pricing,
    allowed_modes,
    price_groups,
    price_space,
    row_strategies,
)
from engine.search.space import R_DPV_LAYERS, config_groups, restrictions
from engine.search.stated import (
    StatedComparison,
    as_searched,
    compare_stated,
    priced_as_searched,
    stated_estimate,
    stated_overrides,
    stated_source,
)
from engine.search.stated import budget as _budget
from engine.search.warnings import low_mfu
from engine.specs import ModelSpec, PipelineLayout, Strategy, noop_text

__all__ = ["Cancelled", "StatedComparison", "as_searched", "compare_stated", "priced_as_searched", "search",
           "search_with", "stated_estimate", "stated_overrides", "stated_source"]

# Batch arithmetic runs in int64 columns: a larger global batch (a typo, at any real scale) is refused.
MAX_GLOBAL_BATCH = 2**53
# Divisors of the device count are found by trial division: beyond this (no real cluster), refuse.
MAX_DEVICES = TRIAL_DIVISION_MAX



def _dimensions(config: Config) -> dict[str, str]:
    """The per-dimension summary (docs/formats.md §3 `dimensions`), without the leading name."""
    out: dict[str, str] = {}
    for name in DIMENSIONS:
        dim = config.dimensions.get(name) or Dimension(name, "absent")
        text = dim.summary()
        out[name] = text.split(": ", 1)[1] if ": " in text else text
    return out


def search(config: Config, *, top: int = 10, progress: Callable[[float], None] | None = None,
           cancelled: Callable[[], bool] | None = None) -> SearchResult:
    """Search the strategy space of `config` for the fastest strategies that fit its memory budget.

    Deterministic. `progress(fraction)` is called between chunks; `cancelled()` is polled there too, and when
    it turns true the search stops and returns an empty result (best None, no diagnostics). Never raises: an
    internal failure comes back as an HP900 diagnostic. Refusals (HP600-HP604) are positioned at the
    offending list or value. The advice about the strategy the files state (HP610/HP611) is
    `compare_stated(config, result)` (engine.search.stated), which the front ends call on the result: its
    diagnostics and the stated plan's estimate.
    """
    if config.model is None or config.cluster is None:
        return search_with(config, None, top=top, progress=progress, cancelled=cancelled)
    if wants_choice(config):  # recompute_modules: auto (engine.search.modules)
        return search_modules(config, lambda c, p: search(c, top=top, progress=p, cancelled=cancelled),
                              progress, cancelled)
    budget = _budget(config)
    offload_gb_s = searched_offload(config)
    pricer = Pricer(config.model, config.cluster, config.run, budget, offload_gb_s=offload_gb_s,
                    schedule=config.pipeline_schedule)
    passes = layout_passes(config)
    # With a layout pass, every pass keeps its whole pool of distinct plans, so the merged ranking (and so the
    # best) is the same whatever `top` is asked (`apply` asks 1, `search` 10).
    wide = max(top, POOL) if passes else top
    result = _with_stack_device(config, search_with(config, pricer, top=wide, progress=progress, cancelled=cancelled))
    if not passes or (cancelled is not None and cancelled()):
        return _cut(result, top)
    # Each layout the stack can be told (engine.cost.layout) priced again on the pp values where it changes the
    # split or makes one possible; every pass's plans ranked together (_pick_layout).
    def run_pass(layout_pass: LayoutPass, *, explain: bool) -> SearchResult:
        assert config.model is not None and config.cluster is not None
        alt_run = replace(config.run, pipeline_layout=layout_pass.layout)
        alt_pricer = Pricer(config.model, config.cluster, alt_run, budget, offload_gb_s=offload_gb_s,
                            schedule=config.pipeline_schedule)
        return search_with(replace(config, run=alt_run), alt_pricer, top=wide, cancelled=cancelled,
                           only=layout_pass.restriction(), explain=explain)

    # A pass where nothing fits says why only when its refusal is the one to say (_padded_refusal): working that
    # out prices widened spaces, far more than the pass itself.
    alts = [(layout_pass.layout, run_pass(layout_pass, explain=False)) for layout_pass in passes]
    if _padding_speaks(result, alts):
        widest = _widest_padding(alts)
        alts[widest] = (alts[widest][0], run_pass(passes[widest], explain=True))
    return _pick_layout(config, result, alts, top)


def searched_offload(config: Config) -> float:
    """The host link the search may offload layers over: only where the stack runs the per-layer offload the
    search chooses (StackSpace.offload "per_layer": HyperParallel's own search, [HP] §8.6). Megatron-Core's CPU
    offloading runs without pipeline parallelism and without recompute, and the others have none, so for them
    the search offers none (a stated plan's offload is priced, and export says what the stack can run)."""
    return config.offload_gb_s if framework_of(config.run).space.offload == "per_layer" else 0.0


def _cut(result: SearchResult, top: int) -> SearchResult:
    """The first `top` rows of a result."""
    return replace(result, best=result.top[0] if result.top else result.best, top=result.top[:top],
                   equivalent=result.equivalent[:top], variants=result.variants[:top])


def _with_stack_device(config: Config, result: SearchResult) -> SearchResult:
    """HP534 on the search's result where the framework does not run on the device (Megatron-LM on Ascend), and
    HP533 where the file asks an offload the stack's search does not offer: its plans are priced, and the user
    hears which stack runs there, or what it runs instead (engine.cost.strategy_rules)."""
    from engine.cost.strategy_rules import positioned, search_offload_problems, stack_device_problem

    device = stack_device_problem(config)
    found = [*([device] if device is not None else []), *search_offload_problems(config)]
    if not found:
        return result
    return replace(result, diagnostics=(*(positioned(config, p.code, p.message, p.field) for p in found),
                                        *result.diagnostics))


def _pick_layout(config: Config, plain: SearchResult, alts: list[tuple[PipelineLayout, SearchResult]],
                 top: int) -> SearchResult:
    """Every pass's plans ranked together as one search ranks them (engine.cost.equivalence); those of a layout
    pass say their layout (Estimate.pipeline_layout), and when the best is one of them an information diagnostic
    names it and the keys `apply` writes. Counts add up over the passes; DualPipeV's layer refusals leave them
    where a padding pass priced those candidates padded."""
    out = plain
    for _, alt in alts:
        out = replace(out, evaluated=out.evaluated + alt.evaluated, feasible=out.feasible + alt.feasible,
                      over_budget=out.over_budget + alt.over_budget, unpriced=out.unpriced + alt.unpriced,
                      elapsed_s=out.elapsed_s + alt.elapsed_s)
    if any(layout.noop_layers for layout, _ in alts):  # those candidates were priced padded, not refused
        out = replace(out, refused={r: c for r, c in out.refused.items() if r != R_DPV_LAYERS})
    found = [(layout, alt) for layout, alt in alts if alt.best is not None]
    if not found:
        return _cut(_padded_refusal(out, plain, alts), top)
    marked = [(tuple(replace(e, pipeline_layout=layout) for e in alt.top), alt) for layout, alt in found]
    picked = distinct(rank_equivalent([*plain.top, *(e for rows, _ in marked for e in rows)]), top)
    rows = picked.ranked.estimates
    out = replace(out, best=rows[0], top=rows, equivalent=picked.ranked.equivalent, band=picked.ranked.band,
                  reach=picked.ranked.reach,
                  variants=merge_variants(picked, [(plain.top, plain.variants),
                                                   *((rows_, alt.variants) for rows_, alt in marked)]))
    layout = rows[0].pipeline_layout
    if layout is None:
        return out
    gain = f" ({plain.best.step_time_s / rows[0].step_time_s:.2f}× the tokens/s of the best plan without it)" \
        if plain.best is not None else " (no plan fits without it)"
    diags = plain.diagnostics if plain.best is not None else \
        next(alt for lay, alt in found if lay == layout).diagnostics
    return replace(out, diagnostics=(*diags, _layout_note(config, layout, rows[0], gain)))


_REFUSALS = frozenset({"HP600", "HP601", "HP602", "HP603", "HP604"})


def _padding_speaks(plain: SearchResult, alts: list[tuple[PipelineLayout, SearchResult]]) -> bool:
    """Whether nothing fits in any pass and a padding pass's refusal is the one to say (_padded_refusal)."""
    padded = [alt for layout, alt in alts if layout.noop_layers]
    lifted = plain.refused.get(R_DPV_LAYERS) or plain.evaluated == 0
    return bool(plain.best is None and padded and lifted and any(alt.evaluated for alt in padded)
                and all(alt.best is None for _, alt in alts))


def _widest_padding(alts: list[tuple[PipelineLayout, SearchResult]]) -> int:
    """The index of the padding pass that priced the most candidates: the one whose refusal speaks."""
    return max((i for i, (layout, _) in enumerate(alts) if layout.noop_layers), key=lambda i: alts[i][1].evaluated)


def _padded_refusal(out: SearchResult, plain: SearchResult,
                    alts: list[tuple[PipelineLayout, SearchResult]]) -> SearchResult:
    """Nothing fits in any pass: where the plain pass's candidates broke DualPipeV's layer rule, or it had none
    (every interleaved candidate left to the padding passes), and a padding pass priced them padded, as the stack
    runs them, that pass's refusal is the one to say (the budget they miss, the lists they break), not the rule
    the stack's padding lifts. The widest padding pass speaks; the plain pass's other findings (the stack on the
    device, HP533/HP534) stay."""
    if not _padding_speaks(plain, alts):
        return out
    kept = tuple(d for d in plain.diagnostics if d.code not in _REFUSALS)
    return replace(out, diagnostics=(*kept, *alts[_widest_padding(alts)][1].diagnostics))


# Where the files state the pipeline schedule: HP614 sits there (the padding serves the schedule's split).
_SCHEDULE_PATHS = ("pp_config.pipeline_schedule", "accelerator.pipeline_scheduler", "accelerator.pp_schedule")


def _layout_note(config: Config, layout: PipelineLayout, best: Estimate, gain: str) -> Diagnostic:
    """HP613 / HP614: the layout the best plan needs, and the keys `apply` writes for it. HP614 sits on the
    stated schedule (an interleaved plan's padding on the declared vpp, where there is one) and, in a search
    config, carries the quick fix that states the padding there."""
    if layout.noop_layers:
        k, text = len(layout.noop_layers), noop_text(layout.noop_layers)
        s = best.strategy
        if config.pipeline_schedule == "dualpipev":
            cut, where = f"cut into DualPipeV's {2 * s.pp} stages", refusals.position(config, _SCHEDULE_PATHS)
        else:  # engine.search.passes.noop_passes: MindSpeed-LLM interleaves only equal chunks
            vpp = config.dimensions.get("vpp")
            cut = (f"fill pp·vpp = {s.pp * s.vpp} equal chunks (the stack interleaves no uneven split)" if s.vpp > 1
                   else f"split into {s.pp} equal stages, the last holding fewer layers beside the output layer and "
                   "the loss")
            where = refusals.dim_position(config, "vpp") if vpp is not None and vpp.location is not None \
                else refusals.position(config, _SCHEDULE_PATHS)
        rng, path, file = where
        # the quick fix edits the file the finding sits in: the search config's own pp_config, never a train.yaml
        fix = noop_fix(layout.noop_layers) if config.kind == "search" and file is None else {}
        return Diagnostic("HP614", f"the best plan pads the layers with {k} no-op layer{'s' if k != 1 else ''} "
                          f"(MindSpeed-LLM's noop_layers \"{text}\") so that they {cut}{gain}: apply writes "
                          "accelerator.noop_layers; in a search config state pp_config.noop_layers", rng, path,
                          severity=Severity.INFORMATION, file=file, data={"noop_layers": list(layout.noop_layers), **fix})
    return Diagnostic("HP613", "the best plan counts the embedding and the loss as layers of the pipeline split"
                      f"{gain}: apply writes account_for_embedding_in_pipeline_split and "
                      "account_for_loss_in_pipeline_split (Megatron-Core)", severity=Severity.INFORMATION)


def search_with(config: Config, pricer: Pricing | None, *, top: int = 10,
                progress: Callable[[float], None] | None = None,
                cancelled: Callable[[], bool] | None = None,
                only: Mapping[str, tuple[int, ...]] | None = None, explain: bool = True) -> SearchResult:
    """`search` with an explicit pricer (tests price synthetic models through the same code); `only`, when
    given, keeps the plans with those values of its dimensions (a layout pass of `search`, engine.search.passes);
    `explain` False leaves out the refusal's diagnostics where nothing fits (a layout pass's, wanted only at times)."""
    t0 = time.perf_counter()
    dims = _dimensions(config)
    try:
        result = _search(config, pricer, top=max(int(top), 1), progress=progress, cancelled=cancelled,
                         only=only or {}, explain=explain)
    except Cancelled:
        return SearchResult(None, (), 0, 0, time.perf_counter() - t0, dims)
    except Exception as exc:  # the front ends never show a traceback (docs/formats.md §3)
        diag = Diagnostic("HP900", f"the search failed: {type(exc).__name__}: {exc}")
        return SearchResult(None, (), 0, 0, time.perf_counter() - t0, dims, diagnostics=(diag,))
    return replace(result, elapsed_s=time.perf_counter() - t0, dimensions=dims)


def _what_is_missing(config: Config) -> tuple[list[str], int]:
    """What the search needs and the config lacks (or states out of range), and how many of those the global
    batch answers (the finding then sits on it)."""
    missing = [name for name, v in (("the model", config.model), ("the cluster", config.cluster)) if v is None]
    g = config.global_batch_size
    batch_items = 0
    if not g or g <= 0:
        missing.append("global_batch_size")
        batch_items = 1
    elif g > MAX_GLOBAL_BATCH:
        missing.append(f"a global_batch_size below {MAX_GLOBAL_BATCH:,} (it is {g:,})")
        batch_items = 1
    if config.cluster is not None and config.cluster.world_size > MAX_DEVICES:
        missing.append(f"a cluster below {MAX_DEVICES:,} devices (it has {config.cluster.world_size:,})")
    for name, dim in sorted(config.dimensions.items()):
        # A degree no cluster here can hold (a 28-digit pp) overflowed numpy's int64 inside the space.
        huge = [v for v in dim.values if v > MAX_DEVICES]
        if huge:
            missing.append(f"{name} below {MAX_DEVICES:,} (it is {huge[0]:,})")
    return missing, batch_items


def _search(config: Config, pricer: Pricing | None, *, top: int, progress: Callable[[float], None] | None,
            cancelled: Callable[[], bool] | None, only: Mapping[str, tuple[int, ...]], explain: bool = True
            ) -> SearchResult:
    missing, batch_items = _what_is_missing(config)
    g = config.global_batch_size
    if missing or pricer is None or config.model is None or config.cluster is None or not g:
        return SearchResult(None, (), 0, 0, 0.0, {}, diagnostics=(
            refusals.cannot_search(config, missing, at_batch=batch_items == len(missing)),))
    model, cluster = config.model, config.cluster
    budget = _budget(config)
    restrict = restrictions(config)
    for name, values in only.items():  # a layout pass: those values, within what the files declare
        declared = restrict.get(name)
        restrict = {**restrict, name: tuple(v for v in values if declared is None or v in declared)}
    groups = config_groups(config, model, cluster, g, restrict)
    total = groups.total

    def poll(done: int) -> None:
        if cancelled is not None and cancelled():
            raise Cancelled
        if progress is not None:
            progress(0.9 * min(done / max(total, 1), 1.0))

    pool = max(top, POOL)  # the near-tie band needs the simpler plans priced too (engine.cost.equivalence)
    # `space` holds the candidates priced (all of them where fewer than `pool` fit); the others are bounded out.
    space, priced = price_groups(pricer, groups, config.recompute, top=pool, model=model, poll=poll,
                                 allowed=allowed_modes(config))
    order = priced.order(pool)
    fits = priced.fits
    over = int(total - int(fits.sum()) - priced.unpriced)
    diags: list[Diagnostic] = []
    estimates: list[Estimate] = []
    if order.size:
        if cancelled is not None and cancelled():
            raise Cancelled
        estimates = _estimates(pricer, row_strategies(space, priced, order.tolist()), model)
        estimates = [e for e in estimates if e.fits]  # the ranking priced these exactly; this only guards
    else:
        if len(space) < total:  # never expected: with nothing fitting every group is priced; price them all
            space = groups.materialise()
            priced = price_space(pricer, space, config.recompute, top=pool, model=model, poll=poll,
                                 allowed=allowed_modes(config), exhaustive=True)
        if explain:
            diags.extend(refuse(config, pricer, space, priced, restrict, model, cluster, g, budget, cancelled))
    if progress is not None:
        progress(1.0)
    ranked = distinct(rank_equivalent(estimates), top)
    kept = ranked.ranked.estimates
    best = kept[0] if kept else None
    warn = low_mfu(best, *refusals.position(config, ("constraint.global_batch_size", "training.global_batch_size",
                                                    "parallelism", "accelerator"))) if best else None
    if warn is not None:
        diags.append(warn)
    return SearchResult(best, kept, total, int(fits.sum()), 0.0, {},
                        refused=dict(space.refused), over_budget=over, diagnostics=tuple(diags),
                        equivalent=ranked.ranked.equivalent, band=ranked.ranked.band, unpriced=priced.unpriced,
                        reach=ranked.ranked.reach,
                        variants=ranked.variants)


def _estimates(pricer: Pricing, strategies: list[Strategy], model: ModelSpec) -> list[Estimate]:
    """Each strategy as `engine.cost.estimate` prices it. The cost model's rows are independent (a row prices
    the same alone or in a table), so one table per kind of plan (one mode, or per layer) gives the same
    digits as one call per strategy, which the tests check, at a fraction of the calls."""
    if not isinstance(pricer, Pricer):
        return [pricer.estimate(s) for s in strategies]
    from engine.cost import CandidateTable, estimate_rows

    strategies = [pricer.as_run(s) for s in strategies]
    out: list[Estimate | None] = [None] * len(strategies)
    for per_layer in (False, True):
        idx = [i for i, s in enumerate(strategies)
               if bool(s.recompute.layers or s.recompute.offload) == per_layer]
        if not idx:
            continue
        batch = [strategies[i] for i in idx]
        table = CandidateTable.from_strategies(batch, num_layers=model.num_layers + model.mtp_depth)
        priced = pricer.price(table)
        for i, e in zip(idx, estimate_rows(priced, ((j, strategies[i]) for j, i in enumerate(idx))), strict=True):
            out[i] = e
    return [e for e in out if e is not None]
