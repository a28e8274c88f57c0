"""The search's one door to the cost model: price a space's rows under a recompute choice, and re-price the
winners through `engine.cost.estimate`, the path `hp-plan estimate` takes, so the two agree to the last digit.

The search never prices anything itself (one source of truth per fact: docs/cost-model.md is priced in one place, engine/cost).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from engine.cost.table import SCHEDULE_CODE, CandidateTable, PricedTable
from engine.results import Estimate
from engine.specs import ClusterSpec, ModelSpec, RunOptions, Strategy

if TYPE_CHECKING:
    from engine.cost.price import SyncParts


def table_of(cols: Mapping[str, np.ndarray], idx: np.ndarray, recompute: np.ndarray | int,
             layer_modes: np.ndarray | None = None) -> CandidateTable:
    """The CandidateTable of rows `idx` of a space (engine.search.space.COLUMNS), with a recompute code per
    row (0 off, 1 selective, 2 full) or per layer. The cost model computes in int64: a space's int32 columns
    are widened here, a chunk at a time."""
    def take(name: str) -> np.ndarray:
        return np.asarray(cols[name][idx], dtype=np.int64)

    vpp = take("vpp")
    n = vpp.shape[0]
    rc = np.full(n, recompute, dtype=np.int64) if np.ndim(recompute) == 0 else np.asarray(recompute, dtype=np.int64)
    return CandidateTable(
        dp=take("dp"), dp_shard=take("fsdp"), tp=take("tp"), pp=take("pp"), cp=take("cp"), ep=take("ep"),
        etp=take("etp"), vpp=vpp, micro_batch_size=take("mbs"), micro_batch_num=take("mbn"),
        sequence_parallel=cols["sp"][idx] > 0, recompute=rc, schedule=(vpp > 1).astype(np.int64),
        optimizer_shard=take("os"),
        layer_modes=None if layer_modes is None else np.asarray(layer_modes, dtype=np.int8),
    )


# The stated schedules a search's plain pipelined rows run as (Pricer.schedule): the space offers them vpp 1.
RUN_AS_STATED = ("dualpipev", "gpipe")


@dataclass(frozen=True, slots=True)
class Pricer:
    """Prices for one search: the model, cluster, run options and budget never change inside it."""

    model: ModelSpec
    cluster: ClusterSpec
    run: RunOptions
    budget_gib: float
    # The host link recompute per_layer may offload over, GB/s one direction (Config.offload_gb_s; 0 = none).
    offload_gb_s: float = 0.0
    # The schedule the files state (Config.pipeline_schedule): under "dualpipev" or "gpipe" every pipelined row the
    # space offers (vpp 1) runs that schedule (engine.cost.dualpipev; GPipe's all-forwards-first in-flight
    # activations, engine.cost.rows); the space's columns carry only vpp.
    schedule: str = "1F1B"

    def price(self, table: CandidateTable, parts: bool = True) -> PricedTable:
        """engine.cost.price_table of `table` (`parts` False: without the explanation's parts, for the bulk
        passes that only rank)."""
        from engine.cost import price_table

        return price_table(self.model, self.cluster, self.run, self._as_run_table(table), self.budget_gib, parts)

    def layer_counts(self, table: CandidateTable) -> np.ndarray:
        """(n, P, 2) layers of each type per stage as `price` would place them (engine.cost.rows.layer_counts),
        nothing priced."""
        from engine.cost.rows import layer_counts

        return layer_counts(self.model, self.run, self._as_run_table(table))

    def _as_run_table(self, table: CandidateTable) -> CandidateTable:
        """`table` with the schedule its rows run under this search (as_run, for a whole table)."""
        if self.schedule not in RUN_AS_STATED:
            return table
        code = SCHEDULE_CODE[self.schedule]
        return replace(table, schedule=np.where((table.pp > 1) & (table.schedule == 0), code, table.schedule))

    def as_run(self, s: Strategy) -> Strategy:
        """`s` with the schedule it runs under this search (the files' DualPipeV or GPipe for a pipelined 1F1B
        row)."""
        if self.schedule in RUN_AS_STATED and s.pp > 1 and s.pipeline_schedule == "1F1B":
            return replace(s, pipeline_schedule=self.schedule)  # type: ignore[arg-type]
        return s

    def sync_parts(self, table: CandidateTable, P: int) -> SyncParts:
        """engine.cost.price.sync_parts: each row's sharding traffic before overlap, uncalibrated."""
        from engine.cost.price import sync_parts

        return sync_parts(self.model, self.cluster, self.run, table, P)

    def sync_time(self, parts: SyncParts, comp_stage: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """engine.cost.price.sync_time: the exposed part of `parts` beside `comp_stage`, uncalibrated."""
        from engine.cost.price import sync_time

        return sync_time(self.run, parts, comp_stage)

    def time_ratio_span(self) -> tuple[float, float]:
        """(least, greatest) calibration multiplier over the time parts and every plan ((1, 1) uncalibrated; a
        `local` calibration's per-plan factor included): a bound priced on calibrated numbers holds after it is
        scaled by least / greatest (engine.search.bound)."""
        from engine.ratios.local import multiplier_span

        return multiplier_span(self.run.ratios)

    def estimate(self, strategy: Strategy) -> Estimate:
        from engine.cost import estimate

        return estimate(self.model, self.cluster, self.run, self.as_run(strategy), self.budget_gib)
