"""price_table over many rows equals estimate one by one, to the last digit; per-layer plans are priced
exactly; the knapsack inputs are consistent with the priced stages."""

from __future__ import annotations

import numpy as np
import pytest

from engine.cost import CandidateTable, estimate, plan_from_layer_modes, plan_layer_modes, price_table
from engine.cost.layout import layer_stage
from engine.results import MEMORY_TERMS, TIME_TERMS
from engine.specs import ModelSpec, PipelineLayout, RecomputePlan, RunOptions, Strategy
from tests.engine.cost.shapes import DSV3, LLAMA70B, cluster


def random_rows(model: ModelSpec, world: int, n: int, seed: int) -> CandidateTable:
    rng = np.random.default_rng(seed)
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 8], n)
    cp = rng.choice([1, 2], n)
    dp = world // (tp * pp * cp)
    sched = rng.integers(0, 2, n)
    return CandidateTable.from_columns(
        dp=dp, tp=tp, pp=pp, cp=cp, ep=np.minimum(rng.choice([1, 2, 4], n), dp) if model.is_moe else 1,
        vpp=np.where(sched == 1, 2, 1), schedule=sched, micro_batch_size=rng.choice([1, 2], n),
        micro_batch_num=rng.choice([8, 16], n), sequence_parallel=rng.random(n) < 0.5,
        recompute=rng.integers(0, 3, n), dp_shard=np.where(rng.random(n) < 0.3, dp * cp, 1),
        optimizer_shard=np.where(rng.random(n) < 0.3, dp, 1),
    )


LAYOUTS = {"even": PipelineLayout(), "embedding+loss": PipelineLayout(embedding_in_split=True, loss_in_split=True),
           "first/last": PipelineLayout(first_stage_layers=8, last_stage_layers=8)}
# The memory-as-trained facts (D-010) in the same contract: recompute modules, TransformerEngine FP8 saved
# inputs and the fused loss (megatron on H100); FSDP2's states, PP-unsharded weights and gradients, the
# vocabulary-parallel loss (torchtitan).
RUNS = [(RunOptions(cp_algo="ring"), "A100"),
        (RunOptions(framework="megatron", recompute_modules=("layernorm", "mla_up_proj", "moe_act", "mlp"), fp8=True),
         "H100"),
        (RunOptions(framework="torchtitan"), "H100")]


@pytest.mark.parametrize("model", [LLAMA70B, DSV3])
@pytest.mark.parametrize(("run", "device"), RUNS)
def test_vectorised_equals_one_by_one(model: ModelSpec, run: RunOptions, device: str) -> None:
    _table_equals_one_by_one(model, run, device)


@pytest.mark.parametrize("layout", [k for k in LAYOUTS if k != "even"])
@pytest.mark.parametrize("model", [LLAMA70B, DSV3])
def test_vectorised_equals_one_by_one_under_a_stated_layout(model: ModelSpec, layout: str) -> None:
    """A stated pipeline layout (engine.cost.layout) applies to some rows' pp·vpp and not to others."""
    _table_equals_one_by_one(model, RunOptions(cp_algo="ring", pipeline_layout=LAYOUTS[layout]), "A100")


def _table_equals_one_by_one(model: ModelSpec, run: RunOptions, device: str) -> None:
    cl = cluster(32, device)
    table = random_rows(model, cl.world_size, 60, seed=1)
    pr = price_table(model, cl, run, table, 76.0)
    for i in range(len(table)):
        e = estimate(model, cl, run, table.strategy(i), 76.0)
        assert e.step_time_s == float(pr.step_time_s[i])
        assert e.peak_memory_gib == float(pr.peak_gib[i])
        assert e.mfu == float(pr.mfu[i])
        assert e.fits == bool(pr.fits[i])
        assert e.stage_memory_gib == tuple(float(x) for x in pr.stage_memory_gib[i, : table.pp[i]])
        for k in MEMORY_TERMS:
            assert e.memory_breakdown_gib[k] == float(pr.memory_terms[k][i])
        for k in TIME_TERMS:
            assert e.time_breakdown_s[k] == float(pr.time_terms[k][i])
        assert np.isnan(pr.stage_memory_gib[i, table.pp[i]:]).all()


def test_layer_modes_uniform_equal_the_recompute_column() -> None:
    cl = cluster(8)
    rows = [Strategy(dp=2, tp=4, pp=8, micro_batch_num=16, recompute=RecomputePlan(m)) for m in ("off", "selective", "full")]
    plain = price_table(LLAMA70B, cl, RunOptions(), CandidateTable.from_strategies(rows), 80.0)
    lm = np.stack([np.full(80, c, dtype=np.int8) for c in (0, 1, 2)])
    tab = CandidateTable.from_strategies(rows)
    tab = CandidateTable(**{**{f: getattr(tab, f) for f in tab.__dataclass_fields__}, "layer_modes": lm})
    by_layer = price_table(LLAMA70B, cl, RunOptions(), tab, 80.0)
    np.testing.assert_allclose(by_layer.step_time_s, plain.step_time_s, rtol=1e-12)
    np.testing.assert_allclose(by_layer.peak_gib, plain.peak_gib, rtol=1e-12)


