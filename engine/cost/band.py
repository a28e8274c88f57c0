"""The error band: the range a measured step time and a measured peak should fall in about four times out of five.

Why: the model's error is not one number. It is ~3 % on dense runs of a stack and device it was fitted on, and
20-50 % on MoE on Ascend or a device no run was fitted on ([CAL] §10-§12). Every figure says which, and every
decision that used to take a constant margin (the search's near-ties, `compare`'s "within error", `apply`'s
threshold) reads its width from here: one band for one model.

How it is derived (docs/cost-model.md, "The error band"): from the model's own errors on the shown runs
(engine.cost.band_evidence, written by `benchmarks/accuracy.py --write-band`; where a constant was fitted on a
run, the run's error is its leave-one-out error, the constant refitted without it). Each row is a deviation
d = measured / priced − 1 of one run, tagged with its framework, device generation and plan features. A plan's
half-width is

    h = sqrt(base² + Σ_f feature_f²),

* base: the COVERAGE quantile of |d| over the plain rows (dense, short context, BF16) of the plan's framework on
  its device generation, when there are at least MIN_ROWS of them (with FEW_ROWS or fewer, not below the
  quantile of the framework's plain rows on every device, nor, where those are FEW_ROWS or fewer too, below
  every stack's plain rows); else over all its rows there (any features)
  when there are MIN_ROWS; else over its framework's plain rows on any device (every stack's where the framework
  has fewer than MIN_ROWS), widened by the first-contact term (what the model read on a device generation before
  any run on it was fitted, [CAL] §11) only where no run of the framework on the generation was priced: one or two
  such runs do not set a quantile, but they show the model has met the stack there;
* feature_f, per feature the plan has (MoE, long context, FP8, FP8 on a MoE model, overlapped expert
  all-to-alls, a device whose matmul rate is a stand-in; for the memory band also a pipeline, PIPELINE): the
  quantile of
  |d| over the rows with that feature in excess of the plain rows' quantile, sqrt(max(0, q_f² − q_plain²))
  (independent sources of error add in quadrature), read from the framework's own rows where it has more than
  FEW_ROWS with the feature, else from every stack's (a stack's two or three MoE runs, each the one its
  mechanisms were built on, say less about the next MoE model than every stack's MoE runs together); the
  first-contact term where no row has the feature (no run checked the mechanism);
* the first-contact term once more for each way the plan's shape lies beyond its feature's rows of the framework
  (every stack's where it has none): a MoE model narrower (hidden size) than every MoE row, since the work a
  MoE layer does beside its GEMMs (routing, permutation, the all-to-all, element-wise passes over every routed
  copy) is linear in h per token and the GEMMs' is h times a width, so a narrower model spends more of its
  step where the runs never priced it; a long context longer than every long-context row, since attention's
  work per token grows with the sequence while the rest does not, so a longer one is set by the attention
  kernel's rate at lengths no run showed; context parallelism by an algorithm no row's CP used (ring,
  Ulysses all-to-all, hybrid, all-gather: each moves and overlaps its bytes its own way; one term at any
  degree), or over more ranks than every row's with the same algorithm (the framework's rows of any feature,
  else every stack's), since each rank added is one more exchange, merge and partial block per layer, in the
  forward and again in the backward, a regime the runs' groups of at most that many ranks never showed. That
  last term is one plan's alone (own_terms): two plans that differ in it do not share its error, so their pair
  band carries it (pair_spread).

The same derivation on the memory rows gives the peak's band (its envelope read from the memory rows: their
rings reach CP 8); the basis says the step's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from engine.cost import band_evidence as E

# The share of measured values the band should hold ("about four times out of five").
COVERAGE = 0.8
# Fewer rows than this cannot state an 80 % quantile (with 3 rows it is between the second and third).
MIN_ROWS = 3
# An 80 % quantile of this many rows or fewer sits between the two or three largest of them and reads low as often
# as not; such a base is not taken below its framework's wider pool (_Pool.wider), nor, where that is this few
# too, below every stack's plain rows (_Pool.every).
FEW_ROWS = 10
# A plan's features, as the rows are tagged: an MoE model, a trained sequence of LONG_CONTEXT tokens or more,
# FP8 GEMMs on a device that has them, the expert all-to-alls overlapped with compute (`moe_a2a_overlap` where the
# stack offers it: priced from its source's statement or one measured share, engine.cost.communication.ep_exposed),
# a device whose achievable matmul rate no measurement on that part gives (its catalog row marks
# `matmul_efficiency` unconfirmed and prices a stand-in: GB300 takes GB200's;
# engine.catalog.devices.matmul_rate_measured),
# and FP8 on a MoE model: its own mechanism, not the sum of the two (the experts' grouped GEMMs in FP8, each
# expert's tokens padded to the quantisation's alignment, the dispatched copies cast per expert), which the FP8
# rows (dense models) and the MoE rows (BF16) never exercised together.
MOE, LONG_CONTEXT, FP8, A2A_OVERLAP = "moe", "long_context", "fp8", "a2a_overlap"
UNMEASURED_DEVICE, MOE_FP8 = "unmeasured_device", "moe_fp8"
# A pipelined plan (pp > 1), a feature of the memory band only and of one plan rather than of its model (read from
# the plan's Shape, as its context parallelism is): its peak stage holds the micro-batches in flight of its
# schedule and the layers its split gives it, an accounting the unpipelined rows never exercise. Left out in turn,
# the memory band held 76 % of the measured peaks without it, the pipelined runs (Llama 3.1 405B at pp 8 on
# torchtitan, +9.6 % and +12.7 %; Llama 3 70B at pp 4 on Megatron, −11.8 %) missing against the ±1.7 % of
# unpipelined 8B runs; with it 86 % (docs/cost-model.md §10). The step band does not read it: the step rows are
# pipelined and not alike, and their scatter is in the base.
PIPELINE = "pipeline"
FEATURES: tuple[str, ...] = (MOE, LONG_CONTEXT, FP8, MOE_FP8, A2A_OVERLAP, UNMEASURED_DEVICE)
# Features that change only the step time (an overlap moves no bytes the device holds, as priced; a stand-in GEMM
# rate moves none either; FP8 on a MoE model holds what FP8 and MoE each hold, which their own rows checked, and
# runs kernels of its own): the memory band does not read them.
TIME_ONLY: frozenset[str] = frozenset({A2A_OVERLAP, UNMEASURED_DEVICE, MOE_FP8})
# How the basis names a feature where its key alone would not say it (the others: the key, spaced).
FEATURE_LABELS: dict[str, str] = {MOE_FP8: "fp8 on a moe model",
                                  UNMEASURED_DEVICE: "a stand-in matmul rate, none measured on this device"}
# Features of the device rather than of the plan: every plan on it shares their error, so calibration reads it as
# the stack's bias (engine.calibrate.fit.plan_feature_spread), and a plan already paying first contact for its
# device generation does not pay it again for the device.
DEVICE_FEATURES: frozenset[str] = frozenset({UNMEASURED_DEVICE})
# Long context from 32K tokens: the shortest of [CAL] §11's long-context runs (Mixtral 8x22B at 32K); the
# kernels' and ring's behaviour there is what the shorter runs never show.
LONG_CONTEXT_TOKENS = 32768
# First contact: the deviations (measured / priced − 1) the model read on a device generation before any run on it
# was fitted, [CAL] §11's "before anything was fitted" errors e = priced / measured − 1 of GB200 dense −17 %,
# B200 FP8 −16 %, GB200 Qwen3-235B −3 % and torchtitan on A100 +47 % (a stack first seen on that generation),
# as d = 1 / (1 + e) − 1. What a plan on a generation with no fitted run of its stack may be off by.
FIRST_CONTACT: tuple[float, ...] = tuple(1 / (1 + e) - 1 for e in (-0.17, -0.16, -0.03, 0.47))


@dataclass(frozen=True, slots=True)
class Shape:
    """What the band's evidence envelope reads of a plan (the module docstring's last rule): a MoE model's hidden
    size (0: a dense model, or not said), the trained sequence length (0: not said), the context-parallel
    degree (1: none, or not said) and its algorithm (engine.specs.RunOptions.cp_algo), and whether the plan
    offloads layers' activations to the host (RecomputePlan.offload)."""

    moe_hidden: int = 0
    seq_len: int = 0
    cp: int = 1
    cp_algo: str = "ring"
    offload: bool = False
    # A hybrid model's Mamba layers (engine.specs.HybridLayers): no row has them.
    hybrid: bool = False
    # The pipeline-parallel degree (1: none, or not said): the memory band's PIPELINE feature.
    pp: int = 1


