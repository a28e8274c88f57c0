"""Columns of candidate strategies (one row each) and the priced result, as numpy arrays.

The search builds a CandidateTable once per space and prices it in one call; `estimate` prices a one-row
table, so the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from itertools import pairwise

import numpy as np

from engine.cost.band import Shape
from engine.specs import GIB as GIB_BYTES
from engine.specs import RECOMPUTE_MODES, Ratios, RecomputePlan, Strategy

RECOMPUTE_CODE: dict[str, int] = {m: i for i, m in enumerate(RECOMPUTE_MODES)}  # off 0, selective 1, full 2
# A layer that runs off and moves what it keeps to the host (engine.cost.offload.OFFLOAD).
OFFLOAD_CODE = 3
# 3: DualPipeV (engine.cost.dualpipev).
SCHEDULE_CODE: dict[str, int] = {"1F1B": 0, "interleaved": 1, "gpipe": 2, "dualpipev": 3}
SCHEDULE_NAME: dict[int, str] = {v: k for k, v in SCHEDULE_CODE.items()}
# The parts a stage's per-micro-batch time is the sum of (PricedTable.stage_time_parts).
STAGE_TIME_PARTS: tuple[str, ...] = (
    "forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_p2p", "fsdp_comm",
)

@dataclass(frozen=True, eq=False)
class CandidateTable:
    """Equal-length columns, one row per strategy (docs/formats.md §3 STRATEGY).

    `recompute` is the mode code of every layer (0 off, 1 selective, 2 full); `schedule` 0 = 1F1B,
    1 = interleaved (vpp > 1 is used only when interleaved). `layer_modes`, when given, is an
    (n, num_layers + mtp_depth) int8 array of per-layer mode codes (global layer index, MTP layers last)
    that overrides `recompute` row by row; this is how a per-layer knapsack choice is priced exactly.
    """

    dp: np.ndarray
    dp_shard: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    vpp: np.ndarray
    micro_batch_size: np.ndarray
    micro_batch_num: np.ndarray
    sequence_parallel: np.ndarray  # bool
    recompute: np.ndarray
    schedule: np.ndarray
    optimizer_shard: np.ndarray
    layer_modes: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.dp)
        for f in fields(self):
            col = getattr(self, f.name)
            if col is None:
                continue
            if len(col) != n:
                raise ValueError(f"column {f.name} has {len(col)} rows, expected {n}")

    def __len__(self) -> int:
        return len(self.dp)

    @staticmethod
    def from_columns(
        *,
        dp: Sequence[int] | np.ndarray,
        tp: Sequence[int] | np.ndarray,
        pp: Sequence[int] | np.ndarray,
        dp_shard: Sequence[int] | np.ndarray | int = 1,
        cp: Sequence[int] | np.ndarray | int = 1,
        ep: Sequence[int] | np.ndarray | int = 1,
        etp: Sequence[int] | np.ndarray | int = 1,
        vpp: Sequence[int] | np.ndarray | int = 1,
        micro_batch_size: Sequence[int] | np.ndarray | int = 1,
        micro_batch_num: Sequence[int] | np.ndarray | int = 1,
        sequence_parallel: Sequence[bool] | np.ndarray | bool = False,
        recompute: Sequence[int] | np.ndarray | int = 0,
        schedule: Sequence[int] | np.ndarray | int = 0,
        optimizer_shard: Sequence[int] | np.ndarray | int = 1,
        layer_modes: np.ndarray | None = None,
    ) -> CandidateTable:
        """Build from arrays or scalars (scalars broadcast to the length of `dp`)."""
        n = len(dp)

        def col(v: object, dtype: type = np.int64) -> np.ndarray:
            a: np.ndarray = np.asarray(v, dtype=dtype)
            return np.full(n, a, dtype=dtype) if a.ndim == 0 else a.astype(dtype, copy=False)

        lm = None if layer_modes is None else np.asarray(layer_modes, dtype=np.int8)
        return CandidateTable(
            dp=col(dp), dp_shard=col(dp_shard), tp=col(tp), pp=col(pp), cp=col(cp), ep=col(ep), etp=col(etp),
            vpp=col(vpp), micro_batch_size=col(micro_batch_size), micro_batch_num=col(micro_batch_num),
            sequence_parallel=col(sequence_parallel, bool), recompute=col(recompute), schedule=col(schedule),
            optimizer_shard=col(optimizer_shard), layer_modes=lm,
        )

    @staticmethod
    def from_strategies(strategies: Sequence[Strategy], num_layers: int | None = None) -> CandidateTable:
        """One row per strategy. Plans with per-layer overrides need `num_layers` (the model's layers plus
        its MTP layers) to expand into `layer_modes`; uniform plans never do."""
        rows = list(strategies)
        need_layers = any(s.recompute.layers or s.recompute.offload for s in rows)
        lm = None
        if need_layers:
            if num_layers is None:
                raise ValueError("per-layer recompute plans need num_layers")
            lm = np.stack([plan_layer_modes(s.recompute, num_layers) for s in rows])
        return CandidateTable.from_columns(
            dp=[s.dp for s in rows], dp_shard=[s.dp_shard for s in rows], tp=[s.tp for s in rows],
            pp=[s.pp for s in rows], cp=[s.cp for s in rows], ep=[s.ep for s in rows], etp=[s.etp for s in rows],
            vpp=[s.vpp for s in rows], micro_batch_size=[s.micro_batch_size for s in rows],
            micro_batch_num=[s.micro_batch_num for s in rows],
            sequence_parallel=[s.sequence_parallel for s in rows],
            recompute=[RECOMPUTE_CODE[s.recompute.mode] for s in rows],
            schedule=[SCHEDULE_CODE[s.pipeline_schedule] for s in rows],
            optimizer_shard=[s.optimizer_shard for s in rows], layer_modes=lm,
        )

    def row(self, i: int) -> CandidateTable:
        """A one-row table (what `estimate` would build for row i)."""
        return self.take(np.array([i]))

    def take(self, idx: np.ndarray) -> CandidateTable:
        kw = {f.name: (None if getattr(self, f.name) is None else getattr(self, f.name)[idx]) for f in fields(self)}
        return CandidateTable(**kw)  # type: ignore[arg-type]

    def strategy(self, i: int) -> Strategy:
        """Row i as a Strategy (per-layer modes folded back into ranges)."""
        mode = RECOMPUTE_MODES[int(self.recompute[i])]
        plan = RecomputePlan(mode=mode)
        if self.layer_modes is not None:
            plan = plan_from_layer_modes(self.layer_modes[i], default=mode)
        return Strategy(
            dp=int(self.dp[i]), dp_shard=int(self.dp_shard[i]), tp=int(self.tp[i]), pp=int(self.pp[i]),
            cp=int(self.cp[i]), ep=int(self.ep[i]), etp=int(self.etp[i]), vpp=int(self.vpp[i]),
            micro_batch_size=int(self.micro_batch_size[i]), micro_batch_num=int(self.micro_batch_num[i]),
            sequence_parallel=bool(self.sequence_parallel[i]), recompute=plan,
            pipeline_schedule=SCHEDULE_NAME[int(self.schedule[i])],  # type: ignore[arg-type]
            optimizer_shard=int(self.optimizer_shard[i]),
        )


def plan_layer_modes(plan: RecomputePlan, num_layers: int) -> np.ndarray:
    """The mode code of each global layer 0..num_layers-1 under `plan` (plan.mode_of), OFFLOAD_CODE where the
    plan offloads the layer (engine.cost.offload)."""
    return np.array([OFFLOAD_CODE if plan.offloaded(i) else RECOMPUTE_CODE[plan.mode_of(i)]
                     for i in range(num_layers)], dtype=np.int8)


def plan_from_layer_modes(codes: np.ndarray, default: str | None = None) -> RecomputePlan:
    """Fold per-layer codes into a RecomputePlan: the most common mode (or `default` if given and present)
    becomes the plan's mode, every run of another mode an inclusive range."""
    codes = np.asarray(codes)
    offload = true_runs(codes == OFFLOAD_CODE)
    codes = np.where(codes == OFFLOAD_CODE, RECOMPUTE_CODE["off"], codes)  # an offloaded layer runs off
    counts = np.bincount(codes.astype(np.int64), minlength=3)
    base = int(np.argmax(counts))
    if default is not None and counts[RECOMPUTE_CODE[default]] == counts.max():
        base = RECOMPUTE_CODE[default]
    ranges: list[tuple[int, int, str]] = []
    i = 0
    n = len(codes)
    while i < n:
        c = int(codes[i])
        j = i
        while j + 1 < n and int(codes[j + 1]) == c:
            j += 1
        if c != base:
            ranges.append((i, j, RECOMPUTE_MODES[c]))
        i = j + 1
    # A run of "off" that holds offloaded layers is cut at their edges, so each offloaded range is its own.
    cut = [(a, b, m) for a, b, m in ranges if m != "off" or not offload]
    if offload:
        for a, b, m in (r for r in ranges if r[2] == "off"):
            edges = sorted({a, b + 1, *(x for lo, hi in offload for x in (lo, hi + 1) if a <= x <= b + 1)})
            cut.extend((x, y - 1, m) for x, y in pairwise(edges))
        cut.sort()
    return RecomputePlan(mode=RECOMPUTE_MODES[base], layers=tuple(cut),  # type: ignore[arg-type]
                         offload=tuple(offload))


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive (first, last) of each run of True in `mask`."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(mask)
    while i < n:
        if mask[i]:
            j = i
            while j + 1 < n and mask[j + 1]:
                j += 1
            out.append((i, j))
            i = j + 1
        else:
            i += 1
    return out


