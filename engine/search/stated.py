"""The strategy the files state, and how it compares with the search's best: one rule for `hp-plan` and the
language server.

A search config states no strategy of its own; the one to compare with is its train.yaml's, read on the
search config's cluster (a train.yaml alone often names no cluster, so it cannot state dp). Before this module
the CLI and the server read that train.yaml under different overrides and priced it twice, so a search job
checked the file more than once and the hover's "stated" column could disagree with HP611's figures (D-007).
Now: `stated_overrides` is the rule, `stated_source` reads the train.yaml once, and `compare_stated` returns the
estimate it priced beside its advice, so a caller never prices the stated plan again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from engine.config.types import ClusterOverrides, Config, Loaded
from engine.diagnostics import Diagnostic
from engine.document import DEFAULT_MAX_BYTES, Reads
from engine.results import Estimate, SearchResult
from engine.search.gain import gain
from engine.search.refusals import gib, position
from engine.specs import RunOptions, Strategy

# Where HP610/HP611 point in the file that states the plan: its tensor-parallel degree, else the section.
_ADVICE_AT = ("accelerator.tp_size", "train.accelerator.tp_degree", "parallelism.tp", "accelerator", "parallelism")


def budget(config: Config) -> float:
    """The memory budget the search prices against: unbounded when neither the files nor the flags state one."""
    return config.budget_gib if config.budget_gib is not None else math.inf


def stated_overrides(config: Config | None) -> ClusterOverrides | None:
    """The cluster a search config imposes on the train.yaml it references, as explicit overrides (D-006
    puts a referencing search config first among the cluster's sources): its world size, node shape, device
    and memory budget, and its framework. The budget goes in as the device memory because the train.yaml's own
    verdict (the server's hover and HP5xx findings on it) must be against the budget the search ranks with; the
    framework because the rules that depend on the stack (which layout it takes: HP416, HP422) are those of the
    stack that runs the plan (`as_searched` prices it on the search's whole run). None when the config states no
    cluster."""
    cl = config.cluster if config is not None else None
    if config is None or cl is None:
        return None
    return ClusterOverrides(devices=cl.world_size, num_nodes=cl.num_nodes, cards_per_node=cl.cards_per_node,
                            device_type=cl.device.name, memory_gb=config.budget_gib, memory_is_budget=True,
                            explicit=True, framework=config.run.framework)


def stated_source(config: Config, texts: Mapping[str, str] | None = None, *,
                  reads: Reads | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Config | None:
    """The config whose `stated` strategy and locations the advice uses: `config` itself when it states one
    (a train.yaml with a known cluster), else a search config's train.yaml read under `stated_overrides`;
    `texts` are unsaved editor buffers, which win over the disk (engine.check.check_file). None when the
    files state no complete strategy. `reads`: the request's reads (engine.document.Reads), which hold the
    train.yaml already when the search config was checked in the same request; `max_bytes` the size the
    train.yaml was checked against there (a larger one is not parsed here either)."""
    if config.stated is not None:
        return config
    if config.kind != "search" or not config.train_yaml or config.cluster is None:
        return None
    from engine.check import check_file

    loaded = check_file(config.train_yaml, overrides=stated_overrides(config), texts=texts, reads=reads,
                        max_bytes=max_bytes)
    return loaded.config if loaded.config is not None and loaded.config.stated is not None else None


def stated_estimate(config: Config, source: Config | None = None, *,
                    texts: Mapping[str, str] | None = None) -> Estimate | None:
    """The strategy the files state, priced on the searched model, cluster, run and budget (the numbers the
    search ranks with), or None when the files state none. `source` is `stated_source(config)` when the
    caller has it already."""
    if config.model is None or config.cluster is None:
        return None
    source = source or stated_source(config, texts)
    if source is None or source.stated is None:
        return None
    from engine.cost import estimate

    priced = as_searched(config, source)
    assert priced.model is not None and priced.cluster is not None and priced.stated is not None
    return estimate(priced.model, priced.cluster, priced.run, priced.stated, budget(config))


def as_searched(config: Config, source: Config) -> Config:
    """`source`, the train.yaml search config `config` references, as that search prices the plan it states:
    the searched model, cluster, run and memory budget, and `stated_run`'s strategy, with the train.yaml's own
    positions. What the editor shows on the train.yaml (its price, verdict and HP5xx findings, the advice
    against the best plan) is then the search's: priced on its own run, a Megatron search config's train.yaml
    read "3.02× faster" where `hp-plan search` said 2.30×. `source` itself where the files state no plan or
    `config` cannot price one; a config stating its own plan is its own search config."""
    if source.stated is None or config.model is None or config.cluster is None:
        return source
    run, strategy = stated_run(config, source)
    return replace(source, model=config.model, cluster=config.cluster, run=run, stated=strategy,
                   memory_limit_gb=config.memory_limit_gb, budget_source=config.budget_source)


def priced_as_searched(loaded: Loaded, space: Loaded | None) -> Loaded:
    """A train.yaml's check with its config as the search config referencing it prices the plan
    (as_searched: that search's model, cluster, run and budget), so its hover, lens, HP5xx findings
    and the advice against the best plan are the numbers `hp-plan search` gives; unchanged without such a search
    config, or when that config has errors (the search then runs on the train.yaml's own space too)."""
    if space is None or space.config is None or space.config.kind != "search" or loaded.config is None \
            or loaded.config.kind != "train" or any(d.is_error for d in space.diagnostics):
        return loaded
    return replace(loaded, config=as_searched(space.config, loaded.config))


def stated_run(config: Config, source: Config) -> tuple[RunOptions, Strategy]:
    """The run options and strategy the stated plan is priced with: what the files state, whatever the search
    config lets the search choose. `recompute_modules: auto` in a search config asks the search to choose the
    modules; the stated plan keeps its train.yaml's own list. And the stack that runs it (the search config's
    framework) gives a plan that states no optimizer shard its distributed optimizer, as its recipes run it
    (engine.config.stated_strategy.stack_optimizer)."""
    from engine.config.stated_strategy import stack_optimizer

    assert source.stated is not None
    run = config.run
    if run.recompute_modules == ("auto",) and source is not config:
        run = replace(run, recompute_modules=tuple(m for m in source.run.recompute_modules if m != "auto"))
    shard_stated = any(p in source.locations for p in ("accelerator.optimizer_weight_shard_size",
                                                       "accelerator.enable_parallel_optimizer",
                                                       "model.optimizer_weight_shard_size"))
    fsdp_stated = any(p in source.locations for p in ("fsdp_config.dp_shard_size", "train.accelerator.dp_shard",
                                                      "parallelism.fsdp"))
    return run, stack_optimizer(source.stated, run, shard_stated, fsdp_stated) or source.stated


@dataclass(frozen=True, slots=True)
class StatedComparison:
    """What `compare_stated` found: the advice (HP610/HP611), the stated plan's price it was computed from
    (None when the files state no plan) and the config that states it (the train.yaml for a search config)."""

    diagnostics: tuple[Diagnostic, ...] = ()
    estimate: Estimate | None = None
    source: Config | None = None


def compare_stated(config: Config, result: SearchResult, *, texts: Mapping[str, str] | None = None,
                   reads: Reads | None = None, priced: Estimate | None = None,
                   source: Config | None = None) -> StatedComparison:
    """HP610 when the strategy the files state does not fit the budget, HP611 (a hint) when the search found
    one faster by more than the model's error band (engine.search.gain); with the stated plan's estimate, priced once here (also when
    nothing fits: the hover still shows the stated column). Shared by `hp-plan search` and the language
    server, so the codes, messages and numbers are one.

    `config` is the config that was searched; the stated strategy is `stated_source`'s, priced by
    `stated_estimate` and positioned at the stated tensor-parallel degree in the file that states it (`file`
    set when that is the train.yaml). `texts` (path -> unsaved editor buffer) makes the language server compare
    with the train.yaml as the editor shows it. A caller that holds what the request already found passes it:
    `source` (the config stating the plan), `priced` (its price: the check's estimate travels to the search
    job, so a save prices the stated plan once) and `reads` (engine.document.Reads)."""
    if config.model is None or config.cluster is None:
        return StatedComparison()
    source = source or stated_source(config, texts, reads=reads)
    stated = priced if _reusable(priced, config, source) else (
        stated_estimate(config, source) if source is not None else None)
    if source is None or source.stated is None or stated is None:
        return StatedComparison(source=source)
    advice = _advice(config, source, stated, result.best)
    return StatedComparison(advice, stated, source)


def _reusable(priced: Estimate | None, config: Config, source: Config | None) -> bool:
    """A price computed before (the check's) is this comparison's when it is of the same plan on the same
    budget: `stated_estimate` would compute the same numbers."""
    return (priced is not None and source is not None and source is config and priced.strategy == config.stated
            and priced.budget_gib == budget(config))


def _advice(config: Config, source: Config, stated: Estimate, best: Estimate | None) -> tuple[Diagnostic, ...]:
    """HP610 / HP611 for the stated plan against the best, or () when neither applies."""
    if best is None or source.stated is None:
        return ()
    strategy = source.stated
    rng, path, _ = position(source, _ADVICE_AT)
    file = source.path if source.path and source.path != config.path else None
    if stated.verdict == "does not fit":
        stage = int(np.argmax(stated.stage_memory_gib)) if stated.stage_memory_gib else 0
        return (Diagnostic(
            "HP610",
            f"The stated strategy ({strategy.short()}) needs {gib(stated.peak_memory_gib)} on stage "
            f"{stage}, above the {gib(stated.budget_gib)} budget; {best.short()} fits at "
            f"{gib(best.peak_memory_gib)}.",
            rng, path, file=file,
            data={"peak_gib": stated.peak_memory_gib, "budget_gib": stated.budget_gib,
                  "strategy": best.strategy.to_json()}),)
    g = gain(stated, best)
    if not g.worth_it:
        return ()
    return (Diagnostic(
        "HP611",
        f"A plan {g.ratio:.2f}× faster fits: {best.short()} trains {best.tokens_per_s:,.0f} tokens/s "
        f"({best.step_time_s:.3g} s per step, MFU {best.mfu:.0%}, {gib(best.peak_memory_gib)}) against "
        f"{stated.tokens_per_s:,.0f} tokens/s ({stated.step_time_s:.3g} s per step) for the stated "
        f"{strategy.short()}.{g.batch_note()}",
        rng, path, file=file,
        data={"speedup": g.ratio, "stated_global_batch_size": g.stated_batch,
              "global_batch_size": g.best_batch, "strategy": best.strategy.to_json()}),)
