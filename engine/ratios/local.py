"""The `local` rule: a stack bias plus a plan-specific part, fitted by one Gaussian algebra (docs/calibration.md).

Model (engine.ratios.prior states every figure): the log-residual of the moved parts of a run at plan x is
r(x) = b + g(x) + u(x) + noise: b the stack bias; g a Gaussian process over the log2 plan features (σ_g², kernel
k), what the model gets wrong about a kind of plan and shares with plans like it; u(x) ~ N(0, o(x)²) what belongs
to that plan alone, its spread o(x) larger where more of the priced step is exposed communication or the step is
short against a fixed per-step overhead (prior.own_spread). Two explanations of the runs are compared by their
marginal likelihood times their prior:
  H0 "the stack prices as the model was fitted" (b = 0): r ~ N(0, Σ0), Σ0 = σ_g² K + O + σ_n² I, O_ij = o² of
     their plan where runs i and j are of one plan (u belongs to the plan: _shared_own), else 0;
  H1 "the stack is biased" (b ~ N(0, σ_B²)):         r ~ N(0, Σ0 + σ_B² 11ᵀ).
Under the more probable one the posterior mean of r at any plan x is c(x)ᵀ Σ⁻¹ r, with c(x)_i = [σ_B²] +
σ_g² k(x, a_i) + o_i² [x = a_i]: a stack-wide part b̂ = σ_B² Σ_i α_i (0 under H0), a local part
Σ_i σ_g² α_i k(x, a_i) and an own part o_i² α_i at the run's own plan, α = Σ⁻¹ r. An anchor is reproduced (up
to σ_n), plans like an anchor get the shared part of its correction, distant plans only the stack part. A run
whose misfit is within the model's own spread at that plan therefore leaves distant plans as priced, and one
far beyond it (a slower cluster) moves every plan of the stack; a short or communication-bound run needs a
larger misfit to say so, since more of its misfit can be its own.

The stack part becomes the moved groups' ratios (the `ratios:` of the file); the local and own parts the
LocalCorrection (anchors' features and weights) applied per plan, vectorised over a priced table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.ratios import prior
from engine.specs import (
    PLAN_FEATURES,
    PRICED_PARTS,
    ClusterSpec,
    LocalCorrection,
    ModelSpec,
    Ratios,
    Strategy,
    group_of_part,
)


@dataclass(frozen=True, slots=True)
class LocalFit:
    """The fitted split: the stack-wide log factor, the local correction, and why (for the report)."""

    log_bias: float
    local: LocalCorrection
    biased: bool  # H1 chosen: the runs read as a stack bias
    prob_biased: float  # the posterior probability of H1
    plan_spread: float  # σ_g used
    prior_biased: float  # p used


def plan_features(model: ModelSpec, cluster: ClusterSpec, tp: np.ndarray, pp: np.ndarray, cp: np.ndarray,
                  ep: np.ndarray, dp: np.ndarray, mbs: np.ndarray) -> np.ndarray:
    """(n, len(PLAN_FEATURES)) log2 features of n plans of one model on one cluster (every count ≥ 1)."""
    n = np.asarray(tp).shape[0]
    fixed = {"hidden": model.hidden, "layers": model.num_layers, "experts": max(model.num_experts, 1),
             "seq_len": model.seq_len, "nodes": cluster.num_nodes}
    varying = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "dp": dp, "micro_batch_size": mbs}
    cols = [np.full(n, float(fixed[f])) if f in fixed else np.asarray(varying[f], dtype=np.float64)
            for f in PLAN_FEATURES]
    return np.log2(np.maximum(np.stack(cols, axis=1), 1.0))


def strategy_features(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> np.ndarray:
    """The log2 features of one plan, (len(PLAN_FEATURES),)."""
    one = [np.array([v]) for v in (s.tp, s.pp, s.cp, s.ep, s.dp, s.micro_batch_size)]
    return plan_features(model, cluster, *one)[0]


def kernel(a: np.ndarray, b: np.ndarray, length_scale: float) -> np.ndarray:
    """k between every row of `a` (n, F) and of `b` (m, F): exp(−|Δ|²/2ℓ²), (n, m)."""
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
    return np.exp(-d2 / (2.0 * length_scale * length_scale))


def _log_normal(r: np.ndarray, cov: np.ndarray) -> float:
    """log N(r; 0, cov)."""
    _sign, logdet = np.linalg.slogdet(cov)
    return float(-0.5 * (r @ np.linalg.solve(cov, r) + logdet + r.size * math.log(2 * math.pi)))


def fit_local(features: np.ndarray, residuals: Sequence[float], moved: Sequence[str], framework: str,
              device_type: str, own_sd: Sequence[float] | None = None) -> LocalFit:
    """The stack bias and the local correction from the runs' log2 features (n, F), log-residuals (n,) and the
    spread of each run's own misfit o_i (n,; prior.own_spread, none when not given)."""
    r = np.asarray(residuals, dtype=np.float64)
    own2 = np.zeros(r.size) if own_sd is None else np.asarray(own_sd, dtype=np.float64) ** 2
    same, own2 = _shared_own(features, own2)
    sg, p = prior.plan_spread(framework, device_type), prior.bias_prior(framework, device_type)
    sb2, sn2 = prior.STACK_BIAS_SD ** 2, prior.MEASUREMENT_SD ** 2
    k = kernel(features, features, prior.LENGTH_SCALE)
    cov0 = sg * sg * k + same * own2[:, None] + sn2 * np.eye(r.size)
    cov1 = cov0 + sb2
    log_odds = math.log(p / (1 - p)) + _log_normal(r, cov1) - _log_normal(r, cov0)
    prob = 1.0 / (1.0 + math.exp(-log_odds)) if log_odds > -700 else 0.0
    biased = log_odds > 0
    alpha = np.linalg.solve(cov1 if biased else cov0, r)
    bias = float(np.clip(sb2 * alpha.sum(), -prior.LOG_BOUND, prior.LOG_BOUND)) if biased else 0.0
    local = LocalCorrection(moved=tuple(moved), length_scale=prior.LENGTH_SCALE,
                            anchors=tuple(tuple(float(v) for v in row) for row in features),
                            weights=tuple(float(sg * sg * a) for a in alpha), log_bound=prior.LOG_BOUND,
                            own=tuple(float(o * a) for o, a in zip(own2, alpha, strict=True)) if own_sd is not None else ())
    return LocalFit(bias, local, biased, prob, sg, p)


