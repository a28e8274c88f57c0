"""The local rule's fit (engine.ratios.local): a stack bias only when the runs' misfit is beyond the model's
own spread on the stack, each run's misfit carried to plans like it, anchors reproduced; its ratios file key."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.ratios import prior
from engine.ratios.local import fit_local, kernel, local_log_factor, multiplier_span, part_factors
from engine.ratios.ratiofile import FittedRow, parse_ratios, ratios_text
from engine.specs import PLAN_FEATURES, RATIO_GROUPS, LocalCorrection, Ratios

MOVED = tuple(RATIO_GROUPS)
FITTED = ("megatron", "A100")  # σ_g 4.8%, p 0.1
F = len(PLAN_FEATURES)


def plan(**log2: float) -> np.ndarray:
    """log2 features: a 4096-wide, 32-layer dense model at seq 4096 on 8 nodes, tp 8, dp 8, unless given."""
    base = {"hidden": 12, "layers": 5, "experts": 0, "seq_len": 12, "tp": 3, "pp": 0, "cp": 0, "ep": 0, "dp": 3,
            "micro_batch_size": 0, "nodes": 3}
    base.update(log2)
    return np.array([base[f] for f in PLAN_FEATURES], dtype=np.float64)


def factor_at(fit, x: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    """The log factor the fit gives plan x: stack part + local part."""
    return fit.log_bias + float(local_log_factor(fit.local, x[None, :])[0])


def test_a_misfit_within_the_models_spread_stays_near_its_plan() -> None:
    a = plan()
    r = 0.06  # 6%: within 1.8 σ_g of the model on this stack
    fit = fit_local(a[None, :], [r], MOVED, *FITTED)
    assert not fit.biased and fit.log_bias == 0.0
    assert factor_at(fit, a) == pytest.approx(r, abs=0.005)  # the anchor is reproduced within 0.5%
    near, far = plan(tp=4, dp=2), plan(hidden=14, layers=7, tp=3, pp=4, nodes=7)
    assert 0.2 * r < factor_at(fit, near) < r
    assert abs(factor_at(fit, far)) < 1e-6


def test_a_misfit_far_beyond_the_spread_is_a_stack_bias() -> None:
    a = plan()
    r = math.log(1.3)
    fit = fit_local(a[None, :], [r], MOVED, *FITTED)
    assert fit.biased and fit.prob_biased > 0.99
    sb2, sg2 = prior.STACK_BIAS_SD ** 2, prior.plan_spread(*FITTED) ** 2
    assert fit.log_bias == pytest.approx(r * sb2 / (sb2 + sg2 + prior.MEASUREMENT_SD ** 2), rel=1e-6)
    assert factor_at(fit, a) == pytest.approx(r, abs=0.005)
    far = plan(hidden=14, layers=7, pp=4, nodes=7)
    assert factor_at(fit, far) == pytest.approx(fit.log_bias, abs=1e-6)
    assert factor_at(fit, far) > 0.9 * r  # most of the bias reaches every plan


def test_the_same_misfit_is_local_on_a_stack_the_model_prices_loosely(monkeypatch: pytest.MonkeyPatch) -> None:
    """26% off is a bias where the model is within 5% (megatron / A100) but not where its own spread is 22%
    (a stack the model prices loosely; mindspeed / A2 read so before its MoE runs were fitted): one run cannot
    tell a slower cluster from that plan's misfit there."""
    a = plan()
    assert fit_local(a[None, :], [0.26], MOVED, "megatron", "A100").biased
    monkeypatch.setitem(prior.PLAN_SPREAD, ("mindspeed", "A2"), (0.215, 3))
    assert not fit_local(a[None, :], [0.26], MOVED, "mindspeed", "A2").biased
    # an unfitted framework expects a bias: a 10% misfit already moves every plan
    assert fit_local(a[None, :], [0.10], MOVED, "hyperparallel", "A2").biased


def test_several_runs_fit_the_bias_and_reproduce_each_run() -> None:
    rng = np.random.default_rng(7)
    plans = np.stack([plan(tp=t, dp=6 - t, hidden=h) for t in (0, 1, 2, 3) for h in (12, 13)])
    own = rng.normal(0.0, 0.03, len(plans))
    for bias in (0.0, 0.2, -0.25):
        fit = fit_local(plans, list(bias + own), MOVED, *FITTED)
        assert fit.biased == (bias != 0.0)
        assert fit.log_bias == pytest.approx(bias, abs=0.05)
        for x, r in zip(plans, bias + own, strict=True):
            assert factor_at(fit, x) == pytest.approx(r, abs=0.01)


def test_the_local_factor_is_clipped_and_the_span_holds_every_multiplier() -> None:
    anchors = (tuple(plan()),)
    loc = LocalCorrection(moved=("compute",), length_scale=1.0, anchors=anchors, weights=(5.0,),
                          log_bound=math.log(10.0))
    assert local_log_factor(loc, plan()[None, :])[0] == pytest.approx(math.log(10.0))
    ratios = Ratios(time=tuple((g, 0.7 if g == "tp_comm" else 1.2) for g in RATIO_GROUPS), local=loc)
    xs = np.stack([plan(), plan(tp=5), plan(hidden=15, nodes=8)])
    factors = part_factors(ratios, xs)
    lo, hi = multiplier_span(ratios)
    for v in factors.values():
        assert np.all((lo <= np.asarray(v) + 1e-15) & (np.asarray(v) <= hi + 1e-12))
    assert lo == pytest.approx(0.7) and hi == pytest.approx(12.0)  # compute 1.2 × the clipped factor 10
    assert multiplier_span(None) == (1.0, 1.0)
    assert kernel(xs, xs, 1.0)[0, 0] == 1.0


