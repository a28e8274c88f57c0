"""The one resolved configuration every later stage consumes, with where each value came from."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from engine.diagnostics import Diagnostic
from engine.positions import Range
from engine.specs import ClusterSpec, ModelSpec, PipelineSchedule, RecomputePlan, RunOptions, Strategy

ConfigKind = Literal["train", "search"]
DimState = Literal["fixed", "list", "auto", "absent"]
DimOrigin = Literal["declared", "train.yaml", "default", "derived"]
RecomputeRequest = Literal["none", "selective", "full", "auto", "per_layer"]

# The searchable dimensions, in the order summaries print them (docs/formats.md §2 `parallelism`).
DIMENSIONS: tuple[str, ...] = (
    "dp", "fsdp", "tp", "pp", "cp", "ep", "etp", "vpp",
    "micro_batch_size", "micro_batch_num", "sequence_parallel",
)


@dataclass(frozen=True, slots=True)
class Location:
    """Where a value was written: which file, the key's range and the value's range."""

    file: str | None
    key: Range
    value: Range


@dataclass(frozen=True, slots=True)
class Dimension:
    """How one parallel dimension was declared. `values` is `(v,)` when fixed, the candidates for a list,
    and `()` when searched over its own bounds. sequence_parallel uses 0/1."""

    name: str
    state: DimState
    values: tuple[int, ...] = ()
    origin: DimOrigin = "default"
    location: Location | None = None

    @property
    def searched(self) -> bool:
        return self.state in ("auto", "absent") or (self.state == "list" and len(self.values) > 1)

    def summary(self) -> str:
        """One line as HyperParallel prints it: `tp: searched over [1, 2, 4, 8]`, `pp: fixed 4 (train.yaml)`."""
        if self.state == "fixed" and self.name == "etp" and self.values[0] == 0:
            return f"etp: follows tp ({self.origin})"  # HyperParallel's etp 0
        if self.state == "fixed":
            return f"{self.name}: fixed {self.values[0]} ({self.origin})"
        if self.state == "list":
            return f"{self.name}: searched over {list(self.values)}"
        if self.state == "auto":
            return f"{self.name}: searched (auto)"
        return f"{self.name}: searched (not declared)"


def _frozen_map(d: Mapping[str, object] | None = None) -> Mapping:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True, slots=True)
class Config:
    """A train.yaml or search config, resolved: model, cluster, dimensions, constraint and the stated run.

    `model` / `cluster` are None when the files do not determine them (diagnostics say why). `stated` is
    the strategy a train.yaml states when every degree is known (the one `hp-plan estimate` prices).
    `locations` maps a dotted path (`accelerator.tp_size`, `parallelism.tp`, `model.hidden_size`) to where
    it was written, so search refusals and hovers land on the right token.
    """

    kind: ConfigKind
    path: str | None
    model: ModelSpec | None
    cluster: ClusterSpec | None
    run: RunOptions = field(default_factory=RunOptions)
    dimensions: Mapping[str, Dimension] = field(default_factory=_frozen_map)
    global_batch_size: int | None = None
    memory_limit_gb: float | None = None
    recompute: RecomputeRequest = "none"
    stated_recompute: RecomputePlan = field(default_factory=RecomputePlan)
    # The modes recompute auto / per_layer choose among (HyperParallel's recompute_modes, estimator.recompute_modes
    # or a parallelism.recompute list), e.g. ("off", "full"); () = all three.
    recompute_modes: tuple[str, ...] = ()
    # offload (ext, [HP] §8.6): the host link, GB/s one direction, over which recompute per_layer may offload a
    # stage's first layers; 0 = no offload (not asked, or refused: engine.config.resolve says why).
    offload_gb_s: float = 0.0
    pipeline_schedule: PipelineSchedule = "1F1B"
    stated: Strategy | None = None
    # ZeRO-1 optimizer-state shard size the files state (accelerator.optimizer_weight_shard_size, a search
    # config's model.optimizer_weight_shard_size, else its train.yaml's); 1 = unsharded. Kept here and not
    # only in `stated` so the search, which has no stated strategy for a search config, prices it too.
    optimizer_shard: int = 1
    # Where the memory budget came from when no file states it (e.g. "setting hpLsp.memoryLimitGb",
    # "--memory-gb"); None when a file states it or the device's own memory is the budget.
    budget_source: str | None = None
    # The command-line flags that changed the device memory from what the files say (a what-if such as
    # "--device-type H200 --memory-gb 140"); None when they did not. A budget the files cap below it warns.
    device_what_if: str | None = None
    # The device memory is HyperParallel's default device's (HP303: no device type and no device memory stated,
    # by the files or the flags): a stated budget above it is not capped, as HyperParallel's own budget is the
    # minimum of the memory figures that are stated ([HP] §4.2, §5.9), and no HP409 is given against a guess.
    memory_assumed: bool = False
    train_yaml: str | None = None  # resolved path of the referenced train.yaml (search configs)
    model_file: str | None = None  # the local config.json the model's facts were read from (a read file)
    ratios_file: str | None = None  # resolved estimator.ratios_file (search configs; docs/formats.md §6)
    locations: Mapping[str, Location] = field(default_factory=_frozen_map)

    @property
    def budget_gib(self) -> float | None:
        """min(memory_limit_gb, device memory) over the positive ones (docs/formats.md §2); an assumed device's
        memory does not cap a stated budget (memory_assumed)."""
        device = self.cluster.memory_gib if self.cluster and not (self.memory_assumed and self.memory_limit_gb) \
            else None
        vals = [v for v in (self.memory_limit_gb, device) if v and v > 0]
        return min(vals) if vals else None

    def summary_lines(self) -> list[str]:
        return [self.dimensions[d].summary() for d in DIMENSIONS if d in self.dimensions]


def positive_number(value: float | int) -> float | None:
    """`value` as a finite positive float, else None: the rule every memory size from outside the files
    follows (`--memory-gb`, the editor's `deviceMemoryGb` / `memoryLimitGb`). JSON's `1e400` reads as infinity
    and a 400-digit integer does not fit a float; neither is a memory size."""
    try:
        number = float(value)
    except (OverflowError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


@dataclass(frozen=True, slots=True)
class ClusterOverrides:
    """Cluster facts from CLI flags or editor settings; they fill what the files leave unsaid."""

    devices: int | None = None
    num_nodes: int | None = None
    cards_per_node: int | None = None
    device_type: str | None = None
    memory_gb: float | None = None
    # Where memory_gb comes from, for messages about a budget no file states ("setting hpLsp.memoryLimitGb").
    memory_source: str | None = None
    # True when memory_gb is a budget imposed on the file (a search config's on its train.yaml), not a statement
    # of the device's memory size: it then never names a memory variant of the device (an H100 under a 94 GB
    # budget stays the 80 GB part it was resolved as, not the H100 NVL).
    memory_is_budget: bool = False
    # A memory budget per device from editor settings (hpLsp.memoryLimitGb): it fills constraint.memory_limit_gb
    # where no file states one, and like a stated one it only narrows the budget, min(it, device memory)
    # (Config.budget_gib, the rule `hp-plan` applies to a search config's limit): it never grows the device.
    memory_limit_gb: float | None = None
    memory_limit_source: str | None = None
    # True for flags typed on the command line: each given field then wins over the files (a user who types
    # `--devices 512` means it); False for editor settings, which only fill what the files leave unsaid.
    explicit: bool = False
    # The framework priced (docs/formats.md §5): --framework wins over estimator.framework (explicit), the setting
    # hpLsp.framework fills it only when the files state none.
    framework: str | None = None


@dataclass(frozen=True, slots=True)
class Loaded:
    """The result of reading a file: the config (None when unreadable) and every diagnostic found so far.
    `files` lists every file read (the search config and its train_yaml), for the server's dependency map."""

    config: Config | None
    diagnostics: tuple[Diagnostic, ...]
    files: tuple[str, ...] = ()
