"""Branch and bound (engine.search.bound, engine.search.rank): every bound is at most the exact step time of
every candidate it covers, and the bounded search's top K is the exhaustive one, row for row and digit for
digit, on random models, clusters, batches, budgets and recompute requests."""

from __future__ import annotations

import math
from dataclasses import replace
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.ratios.local import plan_features
from engine.search import rank, search
from engine.search.bound import group_codes, layer_bound, shard_parts, sync_bound
from engine.search.pricing import Pricer, table_of
from engine.search.rank import price_groups, price_space
from engine.search.space import COLUMNS, enumerate_groups, enumerate_space, restrictions
from engine.specs import RATIO_GROUPS, HybridLayers, LocalCorrection, ModelSpec, Ratios, VisionTower
from tests.engine.search.shapes import TINY, TINY_MOE, cluster, make


@st.composite
def local_parts(draw, model, clus):  # type: ignore[no-untyped-def]
    """The local part of a calibration as `hp-plan calibrate --rule local` writes it: some moved groups, and
    one to three anchors at plans of this model and cluster, each with a log-factor weight of either sign
    (up to ±1.5: large enough that a span ignoring the local factor fails these tests)."""
    moved = tuple(g for g in RATIO_GROUPS if draw(st.booleans())) or ("compute",)
    anchors = []
    for _ in range(draw(st.integers(1, 3))):
        degrees = [np.array([draw(st.sampled_from([1, 2, 4]))]) for _ in range(6)]  # tp, pp, cp, ep, dp, mbs
        anchors.append(tuple(float(v) for v in plan_features(model, clus, *degrees)[0]))
    return LocalCorrection(moved=moved, length_scale=draw(st.sampled_from([0.5, 1.0, 2.0])), anchors=tuple(anchors),
                           weights=tuple(draw(st.floats(-1.5, 1.5)) for _ in anchors), log_bound=math.log(10.0))


@st.composite
def configs(draw):  # type: ignore[no-untyped-def]
    moe = draw(st.booleans())
    base = TINY_MOE if moe else TINY
    layers = draw(st.sampled_from([4, 6, 8, 12]))
    kw: dict[str, object] = {"num_layers": layers, "seq_len": draw(st.sampled_from([1024, 2048, 4096])),
                             "mtp_depth": draw(st.sampled_from([0, 0, 1]))}
    if moe:
        kw["first_k_dense"] = draw(st.integers(0, 2))
        kw["num_experts"] = draw(st.sampled_from([4, 8, 16]))
    if not moe and draw(st.booleans()):  # a hybrid Mamba pattern: each pipeline stage holds its own layers' kinds
        pattern = "".join(draw(st.lists(st.sampled_from("M*-"), min_size=layers, max_size=layers)))
        kw["hybrid"] = HybridLayers(attention=pattern.count("*"), mlp=pattern.count("-"), mamba=pattern.count("M"),
                                    mamba_heads=32, mamba_head_dim=64, state=64, groups=4, conv_kernel=4,
                                    pattern=pattern)
    if draw(st.booleans()):  # a vision tower on stage 0 (engine.cost.tower): its weights synchronise too
        kw["vision"] = VisionTower(num_layers=2, hidden=256, heads=4, seq_len=256, ffn=1024, out_hidden=1024, merge=2)
    model: ModelSpec = replace(base, **kw)
    nodes = draw(st.sampled_from([1, 2, 3, 4]))
    per_node = draw(st.sampled_from([4, 8]))
    # Lists and fixed values as a search config declares them (etp 0 follows tp, per row).
    dims = draw(st.sampled_from([{}, {}, {"etp": 0}, {"etp": (1, 2)}, {"fsdp": (1, 2, 4)}, {"tp": (1, 2)},
                                 {"ep": (1, 2), "micro_batch_size": (1, 2)}]))
    cfg = make(model, nodes=nodes, gbs=draw(st.sampled_from([16, 32, 48, 64, 96])),
               recompute=draw(st.sampled_from(["none", "selective", "full", "auto", "per_layer"])),
               memory_limit=draw(st.sampled_from([None, 4.0, 8.0, 16.0, 40.0])), dims=dims)
    # The sharding terms differ by stack (FSDP2's unhidden layer, fp32 reductions), by resharding (ZeRO-2-like
    # FSDP gathers once per step) and the optimizer shard; calibration scales each time part apart.
    ratios = None
    if draw(st.booleans()):
        ratios = Ratios(time=tuple((g, draw(st.sampled_from([0.5, 0.8, 1.0, 1.3, 2.0]))) for g in RATIO_GROUPS),
                        memory=draw(st.sampled_from([0.9, 1.0, 1.2])))
        if draw(st.booleans()):  # a `local` calibration: one stack ratio, and a factor that differs by plan
            s = draw(st.sampled_from([0.8, 1.0, 1.3]))
            ratios = Ratios(time=tuple((g, s) for g in RATIO_GROUPS), memory=ratios.memory,
                            local=draw(local_parts(model, cluster(nodes, per_node))))
    run = replace(cfg.run, framework=draw(st.sampled_from(["megatron", "torchtitan", "hyperparallel"])),
                  reshard_after_forward=draw(st.booleans()), ratios=ratios)
    return replace(cfg, cluster=cluster(nodes, per_node), run=run,
                   optimizer_shard=draw(st.sampled_from([1, 1, 2])))


