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
from collections.abc import Callable
from dataclasses import replace

from engine.catalog.frameworks import framework_of
from engine.config.stated_layout import noop_fix, noop_pad
from engine.config.types import DIMENSIONS, Config, Dimension
from engine.cost.equivalence import POOL, rank_equivalent
from engine.cost.layout import default_chunks, layout_or_default
from engine.diagnostics import Diagnostic, Severity
from engine.integers import TRIAL_DIVISION_MAX, divisors
from engine.results import Estimate, SearchResult
from engine.search import refusals
from engine.search.distinct import distinct, merge_variants
from engine.search.modules import search_modules, wants_choice
from engine.search.nothing_fits import refuse
from engine.search.pricing import Pricer
from engine.search.rank import (
    Cancelled,
    Pricing,
    allowed_modes,
    price_groups,
    price_space,
    row_strategies,
)
from engine.search.space import R_DPV_LAYERS, VPP_AUTO_MAX, config_groups, restrictions
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
    passes = _layout_passes(config)
    # With a layout pass, every pass keeps its whole pool of distinct plans, so the merged ranking (and so the
    # best) is the same whatever `top` is asked (`apply` asks 1, `search` 10).
    wide = max(top, POOL) if passes else top
    result = _with_stack_device(config, search_with(config, pricer, top=wide, progress=progress, cancelled=cancelled))
    if not passes or (cancelled is not None and cancelled()):
        return _cut(result, top)
    # Each layout the stack can be told (engine.cost.layout) priced again on the pp values where it changes the
    # split or makes one possible; every pass's plans ranked together (_pick_layout).
    alts = []
    for layout, pps in passes:
        alt_run = replace(config.run, pipeline_layout=layout)
        alt_pricer = Pricer(config.model, config.cluster, alt_run, budget, offload_gb_s=offload_gb_s,
                            schedule=config.pipeline_schedule)
        alts.append((layout, search_with(replace(config, run=alt_run), alt_pricer, top=wide, cancelled=cancelled,
                                         only_pp=pps)))
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


ACCOUNTED = PipelineLayout(embedding_in_split=True, loss_in_split=True)


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


def _accounting_pps(config: Config) -> tuple[int, ...]:
    """The pp values worth a second pass with the embedding and loss in the split: none unless the files state
    no layout and the framework offers the accounting; then each pp > 1 with a vpp the space may hold that
    splits differently under it than evenly (pp 2 of an even layer count does not) or exists only under it
    (more chunks than layers: an embedding-only and a loss-only chunk)."""
    if config.run.pipeline_layout.stated or not framework_of(config.run).chooses_accounting:
        return ()
    if config.model is None or config.cluster is None:
        return ()
    m = config.model
    vpps = restrictions(config).get("vpp") or tuple(range(1, VPP_AUTO_MAX + 1))
    pps = _pp_values(config, config.cluster.world_size)
    out = []
    for p in pps:
        for v in vpps:
            if p < 2 or p * v > m.num_layers + 2:
                continue
            chunks, applied = layout_or_default(m.num_layers, m.mtp_depth, p, v, ACCOUNTED)
            if applied and (p * v > m.num_layers or (chunks != default_chunks(m.num_layers, p, v)).any()):
                out.append(p)
                break
    return tuple(out)


def _noop_pads(config: Config) -> list[tuple[PipelineLayout, tuple[int, ...]]]:
    """The no-op layers a DualPipeV search pads the layer count with where it does not cut into 2·pp equal
    stages, and the pp values each padding serves: none unless the files state DualPipeV and no layout, on a
    stack that pads (Framework.noop_layers: MindSpeed-LLM's `--noop-layers`, MS-NOOP). The padding goes at the
    end of the count, as MindSpeed-LLM's DeepSeek-V3 scripts place it (61 layers + "61,62,63"): folded into the V,
    the last stage sits on rank 0 beside the embedding and the output layer ([MS-DUALPIPEV])."""
    if config.run.pipeline_layout.stated or config.pipeline_schedule != "dualpipev" \
            or not framework_of(config.run).noop_layers or config.model is None or config.cluster is None:
        return []
    L = config.model.num_layers
    by_pad: dict[tuple[int, ...], list[int]] = {}
    for p in sorted(set(_pp_values(config, config.cluster.world_size))):
        pad = noop_pad(L, 2 * p)
        if p >= 2 and pad and len(pad) <= L:  # more padding than layers is no plan anyone runs
            by_pad.setdefault(pad, []).append(p)
    return [(PipelineLayout(noop_layers=pad), tuple(ps)) for pad, ps in by_pad.items()]


def _pp_values(config: Config, world: int) -> tuple[int, ...]:
    """The pp values a layout pass may serve: the declared list, else every divisor of the device count."""
    return restrictions(config).get("pp") or tuple(divisors(world))


