"""What `hp-plan explain` shows (docs/formats.md §7): per-stage rows, what bounds the step, the timeline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.diagnostics import Diagnostic
from engine.results import MEMORY_TERMS, Estimate

# Interval kinds (docs/formats.md §7) and the per-stage time columns, in the order they are drawn.
KINDS: tuple[str, ...] = ("forward", "backward", "recompute", "comm", "bubble", "optimizer")
STAGE_TIMES: tuple[str, ...] = ("forward", "backward", "recompute", "comm", "idle")


@dataclass(frozen=True, slots=True)
class Interval:
    """One box of the timeline: `kind` on `stage` from start_s to end_s (seconds from the step's start).
    micro_batch and chunk are 0-based; None for intervals that belong to no micro-batch (bubble, the
    end-of-step sync, the optimizer)."""

    stage: int
    kind: str
    micro_batch: int | None
    chunk: int | None
    start_s: float
    end_s: float

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "kind": self.kind, "micro_batch": self.micro_batch, "chunk": self.chunk,
                "start_s": self.start_s, "end_s": self.end_s}


@dataclass(frozen=True, slots=True)
class StageRow:
    """One pipeline stage: layers held, memory by part (GiB), seconds per step by part. `time_s` has the
    STAGE_TIMES keys (comm = exposed communication: TP, CP, EP, pipeline p2p, FSDP, end-of-step sync) plus
    `optimizer`; they add up to the step time."""

    stage: int
    layers: int
    memory_gib: Mapping[str, float]
    time_s: Mapping[str, float]
    comm_s: Mapping[str, float]
    chunks: tuple[ChunkRow, ...] = ()

    @property
    def total_gib(self) -> float:
        return sum(self.memory_gib.values())

    def layers_text(self, detail: bool) -> str:
        """`7` or, with `detail`, `7 (E|1|1|1)`: each virtual chunk's decoder layers, E / L where the chunk
        also holds the embedding / the output layer and loss (a chunk may hold only those)."""
        if not detail or not self.chunks:
            return str(self.layers)
        return f"{self.layers} ({'|'.join(c.text() for c in self.chunks)})"

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "layers": self.layers,
                "memory_gib": {k: self.memory_gib[k] for k in MEMORY_TERMS},
                "time_s": dict(self.time_s), "comm_s": dict(self.comm_s), "total_gib": self.total_gib,
                "chunks": [c.to_json() for c in self.chunks]}


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """One virtual chunk of a stage (model chunk c·pp + stage): its decoder layers, whether it holds the
    embedding (stage 0's first chunk) or the output layer and loss (the last stage's last chunk), and the
    micro-batches it keeps in flight at the stage's activation peak."""

    chunk: int
    layers: int
    embedding: bool
    loss: bool
    in_flight: float

    def text(self) -> str:
        parts = (["E"] if self.embedding else []) + ([str(self.layers)] if self.layers or not (
            self.embedding or self.loss) else []) + (["L"] if self.loss else [])
        return "+".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"chunk": self.chunk, "layers": self.layers, "embedding": self.embedding, "loss": self.loss,
                "in_flight": self.in_flight}


@dataclass(frozen=True, slots=True)
class Explained:
    """A priced plan taken apart. `bound` is "memory" when the plan does not fit or has less headroom than
    the model's memory uncertainty, else the largest time term (compute, recompute, tp_comm, cp_comm,
    ep_comm, dp_comm, pp_p2p, pp_bubble, optimizer); `time_bound` is always that largest time term."""

    estimate: Estimate
    framework: str
    schedule: str
    stages: tuple[StageRow, ...]
    bound: str
    time_bound: str
    bound_detail: str
    tightest_stage: int
    headroom_gib: float
    timeline: tuple[Interval, ...]
    bubble_fraction: float
    diagnostics: tuple[Diagnostic, ...] = ()
    chunk_detail: bool = False  # the stage rows show their virtual chunks (interleaved, or a stated layout)

    @property
    def step_time_s(self) -> float:
        return self.estimate.step_time_s

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.estimate.strategy.to_json(),
            "framework": self.framework,
            "schedule": self.schedule,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.estimate.tokens_per_s,
            "mfu": self.estimate.mfu,
            "budget_gib": self.estimate.budget_gib,
            "fits": self.estimate.fits,
            "stages": [s.to_json() for s in self.stages],
            "bound": self.bound,
            "time_bound": self.time_bound,
            "bound_detail": self.bound_detail,
            "tightest_stage": self.tightest_stage,
            "headroom_gib": self.headroom_gib,
            "bubble_fraction": self.bubble_fraction,
            "timeline": [iv.to_json() for iv in self.timeline],
            "diagnostics": [d.to_json() for d in self.diagnostics],
            **({"vision_tower": dict(self.estimate.vision_tower)} if self.estimate.vision_tower is not None else {}),
        }
