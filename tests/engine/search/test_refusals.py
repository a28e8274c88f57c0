"""Refusals: the right code, at the right list or value, with the numbers that explain it."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from engine.catalog.frameworks import framework_of
from engine.cost import estimate
from engine.search import compare_stated, search
from engine.search.refusals import gib
from engine.specs import RecomputePlan, RunOptions, Strategy
from tests.engine.search.reference import loop_space
from tests.engine.search.shapes import TINY, loc, make
from tests.support.cli import ROOT, hp_plan


def codes(res) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.code for d in res.diagnostics]


def test_global_batch_that_no_dp_can_make() -> None:
    cfg = make(TINY, nodes=1, gbs=12, dims={"tp": 1, "pp": 1, "cp": 1})
    res = search(cfg)
    assert res.best is None and codes(res) == ["HP600"]
    d = res.diagnostics[0]
    assert d.range == loc(3).value and d.path == "constraint.global_batch_size"
    assert "global batch of 12" in d.message and "[8]" in d.message
    assert "Batch sizes that would work: 8 or 16" in d.message
    assert "parallelism.tp" in d.message  # widening tp alone lets dp = 4 make 12
    assert d.data["suggested_global_batch_size"] == [8, 16]


def test_a_list_no_value_of_which_runs_names_the_list_the_rule_and_what_fits() -> None:
    cfg = make(TINY, nodes=2, dims={"tp": (16,)})
    res = search(cfg)
    assert res.best is None and codes(res) == ["HP601"]
    d = res.diagnostics[0]
    assert d.path == "parallelism.tp" and d.range == cfg.dimensions["tp"].location.value
    assert "parallelism.tp asks [16]" in d.message
    assert "tp 16: tp does not divide the attention or KV heads" in d.message
    assert d.data["asked"] == [16] and d.data["fitting"] == [1, 2, 4]  # 4 KV heads


def test_a_listed_tp_beyond_a_node_is_priced() -> None:
    """tp across nodes runs (its collectives cross the NIC: priced so); `auto` leaves it out, a list keeps it, as
    HyperParallel's search bounds tp by the heads only ([HP] §5.6)."""
    wide = replace(TINY, kv_heads=16)
    listed = search(make(wide, nodes=2, dims={"tp": (16,)}))
    assert listed.best is not None and listed.best.strategy.tp == 16
    auto = search(make(wide, nodes=2))
    assert auto.best is not None and all(e.strategy.tp <= 8 for e in auto.top)


def test_lists_met_one_by_one_but_never_together() -> None:
    # HyperParallel's checker refuses sequence parallelism with the cp values it varies ([HP] §5.6.1); a single
    # stated cp is no candidate (§5.13): test_a_single_stated_cp_runs_beside_sequence_parallelism.
    cfg = make(TINY, nodes=1, dims={"tp": 2, "cp": (2, 4), "sequence_parallel": 1})
    cfg = replace(cfg, run=RunOptions(framework="hyperparallel"))
    res = search(cfg)
    assert codes(res) == ["HP601"]
    d = res.diagnostics[0]
    assert "never all at once" in d.message and "sequence parallelism with cp > 1" in d.message
    assert d.path in ("parallelism.cp", "parallelism.sequence_parallel")


def test_a_single_stated_cp_runs_beside_sequence_parallelism() -> None:
    """HyperParallel's Ulysses example states SP with cp 2 and its trainer runs it: the search keeps that cp."""
    cfg = make(TINY, nodes=1, dims={"tp": 2, "cp": (2,), "sequence_parallel": 1})
    res = search(replace(cfg, run=RunOptions(framework="hyperparallel")))
    assert res.best is not None and res.best.strategy.sequence_parallel and res.best.strategy.cp == 2


def test_megatron_runs_sequence_parallelism_with_context_parallelism() -> None:
    """NeMo and Megatron-Bridge run TP + SP + CP: the same lists find a plan for Megatron."""
    res = search(make(TINY, nodes=1, dims={"tp": 2, "cp": (2,), "sequence_parallel": 1}))
    assert res.best is not None and res.best.strategy.sequence_parallel and res.best.strategy.cp == 2


def _lightest(cfg, restrict: dict) -> float:  # type: ignore[no-untyped-def]
    """The lightest peak of every candidate in `restrict`, priced one by one without recompute."""
    return min(
        estimate(cfg.model, cfg.cluster, cfg.run, Strategy(
            dp=dp, dp_shard=f, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, vpp=v, micro_batch_size=mbs, micro_batch_num=mbn,
            sequence_parallel=bool(sp), recompute=RecomputePlan("off"),
            pipeline_schedule="interleaved" if v > 1 else "1F1B"), 1e9).peak_memory_gib
        for tp, pp, cp, dp, mbs, mbn, f, etp, ep, v, sp in loop_space(cfg.model, cfg.cluster, cfg.global_batch_size,
                                                                       restrict, framework_of(cfg.run).space))


def test_lists_whose_strategies_are_all_over_budget() -> None:
    # A budget between the lightest strategy in the lists and the lightest of all: only the lists fail.
    lists = {"tp": (1,), "pp": (1,), "cp": (1,)}
    base = make(TINY, nodes=1, recompute="none", dims=lists)
    in_lists, overall = _lightest(base, lists), _lightest(base, {})
    assert overall < in_lists
    budget = (in_lists + overall) / 2
    res = search(replace(base, memory_limit_gb=budget))
    assert codes(res) == ["HP601"]
    d = res.diagnostics[0]
    assert ("the strategies that fit take" in d.message or "never all at once" in d.message)
    assert d.path.startswith("parallelism.")
    assert f"Within the lists the lightest strategy needs {gib(in_lists)} of the {gib(budget)} budget" in d.message
    # Below the lightest of all, it is the budget that is refused.
    res = search(replace(base, memory_limit_gb=overall * 0.99))
    assert codes(res) == ["HP602"]
    assert f"needs {gib(overall)}" in res.diagnostics[0].message


