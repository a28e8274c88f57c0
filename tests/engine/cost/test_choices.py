"""[CAL] §9.5 choice tests the cost model alone must get right (rankings, not absolute times)."""

from __future__ import annotations

import pytest

from engine.cost import estimate
from engine.specs import RecomputePlan, Strategy
from tests.engine.cost.shapes import MEGATRON_RUN, NAR21_RUN, cluster, gpt

FULL = RecomputePlan("full")


def step(model, nodes, s, run=MEGATRON_RUN):  # type: ignore[no-untyped-def]
    return estimate(model, cluster(nodes), run, s, 80.0)


@pytest.mark.parametrize(("gpus", "gbs", "far"), [(384, 1536, False), (768, 1536, True), (1536, 1536, True)])
def test_n2_ptdp_beats_zero3_where_the_paper_says(gpus: int, gbs: int, far: bool) -> None:
    # (a) 174.6B: at 768 and 1536 GPUs PTD-P beats ZeRO-3 by > 1.5×; at 384 they are within ~10 %.
    m = gpt(96, 12288, 96)
    mbs = gbs // gpus
    zero3 = step(m, gpus // 8, Strategy(dp=gpus, dp_shard=gpus, micro_batch_size=mbs, recompute=FULL), NAR21_RUN)
    dp = gpus // 96
    ptdp = step(m, gpus // 8, Strategy(dp=dp, tp=8, pp=12, micro_batch_num=gbs // dp, recompute=FULL), NAR21_RUN)
    ratio = zero3.step_time_s / ptdp.step_time_s
    if far:
        assert ratio > 1.5
    else:
        assert 0.9 < ratio < 1.15


@pytest.mark.parametrize("gbs", [32, 128])
def test_nf13_tp8_is_fastest_for_162b_on_64_gpus(gbs: int) -> None:
    # (b) t·p = 64, dp 1, b 1: (t, p) = (8, 8) wins.
    m = gpt(32, 20480, 128)
    times = {tp: step(m, 8, Strategy(dp=1, tp=tp, pp=64 // tp, micro_batch_num=gbs, recompute=FULL)).step_time_s
             for tp in (2, 4, 8, 16, 32)}
    assert min(times, key=times.__getitem__) == 8


@pytest.mark.parametrize("gbs", [128, 512])
def test_nf14_15_more_pp_or_more_tp_is_slower(gbs: int) -> None:
    # (c) 5.9B on 64 GPUs, b 1: throughput falls as pp grows and as tp grows.
    m = gpt(32, 3840, 32)

    def t(tp: int, pp: int) -> float:
        dp = 64 // (tp * pp)
        return step(m, 8, Strategy(dp=dp, tp=tp, pp=pp, micro_batch_num=gbs // dp, recompute=FULL)).step_time_s

    by_pp = [t(1, p) for p in (1, 2, 4, 8)]
    by_tp = [t(tp, 1) for tp in (1, 2, 4, 8)]
    assert by_pp == sorted(by_pp) and by_tp == sorted(by_tp)


@pytest.mark.parametrize(("L", "h", "a", "p", "v", "b"), [
    (48, 6144, 64, 1, 1, 4), (96, 12288, 96, 8, 3, 1), (105, 20480, 128, 35, 3, 1), (128, 25600, 160, 64, 1, 1)])
def test_kor22_no_recompute_no_sp_does_not_fit_but_sp_selective_does(L: int, h: int, a: int, p: int, v: int,
                                                                    b: int) -> None:
    # (d) 80 GB: "no recompute, no SP" is refused for all four models; SP + selective fits and is faster
    # than full recompute.
    m = gpt(L, h, a)
    nodes = max(p, 1)
    base = dict(dp=1, tp=8, pp=p, vpp=v, pipeline_schedule="interleaved" if v > 1 else "1F1B",
                micro_batch_size=b, micro_batch_num=max(8 * p, 1) if p > 1 else 1)
    plain = step(m, nodes, Strategy(**base, recompute=RecomputePlan("off")))  # type: ignore[arg-type]
    sel = step(m, nodes, Strategy(**base, sequence_parallel=True, recompute=RecomputePlan("selective")))  # type: ignore[arg-type]
    full = step(m, nodes, Strategy(**base, recompute=FULL))  # type: ignore[arg-type]
    assert not plain.fits
    assert sel.fits and full.fits
    assert sel.step_time_s < full.step_time_s


def test_nf17_recompute_costs_throughput_at_small_batch() -> None:
    # (e) 145B, (t, p) = (8, 16), 128 GPUs: at small batch recompute costs up to ~33 %.
    m = gpt(80, 12288, 96)
    off = step(m, 16, Strategy(dp=1, tp=8, pp=16, micro_batch_num=16, recompute=RecomputePlan("off")))
    full = step(m, 16, Strategy(dp=1, tp=8, pp=16, micro_batch_num=16, recompute=FULL))
    assert 1.15 < full.step_time_s / off.step_time_s < 1.45


def test_nf12_interleaving_helps_at_small_batch_and_the_gap_closes() -> None:
    # (e) GPT-3 175B on 96 GPUs (t 8, p 12): interleaved beats 1F1B at small batch, less so at large batch.
    m = gpt(96, 12288, 96)

    def gain(gbs: int) -> float:
        plain = step(m, 12, Strategy(dp=1, tp=8, pp=12, micro_batch_num=gbs, recompute=FULL))
        inter = step(m, 12, Strategy(dp=1, tp=8, pp=12, vpp=2, pipeline_schedule="interleaved", micro_batch_num=gbs,
                                     recompute=FULL))
        return plain.step_time_s / inter.step_time_s

    small, large = gain(12), gain(96)
    assert small > 1.05 and 1.0 < large < small