@dataclass(frozen=True, slots=True)
class Spread:
    """Relative half-widths (fractions) of the step-time and peak-memory bands, and what set them."""

    step: float
    memory: float
    basis: tuple[str, ...]

    def step_range(self, step_s: float) -> tuple[float, float]:
        return (step_s * (1 - self.step), step_s * (1 + self.step))

    def memory_range(self, peak_gib: float) -> tuple[float, float]:
        return (peak_gib * (1 - self.memory), peak_gib * (1 + self.memory))


def quantile(values: Sequence[float], q: float = COVERAGE) -> float:
    """The q-quantile of `values` (linear interpolation between order statistics); 0 for none."""
    xs = sorted(values)
    if not xs:
        return 0.0
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def band_features(*, moe: bool, seq_len: int, fp8: bool, a2a_overlap: bool = False,
                  unmeasured_device: bool = False) -> tuple[str, ...]:
    """The band's features of a plan (FEATURES order)."""
    flags = {MOE: moe, LONG_CONTEXT: seq_len >= LONG_CONTEXT_TOKENS, FP8: fp8, MOE_FP8: moe and fp8,
             A2A_OVERLAP: moe and a2a_overlap, UNMEASURED_DEVICE: unmeasured_device}
    return tuple(f for f in FEATURES if flags[f])


