"""Priced results: what `hp-plan estimate` and `hp-plan search` print and the server shows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from engine.diagnostics import Diagnostic
from engine.specs import HOST_PART, PipelineLayout, Ratios, RunOptions, Strategy, noop_text

MEMORY_TERMS: tuple[str, ...] = ("parameters", "gradients", "optimizer", "activations", "buffers", "reserved")
# Which FLOP count `mfu` uses (docs/formats.md §3 `mfu_convention`); `causal_mfu` halves the attention s² term.
MFU_CONVENTION = ("model FLOPs per token, forward + backward, no recompute, attention not halved for causal "
                  "masking (Megatron's counter, KOR22 Eq. 7), over the device's dense BF16 peak")
MFU_LABEL = "MFU (model FLOPs, non-causal, of the BF16 peak)"
TIME_TERMS: tuple[str, ...] = (
    "compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "dp_comm", "pp_bubble", "pp_p2p", "optimizer",
)


@dataclass(frozen=True, slots=True)
class Stages:
    """One plan stage by stage, as its single pricing found it (engine.cost.estimate): the layers each stage
    holds, each memory term (MEMORY_TERMS, GiB) and each part of its per-micro-batch time (the pricing's
    stage_time_parts, seconds) per stage. Carried so the per-stage table and `explain` read the pricing that made
    the estimate instead of a second one."""

    layers: tuple[int, ...]
    memory: Mapping[str, tuple[float, ...]]
    time_parts: Mapping[str, tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class ReleasePrice:
    """A plan priced as older releases of its framework run it (engine.cost.release_spread): `versions` (oldest
    first) share one set of facts and lack `lacks` of the current release's; `since` is the release after them,
    which brought what they lack beyond the releases newer than them."""

    versions: tuple[str, ...]
    since: str
    lacks: tuple[str, ...]
    step_time_s: float
    peak_memory_gib: float

    def to_json(self) -> dict[str, Any]:
        return {"releases": list(self.versions), "since": self.since, "lacks": list(self.lacks),
                "step_time_s": self.step_time_s,
                "peak_memory_gib": self.peak_memory_gib}


@dataclass(frozen=True, slots=True)
class ReleaseSpread:
    """A stated plan at its stack's older releases (engine.cost.release_spread): `prices`, newest first, for the
    releases that run what the files state; `refused_before` the release before which none does (an option the
    files state that an older release lacks: stating that release gets HP530 / HP531 / HP533 / HP535, and its
    price would not be this plan's), "" when every older release runs it."""

    prices: tuple[ReleasePrice, ...] = ()
    refused_before: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"prices": [p.to_json() for p in self.prices], "refused_before": self.refused_before}