def test_the_ratios_file_keeps_the_local_part() -> None:
    feats = np.stack([plan(), plan(tp=2, dp=4, experts=3)])
    fit = fit_local(feats, [0.3, 0.28], MOVED, *FITTED)
    text = ratios_text("megatron", "A100", {g: math.exp(fit.log_bias) for g in RATIO_GROUPS}, 1.0,
                       [FittedRow("a.yaml", 1.0, 0.74, 1.0)], fit.local)
    ratios, diags = parse_ratios(text, "r.yaml")
    assert not diags and ratios is not None and ratios.local is not None
    assert ratios.local.moved == MOVED
    assert np.allclose(np.asarray(ratios.local.anchors), feats)
    assert ratios.local.weights == pytest.approx(fit.local.weights, abs=1e-6)
    x = plan(tp=1)
    assert local_log_factor(ratios.local, x[None, :])[0] == pytest.approx(
        local_log_factor(fit.local, x[None, :])[0], abs=1e-5)


@pytest.mark.parametrize(("bad", "where"), [
    ("local: {moved: [compute, nonsense], length_scale: 1.0, anchors: []}", "local.moved"),
    ("local: {moved: [compute], length_scale: 0, anchors: []}", "local"),
    ("local: {moved: [compute], length_scale: 1.0, anchors: [{plan: {hidden: 8}, weight: 0.1}]}",
     "local.anchors.0"),
])
def test_a_bad_local_key_is_a_positioned_hp810(bad: str, where: str) -> None:
    text = "framework: megatron\ndevice_type: A100\nratios: {compute: 1.1}\nmemory_ratio: 1.0\n" + bad + "\n"
    ratios, diags = parse_ratios(text, "r.yaml")
    assert ratios is None
    assert any(d.code in ("HP810", "HP110") and d.path == where and d.range.start.line == 4 for d in diags), diags


def test_a_short_or_communication_bound_anchor_keeps_its_misfit_to_itself() -> None:
    """The same 26% misfit is a stack bias on a long compute-bound plan, but on a 0.35 s step (the fixed per-step
    overhead prior.OVERHEAD_S is 27% of it) or a step 80% exposed communication it may be that plan's own: the
    anchor is still reproduced, and no other plan inherits the own part."""
    a = plan()
    r = 0.26
    long_compute = prior.own_spread(0.0, 20.0)
    short = prior.own_spread(0.0, 0.35)
    comm_bound = prior.own_spread(0.8, 60.0)
    assert long_compute < 0.01 < prior.OVERHEAD_S / 0.35 == pytest.approx(short)
    assert comm_bound == pytest.approx(math.hypot(prior.COMM_SPREAD * 0.8, prior.OVERHEAD_S / 60.0))
    assert fit_local(a[None, :], [r], MOVED, *FITTED, own_sd=[long_compute]).biased
    near, far = plan(tp=4, dp=2), plan(hidden=14, layers=7, tp=3, pp=4, nodes=7)
    for spread in (short, comm_bound):
        fit = fit_local(a[None, :], [r], MOVED, *FITTED, own_sd=[spread])
        assert not fit.biased and fit.log_bias == 0.0
        assert factor_at(fit, a) == pytest.approx(r, abs=0.005)  # reproduced: the own part is added at a
        assert fit.local.own[0] > 0.5 * r
        assert 0.0 < factor_at(fit, near) < 0.1 * r  # only the shared part reaches a neighbour
        assert abs(factor_at(fit, far)) < 1e-6


def test_runs_of_one_plan_share_its_own_part() -> None:
    """Two runs at one plan (the same degrees, other run options: eager and compiled) wanting +6.9 % and +5.2 %:
    the own part belongs to the plan, so the plan moves by about their mean, not by their sum (each run adding
    its whole correction there read +9.9 % for both, outside either). One run alone is still reproduced."""
    a = plan()
    r = [math.log(1.069), math.log(1.052)]
    short = prior.own_spread(0.0, 2.8)
    fit = fit_local(np.stack([a, a]), r, MOVED, *FITTED, own_sd=[short, short])
    got = factor_at(fit, a)
    assert min(r) - 0.005 < got < max(r) + 0.005
    assert got == pytest.approx(sum(r) / 2, abs=0.01)
    alone = fit_local(a[None, :], r[:1], MOVED, *FITTED, own_sd=[short])
    assert factor_at(alone, a) == pytest.approx(r[0], abs=0.005)


def test_the_own_part_is_in_the_ratios_file_and_in_the_span() -> None:
    feats = np.stack([plan(), plan(tp=2, dp=4)])
    fit = fit_local(feats, [0.3, -0.1], MOVED, *FITTED, own_sd=[0.3, 0.05])
    assert len(fit.local.own) == 2
    text = ratios_text("megatron", "A100", {g: math.exp(fit.log_bias) for g in RATIO_GROUPS}, 1.0,
                       [FittedRow("a.yaml", 1.0, 0.74, 1.0)], fit.local)
    ratios, diags = parse_ratios(text, "r.yaml")
    assert not diags and ratios is not None and ratios.local is not None
    assert ratios.local.own == pytest.approx(fit.local.own, abs=1e-6)
    for x in feats:
        assert local_log_factor(ratios.local, x[None, :])[0] == pytest.approx(
            local_log_factor(fit.local, x[None, :])[0], abs=1e-5)
    lo, hi = multiplier_span(ratios)
    factors = part_factors(ratios, np.stack([*feats, plan(tp=1)]))
    assert all(np.all((lo - 1e-12 <= np.asarray(v)) & (np.asarray(v) <= hi + 1e-12)) for v in factors.values())
    bad, diags = parse_ratios(text.replace("own: ", "own: x", 1), "r.yaml")
    assert bad is None and diags
