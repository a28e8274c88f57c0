"""Near-ties (engine.cost.equivalence): within the fastest plan's ordering spread the simpler plan leads; a plan
differing from the fastest in what only one of them carries (a context parallelism no run checked,
Estimate.own_terms) is compared to a band wider by first contact, since that error does not cancel."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.cost import estimate
from engine.cost.band import FIRST_CONTACT, pair_spread, quantile
from engine.cost.equivalence import rank_equivalent
from engine.specs import Strategy
from tests.engine.search.shapes import TINY, make


def _pair() -> tuple:  # type: ignore[type-arg]
    cfg = make(TINY, recompute="none")
    simple = Strategy(dp=cfg.cluster.world_size, micro_batch_size=1,
                      micro_batch_num=cfg.global_batch_size // cfg.cluster.world_size)
    e = estimate(cfg.model, cfg.cluster, cfg.run, simple, cfg.budget_gib)
    assert e.fits and e.order_spread > 0
    return e, replace(e, strategy=replace(e.strategy, cp=4, dp=e.strategy.dp // 4))


def test_a_plan_with_its_own_term_is_equivalent_to_a_wider_band() -> None:
    simple, exotic = _pair()
    fc = quantile([abs(d) for d in FIRST_CONTACT])
    band = simple.order_spread
    slower = 1 + (band + pair_spread(band, 0.0, 1)) / 2  # outside the plain band, inside the widened one
    assert 1 + band < slower < 1 + (band * band + fc * fc) ** 0.5
    fast = replace(exotic, step_time_s=simple.step_time_s / slower, own_terms=("context parallelism (ring) over 4",))
    ranked = rank_equivalent([simple, fast])
    assert ranked.estimates[0] is simple and ranked.equivalent == (True, True)  # the simpler plan leads
    # without the term the exotic plan is simply faster: outside the band, it leads
    plain = replace(fast, own_terms=())
    ranked = rank_equivalent([simple, plain])
    assert ranked.estimates[0] is plain and ranked.equivalent == (True, False)


def test_a_stated_band_is_not_widened() -> None:
    simple, exotic = _pair()
    fast = replace(exotic, step_time_s=simple.step_time_s / (1 + 2 * simple.order_spread), own_terms=("x",))
    assert rank_equivalent([simple, fast], band=simple.order_spread).estimates[0] is fast
    assert pair_spread(0.1, 0.1) == pytest.approx(0.1 * 2 ** 0.5)


def test_a_slower_plans_own_uncertainty_does_not_make_it_a_tie() -> None:
    """The fastest plan carries no unchecked term and an exotic one 10 % slower does: the exotic plan stays
    outside the fastest plan's band (its own uncertainty would only rank it above faster, simpler plans)."""
    simple, exotic = _pair()
    slower = replace(exotic, step_time_s=simple.step_time_s * (1 + simple.order_spread + 0.06),
                     own_terms=("context parallelism (ring) over 4",))
    ranked = rank_equivalent([simple, slower])
    assert ranked.estimates == (simple, slower) and ranked.equivalent == (True, False)
