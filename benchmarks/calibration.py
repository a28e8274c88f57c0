"""Does calibrating on one run improve the prediction of the other runs of the same stack?

    .venv/bin/python benchmarks/calibration.py              # the local rule (the default of hp-plan calibrate)
    .venv/bin/python benchmarks/calibration.py --rule step  # or compute

Runs: the six published runs of [CAL] §10 (benchmarks/calibration_runs/, measured figure from each
`expected.json`) and the Megatron cases of [CAL] §1-§5 (benchmarks/cases/*.yaml, published step from each file's
header, written by benchmarks/accuracy.py). A stack is (framework, device type) as the configs price them
(engine.ratios.stack). For every stack with two or more runs and every run in it as the anchor: a RUNS file
naming the anchor is calibrated through `engine.calibrate.result.calibrate` (the code `hp-plan calibrate` runs),
the ratios file written, and every other run of the stack priced with it through
`engine.check.check_file(..., ratios=...)` + `estimate_config` (the code `hp-plan estimate --ratios` runs).

Three tables: the runs as published (the model was fitted on them: what is left is each plan's own misfit),
then the same runs with every measured step × 1.3 and × 0.8 (a synthetic biased stack: a user's slower or faster
cluster, which calibration must correct). Each prints per stack the median |e| of the other runs uncalibrated and
calibrated over all (anchor, target) pairs, e = (predicted − measured) / measured of the step time. Last, the
figures engine.ratios.prior takes from these runs (σ_g per stack, and the residuals against plan distance).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.calibrate.fit import DEFAULT_RULE, RULES, Fitted, fit, leave_one_out, plan_feature_spread  # noqa: E402
from engine.calibrate.result import calibrate  # noqa: E402
from engine.check import check_file  # noqa: E402
from engine.cost import estimate_config  # noqa: E402
from engine.ratios import prior  # noqa: E402
from engine.ratios.attach import RatiosRequest  # noqa: E402
from engine.ratios.local import strategy_features  # noqa: E402
from engine.ratios.stack import stack_of  # noqa: E402
from engine.specs import PLAN_FEATURES, PRICED_PARTS  # noqa: E402

RUNS_DIR = ROOT / "benchmarks" / "calibration_runs"  # the [CAL] §10 runs, copied as published
CASES_DIR = ROOT / "benchmarks" / "cases"
BAND_Z = 1.96  # a 95% band: the prediction × exp(±1.96 · its log-spread)
SCALING_RUNS = (100, 400, 1000, 4000)
LOCAL_SCALING_MAX = 100  # the local rule's fit is O(n³) and its leave-one-out n of them
BIASED = (1.3, 0.8)  # the synthetic biased stacks: a user's cluster 30% slower, 20% faster than the published
_PUBLISHED = re.compile(r"published step ([0-9.]+) s")


@dataclass(frozen=True)
class Run:
    id: str
    config: Path
    step_time_s: float


def _measured_step(folder: Path) -> float | None:
    exp = json.loads((folder / "expected.json").read_text())
    if exp.get("step_time_s"):
        return float(exp["step_time_s"])
    tps = exp.get("tokens_per_s_per_device")
    if tps:
        return float(exp["global_batch_size"]) * float(exp["seq_len"]) / (float(exp["devices"]) * float(tps))
    return None


def published_runs() -> list[Run]:
    """Every run with a measured step time: §10's folders, then the committed Megatron cases."""
    out: list[Run] = []
    for folder in sorted(RUNS_DIR.iterdir()) if RUNS_DIR.is_dir() else []:
        step = _measured_step(folder)
        if step is not None:
            out.append(Run(folder.name, folder / "search.yaml", step))
    for path in sorted(CASES_DIR.glob("*.yaml")):
        m = _PUBLISHED.search(path.read_text().splitlines()[0])
        if m:
            out.append(Run(path.stem, path, float(m.group(1))))
    return out


def _price(config: Path, ratios: Path | None) -> tuple[float | None, tuple[str, str]]:
    req = RatiosRequest(str(ratios), "benchmark", explicit=True) if ratios is not None else None
    loaded = check_file(str(config), ratios=req)
    if loaded.config is None:
        return None, ("", "")
    est, _ = estimate_config(loaded.config)
    return (est.step_time_s if est is not None else None), stack_of(loaded.config)