def band_shape(*, moe: bool, hidden: int, seq_len: int, cp: int = 1, cp_algo: str = "ring",
               offload: bool = False, hybrid: bool = False, pp: int = 1) -> Shape:
    """The band's Shape of a plan: the hidden size counts for a MoE model only."""
    return Shape(moe_hidden=hidden if moe else 0, seq_len=seq_len, cp=cp, cp_algo=cp_algo, offload=offload,
                 hybrid=hybrid, pp=pp)


def _abs(rows: Iterable[E.Row]) -> list[float]:
    return [abs(r.deviation) for r in rows]


@dataclass(frozen=True, slots=True)
class _Pool:
    """The rows a plan's base is read from; `wider`: its framework's plain rows on every device (every stack's
    where it has fewer than MIN_ROWS), the floor of a quantile read from FEW_ROWS or fewer; `every`: every stack's
    plain rows, the floor where `wider` is FEW_ROWS or fewer too (a stack with three shown runs cannot say that
    its next run lands closer than every stack's do); `met`: whether the framework's own runs on the plan's
    device generation were priced (without, the first-contact term)."""

    rows: tuple[E.Row, ...]
    wider: tuple[E.Row, ...]
    every: tuple[E.Row, ...]
    met: bool
    label: str


def _pool(rows: Sequence[E.Row], framework: str, generation: str) -> _Pool:
    """The module docstring's base rows: the framework's plain rows on the generation, else all its rows there,
    else its plain rows on any device, else every stack's."""
    plain = tuple(r for r in rows if not r.features)
    here = tuple(r for r in rows if r.framework == framework and r.generation == generation)
    own = tuple(r for r in here if not r.features)
    stack = tuple(r for r in plain if r.framework == framework)
    wider = stack if len(stack) >= MIN_ROWS else plain
    if len(own) >= MIN_ROWS:
        return _Pool(own, wider, plain, True, f"{framework} on {generation}: {len(own)} runs")
    if len(here) >= MIN_ROWS:
        return _Pool(here, wider, plain, True, f"{framework} on {generation}: {len(here)} runs of every kind")
    return _Pool(wider, wider, plain, bool(here) and wider is stack,
                 f"{framework if wider is stack else 'every stack'} ({len(wider)} runs): {len(here)} {framework} "
                 f"runs on {generation or 'this device'}")


def _first_contact() -> float:
    """The first-contact term: the COVERAGE quantile of FIRST_CONTACT's deviations."""
    return quantile([abs(d) for d in FIRST_CONTACT])


def _half_width(rows: Sequence[E.Row], framework: str, generation: str,
                features: Sequence[str], shape: Shape) -> tuple[float, list[str]]:
    """(h, what set it) over one kind of rows (step or memory), the module docstring's rule."""
    pool = _pool(rows, framework, generation)
    base = quantile(_abs(pool.rows))
    basis = [pool.label]
    if len(pool.rows) <= FEW_ROWS:
        base = max(base, quantile(_abs(pool.wider)))
        if len(pool.wider) <= FEW_ROWS:
            every = quantile(_abs(pool.every))
            if every >= base:
                base = every
                basis[0] += f" (not below every stack's {len(pool.every)} plain runs)"
    if not pool.met:
        base = math.hypot(base, _first_contact())
        basis[0] += f" (first contact +{100 * _first_contact():.0f}%)"
        features = [f for f in features if f not in DEVICE_FEATURES]  # the generation's first contact covers it
    extra = 0.0
    for f in features:
        term, n = _feature_term(rows, framework, f)
        extra += term ** 2
        basis.append(f"{FEATURE_LABELS.get(f, f.replace('_', ' '))} ({n} run{'s' if n != 1 else ''}, "
                     f"+{100 * term:.0f}%)")
    for beyond in _beyond_evidence(rows, framework, features, shape):
        extra += _first_contact() ** 2
        basis.append(f"{beyond}: first contact +{100 * _first_contact():.0f}%")
    return math.sqrt(base ** 2 + extra), basis