def test_nothing_fits_the_budget_quotes_the_lightest_and_what_would_fit() -> None:
    cfg = make(TINY, nodes=1, memory_limit=0.6, recompute="none")
    res = search(cfg)
    assert res.best is None and codes(res) == ["HP602"]
    d = res.diagnostics[0]
    assert d.path == "constraint.memory_limit_gb" and d.range == loc(4).value
    # The lightest quoted is the lightest of all candidates priced one by one.
    lightest = min(
        estimate(cfg.model, cfg.cluster, cfg.run, Strategy(
            dp=dp, dp_shard=f, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, vpp=v, micro_batch_size=mbs, micro_batch_num=mbn,
            sequence_parallel=bool(sp), recompute=RecomputePlan("off"),
            pipeline_schedule="interleaved" if v > 1 else "1F1B"), 0.6).peak_memory_gib
        for tp, pp, cp, dp, mbs, mbn, f, etp, ep, v, sp in loop_space(cfg.model, cfg.cluster, 64, {},
                                                                       framework_of(cfg.run).space))
    assert f"needs {gib(lightest)}" in d.message
    assert "budget of 0.60 GiB" in d.message
    assert d.data["lightest_gib"] == lightest
    assert "devices" in d.message  # the more-devices advice, in numbers


def test_every_candidate_breaking_a_rule() -> None:
    cfg = make(TINY, nodes=1, gbs=1, run=RunOptions(cp_algo="ulysses", framework="megatron"))
    res = search(cfg)
    assert codes(res) == ["HP603"]
    assert "micro_batch_num below pp" in res.diagnostics[0].message


def test_missing_batch_cannot_search() -> None:
    res = search(make(TINY, global_batch_size=None))
    assert codes(res) == ["HP604"] and "global_batch_size" in res.diagnostics[0].message


def test_refusals_are_deterministic() -> None:
    cfg = make(TINY, nodes=1, memory_limit=0.6, recompute="none")
    assert search(cfg).diagnostics == search(cfg).diagnostics


def test_stated_strategy_that_does_not_fit_and_a_faster_one() -> None:
    # Megatron (the shapes' framework) runs its distributed optimizer over dp·cp where the files state no shard
    stated = Strategy(dp=16, tp=1, pp=1, micro_batch_size=4, micro_batch_num=1, recompute=RecomputePlan("off"),
                      optimizer_shard=16)
    base = make(TINY, nodes=2, recompute="auto", stated=stated)
    e = estimate(base.model, base.cluster, base.run, stated, base.budget_gib)
    tight = replace(base, memory_limit_gb=e.peak_memory_gib * (1 - e.memory_spread) * 0.9)  # beyond its band
    res = search(tight)
    assert res.best is not None
    assert [d.code for d in compare_stated(tight, res).diagnostics] == ["HP610"]
    slow = Strategy(dp=2, tp=8, pp=1, micro_batch_size=1, micro_batch_num=32, recompute=RecomputePlan("full"))
    res2 = search(replace(base, stated=slow))
    assert not codes(res2)  # the search itself leaves the advice to compare_stated
    hint = [d for d in compare_stated(replace(base, stated=slow), res2).diagnostics if d.code == "HP611"]
    assert hint and "faster fits" in hint[0].message
    assert hint[0].data["strategy"] == res2.best.strategy.to_json()  # type: ignore[union-attr]


def test_a_listed_value_that_never_fits_says_how_heavy_it_is() -> None:
    lists = {"tp": (1,)}
    base = make(TINY, nodes=1, recompute="none", dims=lists)
    tp1, overall = _lightest(base, lists), _lightest(base, {})
    assert overall < tp1  # a larger tp is lighter: the list, not the budget, is what fails in between
    budget = (tp1 + overall) / 2
    res = search(replace(base, memory_limit_gb=budget))
    assert codes(res) == ["HP601"]
    d = res.diagnostics[0]
    assert d.path == "parallelism.tp" and "parallelism.tp asks [1]" in d.message
    assert f"tp 1: its lightest strategy needs {gib(tp1)}" in d.message
    assert 1 not in d.data["fitting"] and d.data["fitting"]


def test_absurd_global_batch_is_refused_not_crashed() -> None:
    res = search(make(TINY, gbs=10**20))
    assert codes(res) == ["HP604"] and res.diagnostics[0].path == "constraint.global_batch_size"
    assert search(make(TINY, nodes=1, gbs=10**15)).best is not None  # large but exact: searched


def test_a_stated_stage_split_with_no_candidate_left_is_a_refusal_not_a_failure(tmp_path: Path) -> None:
    """A search config that states its first and last stages' layers (DeepSeek-V3's 7 / 6) and a global batch
    no plan divides: the stated split is checked over no rows at all, which must be an empty answer (its
    grid of one pp value per row had come out as floats and failed the search with HP900)."""
    folder = tmp_path / "dsv3"
    shutil.copytree(ROOT / "benchmarks" / "calibration_runs" / "deepseek-v3-512xh100-nemo", folder)
    search = folder / "search.yaml"
    text = search.read_text().replace("global_batch_size: 4096", "global_batch_size: 3")
    search.write_text(text.split("\nestimator:")[0] + "\n")
    r = hp_plan("search", "--json", str(search))
    assert "HP900" not in r.stdout and "Traceback" not in r.stdout + r.stderr
    assert r.returncode == 1, r.stdout