def _space_and_pricer(cfg):  # type: ignore[no-untyped-def]
    space = enumerate_space(cfg.model, cfg.cluster, cfg.global_batch_size, restrictions(cfg),
                            cp_algo=cfg.run.cp_algo, optimizer_shard=cfg.optimizer_shard)
    budget = cfg.budget_gib if cfg.budget_gib is not None else float("inf")
    return space, Pricer(cfg.model, cfg.cluster, cfg.run, budget)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(configs())
def test_every_bound_is_below_every_candidates_fastest_step(cfg) -> None:  # type: ignore[no-untyped-def]
    space, pricer = _space_and_pricer(cfg)
    n = len(space)
    if n == 0:
        return
    rows = np.arange(n)
    # No recompute is each candidate's fastest plan (recompute only adds time): its step bounds them all.
    fastest = pricer.price(table_of(space.columns, rows, 0)).step_time_s
    gcode, lb = layer_bound(pricer, space.columns, rows)
    assert np.all(lb[gcode] <= fastest)
    shard = shard_parts(pricer, space.columns, rows)
    assert np.all(shard.bound[shard.code] <= fastest)
    # The sync bound is the candidate's own step with no recompute, short of the slack: uncalibrated, and
    # where FSDP's traffic per micro-batch does not depend on their count (it reshards after forward).
    sync = sync_bound(pricer, space.columns, rows, shard, rows)
    assert np.all(sync <= fastest)
    if cfg.run.ratios is None and cfg.run.reshard_after_forward:
        assert np.allclose(sync, fastest, rtol=1e-6)


@SETTINGS
@given(configs(), st.integers(1, 10))
def test_bounded_top_k_is_the_exhaustive_top_k(cfg, top) -> None:  # type: ignore[no-untyped-def]
    space, pricer = _space_and_pricer(cfg)
    if len(space) == 0:
        return
    want = price_space(pricer, space, cfg.recompute, top=top, model=cfg.model, exhaustive=True)
    with mock.patch.object(rank, "SEED_ROWS", 8):  # bound even these small spaces
        got = price_space(pricer, space, cfg.recompute, top=top, model=cfg.model)
    w, g = want.order(top), got.order(top)
    assert w.tolist() == g.tolist()
    for name in ("step", "peak", "mode"):
        assert getattr(want, name)[w].tolist() == getattr(got, name)[g].tolist()
    for r in w.tolist():
        a, b = want.layer_modes.get(r), got.layer_modes.get(r)
        assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist())
    # A row the bounded search says fits does fit; each row it did not price may or may not.
    assert not np.any(got.feasible & ~want.feasible)
    assert int(got.feasible.sum()) <= int(want.feasible.sum()) <= int(got.feasible.sum()) + got.unpriced