@dataclass(frozen=True, eq=False)
class PricedTable:
    """The priced rows. Memory in GiB, time in seconds. Stage arrays are (n, max_pp) with NaN past each
    row's pp. `memory_terms` / `time_terms` map the MEMORY_TERMS / TIME_TERMS names (engine.results) to
    (n,) arrays: the memory terms of each row's peak stage, the time terms that add up to step_time_s;
    `stage_memory_terms` the same memory terms for every stage, (n, max_pp).

    The knapsack inputs (per-layer recompute choice, see engine.cost docstring):
      stage_static_gib (n, P)      parameters + gradients + optimizer states of each stage
      stage_fixed_gib (n, P)       activations/buffers/reserve that do not depend on the recompute choice
      layer_count (n, P, 2)        layers of each type (0 dense, 1 MoE) each stage holds (MTP included)
      layer_act_gib (n, P, 2, 3)   one layer's activations as held at the stage's peak (× micro-batches in
                                   flight), per type and mode (0 off, 1 selective, 2 full); a property:
                                   in_flight (n, P) × layer_act_one_gib (n, 2, 3)
      layer_time_s (n, 2, 3)       one layer's forward + backward + recompute time per step (all its
                                   micro-batches), per type and mode, communication included
      layer_extra_time_s (n, 2, 3) layer_time_s minus the same layer without recompute (≥ 0)
    Stage memory = static + fixed + Σ_type Σ_mode count(stage, type, mode) · layer_act; with a uniform mode
    this equals stage_memory_gib exactly.
    """

    peak_gib: np.ndarray
    stage_memory_gib: np.ndarray
    peak_stage: np.ndarray
    memory_terms: dict[str, np.ndarray]
    stage_parts: dict[str, np.ndarray]
    step_time_s: np.ndarray
    time_terms: dict[str, np.ndarray]
    tokens_per_s: np.ndarray
    tokens_per_s_per_device: np.ndarray
    mfu: np.ndarray
    fits: np.ndarray
    budget_gib: float
    stage_static_gib: np.ndarray
    stage_fixed_gib: np.ndarray
    layer_count: np.ndarray
    in_flight: np.ndarray
    layer_act_one_gib: np.ndarray
    layer_time_s: np.ndarray
    layer_extra_time_s: np.ndarray
    # What was priced, for every estimate to say (docs/formats.md §3 ext): the framework and device names, and the
    # MFU with causal attention halved (model_stats flops_per_token, the PaLM / torchtitan convention).
    causal_mfu: np.ndarray | None = None
    framework: str = ""
    # The framework's release priced (Framework.release, else the stated estimator.framework_version; "" = none).
    framework_release: str = ""
    device: str = ""
    # The error band's plan features of every row (engine.cost.band.plan_features) and the device generation.
    band_features: tuple[str, ...] = ()
    generation: str = ""
    # What the band's evidence envelope reads of the model (engine.cost.band.Shape); each row's context-parallel
    # degree is its strategy's (engine.cost.estimate.estimate_row sets it).
    band_shape: Shape = field(default_factory=Shape)
    # Per stage, per micro-batch seconds of each part of stage time (STAGE_TIME_PARTS, (n, P), 0 past a
    # row's pp), plus "dp_comm" (n, P) the stage's exposed end-of-step sync and "optimizer" (n, P) the
    # update; what engine.explain draws the pipeline timeline from (the step time is built from the same).
    # This, time_parts and host_launches are empty in a table priced without its parts (price_table `parts`).
    stage_time_parts: dict[str, np.ndarray] = field(default_factory=dict)
    # The step's parts (engine.specs.PRICED_PARTS -> (n,) seconds, engine.cost.step_parts): the time terms split
    # further; they add up to step_time_s. Calibration fits one ratio per part.
    time_parts: dict[str, np.ndarray] = field(default_factory=dict)
    # (n,) launch units per step (engine.cost.step_parts.host_launches): what a calibrated host part scales by.
    host_launches: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # The ratios applied over these numbers (engine.cost.ratio_scaling), None when uncalibrated.
    calibration: Ratios | None = None
    # A multimodal model's vision tower (engine.cost.tower): "memory_gib" (n,) what it holds on stage 0 and
    # "time_s" (n,) its seconds per step there; empty for a text-only model.
    tower: dict[str, np.ndarray] = field(default_factory=dict)
    # (n, layers + MTP) GiB each offloaded layer moves to the host per micro-batch, 0 for the others
    # (engine.cost.offload); None when the table offloads nothing.
    offloaded_gib: np.ndarray | None = None
    # (n,) the share of its activation memory the peak stage no longer holds because of offload ([HP] §4.1
    # `offloaded_share`, "share of the kept memory"); None when the table offloads nothing.
    offloaded_share: np.ndarray | None = None
    # (n,) seconds a step waits for Megatron-Core's offload copies, inside step_time_s and its recompute term
    # (engine.cost.offload.copy_wait); None when no row waits. The search's lower bounds leave it out: a mode that
    # recomputes instead of offloading may be faster (engine.search.rank).
    offload_wait_s: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.peak_gib)

    @property
    def stage_memory_terms(self) -> dict[str, np.ndarray]:
        """The MEMORY_TERMS of every stage, (n, max_pp) GiB, NaN past each row's pp (computed on access from
        the parts the pricing kept, so tables that never print stages do not pay for them)."""
        sp = self.stage_parts
        valid = sp["valid"]
        out = {k: sp["ne"] * sp[f"ne_{k}"][:, None] + sp["ex"] * sp[f"ex_{k}"][:, None]
               for k in ("parameters", "gradients", "optimizer")}
        out["parameters"] = out["parameters"] + sp["io_adjust"]  # engine.cost.memory.StageParams.io_adjust_b
        out["gradients"] = out["gradients"] * sp["grad_share"]  # engine.cost.memory.unsharded_grad_share
        out["activations"] = sp["act"]
        out["buffers"] = sp["buf"]
        out["reserved"] = sp["res"]
        return {k: np.where(valid, v / GIB_BYTES, np.nan) for k, v in out.items()}

    @property
    def layer_act_gib(self) -> np.ndarray:
        """(n, P, 2, 3): one layer's activations as held at each stage's peak = in_flight (n, P, micro-batches
        whose activations the stage holds) × layer_act_one_gib (n, 2, 3, one micro-batch). Computed on access
        (it is the largest array; the search may prefer the two factors)."""
        return self.in_flight[:, :, None, None] * self.layer_act_one_gib[:, None, :, :]