SAME_PLAN = 1e-6  # features (log2 counts) this close are the anchor's own plan: counts are integers


def _shared_own(features: np.ndarray, own2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, n) whether two runs are of one plan, and each run's own-part variance as its plan's: u(x) belongs to
    the plan x, not to a run, so runs of one plan (the same degrees under other run options, or a repeat) share
    one u, with the mean of their spreads. Independent own parts would let each run of a plan add its whole
    correction there, and two runs wanting +5 % and +7 % would move their plan by +12 %."""
    same = np.abs(features[:, None, :] - features[None, :, :]).max(axis=2) < SAME_PLAN
    shared = (same @ own2) / same.sum(axis=1)
    return same.astype(np.float64), shared


def local_log_factor(local: LocalCorrection, features: np.ndarray) -> np.ndarray:
    """Σ_i weight_i · k(x, anchor_i) + own_i · [x = anchor_i] at every row of `features` (n, F), clipped to
    ±log_bound: (n,)."""
    if not local.anchors:
        return np.zeros(features.shape[0])
    if local.own and not any(local.weights):  # own parts only (the parts rule): a look-up, O(rows + anchors)
        own = {tuple(round(float(v), 6) for v in a): o for a, o in zip(local.anchors, local.own, strict=True)}
        got = [own.get(tuple(round(float(v), 6) for v in row), 0.0) for row in features]
        return np.clip(np.asarray(got, dtype=np.float64), -local.log_bound, local.log_bound)
    anchors = np.asarray(local.anchors, dtype=np.float64)
    k = kernel(features, anchors, local.length_scale)
    total = k @ np.asarray(local.weights, dtype=np.float64)
    if local.own:
        same = np.abs(features[:, None, :] - anchors[None, :, :]).max(axis=2) < SAME_PLAN
        total = total + same.astype(np.float64) @ np.asarray(local.own, dtype=np.float64)
    return np.clip(total, -local.log_bound, local.log_bound)


def part_factors(ratios: Ratios, features: np.ndarray | None) -> dict[str, np.ndarray | float]:
    """Each ratio group's and each priced part's multiplier (engine.specs.PRICED_PARTS; a part takes its own ratio,
    else its group's, Ratios.of_part): its ratio, times the local factor (n,) for the groups or parts the local
    part moves (a moved group moves all its parts)."""
    out: dict[str, np.ndarray | float] = {g: ratios.of(g) for g, _ in ratios.time}
    out.update({p: ratios.of_part(p) for p in PRICED_PARTS})
    local = ratios.local
    if local is None or features is None:
        return out
    f = np.exp(local_log_factor(local, features))
    for name in local.moved:
        out[name] = out.get(name, 1.0) * f
    for p in PRICED_PARTS:
        if group_of_part(p) in local.moved and p not in local.moved:
            out[p] = out[p] * f
    return out


def multiplier_span(ratios: Ratios | None) -> tuple[float, float]:
    """(least, greatest) multiplier any time part gets on any plan, 1.0 included (a part no group names keeps
    its price): each group's ratio, times for the moved groups a local factor, which lies between
    exp(Σ negative weights) and exp(Σ positive weights) (own weights included) since every k and every
    same-plan indicator is in [0, 1]. engine.search.bound scales
    its bounds by least / greatest, so they stay lower bounds whatever plan the factor is evaluated at."""
    if ratios is None:
        return 1.0, 1.0
    lo_f = hi_f = 1.0
    local = ratios.local
    if local is not None:
        ws = (*local.weights, *local.own)
        lo_f = math.exp(max(-local.log_bound, sum(min(w, 0.0) for w in ws)))
        hi_f = math.exp(min(local.log_bound, sum(max(w, 0.0) for w in ws)))
    moved = local.moved if local is not None else ()
    values = [1.0]
    for g, r in ratios.time:
        values += [r * lo_f, r * hi_f] if g in moved else [r]
    for p, r in ratios.parts:  # a part's own ratio replaces its group's (Ratios.of_part)
        values += [r * lo_f, r * hi_f] if p in moved or group_of_part(p) in moved else [r]
    return min(values), max(values)