def test_search_reports_what_it_bounded_out() -> None:
    cfg = make(TINY_MOE, nodes=4, gbs=96, recompute="auto")
    res = search(cfg)
    assert res.best is not None and res.unpriced > 0
    assert res.feasible + res.over_budget + res.unpriced == res.evaluated
    assert res.to_json()["unpriced"] == res.unpriced


def test_group_codes_number_groups_by_first_row() -> None:
    cols = {"a": np.array([3, 1, 3, 2, 1]), "b": np.array([0, 0, 0, 5, 0])}
    code, first = group_codes(cols, ("a", "b"))
    assert code.tolist() == [0, 1, 0, 2, 1] and first.tolist() == [0, 1, 3]
    code, first = group_codes(cols, ("a",), np.array([4, 3, 1]))
    assert code.tolist() == [0, 1, 0] and first.tolist() == [0, 1]


@SETTINGS
@given(configs(), st.integers(1, 10))
def test_factored_top_k_is_the_exhaustive_top_k(cfg, top) -> None:  # type: ignore[no-untyped-def]
    """The search's own path: groups bounded before their candidates become rows (price_groups)."""
    space, pricer = _space_and_pricer(cfg)
    if len(space) == 0:
        return
    groups = enumerate_groups(cfg.model, cfg.cluster, cfg.global_batch_size, restrictions(cfg),
                              cp_algo=cfg.run.cp_algo, optimizer_shard=cfg.optimizer_shard)
    assert groups.total == len(space)
    want = price_space(pricer, space, cfg.recompute, top=top, model=cfg.model, exhaustive=True)
    with mock.patch.object(rank, "SEED_ROWS", 8), mock.patch.object(rank, "BEST_FIRST_ROWS", 4):
        sub, got = price_groups(pricer, groups, cfg.recompute, top=top, model=cfg.model)
    assert got.unpriced == len(space) - len(sub)
    w, g = want.order(top), got.order(top)

    def rows(s, idx):  # type: ignore[no-untyped-def]
        return [tuple(int(s.columns[k][i]) for k in COLUMNS) for i in idx.tolist()]

    assert rows(space, w) == rows(sub, g)
    for name in ("step", "peak", "mode"):
        assert getattr(want, name)[w].tolist() == getattr(got, name)[g].tolist()
    for a_r, b_r in zip(w.tolist(), g.tolist(), strict=True):
        a, b = want.layer_modes.get(a_r), got.layer_modes.get(b_r)
        assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist())


def test_a_heavier_micro_batch_is_priced_where_fewer_micro_batches_hold_fewer_gradients() -> None:
    """An interleaved FSDP2 pipeline under 2·pp micro-batches keeps one chunk's unsharded gradients, not every
    chunk's: at a fixed batch the larger micro-batch can fit where the smaller one does not, so the exhaustive
    pricing must not skip it because its lighter neighbour failed (a case Hypothesis found)."""
    model = replace(TINY_MOE, num_layers=12, seq_len=1024, num_experts=16, first_k_dense=0)
    cfg = make(model, nodes=1, gbs=16, recompute="none", memory_limit=4.0)
    ratios = Ratios(time=tuple((g, 0.5) for g in RATIO_GROUPS), memory=0.9)
    cfg = replace(cfg, run=replace(cfg.run, framework="torchtitan", reshard_after_forward=False, ratios=ratios))
    space, pricer = _space_and_pricer(cfg)
    c = space.columns
    at = {k: int(v) for k, v in (("tp", 2), ("pp", 2), ("dp", 2), ("fsdp", 2), ("vpp", 6), ("cp", 1), ("ep", 1))}
    same = np.logical_and.reduce([c[k] == v for k, v in at.items()])
    light, heavy = (np.flatnonzero(same & (c["mbs"] == b)) for b in (2, 4))
    assert light.size and heavy.size
    priced = [pricer.price(table_of(c, rows, 0)) for rows in (light, heavy)]
    assert not priced[0].fits.any() and priced[1].fits.any()  # the shape this test is about
    want = price_space(pricer, space, cfg.recompute, top=1, model=cfg.model, exhaustive=True)
    assert want.feasible[heavy].any()