def _calibrate_on(run: Run | list[Run], folder: Path, rule: str, name: str | None = None,
                  fits: list[Fitted] | None = None) -> Path | None:
    """Calibrate on one run (or several) through the code `hp-plan calibrate` runs; the ratios file written
    (and the fit appended to `fits`, when given)."""
    runs_list = run if isinstance(run, list) else [run]
    name = name or runs_list[0].id
    runs = folder / f"{name}.runs.yaml"
    runs.write_text("runs:\n" + "".join(f"  - config: {r.config}\n    step_time_s: {r.step_time_s!r}\n"
                                        for r in runs_list))
    cal = calibrate(str(runs), rule=rule)
    if not cal.ok:
        return None
    out = folder / f"{name}.ratios.yaml"
    out.write_text(cal.ratios_text())
    if fits is not None and cal.fitted is not None:
        fits.append(cal.fitted)
    return out


@dataclass(frozen=True)
class Priced:
    run: Run
    uncalibrated_s: float
    stack: tuple[str, str]
    features: np.ndarray  # log2 plan features (engine.ratios.local)
    comm_share: float = 0.0  # exposed communication (prior.COMM_PARTS) over the priced step
    groups: tuple[tuple[str, float], ...] = ()  # priced seconds per priced part (engine.specs.PRICED_PARTS)
    feature_sd: float = 0.0  # the band's plan-feature term (engine.calibrate.fit.feature_spread)

    @property
    def is_moe(self) -> bool:
        return bool(self.features[PLAN_FEATURES.index("experts")] > 0)

    def plan_sd(self) -> float:
        """√(σ_g² + o² + σ_n²) at this plan (engine.ratios.prior): what the model misses on it alone."""
        own = prior.own_spread(self.comm_share, self.uncalibrated_s)
        sg = prior.plan_spread(*self.stack)
        return math.sqrt(sg * sg + own * own + self.feature_sd ** 2 + prior.MEASUREMENT_SD ** 2)

    def covered(self, fitted: Fitted, predicted_s: float, measured_s: float) -> bool | None:
        """Whether the measured step lies in the parts rule's 95% band around the prediction (None: no band)."""
        pf = fitted.parts
        if pf is None:
            return None
        sd = pf.band_sd([dict(self.groups).get(g, 0.0) for g in pf.parts], self.plan_sd())
        return abs(math.log(measured_s / predicted_s)) <= BAND_Z * sd

    @property
    def residual(self) -> float:
        return math.log(self.run.step_time_s / self.uncalibrated_s)


def priced_runs() -> dict[tuple[str, str], list[Priced]]:
    """Every published run priced uncalibrated, by stack."""
    stacks: dict[tuple[str, str], list[Priced]] = {}
    for run in published_runs():
        loaded = check_file(str(run.config))
        c = loaded.config
        if c is None or c.model is None or c.cluster is None:
            continue
        est, _ = estimate_config(c)
        if est is None:
            continue
        feats = strategy_features(c.model, c.cluster, est.strategy)
        comm = sum(float(est.time_breakdown_s.get(p, 0.0)) for p in prior.COMM_PARTS) / est.step_time_s
        parts = tuple((p, float(est.time_parts_s.get(p, 0.0))) for p in PRICED_PARTS)
        stacks.setdefault(stack_of(c), []).append(Priced(run, est.step_time_s, stack_of(c), feats, comm, parts,
                                                         plan_feature_spread(est, c)))
    return stacks


def _scaled(run: Run, scale: float) -> Run:
    return Run(run.id, run.config, run.step_time_s * scale)


def _stack_pairs(runs: list[Priced], rule: str, scale: float, tmp: Path, covered: list[bool] | None = None,
                 moe_dense: list[float] | None = None) -> tuple[list[float], list[float], list[str]]:
    """Over every (anchor, target) pair of one stack: |e| uncalibrated, |e| calibrated on the anchor, and a
    note per anchor; whether each target is inside its calibrated 95% band is appended to `covered`, and for a
    MoE anchor and a dense target how far calibrating moved the target's |e| (|e_cal| − |e_uncal|) to
    `moe_dense`."""
    pairs_u: list[float] = []
    pairs_c: list[float] = []
    notes: list[str] = []
    for anchor in runs:
        fits: list[Fitted] = []
        ratios = _calibrate_on(_scaled(anchor.run, scale), tmp, rule, fits=fits)
        if ratios is None:
            notes.append(f"{anchor.run.id}: not calibrated")
            continue
        eu, ec = [], []
        for target in runs:
            if target is anchor:
                continue
            cal, _ = _price(target.run.config, ratios)
            if cal is None:
                continue
            measured = target.run.step_time_s * scale
            eu.append(abs(target.uncalibrated_s / measured - 1))
            ec.append(abs(cal / measured - 1))
            if moe_dense is not None and anchor.is_moe and not target.is_moe:
                moe_dense.append(ec[-1] - eu[-1])
            inside = target.covered(fits[0], cal, measured) if fits else None
            if covered is not None and inside is not None:
                covered.append(inside)
        pairs_u += eu
        pairs_c += ec
        notes.append(f"{anchor.run.id} {100 * statistics.median(eu):.0f}->{100 * statistics.median(ec):.0f}%")
    return pairs_u, pairs_c, notes