def test_per_layer_plan_priced_from_mode_of() -> None:
    cl = cluster(8)
    plan = RecomputePlan("selective", layers=((0, 9, "full"), (70, 79, "off")))
    s = Strategy(dp=2, tp=4, pp=8, micro_batch_num=16, sequence_parallel=True, recompute=plan)
    e = estimate(LLAMA70B, cl, RunOptions(), s, 80.0)
    tab = CandidateTable.from_strategies([s], num_layers=80)
    assert tab.layer_modes is not None
    assert tab.layer_modes[0].tolist() == [plan_layer_modes(plan, 80)[i] for i in range(80)]
    pr = price_table(LLAMA70B, cl, RunOptions(), tab, 80.0)
    assert e.step_time_s == float(pr.step_time_s[0])
    # reconstruct stage memory from the knapsack inputs with the plan's per-stage mode counts
    stage = layer_stage(80, np.array([8]), np.array([1]))[0]
    modes = plan_layer_modes(plan, 80)
    for i in range(8):
        acts = sum(pr.layer_act_gib[0, i, 0, modes[j]] for j in range(80) if stage[j] == i)
        expect = pr.stage_static_gib[0, i] + pr.stage_fixed_gib[0, i] + acts
        assert pr.stage_memory_gib[0, i] == pytest.approx(expect, rel=1e-12)
    # stage 0 (all full) is lighter than a stage of selective layers would be; stage 7 (off) the heaviest per layer
    assert pr.layer_extra_time_s[0, 0, 0] == 0.0
    assert pr.layer_extra_time_s[0, 0, 2] > pr.layer_extra_time_s[0, 0, 1] > 0
    # round trip
    assert plan_from_layer_modes(modes, default="selective") == plan
    assert tab.strategy(0).recompute == plan


def test_layer_time_per_step_scales_with_micro_batches() -> None:
    cl = cluster(8)
    rows = [Strategy(dp=4, tp=8, pp=2, micro_batch_num=m) for m in (4, 8)]
    pr = price_table(LLAMA70B, cl, RunOptions(), CandidateTable.from_strategies(rows), 80.0)
    np.testing.assert_allclose(pr.layer_time_s[1], 2 * pr.layer_time_s[0], rtol=1e-12)


def test_moe_layer_types_per_stage() -> None:
    cl = cluster(32)
    s = Strategy(dp=16, tp=1, pp=16, ep=8, micro_batch_num=16, recompute=RecomputePlan("full", layers=((0, 2, "off"),)))
    tab = CandidateTable.from_strategies([s], num_layers=DSV3.num_layers + DSV3.mtp_depth)
    pr = price_table(DSV3, cl, RunOptions(), tab, 1e6)
    assert pr.layer_count[0, 0].tolist() == [3, 0]
    # MoE layers keep more activations than dense ones in the same mode (routed copies of each token)
    assert pr.layer_act_one_gib[0, 1, 0] > 0 and pr.layer_act_one_gib[0, 0, 2] == pr.layer_act_one_gib[0, 1, 2]
    assert estimate(DSV3, cl, RunOptions(), s, 1e6).step_time_s == float(pr.step_time_s[0])


def test_blocked_pricing_is_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.cost.price as price

    cl = cluster(32)
    table = random_rows(DSV3, cl.world_size, 50, seed=3)
    whole = price_table(DSV3, cl, RunOptions(), table, 76.0)
    monkeypatch.setattr(price, "BLOCK_ROWS", 7)
    blocked = price_table(DSV3, cl, RunOptions(), table, 76.0)
    np.testing.assert_array_equal(whole.step_time_s, blocked.step_time_s)
    np.testing.assert_array_equal(whole.stage_memory_gib, blocked.stage_memory_gib)
    np.testing.assert_array_equal(whole.layer_act_gib, blocked.layer_act_gib)
    for k in TIME_TERMS:
        np.testing.assert_array_equal(whole.time_terms[k], blocked.time_terms[k])
    for k in MEMORY_TERMS:
        np.testing.assert_array_equal(whole.stage_memory_terms[k], blocked.stage_memory_terms[k])


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    return a == b


@pytest.mark.parametrize("model", [LLAMA70B, DSV3])
def test_a_table_priced_without_its_parts_differs_only_there(model: ModelSpec) -> None:
    """price_table(parts=False), what a search's bulk passes ask for: every figure the same to the last digit, the
    explanation's parts empty; a calibrated run scales those parts, so it keeps them."""
    from dataclasses import fields

    from engine.specs import Ratios

    cl = cluster(32)
    table = random_rows(model, cl.world_size, 40, seed=5)
    full = price_table(model, cl, RunOptions(), table, 76.0)
    lean = price_table(model, cl, RunOptions(), table, 76.0, parts=False)
    explained = {"stage_time_parts", "time_parts", "host_launches"}
    assert full.stage_time_parts and full.time_parts and full.host_launches.size == len(table)
    assert not lean.stage_time_parts and not lean.time_parts and lean.host_launches.size == 0
    for f in fields(full):
        if f.name not in explained:
            assert _same(getattr(full, f.name), getattr(lean, f.name)), f.name
    calibrated = RunOptions(ratios=Ratios(time=(("compute", 1.5),)))
    kept = price_table(model, cl, calibrated, table, 76.0, parts=False)
    assert _same(kept.time_parts, price_table(model, cl, calibrated, table, 76.0).time_parts) and kept.time_parts
