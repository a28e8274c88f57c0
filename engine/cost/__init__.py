"""The cost model: memory per pipeline stage and step time for parallel strategies.

Public API (stable names; docs/cost-model.md has every formula and its source):

* ``price_table(model, cluster, run, table, budget_gib) -> PricedTable`` — the vectorised core. ``table`` is
  a :class:`CandidateTable` of equal-length numpy columns, one row per strategy: dp, dp_shard, tp, pp, cp, ep,
  etp, vpp, micro_batch_size, micro_batch_num, sequence_parallel (bool), recompute (0 off / 1 selective /
  2 full, every layer), schedule (0 1F1B / 1 interleaved), optimizer_shard, and optionally ``layer_modes``
  ((n, num_layers + mtp_depth) int8 mode codes per global layer, overriding ``recompute``; code 3 = offloaded:
  priced off, its activations off the device but the one in transit, engine.cost.offload). Build it with
  ``CandidateTable.from_columns(dp=..., tp=..., pp=..., ...)`` (scalars broadcast) or
  ``CandidateTable.from_strategies([...])``. Rows are not validated here (the search and estimate_config
  validate); every row gets numbers.
* ``PricedTable`` arrays (n rows; P = max pp of the table; stage arrays NaN past a row's pp):
  peak_gib, stage_memory_gib (n, P), peak_stage, memory_terms[name] (n,) for each MEMORY_TERMS name (the
  peak stage's breakdown), step_time_s, time_terms[name] for each TIME_TERMS name (they sum to
  step_time_s), tokens_per_s, tokens_per_s_per_device, mfu, fits (peak ≤ budget).
* Per-layer recompute (the search's multiple-choice knapsack), from the same PricedTable:
  - ``stage_static_gib`` (n, P): parameters + gradients + optimizer states of each stage;
  - ``stage_fixed_gib`` (n, P): activations, buffers and reserve that do not depend on the recompute
    choice (embedding/logits activations, one layer's backward working set, communication buffers, the
    allocator reserve);
  - ``layer_count`` (n, P, 2): layers of type 0 (dense) and 1 (MoE) each stage holds (MTP layers on the
    last stage included);
  - ``layer_act_gib`` (n, P, 2, 3): one layer's activations as held at the stage's peak (already ×
    micro-batches in flight on that stage), per type and mode (0 off, 1 selective, 2 full);
  - ``layer_time_s`` (n, 2, 3): one layer's forward + backward (+ recompute) time per step, i.e. all
    micro-batches, with its TP/CP/EP communication; ``layer_extra_time_s`` = that minus mode off.
  Stage memory = static + fixed + Σ_type Σ_mode (layers of that type in that mode) · layer_act_gib; with
  a uniform mode this equals stage_memory_gib. After choosing, price the plan exactly by setting
  ``layer_modes`` (a layer's mode = ``plan.mode_of(global_layer_index)``; stage of a layer: see
  engine.cost.layout.layer_stage) and calling price_table again.
* ``estimate(model, cluster, run, strategy, budget_gib) -> Estimate``: a one-row price_table, same numbers.
* ``estimate_row(priced, i, strategy)``: row i of a PricedTable as an Estimate; ``estimate_rows`` many rows of one.
* ``estimate_config(config) -> (Estimate | None, diagnostics)``: validates config.stated against the model
  and cluster (HP5xx, positioned with config.locations) and prices it.
* ``model_stats(model) -> ModelStats``: total/active/MTP parameters and training FLOPs per token.
"""

from engine.cost.estimate import estimate, estimate_row, estimate_rows
from engine.cost.model import ModelStats, model_stats
from engine.cost.price import price_table
from engine.cost.strategy_rules import check_strategy, estimate_config
from engine.cost.table import CandidateTable, PricedTable, plan_from_layer_modes, plan_layer_modes

__all__ = [
    "CandidateTable", "ModelStats", "PricedTable", "check_strategy", "estimate", "estimate_config", "estimate_row",
    "estimate_rows", "model_stats",
    "plan_from_layer_modes", "plan_layer_modes", "price_table",
]