def _stack_loo(runs: list[Priced], rule: str, scale: float, tmp: Path) -> list[float]:
    """|e| of each run predicted from a calibration on all the other runs of its stack (several anchors)."""
    out: list[float] = []
    for target in runs:
        others = [_scaled(p.run, scale) for p in runs if p is not target]
        ratios = _calibrate_on(others, tmp, rule, name=f"loo-{target.run.id}")
        cal, _ = _price(target.run.config, ratios) if ratios is not None else (None, None)
        if cal is not None:
            out.append(abs(cal / (target.run.step_time_s * scale) - 1))
    return out


def table(stacks: dict[tuple[str, str], list[Priced]], rule: str, scale: float) -> tuple[float, float]:
    """Print one table (measured step times × `scale`); return the overall medians (uncalibrated, calibrated)."""
    head = (f"{'stack':<22} {'runs':>4}  {'uncal med|e|':>12} {'calib med|e|':>12} {'all others':>10} "
            f"{'95% band':>8}  per anchor (one-anchor median |e| uncal->calib)")
    print(head)
    print("-" * len(head))
    all_u: list[float] = []
    all_c: list[float] = []
    all_l: list[float] = []
    all_cov: list[bool] = []
    moe_dense: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for (framework, device), runs in sorted(stacks.items()):
            if len(runs) < 2:
                print(f"{framework + ' / ' + device:<22} {len(runs):>4}  (one run: nothing to predict)")
                continue
            covered: list[bool] = []
            pairs_u, pairs_c, notes = _stack_pairs(runs, rule, scale, Path(tmp), covered, moe_dense)
            all_cov += covered
            cov = f"{100 * sum(covered) / len(covered):.0f}%" if covered else "-"
            loo = _stack_loo(runs, rule, scale, Path(tmp))
            all_u += pairs_u
            all_c += pairs_c
            all_l += loo
            shown = "; ".join(notes) if len(notes) <= 3 else "; ".join(notes[:3]) + "; ..."
            print(f"{framework + ' / ' + device:<22} {len(runs):>4}  {100 * statistics.median(pairs_u):>11.2f}% "
                  f"{100 * statistics.median(pairs_c):>11.2f}% {100 * statistics.median(loo):>9.2f}% {cov:>8}  {shown}")
    mu, mc = statistics.median(all_u), statistics.median(all_c)
    print(f"all pairs: median |e| uncalibrated {100 * mu:.2f}% -> calibrated on one anchor {100 * mc:.2f}% over "
          f"{len(all_c)} (anchor, target) pairs; calibrated on all the other runs of the stack "
          f"{100 * statistics.median(all_l):.2f}% over {len(all_l)} runs"
          + (f"; the calibrated 95% band holds the measured step on {100 * sum(all_cov) / len(all_cov):.0f}% of "
             "the pairs" if all_cov else "")
          + (f"; a MoE anchor moved its dense targets' |e| by at most {100 * max(moe_dense, key=abs):+.2f} points "
             f"({len(moe_dense)} pairs)" if moe_dense else "") + "\n")
    return mu, mc


_SIGMA_GRID = np.exp(np.linspace(math.log(1e-3), math.log(0.6), 400))
_SPREAD_GRID = np.concatenate([[0.0], np.exp(np.linspace(math.log(1e-3), math.log(2.0), 400))])


@dataclass(frozen=True)
class SpreadFit:
    sigma: dict[tuple[str, str], float]  # σ_g per stack
    kappa: float
    tau_s: float
    nll: float


