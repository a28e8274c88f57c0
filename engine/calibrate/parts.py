"""The `parts` rule (the default): one ratio per part of the priced step, each with a prior, fitted as the most
probable set of ratios given the runs (MAP, bounded, never negative). docs/calibration.md, "The parts rule".

Model. A run i's step time is the sum of its priced parts u_ig, each times its ratio exp(θ_g), times the run's own
misfit: log T_i = log Σ_g u_ig·exp(θ_g) + ε_i. The ratio of a part is a stack-wide bias b, shared by every part
(a cluster slower or faster as a whole), plus the part's own deviation d_g: θ_g = b + d_g. The priors:
  d_g ~ N(0, s_g²), s_g the part's spread on the stack (engine.calibrate.spreads: how well the model knows that
    part there), so a part the model knows well barely moves and one it knows poorly takes the misfit;
  b = 0 (H0: the stack prices as the runs the model was fitted on) or b ~ N(0, σ_B²) (H1), with the prior
    probability p of H1 (engine.ratios.prior.bias_prior); the more probable one (marginal likelihood × prior)
    is used;
  ε_i ~ N(0, v_i), independent per plan: v_i = σ_g² + o_i² + σ_n², the model's spread at a plan of that stack,
    the plan's own communication / overhead spread, and the measurement (engine.ratios.prior).
The likelihood is linear in β = (b, d) after one linearisation (w_ig = u_ig / Σ_h u_ih, the part's share), which
gives the marginal likelihoods and the starting point; Gauss-Newton then finds the MAP of the exact model, with
every θ_g kept within ±log 10 (engine.calibrate.fit's ratio bounds). Each run's remaining misfit ε̂_i is its own
(applied only at its own plan, LocalCorrection.own), so every anchor is reproduced; another plan gets the part
ratios applied to its own parts: an anchor whose misfit sits in a part other plans lack moves them little.

Cost: every product is (n × P) or (P × P) with P the number of parts, so a fit over n runs is O(n·P²), and the
leave-one-out predictions come from the same factorisation in closed form (the Gaussian identity
r_i − [Σ⁻¹r]_i / [Σ⁻¹]_ii, Σ⁻¹ by Woodbury): linear in the number of runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.ratios import prior

GN_ITERATIONS = 30  # Gauss-Newton steps; the objective is smooth and P small: it converges in a handful
GN_TOLERANCE = 1e-10


@dataclass(frozen=True, slots=True)
class PartsFit:
    """The MAP part ratios and why: θ_g per part (log ratio, bias included), the stack bias b̂, the hypothesis
    taken and its probability, the prior spreads used, each run's own remaining log misfit, and the
    leave-one-out log residual of each run (None with one run)."""

    parts: tuple[str, ...]
    log_ratios: tuple[float, ...]
    log_bias: float
    biased: bool
    prob_biased: float
    prior_biased: float
    part_spreads: tuple[float, ...]
    plan_spread: float
    own: tuple[float, ...]
    loo_log: tuple[float, ...] | None
    posterior_cov: tuple[tuple[float, ...], ...] = ()  # of the log ratios θ (P × P), Laplace at the MAP
    host_s_per_launch: float = 0.0  # the host part's MAP seconds per launch unit (0 when not fitted)
    host_prior_sd_s: float = 0.0  # its prior spread, seconds per step at the runs' mean launch units (0: not fitted)

    def band_sd(self, priced: Sequence[float], plan_sd: float) -> float:
        """The log-spread of the calibrated step's moved parts at a plan with `priced` seconds per part (in
        `parts` order) and its own spread √(σ_g² + o² + σ_n²): what the plan misses on its own plus what the
        runs left unknown of the ratios."""
        u = np.asarray(priced, dtype=np.float64) * np.exp(np.asarray(self.log_ratios))
        if u.sum() <= 0 or not self.posterior_cov:
            return plan_sd
        g = u / u.sum()
        return math.sqrt(plan_sd * plan_sd + float(g @ np.asarray(self.posterior_cov) @ g))


def _marginal(r: np.ndarray, x: np.ndarray, lam: np.ndarray, v: np.ndarray) -> tuple[float, np.ndarray,
                                                                                      np.ndarray]:
    """(log N(r; 0, V + X Λ Xᵀ), A = Λ⁻¹ + XᵀV⁻¹X, c = XᵀV⁻¹r) by the Woodbury identity and the matrix
    determinant lemma: O(n·P²)."""
    xv = x / v[:, None]
    a = np.diag(1.0 / lam) + xv.T @ x
    c = xv.T @ r
    sol = np.linalg.solve(a, c)
    quad = float(np.sum(r * r / v) - c @ sol)
    _s, logdet_a = np.linalg.slogdet(a)
    logdet = float(np.sum(np.log(v)) + np.sum(np.log(lam)) + logdet_a)
    return -0.5 * (quad + logdet + r.size * math.log(2 * math.pi)), a, c


def _thetas(beta: np.ndarray, biased: bool, n_parts: int) -> np.ndarray:
    """Each part's log ratio: its deviation, plus the stack bias (β's first entry) when there is one. β is
    (b?, d_1..d_P, η?): η, the host part's scaled size, last when it is fitted."""
    off = int(biased)
    d = beta[off:off + n_parts]
    return d + beta[0] if biased else d


