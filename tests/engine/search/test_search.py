"""search(): the optimum of brute-force pricing, agreement with estimate, recompute choices, determinism,
progress and cancellation."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import product

import numpy as np
import pytest

from engine.catalog.frameworks import framework_of
from engine.cost import estimate
from engine.cost.band import own_lead, pair_spread
from engine.cost.equivalence import complexity, rank_equivalent, tight
from engine.search import search
from engine.search.passes import ACCOUNTED, accounting_pps
from engine.specs import RECOMPUTE_MODES, RecomputePlan, Strategy
from tests.engine.search.reference import loop_space
from tests.engine.search.shapes import TINY, TINY_MOE, make

MODES = {"none": ("off",), "selective": ("selective",), "full": ("full",), "auto": RECOMPUTE_MODES}


def brute_force(cfg, modes):  # type: ignore[no-untyped-def]
    """Price every candidate of the plain-loop space one by one through estimate; the best as the search
    ranks (engine.cost.equivalence: the simplest plan within the error band of the fastest). Where the
    framework offers the embedding and loss in the pipeline split and the search looks at it (Megatron-Core;
    engine.search.passes.accounting_pps), every candidate with those pp whose pp·vpp divides the layers + 2 is priced
    under that layout too and ranked with the rest."""
    restrict = {k: (None if d.state in ("auto", "absent") else d.values) for k, d in cfg.dimensions.items()}
    fitting: list = []
    n = _price_loop(cfg, cfg.model, cfg.run, restrict, modes, fitting, None)
    pps = accounting_pps(cfg)
    if pps:
        slots = cfg.model.num_layers + 2  # the candidates of the split with the embedding and loss in it
        run = replace(cfg.run, pipeline_layout=ACCOUNTED)
        n += _price_loop(cfg, replace(cfg.model, num_layers=slots), run, restrict, modes, fitting,
                         lambda pp, vpp: pp in pps and slots % (pp * vpp) == 0)
    ranked = rank_equivalent(fitting).estimates
    return (ranked[0] if ranked else None), n


def _price_loop(cfg, space_model, run, restrict, modes, fitting, keep) -> int:  # type: ignore[no-untyped-def]
    n = 0
    stack = framework_of(run).space
    for tp, pp, cp, dp, mbs, mbn, fsdp, etp, ep, vpp, sp in sorted(loop_space(space_model, cfg.cluster,
                                                                                cfg.global_batch_size, restrict, stack)):
        if keep is not None and not keep(pp, vpp):
            continue
        for mode in modes:
            s = Strategy(dp=dp, dp_shard=fsdp, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, vpp=vpp, micro_batch_size=mbs,
                         micro_batch_num=mbn, sequence_parallel=bool(sp), recompute=RecomputePlan(mode),
                         pipeline_schedule="interleaved" if vpp > 1 else "1F1B",
                         optimizer_shard=dp * cp if stack.distributed_optimizer else 1)
            e = estimate(cfg.model, cfg.cluster, run, s, cfg.budget_gib)
            n += 1
            if e.fits:
                fitting.append(e if keep is None else replace(e, pipeline_layout=ACCOUNTED))
    return n


@pytest.mark.parametrize(("model", "recompute", "kw"), [
    (TINY, "auto", {}),
    (TINY, "none", {"memory_limit": 12.0}),
    (TINY, "selective", {"gbs": 32}),
    (TINY_MOE, "full", {"dims": {"micro_batch_size": (1, 2)}}),
    (TINY_MOE, "auto", {"memory_limit": 20.0, "dims": {"pp": (1, 2), "vpp": 1}}),
])
def test_search_equals_brute_force(model, recompute, kw) -> None:  # type: ignore[no-untyped-def]
    cfg = make(model, nodes=1, recompute=recompute, **kw)
    res = search(cfg)
    want, _ = brute_force(cfg, MODES[recompute])
    assert not [d for d in res.diagnostics if d.code == "HP900"], res.diagnostics
    if want is None:
        assert res.best is None
        return
    assert res.best is not None
    assert res.best.step_time_s == want.step_time_s
    assert res.best.peak_memory_gib == want.peak_memory_gib
    assert res.best.strategy == want.strategy


def test_fixed_everything_equals_estimate() -> None:
    s = Strategy(dp=4, dp_shard=2, tp=2, pp=2, cp=1, micro_batch_size=2, micro_batch_num=8,
                 sequence_parallel=True, recompute=RecomputePlan("selective"))
    cfg = make(TINY, recompute="selective", dims={"dp": 4, "fsdp": 2, "tp": 2, "pp": 2, "cp": 1, "ep": 1, "vpp": 1,
                                                  "micro_batch_size": 2, "micro_batch_num": 8,
                                                  "sequence_parallel": 1})
    # HSDP (FSDP over 2 of the 4 data-parallel ranks) with pipeline parallelism is torchtitan's, not Megatron's.
    cfg = replace(cfg, run=replace(cfg.run, framework="torchtitan"))
    res = search(cfg)
    assert res.evaluated == 1 and res.best is not None
    e = estimate(cfg.model, cfg.cluster, cfg.run, s, cfg.budget_gib)
    assert res.best.to_json() == e.to_json()


def test_top_is_ranked_and_every_entry_is_its_own_estimate() -> None:
    cfg = make(TINY, recompute="auto")
    res = search(cfg, top=7)
    assert len(res.top) == 7 and res.best == res.top[0]
    assert len(res.equivalent) == 7 and res.equivalent[0]
    near = [e for e, q in zip(res.top, res.equivalent, strict=True) if q]
    rest = [e for e, q in zip(res.top, res.equivalent, strict=True) if not q]
    assert list(res.equivalent) == [True] * len(near) + [False] * len(rest)
    fastest = min(res.top, key=lambda e: e.step_time_s)
    assert res.band == fastest.order_spread > 0  # the fastest plan's own band (engine.cost.band)
    # where the fastest plan's lead rests on a context parallelism no run checked (Estimate.own_terms), its band
    # is wider by first contact per such term the other plan lacks
    assert all(e.step_time_s <= fastest.step_time_s
               * (1 + pair_spread(res.band, 0.0, own_lead(fastest.own_terms, e.own_terms))) for e in near)
    assert all(e.step_time_s > fastest.step_time_s
               * (1 + pair_spread(res.band, 0.0, own_lead(fastest.own_terms, e.own_terms))) for e in rest)
    simple = [(*complexity(e), tight(e), e.step_time_s, e.peak_memory_gib) for e in near]
    assert simple == sorted(simple)
    keys = [(e.step_time_s, e.peak_memory_gib) for e in rest]
    assert keys == sorted(keys)
    assert len({e.strategy for e in res.top}) == 7
    for e in res.top:
        assert e.fits
        again = estimate(cfg.model, cfg.cluster, cfg.run, e.strategy, cfg.budget_gib)
        assert again.to_json() == e.to_json()
        st = e.strategy
        assert st.dp * st.tp * st.pp * st.cp == cfg.cluster.world_size
        assert st.global_batch_size == cfg.global_batch_size


def test_auto_picks_the_fastest_mode_that_fits() -> None:
    cfg = make(TINY, recompute="auto", memory_limit=6.0)
    res = search(cfg)
    assert res.best is not None
    for mode in RECOMPUTE_MODES:
        s = Strategy(**{**_fields(res.best.strategy), "recompute": RecomputePlan(mode)})
        e = estimate(cfg.model, cfg.cluster, cfg.run, s, cfg.budget_gib)
        if e.fits:
            assert e.step_time_s >= res.best.step_time_s


def _fields(s: Strategy) -> dict:
    return {f: getattr(s, f) for f in s.__dataclass_fields__}


def test_per_layer_is_never_slower_than_auto_and_reprices_exactly() -> None:
    for limit in (4.0, 6.0, 9.0):
        auto = search(make(TINY, recompute="auto", memory_limit=limit))
        per = search(make(TINY, recompute="per_layer", memory_limit=limit))
        if auto.best is None:
            continue
        assert per.best is not None
        assert per.best.step_time_s <= auto.best.step_time_s
        cfg = make(TINY)
        e = estimate(TINY, cfg.cluster, cfg.run, per.best.strategy, limit)
        assert e.step_time_s == per.best.step_time_s and e.fits


def test_per_layer_plan_is_optimal_for_its_strategy_on_a_small_model() -> None:
    small = TINY.__class__(**{**_fields(TINY), "num_layers": 4})
    for limit in (3.0, 4.0, 5.0, 7.0):
        cfg = make(small, nodes=1, recompute="per_layer", memory_limit=limit,
                   dims={"tp": 2, "pp": 2, "cp": 1, "vpp": 1, "micro_batch_size": 1, "fsdp": 1,
                         "sequence_parallel": 1})
        res = search(cfg)
        if res.best is None:
            continue
        base = _fields(res.best.strategy)
        best = math.inf
        for codes in product(range(3), repeat=4):
            layers = tuple((i, i, RECOMPUTE_MODES[c]) for i, c in enumerate(codes))
            s = Strategy(**{**base, "recompute": RecomputePlan("off", layers)})
            e = estimate(small, cfg.cluster, cfg.run, s, limit)
            if e.fits:
                best = min(best, e.step_time_s)
        assert res.best.step_time_s <= best * (1 + 1e-12)


def test_deterministic_and_stateless() -> None:
    a = search(make(TINY_MOE, recompute="auto"))
    search(make(TINY, recompute="per_layer", memory_limit=5.0))  # another search in between
    b = search(make(TINY_MOE, recompute="auto"))
    assert a.to_json() | {"elapsed_s": 0} == b.to_json() | {"elapsed_s": 0}


def test_progress_rises_to_one_and_cancel_stops() -> None:
    seen: list[float] = []
    res = search(make(TINY), progress=seen.append)
    assert seen and seen[-1] == 1.0 and all(np.diff(seen) >= 0) and res.best is not None
    stopped = search(make(TINY), cancelled=lambda: True)
    assert stopped.best is None and stopped.diagnostics == ()


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_random_lists_equal_brute_force(seed: int) -> None:
    """Random candidate lists (some unreachable, some empty together) on random budgets and batches."""
    rng = np.random.default_rng(seed)

    def pick(values: list[int]) -> tuple[int, ...]:
        k = int(rng.integers(1, len(values) + 1))
        return tuple(sorted(int(v) for v in rng.choice(values, size=k, replace=False)))

    dims: dict = {}
    for name, values in (("tp", [1, 2, 4, 8]), ("pp", [1, 2, 4]), ("micro_batch_size", [1, 2, 4]),
                         ("fsdp", [1, 2, 4, 8]), ("sequence_parallel", [0, 1])):
        if rng.random() < 0.6:
            dims[name] = pick(values)
    model = TINY_MOE if seed % 2 else TINY
    recompute = ["none", "selective", "full", "auto"][seed % 4]
    cfg = make(model, nodes=1, gbs=int(rng.choice([16, 32, 64])), recompute=recompute,
               memory_limit=float(rng.uniform(2.0, 12.0)), dims=dims)
    res = search(cfg)
    want, _ = brute_force(cfg, MODES[recompute])
    assert not [d for d in res.diagnostics if d.code == "HP900"], res.diagnostics
    if want is None:
        assert res.best is None and res.diagnostics and res.diagnostics[0].code.startswith("HP6")
    else:
        assert res.best is not None and res.best.strategy == want.strategy
        assert res.best.step_time_s == want.step_time_s


def test_mode_peaks_equal_pricing_each_mode() -> None:
    from engine.search.pricing import Pricer, table_of
    from engine.search.rank import mode_peaks
    from engine.search.space import enumerate_space

    for model in (TINY, TINY_MOE):
        cfg = make(model, nodes=2)
        space = enumerate_space(cfg.model, cfg.cluster, 64, {})
        pricer = Pricer(cfg.model, cfg.cluster, cfg.run, 80.0)
        idx = np.arange(0, len(space), 3)
        peaks = mode_peaks(pricer.price(table_of(space.columns, idx, 0)))
        assert np.array_equal(mode_peaks(pricer.price(table_of(space.columns, idx, 0)), None, (2,))[:, 0],
                              peaks[:, 2])
        for m in range(3):
            exact = pricer.price(table_of(space.columns, idx, m)).peak_gib
            assert np.allclose(peaks[:, m], exact, rtol=1e-12, atol=1e-12)