def _nll(res: np.ndarray, comm: np.ndarray, step: np.ndarray, feat: np.ndarray, sigma: np.ndarray,
         kappa: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """−log-likelihood (up to a constant) of residuals `res` (n,) under N(0, σ² + (κc)² + (τ/T)² + f² + σ_n²), f
    the band's plan-feature term of each run (MoE, long context, FP8 and the band's other plan features: what the
    model knows it lacks there, so those runs' misfits are not read as σ, κ or τ), broadcast over a grid of one of σ, κ, τ (shape (g, 1)): (g,)."""
    v = sigma ** 2 + (kappa * comm) ** 2 + (tau / step) ** 2 + feat ** 2 + prior.MEASUREMENT_SD ** 2
    return (0.5 * (res * res / v + np.log(v))).sum(axis=-1)


def fit_spreads(groups: dict[tuple[str, str], list[Priced]], pooled: bool = False) -> SpreadFit:
    """Maximum likelihood of σ_g per group (one σ for all when `pooled`), κ and τ0 (engine.ratios.prior) by
    coordinate descent over fixed grids, each run's plan-feature term counted."""
    keys = sorted(groups)
    arr = {k: tuple(np.array([getattr(p, a) for p in groups[k]])
                    for a in ("residual", "comm_share", "uncalibrated_s", "feature_sd")) for k in keys}
    allr, allc, allt, allf = (np.concatenate([arr[k][i] for k in keys]) for i in range(4))
    sigma = {k: 0.05 for k in keys}
    kappa, tau = 0.3, 0.08
    col = lambda g: g[:, None]  # noqa: E731
    for _ in range(8):
        if pooled:
            one = float(_SIGMA_GRID[np.argmin(_nll(allr, allc, allt, allf, col(_SIGMA_GRID), kappa, tau))])
            sigma = {k: one for k in keys}
        else:
            for k in keys:
                r, c, t, f = arr[k]
                sigma[k] = float(_SIGMA_GRID[np.argmin(_nll(r, c, t, f, col(_SIGMA_GRID), kappa, tau))])
        sig = np.concatenate([np.full(arr[k][0].size, sigma[k]) for k in keys])
        kappa = float(_SPREAD_GRID[np.argmin(_nll(allr, allc, allt, allf, sig, col(_SPREAD_GRID), tau))])
        tau = float(_SPREAD_GRID[np.argmin(_nll(allr, allc, allt, allf, sig, kappa, col(_SPREAD_GRID)))])
    sig = np.concatenate([np.full(arr[k][0].size, sigma[k]) for k in keys])
    return SpreadFit(sigma, kappa, tau, float(_nll(allr, allc, allt, allf, sig, kappa, tau)))


def _fit_without(stacks: dict[tuple[str, str], list[Priced]], left: Priced) -> SpreadFit:
    return fit_spreads({k: [p for p in v if p is not left] for k, v in stacks.items()})


def priors(stacks: dict[tuple[str, str], list[Priced]]) -> None:
    """The figures engine.ratios.prior takes from these runs: σ_g per stack, per framework and pooled, κ and
    τ0 (maximum likelihood, with each run left out in turn), and the semivariogram of the residuals against the
    plan distance (why ℓ is short)."""
    shared = {k: statistics.fmean(a.residual * t.residual for a in v for t in v if t is not a)
              for k, v in sorted(stacks.items()) if len(v) >= 2}
    print("shared misfit variance, mean r_a·r_t over same-stack pairs (engine.calibrate.spreads.SHARED_VARIANCE): "
          + "; ".join(f"{f}/{d} {x:.1e}" for (f, d), x in shared.items()))
    res = {st: [p.residual for p in runs] for st, runs in stacks.items()}
    rms = lambda xs: math.sqrt(sum(x * x for x in xs) / len(xs))  # noqa: E731
    print("plain RMS log-residual, uncalibrated (κ = τ0 = 0): " + "; ".join(
        f"{fw}/{dev} {rms(r):.3f} ({len(r)})" for (fw, dev), r in sorted(res.items())))
    fit = fit_spreads(stacks)
    by_fw: dict[tuple[str, str], list[Priced]] = {}
    for (fw, _), runs in stacks.items():
        by_fw.setdefault((fw, ""), []).extend(runs)
    fw_fit = fit_spreads(by_fw)
    pooled = fit_spreads(stacks, pooled=True)
    print(f"maximum likelihood over {sum(len(v) for v in stacks.values())} runs: κ {fit.kappa:.3f}, τ0 "
          f"{fit.tau_s:.3f} s, σ_g " + "; ".join(f"{fw}/{dev} {s:.3f}" for (fw, dev), s in sorted(fit.sigma.items()))
          + f" (−log L {fit.nll:.2f}); per framework " + "; ".join(f"{fw} {s:.3f}" for (fw, _), s in
                                                                    sorted(fw_fit.sigma.items()))
          + f"; pooled {pooled.sigma[min(pooled.sigma)]:.3f}")
    loo = [_fit_without(stacks, p) for runs in stacks.values() for p in runs]
    ks, ts = [f.kappa for f in loo], [f.tau_s for f in loo]
    print(f"  each run left out in turn: κ {min(ks):.3f}..{max(ks):.3f} (median {statistics.median(ks):.3f}), "
          f"τ0 {min(ts):.3f}..{max(ts):.3f} s (median {statistics.median(ts):.3f})")
    stale = [f"{fw}/{dev} {prior.PLAN_SPREAD[(fw, dev)][0]:.3f} (now {s:.3f})" for (fw, dev), s in fit.sigma.items()
             if (fw, dev) in prior.PLAN_SPREAD and abs(prior.PLAN_SPREAD[(fw, dev)][0] - s) > 0.1 * s]
    stale += [f"COMM_SPREAD {prior.COMM_SPREAD:.3f} (now {fit.kappa:.3f})"
              ] if abs(prior.COMM_SPREAD - fit.kappa) > 0.1 * fit.kappa else []
    print("  engine/ratios/prior.py: " + ("matches these figures within 10%" if not stale else
                                             "out of date, copy the figures above: " + "; ".join(stale))
          + f"; OVERHEAD_S {prior.OVERHEAD_S:.3f} against the fit's {fit.tau_s:.3f} (not copied: prior.py says why)")
    bins: dict[int, list[tuple[float, float]]] = {}
    for runs in stacks.values():
        for a in runs:
            for t in runs:
                if t is not a:
                    d = float(np.sqrt(((a.features - t.features) ** 2).sum()))
                    bins.setdefault(min(int(d), 4), []).append((abs(t.residual - a.residual), abs(t.residual)))
    print("  same-stack pairs by plan distance (doublings): median |r_t - r_a| vs median |r_t| "
          "(a misfit carries over only where the first is the smaller): " + "; ".join(
              f"{'>=' if b == 4 else ''}{b}: {statistics.median(x for x, _ in v):.3f} vs "
              f"{statistics.median(y for _, y in v):.3f} ({len(v)})" for b, v in sorted(bins.items())))


def scaling() -> None:
    """Seconds to fit n runs and predict each left out (what `hp-plan calibrate` does after pricing them), per
    rule, on copies of one priced run (examples/explain/1f1b.yaml) with step times spread ±10%."""
    from dataclasses import replace

    from engine.calibrate.runs import measure, read_runs

    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs.yaml"
        runs.write_text(f"runs:\n  - config: {ROOT / 'examples' / 'explain' / '1f1b.yaml'}\n    step_time_s: 1.4\n")
        rf = read_runs(str(runs))
        one, _ = measure(rf, rf.entries[0])
    assert one is not None
    rng = np.random.default_rng(0)
    print("fit + leave-one-out seconds by number of runs (one plan, steps ±10%):")
    for rule in ("parts", "local"):
        cells = []
        for n in SCALING_RUNS:
            many = [replace(one, step_time_s=1.4 * float(f)) for f in rng.uniform(0.9, 1.1, n)]
            t0 = time.perf_counter()
            if rule == "local" and n > LOCAL_SCALING_MAX:
                cells.append(f"{n}: not run (the pairwise kernel and n refits: 400 runs took 534 s here)")
                continue
            leave_one_out(many, rule)
            fit(many, rule)
            cells.append(f"{n}: {time.perf_counter() - t0:.2f} s")
        print(f"  {rule:<6} " + "; ".join(cells))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rule", choices=RULES, default=DEFAULT_RULE)
    ap.add_argument("--scaling", action="store_true", help="only time the fit against the number of runs")
    ap.add_argument("--scales", type=float, nargs="*", default=list(BIASED),
                    help="the synthetic biased stacks: every measured step time × each of these")
    args = ap.parse_args(argv)
    if args.scaling:
        scaling()
        return 0
    stacks = priced_runs()
    print(f"rule: {args.rule}; e = (predicted - measured) / measured of the step time; anchors calibrate, "
          "targets are the other runs of the same framework and device type\n")
    print("== the published runs as measured ==")
    table(stacks, args.rule, 1.0)
    for scale in args.scales:
        print(f"== a biased stack: every measured step × {scale:g} (a {'slower' if scale > 1 else 'faster'} "
              "cluster than the published runs) ==")
        table(stacks, args.rule, scale)
    priors(stacks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
