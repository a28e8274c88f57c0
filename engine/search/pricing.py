"""The search's one door to the cost model: price a space's rows under a recompute choice, and re-price the
winners through `engine.cost.estimate`, the path `hp-plan estimate` takes, so the two agree to the last digit.

The search never prices anything itself (one source of truth per fact, ARCHITECTURE.md "Habits").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from engine.cost.table import CandidateTable, PricedTable
from engine.results import Estimate
from engine.specs import ClusterSpec, ModelSpec, RunOptions, Strategy


def table_of(cols: Mapping[str, np.ndarray], idx: np.ndarray, recompute: np.ndarray | int,
             layer_modes: np.ndarray | None = None) -> CandidateTable:
    """The CandidateTable of rows `idx` of a space (engine.search.space.COLUMNS), with a recompute code per
    row (0 off, 1 selective, 2 full) or per layer. The space's columns are already int64, so the table takes
    the gathered arrays as they are (no conversions on the search's hot path)."""
    vpp = cols["vpp"][idx]
    n = vpp.shape[0]
    rc = np.full(n, recompute, dtype=np.int64) if np.ndim(recompute) == 0 else np.asarray(recompute, dtype=np.int64)
    return CandidateTable(
        dp=cols["dp"][idx], dp_shard=cols["fsdp"][idx], tp=cols["tp"][idx], pp=cols["pp"][idx],
        cp=cols["cp"][idx], ep=cols["ep"][idx], etp=cols["etp"][idx], vpp=vpp,
        micro_batch_size=cols["mbs"][idx], micro_batch_num=cols["mbn"][idx],
        sequence_parallel=cols["sp"][idx] > 0, recompute=rc, schedule=(vpp > 1).astype(np.int64),
        optimizer_shard=cols["os"][idx],
        layer_modes=None if layer_modes is None else np.asarray(layer_modes, dtype=np.int8),
    )


@dataclass(frozen=True, slots=True)
class Pricer:
    """Prices for one search: the model, cluster, run options and budget never change inside it."""

    model: ModelSpec
    cluster: ClusterSpec
    run: RunOptions
    budget_gib: float

    def price(self, table: CandidateTable) -> PricedTable:
        from engine.cost import price_table

        return price_table(self.model, self.cluster, self.run, table, self.budget_gib)

    def estimate(self, strategy: Strategy) -> Estimate:
        from engine.cost import estimate

        return estimate(self.model, self.cluster, self.run, strategy, self.budget_gib)
