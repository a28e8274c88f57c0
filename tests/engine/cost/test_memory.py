"""Memory terms on hand-computed cases: KOR22 Table 2 activations, Fig. 1, micro-batches in flight, layer
split, byte widths and sharding ([CAL] §4.4-§4.5, §6.1-§6.2; [HP] §6.8)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cost import CandidateTable, estimate, price_table
from engine.cost.layout import (
    chunk_bounds,
    chunk_type_counts,
    default_chunks,
    in_flight,
    layer_stage,
    stage_type_counts,
)
from engine.cost.model import layer_params
from engine.specs import GIB, ModelSpec, RecomputePlan, RunOptions, Strategy
from tests.engine.cost.shapes import DSV3, LLAMA70B, MEGATRON_RUN, cluster, gpt


def layer_bytes(m: ModelSpec, *, t: int, b: int, sp: bool, mode: int, run: RunOptions = MEGATRON_RUN) -> float:
    """One layer's activation bytes for one micro-batch, from the priced table."""
    tab = CandidateTable.from_columns(dp=[1], tp=[t], pp=[1], micro_batch_size=b, sequence_parallel=sp, recompute=mode)
    pr = price_table(m, cluster(1), run, tab, 80.0)
    return float(pr.layer_act_one_gib[0, 0, mode]) * GIB


@pytest.mark.parametrize(("t", "sp", "mode", "coef"), [
    # KOR22 Table 2 rows, bytes per layer = s·b·h·coef (a = 16, s = 2048, h = 1024 -> 5as/h = 160)
    (1, False, 0, 34 + 160),
    (4, False, 0, 10 + 24 / 4 + 160 / 4),
    (4, True, 0, 34 / 4 + 160 / 4),
    (4, False, 1, 10 + 24 / 4),
    (4, True, 1, 34 / 4),
    (4, False, 2, 2),
])
def test_kor22_table2_rows(t: int, sp: bool, mode: int, coef: float) -> None:
    m = gpt(4, 1024, 16)
    s, b, h = 2048, 2, 1024
    assert layer_bytes(m, t=t, b=b, sp=sp, mode=mode) == pytest.approx(s * b * h * coef, rel=1e-12)


def test_full_recompute_with_sp_keeps_the_sharded_input() -> None:
    m = gpt(4, 1024, 16)
    assert layer_bytes(m, t=4, b=1, sp=True, mode=2) == pytest.approx(2 * 2048 * 1024 / 4)


def test_flash_attention_drops_the_score_term_and_gqa_shrinks_kv() -> None:
    s, h = 4096, 4096
    base = dict(name="x", num_layers=2, hidden=h, heads=32, vocab=1000, ffn=4 * h, seq_len=s, gated_mlp=False)
    mha = ModelSpec(**base, use_flash_attention=True)  # type: ignore[arg-type]
    gqa = ModelSpec(**base, kv_heads=8, use_flash_attention=True)  # type: ignore[arg-type]
    # flash, no dropout masks (gated_mlp False keeps dropout: 2 masks of 1 byte): 34 − 0 + lse 4·a/h per token
    expect_mha = s * (34 * h + 4 * 32)
    assert layer_bytes(mha, t=1, b=1, sp=False, mode=0) == pytest.approx(expect_mha)
    # K and V at 8 of 32 heads: 4·h bytes of K,V become h
    assert layer_bytes(gqa, t=1, b=1, sp=False, mode=0) == pytest.approx(expect_mha - s * 3 * h)


def test_swiglu_keeps_three_intermediates_and_no_masks() -> None:
    h, f, s = 1024, 2816, 1024
    m = ModelSpec(name="l", num_layers=2, hidden=h, heads=8, vocab=1000, ffn=f, seq_len=s)  # gated, flash
    # norms in/out 8h, QKV 6h, proj 2h, lse 4·a, gate/up/product 6f
    assert layer_bytes(m, t=1, b=1, sp=False, mode=0) == pytest.approx(s * (16 * h + 4 * 8 + 6 * f))