def _beyond_evidence(rows: Sequence[E.Row], framework: str, features: Sequence[str], shape: Shape) -> list[str]:
    """What of the plan's shape lies beyond every row of its feature that the framework was checked on (every
    stack's rows where it has none): a MoE model narrower than the narrowest, a long context longer than the
    longest, context parallelism by an algorithm none used or over more ranks than the widest (the module
    docstring's last rule); each said plainly."""
    out = []
    if MOE in features and shape.moe_hidden > 0:
        narrowest = min(_checked(rows, framework, MOE, "hidden") or [0])
        if shape.moe_hidden < narrowest:
            out.append(f"moe at hidden {shape.moe_hidden}, narrower than any MoE run it was checked on ({narrowest})")
    if LONG_CONTEXT in features and shape.seq_len > 0:
        longest = max(_checked(rows, framework, LONG_CONTEXT, "seq_len") or [0])
        if shape.seq_len > longest > 0:
            out.append(f"{shape.seq_len:,} tokens, longer than any long-context run it was checked on ({longest:,})")
    if shape.hybrid:  # the Mamba mixers are priced from their FLOPs and saved tensors, never against a measured run
        out.append("hybrid Mamba layers, which no run it was checked on had")
    return out + list(_own_beyond(rows, framework, shape))


def _own_beyond(rows: Sequence[E.Row], framework: str, shape: Shape) -> tuple[str, ...]:
    """The envelope terms one plan of a model carries and another of the same model need not: its context
    parallelism and its host offload beyond the `rows` (own_terms reads them over the step rows)."""
    return tuple(x for x in (_beyond_cp(rows, framework, shape), _beyond_offload(rows, shape)) if x)


def _beyond_offload(rows: Sequence[E.Row], shape: Shape) -> str:
    """The plan's host offload where no row of any stack offloaded: its copies' overlap and the memory they free
    were never checked against a measured run; "" where a row did or the plan offloads nothing."""
    if not shape.offload or any(r.offload for r in rows):
        return ""
    return "activations offloaded to the host, which no run it was checked on did"


def _beyond_cp(rows: Sequence[E.Row], framework: str, shape: Shape) -> str:
    """The plan's context parallelism where no row checked it: an algorithm no row with CP used (one term, at
    any degree), or more ranks than every row with the same algorithm (the framework's, else every stack's);
    "" where the rows cover it or the plan has none."""
    if shape.cp <= 1:
        return ""
    same = [r for r in rows if r.cp > 1 and r.cp_algo == shape.cp_algo]
    if not same:
        return f"context parallelism by {shape.cp_algo}, which no run it was checked on used"
    widest = max([r.cp for r in same if r.framework == framework] or [r.cp for r in same])
    if shape.cp <= widest:
        return ""
    return f"context parallelism ({shape.cp_algo}) over {shape.cp} ranks, more than any run it was checked on ({widest})"


def _checked(rows: Sequence[E.Row], framework: str, feature: str, field: str) -> list[int]:
    """The `field` values (hidden, seq_len) of the framework's rows with `feature`, else every stack's."""
    every = [getattr(r, field) for r in rows if feature in r.features and getattr(r, field) > 0]
    own = [getattr(r, field) for r in rows
           if feature in r.features and getattr(r, field) > 0 and r.framework == framework]
    return own or every


@lru_cache(maxsize=64)
def ordering_spread(framework: str, generation: str) -> float:
    """The half-width within which one plan's step time is not known to differ from another's of the same model
    on the same stack and device. Why not the whole band: what two such plans share (the stack's and device's
    bias, the first-contact term, the model's features) moves both alike and cancels in their ratio; what is
    left is the scatter between plans of one model. Read from the rows that show it: groups of two or more rows
    of one model, stack and generation, each row's |d − the group's mean| · sqrt(n / (n − 1)) (unbiased for a
    group of n); the framework's own generation where it has MIN_ROWS such rows, else every stack's groups."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in E.STEP_ROWS:
        groups.setdefault((r.model, r.framework, r.generation), []).append(r.deviation)
    scatter: dict[tuple[str, str], list[float]] = {}
    for (_, fw, gen), ds in groups.items():
        if len(ds) >= 2:
            mean, n = statistics.mean(ds), len(ds)
            scatter.setdefault((fw, gen), []).extend(abs(d - mean) * math.sqrt(n / (n - 1)) for d in ds)
    own = scatter.get((framework, generation), [])
    return quantile(own if len(own) >= MIN_ROWS else [x for v in scatter.values() for x in v])


def clear_cache() -> None:
    """Forget the remembered bands (after the evidence module was rewritten and reloaded)."""
    _spread.cache_clear()
    ordering_spread.cache_clear()
    own_terms.cache_clear()


def pair_spread(a: float, b: float, own: int = 0) -> float:
    """The half-width of the ratio of two plans' figures, each with ordering spread a and b (independent
    scatter adds in quadrature), and `own` terms only one of the two carries (own_difference), each the
    first-contact term: what cancels between two plans of one model is what they share, and a context
    parallelism no run checked is one plan's alone."""
    return math.sqrt(a * a + b * b + own * _first_contact() ** 2)