def _layout_passes(config: Config) -> list[tuple[PipelineLayout, tuple[int, ...]]]:
    """Every layout the search prices beside the run's own split, with the pp values it serves: the embedding
    and loss counted in the split (_accounting_pps), the no-op layers that let DualPipeV cut (_noop_pads)."""
    pps = _accounting_pps(config)
    return [*([(ACCOUNTED, pps)] if pps else []), *_noop_pads(config)]


def _offers_accounting(config: Config) -> bool:
    """Whether the search makes a second pass with the embedding and loss in the split (_accounting_pps)."""
    return bool(_accounting_pps(config))


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


def _padded_refusal(out: SearchResult, plain: SearchResult,
                    alts: list[tuple[PipelineLayout, SearchResult]]) -> SearchResult:
    """Nothing fits in any pass: where the plain pass's candidates broke DualPipeV's layer rule and a padding pass
    priced them padded, as the stack runs them, that pass's refusal is the one to say (the budget they miss, the
    lists they break), not the rule the stack's padding lifts. The widest padding pass speaks; the plain pass's
    other findings (the stack on the device, HP533/HP534) stay."""
    padded = [alt for layout, alt in alts if layout.noop_layers]
    if plain.best is not None or not padded or not plain.refused.get(R_DPV_LAYERS):
        return out
    widest = max(padded, key=lambda alt: alt.evaluated)
    kept = tuple(d for d in plain.diagnostics if d.code not in _REFUSALS)
    return replace(out, diagnostics=(*kept, *widest.diagnostics))


# Where the files state the pipeline schedule: HP614 sits there (the padding serves DualPipeV).
_SCHEDULE_PATHS = ("pp_config.pipeline_schedule", "accelerator.pipeline_scheduler", "accelerator.pp_schedule")


def _layout_note(config: Config, layout: PipelineLayout, best: Estimate, gain: str) -> Diagnostic:
    """HP613 / HP614: the layout the best plan needs, and the keys `apply` writes for it. HP614 sits on the
    stated schedule and, in a search config, carries the quick fix that states the padding there."""
    if layout.noop_layers:
        k, text = len(layout.noop_layers), noop_text(layout.noop_layers)
        rng, path, file = refusals.position(config, _SCHEDULE_PATHS)
        # the quick fix edits the file the finding sits in: the search config's own pp_config, never a train.yaml
        fix = noop_fix(layout.noop_layers) if config.kind == "search" and file is None else {}
        return Diagnostic("HP614", f"the best plan pads the layers with {k} no-op layer{'s' if k != 1 else ''} "
                          f"(MindSpeed-LLM's noop_layers \"{text}\") so that they cut into DualPipeV's "
                          f"{2 * best.strategy.pp} stages{gain}: apply writes accelerator.noop_layers; in a search "
                          "config state pp_config.noop_layers", rng, path, severity=Severity.INFORMATION, file=file,
                          data={"noop_layers": list(layout.noop_layers), **fix})
    return Diagnostic("HP613", "the best plan counts the embedding and the loss as layers of the pipeline split"
                      f"{gain}: apply writes account_for_embedding_in_pipeline_split and "
                      "account_for_loss_in_pipeline_split (Megatron-Core)", severity=Severity.INFORMATION)


def search_with(config: Config, pricer: Pricing | None, *, top: int = 10,
                progress: Callable[[float], None] | None = None,
                cancelled: Callable[[], bool] | None = None, only_pp: tuple[int, ...] = ()) -> SearchResult:
    """`search` with an explicit pricer (tests price synthetic models through the same code); `only_pp`, when
    given, keeps the plans with those pipeline degrees (the layout pass of `search`)."""
    t0 = time.perf_counter()
    dims = _dimensions(config)
    try:
        result = _search(config, pricer, top=max(int(top), 1), progress=progress, cancelled=cancelled,
                         only_pp=only_pp)
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
            cancelled: Callable[[], bool] | None, only_pp: tuple[int, ...] = ()) -> SearchResult:
    missing, batch_items = _what_is_missing(config)
    g = config.global_batch_size
    if missing or pricer is None or config.model is None or config.cluster is None or not g:
        return SearchResult(None, (), 0, 0, 0.0, {}, diagnostics=(
            refusals.cannot_search(config, missing, at_batch=batch_items == len(missing)),))
    model, cluster = config.model, config.cluster
    budget = _budget(config)
    restrict = restrictions(config)
    if only_pp:
        pp = restrict.get("pp")
        restrict = {**restrict, "pp": tuple(p for p in only_pp if pp is None or p in pp)}
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
    from engine.cost import CandidateTable, estimate_row

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
        for j, i in enumerate(idx):
            out[i] = estimate_row(priced, j, strategies[i])
    return [e for e in out if e is not None]
