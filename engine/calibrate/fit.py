"""Fitting ratios to measured runs (docs/calibration.md has the rules and why). The unit is the priced part
(engine.specs.PRICED_PARTS: GEMM, attention, element-wise, recompute, each collective kind per link class,
the pipeline bubble and p2p, the optimizer); a group's ratio (RATIO_GROUPS, what a reader of group ratios
applies) is its parts' priced-seconds-weighted mean.

1. Parts a profile measured (`parts_s`, by part or by group): a ratio of sums over the runs that measured it,
   Σ measured seconds ÷ Σ priced seconds (HyperParallel's rule, [HP] §7.8), shared by the parts the key
   stands for. A key priced at ≤ 1e-9 of the runs' step time takes no ratio (nothing to scale).
2. The step times fix what is left. A step time alone cannot say which part is off, nor whether the whole
   stack or only that plan is off, so the choice is a named rule:
   `parts` (the default, engine.calibrate.parts) the MAP ratio of every part, each with its prior spread;
   `local` moves every part no profile fixed by a stack factor exp(b̂) times a per-plan factor,
   fitted by engine.ratios.local (a stack bias only when the runs' misfit is beyond the model's own
   spread on the stack; each run's own misfit kept near its plan);
   `step` moves every part no profile fixed by one factor s on every plan; `compute` moves only compute's
   parts (with recompute) and keeps the rest as priced. s minimises Σ ((s·S_i − R_i)/T_i)² over the runs (T
   the measured step, R what is left of it after the fixed parts, S the priced seconds of the parts s
   moves), so with one run s = R/S and the run is reproduced exactly; with several every run weighs by its
   relative error.
3. Memory: the measured peaks constrain the memory parts, each with its prior (engine.calibrate.memory_parts).

Every ratio is bounded to [RATIO_MIN, RATIO_MAX] (never negative); a clamped or far-off ratio is a warning.
Leave-one-out: each run is predicted from ratios fitted on the others.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from engine.calibrate.memory_parts import MemoryFit, fit_memory
from engine.calibrate.parts import PartsFit, fit_parts
from engine.calibrate.runs import Measured
from engine.calibrate.spreads import host_spread, part_spreads
from engine.catalog.frameworks import framework_of
from engine.config import Config
from engine.cost.band import COVERAGE, DEVICE_FEATURES, relative_spread
from engine.diagnostics import Diagnostic
from engine.positions import Range
from engine.ratios import prior
from engine.ratios.local import LocalFit, fit_local, local_log_factor, strategy_features
from engine.ratios.stack import stack_of
from engine.results import Estimate
from engine.specs import (
    HOST_PART,
    HOST_S_PER_LAUNCH_MAX,
    PRICED_PARTS,
    RATIO_GROUPS,
    LocalCorrection,
    group_of_part,
)

RULES = ("parts", "local", "step", "compute")
DEFAULT_RULE = "parts"
RATIO_MIN, RATIO_MAX = 0.1, 10.0  # beyond 10x either way the config does not describe what ran
FAR_OFF = 2.0  # a ratio beyond 2x (or under 1/2) gets a warning: check that the config states what ran
NEGLIGIBLE = 1e-9

# The band's half-widths hold COVERAGE of the runs: as a normal deviate, z at (1 + COVERAGE) / 2.
_Z80 = NormalDist().inv_cdf((1 + COVERAGE) / 2)


@dataclass(frozen=True, slots=True)
class Fitted:
    """Ratios per priced part (engine.specs.PRICED_PARTS) and per group (RATIO_GROUPS order: each group's
    priced-seconds-weighted mean of its parts' over the runs, what a reader without part ratios applies), the
    memory ratio, and which parts each source fixed."""

    ratios: dict[str, float]
    memory: float
    profiled: tuple[str, ...]
    moved: tuple[str, ...]  # the parts the step times moved
    clamped: tuple[str, ...]
    local: LocalFit | None = None  # rules `local`, `parts`: the stack/plan split (ratios hold the stack part)
    parts: PartsFit | None = None  # rule `parts`: the MAP part ratios and why
    part_ratios: dict[str, float] = field(default_factory=dict)
    memory_fit: MemoryFit | None = None  # a measured peak's MAP split over the memory parts
    host_s_per_launch: float = 0.0  # the host part (engine.specs.HOST_PART): seconds per launch unit
    host_source: str = ""  # "profile" (measured), "step times" (the parts rule's MAP), "" (not fitted: 0)

    @property
    def split_parts(self) -> bool:
        """Whether some part's ratio differs from its group's (then the ratios file lists every part's)."""
        return any(abs(r - self.ratios[group_of_part(p)]) > 1e-9 for p, r in self.part_ratios.items())


def group_seconds(m: Measured) -> dict[str, float]:
    """The run's priced (uncalibrated) seconds per ratio group."""
    tb = m.estimate.time_breakdown_s
    return {g: sum(float(tb.get(p, 0.0)) for p in parts) for g, parts in RATIO_GROUPS.items()}


def part_seconds(m: Measured) -> dict[str, float]:
    """The run's priced (uncalibrated) seconds per priced part (engine.cost.step_parts)."""
    tp = m.estimate.time_parts_s
    return {p: float(tp.get(p, 0.0)) for p in PRICED_PARTS}


def covered(key: str) -> tuple[str, ...]:
    """The priced parts a measured `parts_s` key stands for: itself, or every part of its group."""
    return (key,) if key in PRICED_PARTS else tuple(p for p in PRICED_PARTS if group_of_part(p) == key)


def _clamp(value: float, lo: float, hi: float) -> tuple[float, bool]:
    bounded = min(max(value, lo), hi)
    return bounded, bounded != value


def _profiled(runs: Sequence[Measured], priced: list[dict[str, float]]) -> tuple[dict[str, float], list[str],
                                                                                list[str]]:
    """(ratios per part with the profiled parts set, the profiled parts, the clamped ones): per measured key, a
    ratio of sums over the runs that measured it, shared by the parts it stands for."""
    total = sum(m.step_time_s for m in runs)
    ratios = {p: 1.0 for p in PRICED_PARTS}
    clamped: list[str] = []
    profiled: list[str] = []
    keys = list(dict.fromkeys(k for m in runs for k in m.parts_s))
    for key in keys:
        parts = covered(key)
        rows = [(m.parts_s[key], sum(u[p] for p in parts)) for m, u in zip(runs, priced, strict=True)
                if key in m.parts_s]
        est = sum(u for _, u in rows)
        if rows and est > NEGLIGIBLE * total:
            value, hit = _clamp(sum(x for x, _ in rows) / est, RATIO_MIN, RATIO_MAX)
            ratios.update({p: value for p in parts})
            profiled += parts
            if hit:
                clamped += parts
    return ratios, [p for p in PRICED_PARTS if p in profiled], clamped


def _left(m: Measured, u: dict[str, float], ratios: dict[str, float], moved: Sequence[str],
          host_s_per_launch: float = 0.0) -> tuple[float, float]:
    """(R, S): the run's step less its fixed parts (a profiled host part's seconds among them), and the priced
    seconds of the moved parts."""
    fixed = sum(ratios[p] * u[p] for p in PRICED_PARTS if p not in moved) + host_s_per_launch * m.estimate.host_launches
    return m.step_time_s - fixed, sum(u[p] for p in moved)


def profiled_host(runs: Sequence[Measured]) -> float | None:
    """The host part's seconds per launch unit from the runs whose profile measured it (`parts_s` key
    HOST_PART): Σ measured host seconds ÷ Σ launch units, the ratio-of-sums rule of the profiled parts; None
    when no profile measured it."""
    rows = [(m.parts_s[HOST_PART], m.estimate.host_launches) for m in runs
            if HOST_PART in m.parts_s and m.estimate.host_launches > 0]
    return sum(h for h, _ in rows) / sum(n for _, n in rows) if rows else None


def _one_factor(runs: Sequence[Measured], priced: list[dict[str, float]], ratios: dict[str, float],
                moved: Sequence[str], host: float = 0.0) -> float | None:
    """The step/compute rules' factor s (None when the moved parts are priced at nothing)."""
    num = den = 0.0
    for m, u in zip(runs, priced, strict=True):
        r_i, s_i = _left(m, u, ratios, moved, host)
        w = 1.0 / (m.step_time_s ** 2)
        num += w * s_i * r_i
        den += w * s_i * s_i
    return num / den if moved and den > 0 else None


def named_moved(moved: Sequence[str]) -> tuple[str, ...]:
    """The moved parts as a ratios file's `local.moved` names them: a group whose parts all move by its name,
    the others part by part."""
    out: list[str] = []
    for g in RATIO_GROUPS:
        parts = covered(g)
        if all(p in moved for p in parts):
            out.append(g)
        else:
            out += [p for p in parts if p in moved]
    return tuple(out)


def _local(runs: Sequence[Measured], priced: list[dict[str, float]], ratios: dict[str, float],
           moved: Sequence[str], host: float = 0.0) -> LocalFit | None:
    """The local rule's split over the runs whose moved parts are priced (None when none is)."""
    feats, res, own = [], [], []
    for m, u in zip(runs, priced, strict=True):
        r_i, s_i = _left(m, u, ratios, moved, host)
        if s_i > 0 and m.config.model is not None and m.config.cluster is not None:
            feats.append(strategy_features(m.config.model, m.config.cluster, m.estimate.strategy))
            res.append(math.log(min(max(r_i / s_i, RATIO_MIN), RATIO_MAX)))
            own.append(prior.own_spread(moved_comm_seconds(m, moved) / s_i, s_i))
    if not moved or not res:
        return None
    framework, device = stack_of(runs[0].config)
    return fit_local(np.stack(feats), res, named_moved(moved), framework, device, own)


def moved_comm_seconds(m: Measured, moved: Sequence[str]) -> float:
    """The run's priced seconds of exposed communication (prior.COMM_PARTS) in the parts the step time moves:
    a part a profile fixed is measured, so none of the plan's own spread comes from it."""
    tp = m.estimate.time_parts_s
    return sum(float(tp.get(p, 0.0)) for p in moved if PRICED_PARTS[p] in prior.COMM_PARTS)


def feature_spread(m: Measured) -> float:
    """The spread the model's error band adds for the run's plan features and evidence-envelope terms (MoE, long
    context, FP8, FP8 on MoE, overlapped all-to-alls; a MoE narrower, a context longer, a CP wider or by another
    algorithm than any shown run's: the excess of engine.cost.band.relative_spread over a plain plan of the stack
    on the same device, as a standard deviation). A run with such a feature misses by terms the model lacks, so its
    misfit is its own plan's: it weighs little as evidence of a stack bias, and a MoE anchor barely moves a dense
    plan (docs/calibration.md). A feature of the device (band.DEVICE_FEATURES: a stand-in GEMM rate) is not the
    plan's: every plan on the device shares it, so it stays in the plain plan's band and calibration carries it."""
    return plan_feature_spread(m.estimate, m.config)


def plan_feature_spread(est: Estimate, config: Config) -> float:
    """feature_spread of a priced plan and the config it was priced from: the estimate's own band (its features
    and shape, engine.cost.estimate: a context parallelism no shown run checked widens it without a feature)
    over the band of a plain plan of the stack on the same device."""
    if config.cluster is None:
        return 0.0
    device_only = tuple(f for f in est.band_features if f in DEVICE_FEATURES)
    plain = relative_spread(framework_of(config.run).name, config.cluster.device.generation, device_only).step
    full = est.step_spread
    return math.sqrt(max(full * full - plain * plain, 0.0)) / _Z80


def _parts_fit(runs: Sequence[Measured], priced: list[dict[str, float]], ratios: dict[str, float],
               moved: Sequence[str], host: float | None) -> tuple[PartsFit, LocalFit] | None:
    """The parts rule over the runs whose moved parts are priced (None when none is): the MAP ratio of every moved
    part some run prices, and each run's remaining misfit as its own (a LocalCorrection with no shared weights,
    so only its plan gets it). `host`: the host part's seconds per launch unit a profile measured (fixed), or
    None to fit it with the parts (prior mean 0, spread engine.calibrate.spreads.host_spread: τ0, the per-step
    overhead the model does not price, where it can carry; docs/calibration.md "Host overhead")."""
    total = sum(m.step_time_s for m in runs)
    fitted = [p for p in moved if sum(u[p] for u in priced) > NEGLIGIBLE * total]
    rows, feats, sds = [], [], []
    targets: list[float] = []
    framework, device = stack_of(runs[0].config)
    sg = prior.plan_spread(framework, device)
    launches: list[float] = []
    for m, u in zip(runs, priced, strict=True):
        r_i, s_i = _left(m, u, ratios, fitted, host or 0.0)
        if s_i > 0 and m.config.model is not None and m.config.cluster is not None:
            launches.append(m.estimate.host_launches)
            rows.append([u[p] for p in fitted])
            targets.append(r_i)
            feats.append(strategy_features(m.config.model, m.config.cluster, m.estimate.strategy))
            own = prior.own_spread(moved_comm_seconds(m, fitted) / s_i, s_i)
            feature = feature_spread(m)
            sds.append(math.sqrt(sg * sg + own * own + feature * feature + prior.MEASUREMENT_SD ** 2))
    if not fitted or not rows:
        return None
    spreads = part_spreads(framework, device)
    pf = fit_parts(tuple(fitted), np.asarray(rows), np.asarray(targets), np.asarray(sds),
                   [spreads[p] for p in fitted], sg, prior.bias_prior(framework, device),
                   np.asarray(launches) if host is None else None, host_spread(framework, device))
    plans: dict[tuple[float, ...], list[float]] = {}  # one anchor per plan: repeats of a plan share their rest
    for row, e in zip(feats, pf.own, strict=True):
        plans.setdefault(tuple(round(float(v), 6) for v in row), []).append(e)
    local = LocalCorrection(moved=named_moved(fitted), length_scale=prior.LENGTH_SCALE, anchors=tuple(plans),
                            weights=(0.0,) * len(plans), log_bound=prior.LOG_BOUND,
                            own=tuple(sum(es) / len(es) for es in plans.values()))
    return pf, LocalFit(pf.log_bias, local, pf.biased, pf.prob_biased, sg, pf.prior_biased)


def _moved_by_rule(rule: str, profiled: Sequence[str]) -> list[str]:
    """The parts the step times move under `rule`: every part no profile fixed (`compute`: only compute's and
    recompute's)."""
    free = [p for p in PRICED_PARTS if p not in profiled]
    return [p for p in free if group_of_part(p) == "compute"] if rule == "compute" else free


def group_ratios(runs: Sequence[Measured], priced: list[dict[str, float]], ratios: dict[str, float]
                 ) -> dict[str, float]:
    """Each ratio group's ratio from its parts': their priced-seconds-weighted mean over the runs (their mean
    where the runs price none of them)."""
    out: dict[str, float] = {}
    for g in RATIO_GROUPS:
        parts = covered(g)
        den = sum(u[p] for u in priced for p in parts)
        num = sum(ratios[p] * u[p] for u in priced for p in parts)
        out[g] = num / den if den > 0 else sum(ratios[p] for p in parts) / len(parts)
    return out


def fit(runs: Sequence[Measured], rule: str = DEFAULT_RULE) -> Fitted:
    """Ratios fitted on `runs` (at least one) under `rule` (RULES)."""
    priced = [part_seconds(m) for m in runs]
    ratios, profiled, clamped = _profiled(runs, priced)
    host = profiled_host(runs)
    moved = _moved_by_rule(rule, profiled)
    local: LocalFit | None = None
    parts: PartsFit | None = None
    factor = None
    if rule == "parts":
        both = _parts_fit(runs, priced, ratios, moved, host)
        parts, local = both if both is not None else (None, None)
        if parts is not None:
            # A part no run prices has no evidence of its own: its MAP is the prior's, θ = b̂ + 0 (the stack
            # factor when the stack reads as biased, else 1), so a MoE plan's all-to-all moves with its stack.
            ratios.update({p: math.exp(parts.log_bias) for p in moved})
            ratios.update({p: math.exp(t) for p, t in zip(parts.parts, parts.log_ratios, strict=True)})
    elif rule == "local":
        local = _local(runs, priced, ratios, moved, host or 0.0)
        factor = math.exp(local.log_bias) if local is not None else None
    else:
        factor = _one_factor(runs, priced, ratios, moved, host or 0.0)
    if factor is not None:
        s, hit = _clamp(factor, RATIO_MIN, RATIO_MAX)
        ratios.update({p: s for p in moved})
        if hit:
            clamped.extend(moved)
    memory_fit = fit_memory(runs)
    memory = 1.0 if memory_fit is None else memory_fit.ratio
    if memory_fit is not None and memory_fit.clamped:
        clamped.append("memory")
    moved_by_steps = tuple(moved) if factor is not None or parts is not None else ()
    host_fit = host if host is not None else parts.host_s_per_launch if parts is not None else 0.0
    # What a ratios file may carry (engine.ratios.ratiofile refuses more, HP810): a fit past it is a step the
    # runs' configs do not describe (an idle device, a stalled loader), said at its bound, never written unreadable.
    host_fit, host_hit = _clamp(host_fit, 0.0, HOST_S_PER_LAUNCH_MAX) if math.isfinite(host_fit) else (0.0, True)
    if host_hit:
        clamped.append(HOST_PART)
    source = "profile" if host is not None else "step times" if parts is not None and parts.host_prior_sd_s else ""
    return Fitted(group_ratios(runs, priced, ratios), memory, tuple(profiled), moved_by_steps, tuple(clamped),
                  local, parts, ratios, memory_fit, host_fit, source)


def run_factor(m: Measured, fitted: Fitted) -> float:
    """The local factor at the run's plan (1.0 unless a rule with a local part); it multiplies the moved parts."""
    if fitted.local is None or m.config.model is None or m.config.cluster is None:
        return 1.0
    x = strategy_features(m.config.model, m.config.cluster, m.estimate.strategy)[None, :]
    return float(np.exp(local_log_factor(fitted.local.local, x))[0])


def calibrated_part_seconds(m: Measured, fitted: Fitted) -> dict[str, float]:
    """The run's seconds per priced part after calibration."""
    u = part_seconds(m)
    f = run_factor(m, fitted)
    moved = fitted.local.local.moved if fitted.local is not None else ()
    out = {p: fitted.part_ratios[p] * u[p] * (f if p in moved or group_of_part(p) in moved else 1.0)
           for p in PRICED_PARTS}
    out[HOST_PART] = fitted.host_s_per_launch * m.estimate.host_launches
    return out


def calibrated_parts(m: Measured, fitted: Fitted) -> dict[str, float]:
    """The run's seconds per ratio group after calibration."""
    out = {g: 0.0 for g in RATIO_GROUPS}
    for p, v in calibrated_part_seconds(m, fitted).items():
        if p in PRICED_PARTS:
            out[group_of_part(p)] += v
    return out


def predict_step(m: Measured, fitted: Fitted) -> float:
    """The run's step time under the fitted ratios (and the local factor at its plan)."""
    return sum(calibrated_part_seconds(m, fitted).values())


# The most runs whose leave-one-out is a refit per run: the rule `parts` on runs with profiled parts (its MAP has
# no closed form once the profiled ratios change with the run left out) and `local` (at most LOCAL_MAX_RUNS,
# engine.calibrate.result). Each refit is linear in the runs, all of them quadratic: 100 / 200 runs of `parts`
# with profiles took 1.2 / 4.4 s on 2 shared cores, 1,000 would take about 2 minutes. Past it the leave-one-out
# is not computed (null), and calibrate says so (HP815).
REFIT_MAX_RUNS = 200


def refits(runs: Sequence[Measured], rule: str) -> bool:
    """Whether `rule`'s leave-one-out on `runs` refits once per run (no closed form for it)."""
    return rule == "local" or (rule == "parts" and any(m.parts_s for m in runs))


def leave_one_out(runs: Sequence[Measured], rule: str = DEFAULT_RULE) -> list[float | None]:
    """Each run's step predicted from the ratios fitted on the other runs (None with a single run). The rules
    `parts` (without profiles), `step` and `compute` are computed without refitting, linear in the runs; the
    others refit once per run, up to REFIT_MAX_RUNS runs (None past it)."""
    if len(runs) < 2 or (refits(runs, rule) and len(runs) > REFIT_MAX_RUNS):
        return [None for _ in runs]
    if rule == "parts" and not any(m.parts_s for m in runs):
        return _parts_leave_one_out(runs, fit(runs, rule))
    if rule in ("step", "compute"):
        return _one_factor_leave_one_out(runs, rule)
    return refit_leave_one_out(runs, rule)


def refit_leave_one_out(runs: Sequence[Measured], rule: str = DEFAULT_RULE) -> list[float | None]:
    """leave_one_out by refitting on every run's others: what the closed forms must equal (quadratic in the
    runs: 1,000 runs took 20-31 s under `step` or `compute` on 2 shared cores)."""
    return [predict_step(m, fit([r for j, r in enumerate(runs) if j != i], rule)) for i, m in enumerate(runs)]


def _excluded(a: np.ndarray) -> np.ndarray:
    """Row i: the sum of `a`'s rows other than i, from a running sum from each end (no total less the run, so a
    large run never cancels a small one's digits)."""
    zero = np.zeros((1, *a.shape[1:]))
    before = np.concatenate([zero, np.cumsum(a, axis=0)[:-1]])
    after = np.concatenate([np.cumsum(a[::-1], axis=0)[::-1][1:], zero])
    return before + after


@dataclass(frozen=True, slots=True)
class _Columns:
    """The runs as arrays, for a leave-one-out without refits: per run its step, priced seconds per part (n × P,
    PRICED_PARTS order) and launch units; per measured `parts_s` key (first-seen order) the sums over the other
    runs that measured it (n × K: measured seconds, priced seconds of the parts it covers, how many runs); the
    same of the host part; and each run's others' step total."""

    step: np.ndarray
    priced: np.ndarray
    launches: np.ndarray
    keys: tuple[str, ...]
    measured: np.ndarray
    key_priced: np.ndarray
    count: np.ndarray
    host: np.ndarray  # n × 3: host seconds, launch units, runs
    total: np.ndarray


def _columns(runs: Sequence[Measured], priced: list[dict[str, float]]) -> _Columns:
    """The runs' _Columns: each sum over a run's others taken once for all runs (_excluded), O(n) in all."""
    keys = tuple(dict.fromkeys(k for m in runs for k in m.parts_s))
    has = np.array([[k in m.parts_s for k in keys] for m in runs], dtype=float).reshape(len(runs), len(keys))
    measured = np.array([[m.parts_s.get(k, 0.0) for k in keys] for m in runs]).reshape(has.shape)
    covers = np.array([[sum(u[p] for p in covered(k)) for k in keys] for u in priced]).reshape(has.shape)
    launches = np.array([float(m.estimate.host_launches) for m in runs])
    hosted = np.array([HOST_PART in m.parts_s and m.estimate.host_launches > 0 for m in runs], dtype=float)
    host = np.stack([hosted * [m.parts_s.get(HOST_PART, 0.0) for m in runs], hosted * launches, hosted], axis=1)
    step = np.array([m.step_time_s for m in runs])
    return _Columns(step, np.array([[u[p] for p in PRICED_PARTS] for u in priced]), launches, keys,
                    _excluded(measured * has), _excluded(covers * has), _excluded(has), _excluded(host),
                    _excluded(step))


def _profiled_without(c: _Columns, i: int, keys: Sequence[str]) -> tuple[dict[str, float], list[str], float | None]:
    """_profiled and profiled_host on every run but i, from the sums over the others: (ratios, profiled parts,
    host seconds per launch unit or None). `keys`: the measured keys in the order the other runs first give
    them (a later key's ratio overrides an earlier one's on the parts both cover, as in _profiled)."""
    ratios = {p: 1.0 for p in PRICED_PARTS}
    profiled: set[str] = set()
    for k in keys:
        j = c.keys.index(k)
        est = float(c.key_priced[i, j])
        if c.count[i, j] > 0 and est > NEGLIGIBLE * float(c.total[i]):
            value, _ = _clamp(float(c.measured[i, j]) / est, RATIO_MIN, RATIO_MAX)
            ratios.update({p: value for p in covered(k)})
            profiled.update(covered(k))
    host = float(c.host[i, 0]) / float(c.host[i, 1]) if c.host[i, 2] > 0 else None
    return ratios, [p for p in PRICED_PARTS if p in profiled], host


def _one_factor_sums(c: _Columns, moved: Sequence[str], ref: dict[str, float], ref_host: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """_one_factor's sums over each run's others when `moved` move, at the reference fixed ratios `ref` and
    host `ref_host`: (Σ w·S·R, Σ w·S², Σ w·S·u_p per fixed part p, Σ w·S·launches). R is linear in the fixed
    ratios, so another run's R at other ratios is R − Σ_p Δ_p·u_p − Δ_host·launches, and so are the sums."""
    on = np.array([p in moved for p in PRICED_PARTS])
    ref_fixed = np.array([ref[p] for p in PRICED_PARTS])[~on]
    s = c.priced[:, on].sum(axis=1)
    r = c.step - c.priced[:, ~on] @ ref_fixed - ref_host * c.launches
    ws = s / c.step ** 2
    return (_excluded(ws * r), _excluded(ws * s), _excluded(ws[:, None] * c.priced[:, ~on]),
            _excluded(ws * c.launches))


def _one_factor_leave_one_out(runs: Sequence[Measured], rule: str) -> list[float | None]:
    """The step and compute rules' leave-one-out without refits, linear in the runs: the profiled ratios and the
    host part are ratios of sums, the factor s a ratio of sums linear in them (_one_factor_sums), so each run's
    fit on the others is read from sums over the others. Equal to refit_leave_one_out but for rounding."""
    priced = [part_seconds(m) for m in runs]
    c = _columns(runs, priced)
    ref, _, _ = _profiled(runs, priced)
    ref_host = profiled_host(runs) or 0.0
    first = {k: next(j for j, m in enumerate(runs) if k in m.parts_s) for k in c.keys}
    sums: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    out: list[float | None] = []
    for i, m in enumerate(runs):
        keys = c.keys if i not in first.values() else tuple(
            dict.fromkeys(k for j, r in enumerate(runs) if j != i for k in r.parts_s))
        ratios, profiled, host = _profiled_without(c, i, keys)
        moved = tuple(_moved_by_rule(rule, profiled))
        if moved not in sums:
            sums[moved] = _one_factor_sums(c, moved, ref, ref_host)
        num, den, fixed, per_launch = (a[i] for a in sums[moved])
        fixed_parts = [p for p in PRICED_PARTS if p not in moved]
        delta = np.array([ratios[p] - ref[p] for p in fixed_parts])
        num = float(num - fixed @ delta - ((host or 0.0) - ref_host) * per_launch)
        if moved and den > 0:
            ratios.update(dict.fromkeys(moved, _clamp(num / float(den), RATIO_MIN, RATIO_MAX)[0]))
        h = host if host is not None else 0.0
        h = min(max(h, 0.0), HOST_S_PER_LAUNCH_MAX) if math.isfinite(h) else 0.0
        out.append(sum(ratios[p] * priced[i][p] for p in PRICED_PARTS) + h * m.estimate.host_launches)
    return out


def _parts_leave_one_out(runs: Sequence[Measured], fitted: Fitted) -> list[float | None]:
    """The parts rule's leave-one-out in closed form (engine.calibrate.parts._loo): each run's moved parts at the
    log misfit the other runs predict for it, linear in the number of runs (no profiles: nothing else is fitted)."""
    pf = fitted.parts
    if pf is None or pf.loo_log is None or len(pf.loo_log) != len(runs):
        return [None for _ in runs]
    moved = pf.parts
    out: list[float | None] = []
    for m, loo in zip(runs, pf.loo_log, strict=True):
        u = part_seconds(m)
        out.append(sum(u[p] for p in PRICED_PARTS if p not in moved) + sum(u[p] for p in moved) * math.exp(loo))
    return out


def warnings(fitted: Fitted, at: Range, runs: Sequence[Measured] = ()) -> list[Diagnostic]:
    """HP807 for the part ratios at their bound or beyond FAR_OFF, at the RUNS file's `runs` key: one warning per
    value (a rule that moves every part by one factor is one finding, not sixteen), naming the parts; a part the
    runs price at no seconds says nothing and is left out."""
    out: list[Diagnostic] = []
    priced = {p: sum(part_seconds(m)[p] for m in runs) for p in PRICED_PARTS} if runs else {}
    values = {p: r for p, r in fitted.part_ratios.items() if not runs or priced.get(p, 1.0) > 0}
    values["memory"] = fitted.memory
    if HOST_PART in fitted.clamped:
        out.append(Diagnostic("HP807", f"the host time hit its bound ({fitted.host_s_per_launch:g} s per launch "
                              "unit): the runs' steps hold idle time the configs do not describe (a data loader, a "
                              "synchronisation), or the measurement is in other units", at, "runs"))
    bound: dict[float, list[str]] = {}
    far: dict[float, list[str]] = {}
    for g, r in values.items():
        if g in fitted.clamped:
            bound.setdefault(round(r, 6), []).append(g)
        elif (g in fitted.moved or g in fitted.profiled or g == "memory") and not 1 / FAR_OFF <= r <= FAR_OFF:
            far.setdefault(round(r, 3), []).append(g)
    for r, names in bound.items():
        out.append(Diagnostic("HP807", f"the {_named(names)} hit {'its bound' if len(names) == 1 else 'their bound'} "
                              f"({r:g}): the runs cannot be reproduced; their configs do not describe what ran, or "
                              "the measurement is in other units", at, "runs"))
    for r, names in far.items():
        out.append(Diagnostic("HP807", f"the {_named(names)} {'is' if len(names) == 1 else 'are'} {r:.3g}: the "
                              f"uncalibrated model is off by more than {FAR_OFF:g}x here; check that each run's config "
                              "states what ran", at, "runs"))
    return out


def _named(parts: list[str]) -> str:
    return f"{parts[0]} ratio" if len(parts) == 1 else f"ratios of {', '.join(parts)}"
