"""The stated plan at its framework's older releases, where the file names none (HP536).

A stack's facts change with its release (engine.catalog.frameworks.Releases), and a file that states no
`estimator.framework_version` is priced as the current release (docs/formats.md §2). The release a run uses can
move its price by more than the model's own error: torchtitan before its chunked loss (2026-06) holds the whole
fp32 loss, 40 % more peak for an 8B plan at 16K tokens per GPU; Megatron-Core before 0.13 keeps every routed
copy's output, 18-39 % more peak for DeepSeek-V3; before 0.10's expert-parallel folding a small MoE plan steps
48 % slower (docs/cost-model.md §8.1). The model cannot know which release will run the plan, so instead of
hiding the choice it prices the plan once more for each distinct set of facts an older release lacks (two sets
for torchtitan, five for Megatron-Core, three for MindSpeed-LLM: a few milliseconds each) and says which move a
figure beyond its error band. A plan that states the release, or a framework without releases, costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from engine.catalog.frameworks import ReleaseFact, Releases, find_framework
from engine.cost.estimate import estimate
from engine.results import Estimate, ReleasePrice, ReleaseSpread
from engine.specs import ClusterSpec, ModelSpec, RunOptions, Strategy


def fact_sets(rel: Releases) -> list[tuple[tuple[str, ...], tuple[ReleaseFact, ...]]]:
    """The releases older than the current one grouped by the priced facts they lack, newest group first (each
    lacks what the group before it lacks and more: a fact holds from one release on). What a release can run
    (`space.` facts) does not price a plan; where the plan needs what its release lacks, stating the release
    says so (HP535 and the strategy rules)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    missing: dict[tuple[str, ...], tuple[ReleaseFact, ...]] = {}
    for version in rel.versions:
        lacks = tuple(f for f in rel.missing(version) if not f.field.startswith("space."))
        if lacks:
            key = tuple(f.field for f in lacks)
            groups.setdefault(key, []).append(version)
            missing[key] = lacks
    return sorted(((tuple(v), missing[k]) for k, v in groups.items()), key=lambda g: len(g[1]))


def release_prices(model: ModelSpec, cluster: ClusterSpec, run: RunOptions, strategy: Strategy, budget_gib: float,
                   runs: Callable[[RunOptions], bool] = lambda _run: True) -> ReleaseSpread:
    """The plan at each older set of facts of its framework, newest first, down to the first release that does
    not run it as stated (`runs`: an older release lacks all a newer one lacks, so none older runs it either);
    empty when the run states its release or its framework has none."""
    fw = find_framework(run.framework)
    if run.framework_version or fw is None or fw.releases is None:
        return ReleaseSpread()
    out: list[ReleasePrice] = []
    for versions, lacks in fact_sets(fw.releases):
        newest = versions[-1]  # the release after it brought what it lacks beyond the next newer group
        since = fw.releases.versions[fw.releases.versions.index(newest) + 1]
        older = replace(run, framework_version=versions[0])
        if not runs(older):
            return ReleaseSpread(tuple(out), since)
        est = estimate(model, cluster, older, strategy, budget_gib)
        out.append(ReleasePrice(versions, since, tuple(f.what for f in lacks), est.step_time_s, est.peak_memory_gib))
    return ReleaseSpread(tuple(out))


def beyond_band(prices: tuple[ReleasePrice, ...], est: Estimate) -> bool:
    """Whether an older release moves the step or the peak by more than its error band's half-width: where the
    release matters more than the model's own error."""
    return any(abs(_change(p.step_time_s, est.step_time_s)) > est.step_spread
               or abs(_change(p.peak_memory_gib, est.peak_memory_gib)) > est.memory_spread for p in prices)


def _change(value: float, against: float) -> float:
    """value / against − 1; 0 where `against` is not a positive figure (nothing to compare)."""
    return value / against - 1 if against > 0 else 0.0


# A release step the message names: one that moves the step or the peak by more than this against the newer
# release before it (smaller moves are rounding beside any band).
STEP = 0.01


def spread_message(framework: str, current: str, spread: ReleaseSpread, est: Estimate, where: str) -> str:
    """HP536's text: the release priced, then, oldest facts last, each release whose facts move the price from
    the newer one before it (what arrived there and what the plan prices without it, against the current; the
    release that moves it most where no single step does), the release before which the stated plan does not
    run, and `where` the release is stated."""
    parts: list[str] = []
    newer_step, newer_peak, before = est.step_time_s, est.peak_memory_gib, frozenset[str]()
    for p in spread.prices:
        step, peak = abs(_change(p.step_time_s, newer_step)) > STEP, abs(_change(p.peak_memory_gib, newer_peak)) > STEP
        if step or peak:
            parts.append(_boundary(p, est, [f for f in p.lacks if f not in before], step, peak))
        newer_step, newer_peak, before = p.step_time_s, p.peak_memory_gib, frozenset(p.lacks)
    if not parts and spread.prices:  # small steps that add up beyond a narrow band
        most = max(spread.prices, key=lambda p: max(abs(_change(p.step_time_s, est.step_time_s)),
                                                    abs(_change(p.peak_memory_gib, est.peak_memory_gib))))
        parts.append(_boundary(most, est, list(most.lacks), True, True))
    refused = (f"; releases before {spread.refused_before} do not run what the files state"
               if spread.refused_before else "")
    return (f"no {framework} release stated: priced as {current}, the current one; an older release prices this "
            f"plan beyond its error band: {'; '.join(parts)}{refused}. State the release the run uses ({where})")


def _boundary(p: ReleasePrice, est: Estimate, arrived: list[str], step: bool, peak: bool) -> str:
    """One release boundary: what arrived there, and the figures it moves (`step`, `peak`) as that older release
    prices them, against the current release's."""
    figures = []
    if step:
        figures.append(f"step {p.step_time_s:.3f} s ({100 * _change(p.step_time_s, est.step_time_s):+.0f}%)")
    if peak:
        figures.append(f"peak {p.peak_memory_gib:.1f} GiB "
                       f"({100 * _change(p.peak_memory_gib, est.peak_memory_gib):+.0f}%)")
    return f"before {p.since} ({'; '.join(arrived)}): {', '.join(figures)}"