@lru_cache(maxsize=1024)
def own_terms(framework: str, shape: Shape) -> tuple[str, ...]:
    """The envelope terms of a plan that another plan of the same model on the same stack and device need not
    share (its context parallelism and its host offload beyond the evidence, step rows), as its basis says them."""
    return _own_beyond(E.STEP_ROWS, framework, shape)


def own_difference(a: Sequence[str], b: Sequence[str]) -> int:
    """How many own terms one of two plans carries and the other does not (a ring of 4 and one of 8: two)."""
    return len(set(a) ^ set(b))


def own_lead(fastest: Sequence[str], other: Sequence[str]) -> int:
    """How many own terms the faster of two plans carries and the other does not: what its lead rests on that no
    run checked (engine.cost.equivalence's near-ties)."""
    return len(set(fastest).difference(other))


def _feature_term(rows: Sequence[E.Row], framework: str, feature: str) -> tuple[float, int]:
    """(the feature's excess spread, the rows it is read from): the framework's own rows with the feature against
    its plain rows where it has more than FEW_ROWS of them, else every stack's (the module docstring's rule); the
    first-contact term where no run of any stack has it (nothing checked the mechanism)."""
    stack = [r for r in rows if r.framework == framework]
    pool = stack if sum(feature in r.features for r in stack) > FEW_ROWS else list(rows)
    with_f = [r for r in pool if feature in r.features]
    plain = [r for r in pool if not r.features]
    if not with_f:
        return _first_contact(), 0
    return math.sqrt(max(0.0, quantile(_abs(with_f)) ** 2 - quantile(_abs(plain)) ** 2)), len(with_f)


def relative_spread(framework: str, generation: str, features: Sequence[str] = (),
                    shape: Shape = Shape()) -> Spread:
    """The model's relative error spread (half-widths at COVERAGE) for a framework on a device generation with
    the given plan features (FEATURES) and shape (what the evidence envelope compares; Shape() says nothing).
    Also the prior spread a calibration of one part may start from."""
    return _spread(framework, generation, tuple(features), shape)


@lru_cache(maxsize=1024)
def _spread(framework: str, generation: str, features: tuple[str, ...], shape: Shape) -> Spread:
    """relative_spread, remembered: the evidence is fixed for the process (benchmarks/accuracy.py clears it after
    rewriting the evidence), and a search asks for the same few bands once per ranked plan."""
    return spread_from(E.STEP_ROWS, E.MEMORY_ROWS, framework, generation, features, shape)


def spread_from(step_rows: Sequence[E.Row], memory_rows: Sequence[E.Row], framework: str, generation: str,
                features: Sequence[str] = (), shape: Shape = Shape()) -> Spread:
    """relative_spread derived from the given evidence rather than the committed one: what
    benchmarks/accuracy.py uses to check the band on a run it was not derived from (each run left out in turn)."""
    step, basis = _half_width(step_rows, framework, generation, features, shape)
    memory_features = tuple(f for f in features if f not in TIME_ONLY) + ((PIPELINE,) if shape.pp > 1 else ())
    memory, _ = _half_width(_pipelined(memory_rows), framework, generation, memory_features, shape)
    return Spread(step, memory, tuple(basis))


def _pipelined(rows: Sequence[E.Row]) -> tuple[E.Row, ...]:
    """The memory rows with PIPELINE among the features of the pipelined ones (pp > 1), as spread_from reads a
    plan's."""
    return tuple(r._replace(features=(*r.features, PIPELINE)) if r.pp > 1 else r for r in rows)


def covers(spread: float, priced: float, measured: float) -> bool:
    """The measured value lies inside the priced value's band of half-width `spread`."""
    return priced * (1 - spread) <= measured <= priced * (1 + spread)