@dataclass(frozen=True, slots=True)
class Estimate:
    """One priced strategy (docs/formats.md §3 `estimate`). Memory in GiB; times in seconds; mfu in 0..1.
    `memory_breakdown_gib` is the breakdown of the peak (worst) stage."""

    strategy: Strategy
    fits: bool
    budget_gib: float
    peak_memory_gib: float
    stage_memory_gib: tuple[float, ...]
    memory_breakdown_gib: Mapping[str, float]
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_device: float
    mfu: float
    time_breakdown_s: Mapping[str, float]
    diagnostics: tuple[Diagnostic, ...] = ()
    calibration: Ratios | None = None  # the ratios file applied (docs/formats.md §3: "calibration")
    framework: str = ""  # the framework priced (docs/formats.md §5)
    framework_release: str = ""  # its release priced (estimator.framework_version, else its current one; "" = none)
    device: str = ""  # the catalog device priced
    causal_mfu: float = 0.0
    calibrated_framework: bool = False  # the framework's constants were checked on published runs
    # The step's parts (engine.specs.PRICED_PARTS -> seconds per step, engine.cost.step_parts): time_breakdown_s split
    # further (GEMM / attention / element-wise, each collective per link class); they add up to step_time_s.
    time_parts_s: Mapping[str, float] = field(default_factory=dict)
    host_launches: float = 0.0  # launch units per step (engine.cost.step_parts.host_launches); not in the JSON
    # The pipeline layout the search chose for this plan where the files state none (engine.search.passes: the
    # embedding and loss counted in the split, or no-op layers padding it, where the stack offers them); None =
    # the run's own.
    pipeline_layout: PipelineLayout | None = None
    # The recompute modules `selective` recomputes in this plan, where the search chose them
    # (`recompute_modules: auto`, engine.search.modules); () = as the files state.
    recompute_modules: tuple[str, ...] = ()
    # A multimodal model's vision tower (engine.cost.tower): {"layers", "visual_seq_len", "stage": 0, "memory_gib",
    # "time_s"}, what it holds on stage 0 and its seconds per step there (both inside the breakdowns); None: text only.
    vision_tower: Mapping[str, float] | None = None
    # Offload ([HP] §8.6, engine.cost.offload): per offloaded range of the plan ("first-last", as
    # strategy.recompute.layers names it), the GiB each of its layers moves to the host per micro-batch; None when
    # the plan offloads nothing.
    offloaded_gib: Mapping[str, float] | None = None
    # The share of the peak stage's activation memory offload moves off the device ([HP] §4.1 offloaded_share).
    offloaded_share: float | None = None
    # How the stack runs that offload (engine.catalog.frameworks.StackSpace.offload): "layers" (Megatron-Core's
    # --cpu-offloading-num-layers, stated and run) or "per_layer" (HyperParallel's search choice, which its
    # trainer does not run yet).
    offload_route: str = ""
    # The error band (engine.cost.band): relative half-widths of the step time and the peak the measured values
    # should fall in about four times out of five, the plan features that widened them and what set them.
    step_spread: float = 0.0
    memory_spread: float = 0.0
    # The part of the step band that does not cancel between two plans of one model on one stack and device
    # (engine.cost.band.ordering_spread): what the search's near-ties, `compare` and `apply` read.
    order_spread: float = 0.0
    band_features: tuple[str, ...] = ()
    band_basis: tuple[str, ...] = ()
    # What of the plan's band its own plan alone may carry, which two plans of one model do not share (its context
    # parallelism beyond the evidence, engine.cost.band.own_terms): a pair differing in them adds first contact
    # per term (engine.cost.band.pair_spread).
    own_terms: tuple[str, ...] = ()
    # Where the files state no release of a framework that has releases: the plan as each older set of its facts
    # prices it (engine.cost.release_spread, HP536); None otherwise and for every plan a search ranks.
    other_releases: ReleaseSpread | None = None
    # Every stage's layers, memory and time where the plan was priced on its own (engine.cost.estimate); None for
    # the rows a search turns into estimates.
    stages: Stages | None = None

    @property
    def step_time_range_s(self) -> tuple[float, float]:
        return (self.step_time_s * (1 - self.step_spread), self.step_time_s * (1 + self.step_spread))

    @property
    def peak_memory_range_gib(self) -> tuple[float, float]:
        return (self.peak_memory_gib * (1 - self.memory_spread), self.peak_memory_gib * (1 + self.memory_spread))

    @property
    def step_band(self) -> str:
        """'± 6%': the step time's band (engine.cost.band), as every front end prints it after the figure."""
        return f"± {100 * self.step_spread:.0f}%"

    @property
    def memory_band(self) -> str:
        return f"± {100 * self.memory_spread:.0f}%"

    def short(self) -> str:
        """The strategy's one-line form, and the pipeline layout when the search chose one."""
        layout = self.layout_text()
        return self.strategy.short() + (f" · {layout}" if layout else "")

    def layout_text(self) -> str:
        """The pipeline layout the search chose, in words ("" where the plan runs the files' own)."""
        lay = self.pipeline_layout
        if lay is None:
            return ""
        if lay.noop_layers:
            return f"noop layers {noop_text(lay.noop_layers)}"
        return "emb+loss in pp split" if lay.embedding_in_split or lay.loss_in_split else ""

    def priced_run(self, run: RunOptions) -> RunOptions:
        """`run` (the files' options) as this plan was priced: with the pipeline layout and the recompute modules
        the search chose for it, where it chose them. What prices or exports the plan again (explain, its bound,
        export) starts from this, or it describes a plan the search did not price."""
        if self.pipeline_layout is not None:
            run = replace(run, pipeline_layout=self.pipeline_layout)
        return replace(run, recompute_modules=self.recompute_modules) if self.recompute_modules else run

    def calibration_note(self) -> str:
        """One line saying whether and how the numbers are calibrated (every output says so)."""
        c = self.calibration
        if c is None:
            return "uncalibrated (fit ratios on your own runs with hp-plan calibrate)"
        host = (f", host time {self.time_parts_s.get(HOST_PART, 0.0):.4g} s per step ({self.host_launches:g} launch "
                f"units)" if c.host_s_per_launch > 0 else "")
        return f"calibrated on {c.runs} run{'s' if c.runs != 1 else ''} from {c.file}{host}"

    def _calibration_json(self) -> dict[str, Any] | None:
        """The `calibration` object: the ratios file and runs, and where a host part applies
        (engine.specs.HOST_PART) its seconds per launch unit and this plan's host seconds."""
        c = self.calibration
        if c is None:
            return None
        if c.host_s_per_launch <= 0:
            return c.to_json()
        return {**c.to_json(), "host_s_per_launch": c.host_s_per_launch,
                "host_s": self.time_parts_s.get(HOST_PART, 0.0), "host_launches": self.host_launches}

    @property
    def priced_for(self) -> str:
        """What the numbers price, said plainly: "torchtitan on H100-96G", and whether they are calibrated
        (a ratios file), checked on published runs, or can be calibrated (hp-plan calibrate, docs/formats.md §6)."""
        release = f" {self.framework_release}" if self.framework_release else ""
        what = f"{self.framework or '?'}{release} on {self.device or '?'}"
        if self.calibration is not None:
            return f"{what}, {self.calibration_note()}"
        if self.calibrated_framework:
            return f"{what} (framework checked on published runs; `hp-plan calibrate` fits your own)"
        return f"{what} (uncalibrated framework: measure a run and fit it with `hp-plan calibrate`)"

    @property
    def verdict(self) -> str:
        """`fits | marginal | does not fit` (docs/formats.md §3): `fits` when the peak is within the budget; over
        it, the peak's own error band (peak_memory_range_gib, the one band every figure carries:
        engine.cost.band) decides: `marginal` while the band's low end is within the budget (it may fit), `does
        not fit` only when even the low end is over it. A plan is called out of memory only as far as the model
        knows its memory."""
        b = self.budget_gib
        if not b or b != b or b == float("inf"):
            return "fits" if self.fits else "does not fit"
        if self.peak_memory_gib <= b:
            return "fits"
        return "does not fit" if self.peak_memory_range_gib[0] > b else "marginal"

    @property
    def verdict_text(self) -> str:
        """The memory verdict as the terminal prints it after the budget: a marginal plan is over the budget, so
        the text says so rather than "fits" (its JSON `fits` stays true, docs/formats.md §3)."""
        return {"fits": "fits", "marginal": "MARGINAL (over the budget, within the estimate's band: it may fit)"}.get(
            self.verdict, "DOES NOT FIT")

    def fit_words(self, strong: Callable[[str], str] = str.upper) -> str:
        """The same verdict in the few words an editor has room for, budget included: "fits 80 GiB", "over 80 GiB,
        MAY fit", "does NOT fit 80 GiB". `strong` marks the word that makes a verdict doubtful or failing (upper
        case in a code lens, markdown bold in a hover), so both say it alike."""
        b = f"{self.budget_gib:.0f} GiB"
        return {"fits": f"fits {b}", "marginal": f"over {b}, {strong('may')} fit"}.get(
            self.verdict, f"does {strong('not')} fit {b}")

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy.to_json(),
            "fits": self.fits,
            "budget_gib": self.budget_gib,
            "peak_memory_gib": self.peak_memory_gib,
            "stage_memory_gib": list(self.stage_memory_gib),
            "memory_breakdown_gib": {k: self.memory_breakdown_gib[k] for k in MEMORY_TERMS},
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
            "mfu": self.mfu,
            "time_breakdown_s": {k: self.time_breakdown_s[k] for k in TIME_TERMS},
            "framework": self.framework,
            "framework_release": self.framework_release,
            "device": self.device,
            "mfu_convention": MFU_CONVENTION,
            "causal_mfu": self.causal_mfu,
            "verdict": self.verdict,
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "calibration": self._calibration_json(),
            "pipeline_layout": self.pipeline_layout.to_json() if self.pipeline_layout is not None else None,
            **({"recompute_modules": list(self.recompute_modules)} if self.recompute_modules else {}),
            **({"vision_tower": dict(self.vision_tower)} if self.vision_tower is not None else {}),
            **({"offloaded_gib": dict(self.offloaded_gib)} if self.offloaded_gib else {}),
            **({"offloaded_share": self.offloaded_share} if self.offloaded_gib and self.offloaded_share is not None
               else {}),
            **({"other_releases": self.other_releases.to_json()} if self.other_releases is not None else {}),
            "step_time_range_s": list(self.step_time_range_s),
            "peak_memory_range_gib": list(self.peak_memory_range_gib),
            "error_band": {"step": self.step_spread, "memory": self.memory_spread, "order": self.order_spread,
                           "features": list(self.band_features), "basis": list(self.band_basis)},
        }

    def offload_note(self) -> str | None:
        """What the front ends say of an offloaded plan ([HP] §4.2's CLI line): which layers, how much they move,
        and that apply writes the fastest plan without it instead. None when the plan offloads nothing."""
        if not self.offloaded_gib:
            return None
        moved = ", ".join(f"{k} ({v:.2f} GiB per layer per micro-batch)" for k, v in self.offloaded_gib.items())
        share = (f", {100 * self.offloaded_share:.0f}% of the peak stage's activation memory"
                 if self.offloaded_share else "")
        if self.offload_route == "layers":
            return (f"Offloaded to the host as {self.framework} runs --cpu-offloading-num-layers: layers "
                    f"{moved}{share}; the copies' wait beyond the compute under them is in recompute")
        return (f"Offloaded to the host, priced as offload should run: layers {moved}{share}. The trainer has no "
                "key for this offload, so apply writes the fastest plan without it (engine.search.written)")


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The outcome of a search (docs/formats.md §3 `search`). `best` is None when nothing fits; `refused` counts
    candidates by reason; `diagnostics` carry the refusals positioned at the offending list or value.
    `unpriced` counts candidates the search proved slower than its K-th best without pricing them (their
    memory is unknown): `feasible` + `over_budget` + `unpriced` = `evaluated`."""

    best: Estimate | None
    top: tuple[Estimate, ...]
    evaluated: int
    feasible: int
    elapsed_s: float
    dimensions: Mapping[str, str]
    refused: Mapping[str, int] = field(default_factory=dict)
    over_budget: int = 0
    diagnostics: tuple[Diagnostic, ...] = ()
    # Per `top` entry: within `band` (a fraction of the fastest step time) of the fastest, hence ranked by
    # simplicity rather than speed (engine.cost.equivalence).
    equivalent: tuple[bool, ...] = ()
    band: float | None = None
    unpriced: int = 0
    # How far above the fastest plan found the slowest plan it ties with lies (engine.cost.equivalence.Ranked.reach;
    # the fastest need not be shown: ties rank simplest first and `top` cuts them).
    reach: float = 0.0
    # Per `top` entry: the degrees the plans it stands for differ in and their values (engine.search.distinct:
    # plans of one shape collapse into one row); an empty mapping where the row stands alone.
    variants: tuple[Mapping[str, tuple[Any, ...]], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "best": self.best.to_json() if self.best else None,
            "top": [e.to_json() for e in self.top],
            "equivalent": list(self.equivalent),
            "equivalence_band": self.band,
            "evaluated": self.evaluated,
            "feasible": self.feasible,
            "elapsed_s": self.elapsed_s,
            "dimensions": dict(self.dimensions),
            "refused": dict(self.refused),
            "over_budget": self.over_budget,
            "unpriced": self.unpriced,
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "variants": [{k: list(v) for k, v in m.items()} for m in self.variants],
        }