@pytest.mark.parametrize("name", ["22B", "175B", "530B", "1T"])
def test_kor22_figure1_within_2_percent(name: str) -> None:
    # [CAL] §4.5: Table 2 row × L × interleave factor on the first stage, GiB.
    L, h, a, t, p, v, b, _states, *acts = {
        "22B": (48, 6144, 64, 8, 1, 1, 4, 45.56, 59.25, 39.56, 29.25, 9.56, 4.50),
        "175B": (96, 12288, 96, 8, 8, 3, 1, 45.56, 66.84, 41.41, 37.78, 12.35, 5.81),
        "530B": (105, 20480, 128, 8, 35, 3, 1, 31.64, 114.02, 66.51, 70.59, 23.08, 10.86),
        "1T": (128, 25600, 160, 8, 64, 1, 1, 32.96, 131.25, 76.56, 81.25, 26.56, 12.50),
    }[name]
    m = gpt(L, h, a)
    combos = [(False, 0), (True, 0), (False, 1), (True, 1), (False, 2)]
    for (sp, mode), published in zip(combos, acts, strict=True):
        tab = CandidateTable.from_columns(dp=[1], tp=[t], pp=[p], vpp=v, micro_batch_size=b, micro_batch_num=8 * p,
                                          sequence_parallel=sp, recompute=mode, schedule=int(v > 1))
        pr = price_table(m, cluster(max(t * p // 8, 1)), MEGATRON_RUN, tab, 80.0)
        ours = float(pr.layer_count[0, 0, 0] * pr.layer_act_gib[0, 0, 0, mode])
        assert ours == pytest.approx(published, rel=0.02), (sp, mode)


def test_in_flight_1f1b_and_interleaved() -> None:
    one = np.array([1])
    # [HP] §6.8 example: p 4, m 8 -> 4,3,2,1
    assert in_flight(np.array([4]), one, np.array([8]), 4).tolist() == [[4, 3, 2, 1]]
    # m < p: Megatron warms up min(p − i − 1, m) forwards, so stages hold min(p − i, m) = 2,2,2,1
    # (HyperParallel's min(p, m) − i gives 2,1,1,1, undercounting the middle stages)
    assert in_flight(np.array([4]), one, np.array([2]), 4).tolist() == [[2, 2, 2, 1]]
    # KOR22: stage 0 of the interleaved schedule holds p·(1 + (p − 1)/(p·v)) micro-batches' worth
    p, v = 8, 3
    mf = in_flight(np.array([p]), np.array([v]), np.array([64]), p)
    assert mf[0, 0] == pytest.approx(p * (1 + (p - 1) / (p * v)))
    # padded stages hold nothing
    assert in_flight(np.array([2]), one, np.array([8]), 4)[0].tolist() == [2, 1, 0, 0]


def test_uneven_layer_split_gives_extras_to_the_chunks_after_the_first() -> None:
    p, v = np.array([4]), np.array([1])
    starts, counts = chunk_bounds(10, p, v, np.arange(4))
    assert counts.tolist() == [2, 3, 3, 2] and starts.tolist() == [0, 2, 5, 8]
    assert layer_stage(10, p, v)[0].tolist() == [0, 0, 1, 1, 1, 2, 2, 2, 3, 3]
    # interleaved: chunk j on stage j mod p
    st = layer_stage(8, np.array([2]), np.array([2]))[0].tolist()
    assert st == [0, 0, 1, 1, 0, 0, 1, 1]
    c = stage_type_counts(61, 3, np.array([16]), v, 16, 1)[0]
    assert c[:, 0].sum() == 3 and c[:, 1].sum() == 58 and c[0].tolist() == [3, 0]


@settings(max_examples=300, deadline=None)
@given(L=st.integers(1, 130), p=st.integers(1, 16), v=st.integers(1, 8), dense=st.integers(0, 140),
       pad=st.integers(0, 3))
def test_stage_type_counts_place_the_layers_as_their_chunks_do(L: int, p: int, v: int, dense: int, pad: int) -> None:
    """The closed form per stage (layout.stage_type_counts) against the chunks laid one by one in model order
    (default_chunks, chunk_type_counts), for any split, more chunks than layers included, and any dense prefix."""
    rows = stage_type_counts(L, dense, np.array([p, 1]), np.array([v, 1]), p + pad, v + pad)
    assert rows[0, :p].tolist() == chunk_type_counts(default_chunks(L, p, v), dense).tolist()
    assert not rows[0, p:].any() and rows[1, 0].tolist() == [min(dense, L), L - min(dense, L)]


def test_eighteen_bytes_per_parameter_and_distributed_optimizer() -> None:
    # [CAL] §6.1: bf16 weights, fp32 grads, Adam: 18 B/param; distributed optimizer 6 + 12/d.
    m = LLAMA70B
    cl = cluster(16)
    s = Strategy(dp=16, tp=8, pp=1, micro_batch_num=1, optimizer_shard=1)
    mega = RunOptions(framework="megatron")  # a separate fp32 master copy (FSDP2 stacks: held_state_bytes)
    e1 = estimate(m, cl, mega, s, 1e6)
    b1 = e1.memory_breakdown_gib
    e2 = estimate(m, cl, mega, Strategy(dp=16, tp=8, optimizer_shard=16), 1e6)
    b2 = e2.memory_breakdown_gib
    states1 = b1["parameters"] + b1["gradients"] + b1["optimizer"]
    states2 = b2["parameters"] + b2["gradients"] + b2["optimizer"]
    assert states1 == pytest.approx(18 / 2 * b1["parameters"])
    assert states2 == pytest.approx((6 + 12 / 16) / 2 * b1["parameters"])


def test_zero_stage_examples() -> None:
    # ZERO20 Fig. 1 ([CAL] §6.2): Ψ params, N_d 64, K 12 with fp16 grads (16 B/param baseline).
    m = gpt(40, 4096, 32)
    cl = cluster(8)
    psi = sum(layer_params(m, False).total for _ in range(1))  # per layer
    run2 = RunOptions(grad_bytes=2, reshard_after_forward=False, framework="megatron")
    run3 = RunOptions(grad_bytes=2, reshard_after_forward=True, framework="megatron")
    dp = Strategy(dp=64)
    z1 = Strategy(dp=64, optimizer_shard=64)
    z23 = Strategy(dp=64, dp_shard=64)

    def states(run: RunOptions, s: Strategy) -> float:
        pr = price_table(m, cl, run, CandidateTable.from_strategies([s]), 1e6)
        return float(pr.stage_static_gib[0, 0])

    base = states(run3, dp)
    assert states(run3, z1) / base == pytest.approx((4 + 12 / 64) / 16, rel=1e-9)
    assert states(run2, z23) / base == pytest.approx((2 + 14 / 64) / 16, rel=1e-9)
    assert states(run3, z23) / base == pytest.approx(1 / 64, rel=1e-9)
    assert psi > 0


def test_embedding_on_first_stage_head_on_last_and_tied_copy() -> None:
    tied = gpt(8, 1024, 16)
    untied = ModelSpec(**{**{f: getattr(tied, f) for f in tied.__slots__}, "tie_embeddings": False})  # type: ignore[arg-type]
    cl = cluster(1)
    s = Strategy(dp=4, tp=1, pp=2, micro_batch_num=4)
    for m in (tied, untied):
        pr = price_table(m, cl, RunOptions(framework="megatron"), CandidateTable.from_strategies([s]), 1e6)
        st = pr.stage_static_gib[0] * GIB / 18  # parameters per stage
        layer = layer_params(m, False).total
        emb = m.vocab * m.hidden
        pos = m.seq_len * m.hidden
        norm = 2 * m.hidden
        assert st[0] == pytest.approx(4 * layer + emb + pos)
        # the last stage holds the output projection (untied) or Megatron's copy of the embedding (tied)
        assert st[1] == pytest.approx(4 * layer + emb + norm)


def test_routed_experts_shard_by_ep_and_mtp_on_last_stage() -> None:
    cl = cluster(32)
    s1 = Strategy(dp=16, tp=1, pp=16, ep=1, micro_batch_num=16)
    s8 = Strategy(dp=16, tp=1, pp=16, ep=8, micro_batch_num=16)
    pr = price_table(DSV3, cl, RunOptions(framework="megatron"), CandidateTable.from_strategies([s1, s8]), 1e6)
    lp = layer_params(DSV3, True)
    # stage 1 holds 4 MoE layers: ep 8 removes 7/8 of their routed weights (18 B each)
    diff = (pr.stage_static_gib[0, 1] - pr.stage_static_gib[1, 1]) * GIB / 18
    assert diff == pytest.approx(4 * lp.routed * 7 / 8)
    # MTP's layer sits on the last stage
    assert pr.layer_count[0, 15].tolist() == [0, 4]


def test_priced_stage_memory_is_static_plus_fixed_plus_layers() -> None:
    cl = cluster(8)
    rows = [Strategy(dp=2, tp=4, pp=8, vpp=2, pipeline_schedule="interleaved", micro_batch_num=16,
                     sequence_parallel=True, recompute=RecomputePlan(mode))
            for mode in ("off", "selective", "full")]
    pr = price_table(LLAMA70B, cl, RunOptions(), CandidateTable.from_strategies(rows), 1e6)
    for i, code in enumerate((0, 1, 2)):
        layers = (pr.layer_count[i] * pr.layer_act_gib[i, :, :, code]).sum(axis=1)
        total = pr.stage_static_gib[i] + pr.stage_fixed_gib[i] + layers
        np.testing.assert_allclose(total, pr.stage_memory_gib[i], rtol=1e-12)
    assert pr.peak_gib[0] > pr.peak_gib[1] > pr.peak_gib[2]


@pytest.mark.parametrize(("L", "h", "a", "p", "v", "gib"), [
    (48, 6144, 64, 1, 1, 46.24), (96, 12288, 96, 8, 3, 46.89), (105, 20480, 128, 35, 3, 33.84),
    (128, 25600, 160, 64, 1, 35.71)])
def test_first_stage_states_match_megatron_theoretical_memory(L: int, h: int, a: int, p: int, v: int,
                                                              gib: float) -> None:
    # [CAL] §4.6 [D] (MLM-THEO): 18 B/param on the first stage, input embedding included.
    m = ModelSpec(name="k", num_layers=L, hidden=h, heads=a, vocab=51200, ffn=4 * h, seq_len=2048,
                  tie_embeddings=True, gated_mlp=False, use_flash_attention=False)
    tab = CandidateTable.from_columns(dp=[1], tp=[8], pp=[p], vpp=v, micro_batch_num=8 * p, schedule=int(v > 1))
    pr = price_table(m, cluster(max(p, 1)), MEGATRON_RUN, tab, 80.0)
    assert pr.stage_static_gib[0, 0] == pytest.approx(gib, rel=0.005)
