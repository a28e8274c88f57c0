"""The plan a front end writes into a train.yaml: the search's best, where the trainer runs it as priced.

HyperParallel's search may offload a stage's first layers to the host ([HP] §8.6), and no trainer key states that
plan ([HP] Corrections 4): written into a train.yaml those layers run without recompute and without offload, a
plan the search never priced and one that may not fit (the write-path probe: 78.9 GiB over a 60 GiB budget). So
where the best offloads what the trainer cannot, the plan written is the fastest one that offloads nothing, from
the same search without the host link; `search` still shows the offloaded plan, and every writer says why the two
differ (`apply`, the server's Apply)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.config.types import Config
from engine.results import Estimate, SearchResult


@dataclass(frozen=True, slots=True)
class Written:
    """What a writer puts into the train.yaml: `estimate` (None: nothing the trainer runs fits) and, where it is
    not the search's best, `why`."""

    estimate: Estimate | None
    why: str | None = None


def trainer_runs(est: Estimate) -> bool:
    """Whether the trainer runs `est` as priced: it offloads nothing, or offloads as the stack runs it
    (Megatron-Core's --cpu-offloading-num-layers, which export writes)."""
    return not est.offloaded_gib or est.offload_route == "layers"


def written_plan(config: Config, result: SearchResult,
                 search_fn: Callable[[Config], SearchResult]) -> Written:
    """The plan to write for `result` (a search of `config`); `search_fn` searches a config (top 1 is enough)."""
    best = result.best
    if best is None or trainer_runs(best):
        return Written(best)
    plain = search_fn(replace(config, offload_gb_s=0.0)).best
    offloaded = ", ".join(best.offloaded_gib or {})
    if plain is None:
        return Written(None, f"the fastest plan offloads layers {offloaded} to the host, which the trainer has no "
                       "key for, and no plan fits without offload")
    return Written(plain, f"the fastest plan ({best.short()}, {best.step_time_s:.3f} s) offloads layers {offloaded} "
                   f"to the host, which the trainer has no key for; written instead: the fastest plan without "
                   f"offload ({plain.short()}, {plain.step_time_s:.3f} s)")