def _eta(beta: np.ndarray, biased: bool, n_parts: int) -> float:
    """The host part's scaled size η (0 when it is not fitted: β holds no entry past the parts)."""
    return float(beta[int(biased) + n_parts]) if beta.size > int(biased) + n_parts else 0.0


def _predict(beta: np.ndarray, w: np.ndarray, biased: bool, host: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """(f, J): f_i = log(Σ_g w_ig·exp(θ_g) + η·c_i), c_i the host column (None: no host part), and its Jacobian
    in β (the bias moves every θ)."""
    n_parts = w.shape[1]
    e = w * np.exp(_thetas(beta, biased, n_parts))[None, :]
    tot = e.sum(axis=1) + (_eta(beta, biased, n_parts) * host if host is not None else 0.0)
    tot = np.maximum(tot, 1e-300)
    jac = e / tot[:, None]
    cols = [jac.sum(axis=1, keepdims=True)] if biased else []
    cols.append(jac)
    if host is not None:
        cols.append((host / tot)[:, None])
    return np.log(tot), np.concatenate(cols, axis=1)


def _map(r: np.ndarray, w: np.ndarray, lam: np.ndarray, v: np.ndarray, start: np.ndarray,
         biased: bool, host: np.ndarray | None = None) -> np.ndarray:
    """Gauss-Newton on Σ (r_i − f_i(β))²/v_i + Σ β²/λ from `start`, every θ kept within ±prior.LOG_BOUND and
    the host part never negative."""
    n_parts = w.shape[1]
    beta = _bounded(start, biased, n_parts)
    for _ in range(GN_ITERATIONS):
        f, jac = _predict(beta, w, biased, host)
        jv = jac / v[:, None]
        h = np.diag(1.0 / lam) + jv.T @ jac
        g = jv.T @ (r - f) - beta / lam
        step = np.linalg.solve(h, g)
        beta = _bounded(beta + step, biased, n_parts)
        if float(np.max(np.abs(step))) < GN_TOLERANCE:
            break
    return beta


def _bounded(beta: np.ndarray, biased: bool, n_parts: int) -> np.ndarray:
    """β with every part's log ratio (bias included) within ±prior.LOG_BOUND and η ≥ 0 (host time is never
    negative)."""
    out = beta.copy()
    off = int(biased)
    if biased:
        out[0] = float(np.clip(out[0], -prior.LOG_BOUND, prior.LOG_BOUND))
        out[1:1 + n_parts] = np.clip(out[1:1 + n_parts] + out[0], -prior.LOG_BOUND, prior.LOG_BOUND) - out[0]
    else:
        out[:n_parts] = np.clip(out[:n_parts], -prior.LOG_BOUND, prior.LOG_BOUND)
    out[off + n_parts:] = np.maximum(out[off + n_parts:], 0.0)
    return out


def _loo(r: np.ndarray, x: np.ndarray, a: np.ndarray, c: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Each run's log residual predicted from the others (linearised model): r_i − [Σ⁻¹r]_i / [Σ⁻¹]_ii with
    Σ⁻¹ = V⁻¹ − V⁻¹X A⁻¹ XᵀV⁻¹, its diagonal and Σ⁻¹r in O(n·P²)."""
    xv = x / v[:, None]
    a_inv = np.linalg.inv(a)
    alpha = r / v - xv @ (a_inv @ c)
    diag = 1.0 / v - np.einsum("ij,jk,ik->i", xv, a_inv, xv)
    return r - alpha / diag


def _theta_cov(beta: np.ndarray, w: np.ndarray, lam: np.ndarray, v: np.ndarray, biased: bool,
               host: np.ndarray | None = None) -> np.ndarray:
    """The posterior covariance of the log ratios θ at the MAP (Laplace: the inverse Gauss-Newton Hessian,
    mapped through θ = b + d when the stack bias is in; the host part's entry left out)."""
    _f, jac = _predict(beta, w, biased, host)
    cov = np.linalg.inv(np.diag(1.0 / lam) + (jac / v[:, None]).T @ jac)
    n_parts = w.shape[1]
    t = np.zeros((n_parts, beta.size))
    t[:, int(biased):int(biased) + n_parts] = np.eye(n_parts)
    if biased:
        t[:, 0] = 1.0
    return t @ cov @ t.T


def _loo_at(r: np.ndarray, w: np.ndarray, lam: np.ndarray, v: np.ndarray, beta: np.ndarray,
            biased: bool, host: np.ndarray | None = None) -> np.ndarray:
    """The leave-one-out log residuals of the model linearised at the MAP β̂ (its Jacobian J as the design, so
    parts that moved apart keep their curvature): J_i·β̂₋ᵢ + f_i − J_i·β̂ for each run."""
    f, jac = _predict(beta, w, biased, host)
    offset = f - jac @ beta
    r_lin = r - offset
    jv = jac / v[:, None]
    a = np.diag(1.0 / lam) + jv.T @ jac
    return _loo(r_lin, jac, a, jv.T @ r_lin, v) + offset


def _host_column(launches: np.ndarray | None, host_sd_s: float, tot: np.ndarray) -> tuple[np.ndarray | None,
                                                                                        float]:
    """(c, n̄): the host part's design column c_i = (n_i / n̄)·τ / T_i (η ~ N(0, 1) scales it: run i's host
    seconds are η·τ·n_i/n̄, τ = host_sd_s the prior spread at the runs' mean launch units n̄), or (None, 0) when
    the host part is not fitted."""
    if launches is None or host_sd_s <= 0:
        return None, 0.0
    n_bar = float(np.mean(launches))
    if n_bar <= 0:
        return None, 0.0
    return np.asarray(launches, dtype=np.float64) / n_bar * host_sd_s / tot, n_bar


def fit_parts(parts: Sequence[str], priced: np.ndarray, residual_target: np.ndarray, plan_sd: np.ndarray,
              part_sd: Sequence[float], plan_spread: float, prior_biased: float,
              launches: np.ndarray | None = None, host_sd_s: float = 0.0) -> PartsFit:
    """The MAP part ratios from `priced` (n, P) seconds per part of each run (the parts the step times move),
    `residual_target` (n,) what each run measured of those parts (seconds), `plan_sd` (n,) each run's own
    spread √(σ_g² + o_i² + σ_n²), `part_sd` (P,) each part's prior spread, and the prior probability that the
    stack is biased; with `launches` (n,) each run's launch units and `host_sd_s` > 0, also the additive host
    part's seconds per launch unit (prior mean 0, spread host_sd_s seconds per step at the runs' mean units,
    never negative)."""
    u = np.asarray(priced, dtype=np.float64)
    tot = u.sum(axis=1)
    w = u / tot[:, None]
    r = np.log(np.clip(np.asarray(residual_target, dtype=np.float64) / tot, 0.1, 10.0))
    v = np.asarray(plan_sd, dtype=np.float64) ** 2
    s2 = np.asarray(part_sd, dtype=np.float64) ** 2
    host, n_bar = _host_column(launches, host_sd_s, tot)
    extra = [] if host is None else [host[:, None]]
    x0 = np.concatenate([w, *extra], axis=1)
    lam0 = np.concatenate([s2, [1.0] * len(extra)])
    x1 = np.concatenate([np.ones((u.shape[0], 1)), x0], axis=1)
    lam1 = np.concatenate([[prior.STACK_BIAS_SD ** 2], lam0])
    ll0, a0, c0 = _marginal(r, x0, lam0, v)
    ll1, a1, c1 = _marginal(r, x1, lam1, v)
    # prior_biased 0: no stack-wide factor is considered (the memory parts: engine.calibrate.memory_parts)
    log_odds = math.log(prior_biased / (1 - prior_biased)) + ll1 - ll0 if prior_biased > 0 else -math.inf
    prob = 1.0 / (1.0 + math.exp(-log_odds)) if log_odds > -700 else 0.0
    biased = log_odds > 0
    lam, a, c = (lam1, a1, c1) if biased else (lam0, a0, c0)
    beta = _map(r, w, lam, v, np.linalg.solve(a, c), biased, host)
    bias = float(beta[0]) if biased else 0.0
    theta = _thetas(beta, biased, w.shape[1])
    eta = _eta(beta, biased, w.shape[1])
    cov = _theta_cov(beta, w, lam, v, biased, host)
    loo = tuple(float(e) for e in _loo_at(r, w, lam, v, beta, biased, host)) if r.size > 1 else None
    # Each run's own misfit multiplies its moved parts only (the host seconds are added), so the anchor is
    # reproduced: log((target − host) / moved), the target and both as shares of the priced step.
    moved = (w * np.exp(theta)[None, :]).sum(axis=1)
    left = np.exp(r) - (eta * host if host is not None else 0.0)
    own = np.log(np.maximum(left, 1e-3 * moved) / moved)
    return PartsFit(tuple(parts), tuple(float(t) for t in theta), bias, biased, prob, prior_biased,
                    tuple(float(s) for s in part_sd), plan_spread, tuple(float(e) for e in own), loo,
                    tuple(tuple(float(c) for c in row) for row in cov),
                    eta * host_sd_s / n_bar if host is not None else 0.0, host_sd_s if host is not None else 0.0)
