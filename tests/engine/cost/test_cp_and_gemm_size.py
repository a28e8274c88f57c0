"""Priced as run (D-010): context parallelism is priced (ring KV exchange per step, Ulysses all-to-alls, short
flash-attention chunks), and a GEMM's efficiency depends on the tokens it sees (micro-batch × sequence shard)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.catalog.frameworks import PYTORCH_RING_MERGE, TE_RING_MERGE
from engine.cost import constants as K
from engine.cost import estimate
from engine.cost.timing import size_factor
from engine.specs import ClusterSpec, ModelSpec, RunOptions, Strategy
from tests.engine.cost.shapes import GPT2, h100

LLAMA8B = ModelSpec(name="llama-8b", num_layers=32, hidden=4096, heads=32, vocab=128256, ffn=14336, kv_heads=8,
                    seq_len=8192)
def price(model: ModelSpec, cluster: ClusterSpec, s: Strategy, run: RunOptions | None = None):  # type: ignore[no-untyped-def]
    return estimate(model, cluster, run or RunOptions(), s, 1e9)


@pytest.mark.parametrize("algo", ["ring", "ulysses", "hybrid", "allgather"])
@pytest.mark.parametrize("cp", [2, 4, 8])
def test_cp_comm_is_positive_whenever_cp_above_one(algo: str, cp: int) -> None:
    run = RunOptions(cp_algo=algo)  # type: ignore[arg-type]
    s = Strategy(dp=8 // cp, dp_shard=8, cp=cp, micro_batch_num=8)
    e = price(LLAMA8B, h100(), s, run)
    assert e.time_breakdown_s["cp_comm"] > 0
    base = price(LLAMA8B, h100(), Strategy(dp=8, dp_shard=8, micro_batch_num=8 // cp), run)
    assert base.time_breakdown_s["cp_comm"] == 0


def test_cp_degrees_no_longer_price_the_same() -> None:
    """Reproduced: cp 1/2/4/8 priced alike to three decimals for Llama-3.1-8B at 8K on 8 H100 (D-010)."""
    steps = [price(LLAMA8B, h100(), Strategy(dp=8 // c, dp_shard=8, cp=c, micro_batch_num=8 * c)).step_time_s
             for c in (1, 2, 4, 8)]
    # The same global batch of 64 sequences (dp · micro_batch_num): the step grows with cp.
    assert steps == sorted(steps) and steps[-1] > steps[0] * 1.005


def test_ring_across_nodes_costs_more_than_inside() -> None:
    """cp 8 at tp 2 spans two 8-GPU nodes: every ring step is paced by the NIC."""
    inside = price(LLAMA8B, h100(2), Strategy(dp=2, dp_shard=2, tp=1, cp=8, micro_batch_num=8))
    across = price(LLAMA8B, h100(2), Strategy(dp=1, dp_shard=1, tp=2, cp=8, micro_batch_num=16))
    per_inside = inside.time_breakdown_s["cp_comm"] / 8
    per_across = across.time_breakdown_s["cp_comm"] / 16
    assert per_across > 2 * per_inside


def test_flash_attention_loses_at_short_ring_chunks() -> None:
    """The ring splits a rank's attention into cp kernel calls; the compute term grows with cp even though
    the FLOPs per device are the same."""
    c1 = price(LLAMA8B, h100(), Strategy(dp=8, dp_shard=8, micro_batch_num=8)).time_breakdown_s["compute"]
    c8 = price(LLAMA8B, h100(), Strategy(dp=1, dp_shard=8, cp=8, micro_batch_num=64)).time_breakdown_s["compute"]
    assert c8 > c1


def test_size_factor_follows_calculons_buckets() -> None:
    f = size_factor(np.array([0.1e9, 1e9, 16e9, 128e9]))
    # Calculon ([HW] §3.3) relative to its top bucket: 0.11, 0.63, 0.95, 1.0.
    assert f[0] == pytest.approx(0.11, abs=0.05) and f[1] == pytest.approx(0.63, abs=0.03)
    assert f[2] == pytest.approx(0.95, abs=0.03) and f[3] == pytest.approx(1.0, abs=0.01)
    assert K.GEMM_HALF_FLOPS > 0


def test_tiny_micro_batches_lose_for_a_small_model() -> None:
    """Reproduced: mbs 1…16 tied exactly for a 124M model on one GPU; small GEMMs now run below peak."""
    one = replace(h100(1, 1))
    steps = {b: price(GPT2, one, Strategy(micro_batch_size=b, micro_batch_num=16 // b)).step_time_s
             for b in (1, 2, 4, 8, 16)}
    assert steps[16] < steps[8] < steps[4] < steps[2] < steps[1]
    # eager element-wise work (the default hyperparallel stack) does not shrink with mbs, so the spread is small
    assert steps[1] > 1.02 * steps[16]


LONG = replace(LLAMA8B, seq_len=131072, use_flash_attention=True)
MEGATRON_CP = RunOptions(framework="megatron", selective_policy="attention")


def test_ring_steps_merge_their_partial_outputs_at_long_context() -> None:
    """[TE-CP]: every ring step after the first merges its partial output (forward) and accumulates dq, dkv
    (backward) outside the kernel: priced at the stack's RingMerge bytes per element, (cp − 1) times; all-gather CP
    has none."""
    from engine.cost.rows import build_rows
    from engine.cost.table import CandidateTable
    from engine.cost.timing import attention_layer_core

    table = CandidateTable.from_strategies([Strategy(dp=1, tp=2, cp=4, micro_batch_num=1, sequence_parallel=True)],
                                           num_layers=LONG.num_layers)
    cores = {}
    for algo in ("ring", "allgather"):
        r = build_rows(LONG, h100(), replace(MEGATRON_CP, cp_algo=algo), table, 1)  # type: ignore[arg-type]
        cores[algo] = attention_layer_core(r)
    a = r.attn
    per_elem = TE_RING_MERGE.out * r.T[0] / r.t[0] / r.hbm
    assert cores["ring"][0][0] - cores["allgather"][0][0] == pytest.approx(3 * per_elem * a.out_width, rel=0.02)


def test_pytorch_s_ring_merges_in_fp32_eager_ops() -> None:
    """[PT-CP]: torchtitan's ring (PyTorch's context_parallel) merges each step in fp32 eager ops and copies what it
    sends on: priced at its RingMerge (38 bytes per output element and 4 per K/V element forward, 10 per q and 25 per
    K/V element backward), (cp − 1) times, well above TransformerEngine's 6."""
    from engine.cost.rows import build_rows
    from engine.cost.table import CandidateTable
    from engine.cost.timing import attention_layer_core

    table = CandidateTable.from_strategies([Strategy(dp=1, tp=1, cp=4, micro_batch_num=1)],
                                           num_layers=LONG.num_layers)
    r = build_rows(LONG, h100(), RunOptions(framework="torchtitan"), table, 1)
    assert r.fw.ring_merge == PYTORCH_RING_MERGE and r.cp_algo == "ring"  # torchtitan runs the ring only
    as_te = replace(r, fw=replace(r.fw, ring_merge=TE_RING_MERGE))
    a, m = r.attn, PYTORCH_RING_MERGE
    per_byte = 3 * r.T[0] / r.t[0] / r.hbm
    fwd, bwd = (attention_layer_core(r)[k][0] - attention_layer_core(as_te)[k][0] for k in (0, 1))
    te = TE_RING_MERGE
    assert fwd == pytest.approx(per_byte * ((m.out - te.out) * a.out_width + m.kv_fwd * a.kv_width), rel=0.02)
    assert bwd == pytest.approx(per_byte * ((m.q - te.q) * a.q_width + (m.kv - te.kv) * a.kv_width), rel=0.02)
    assert m.out > 6 * TE_RING_MERGE.out and m.kv > 4 * TE_RING_MERGE.kv


def test_allgather_cp_exposes_its_gather_and_exports_as_megatrons() -> None:
    from engine.explain.export import export

    s = Strategy(dp=1, tp=2, cp=4, micro_batch_num=1, sequence_parallel=True)
    ring = price(LONG, h100(), s, MEGATRON_CP)
    ag = price(LONG, h100(), s, replace(MEGATRON_CP, cp_algo="allgather"))
    assert ag.time_breakdown_s["cp_comm"] > ring.time_breakdown_s["cp_comm"] > 0  # the ring hides under 128K blocks
    assert "--cp-comm-type all_gather" in export(s, LONG, replace(MEGATRON_CP, cp_algo="allgather"), "megatron").text
    ms = export(s, LONG, replace(MEGATRON_CP, cp_algo="allgather", framework="mindspeed"), "mindspeed")
    assert [d for d in ms.diagnostics if d.code == "HP753" and "allgather" in d.message]


def test_fp8_gains_less_on_small_weight_gemms() -> None:
    """A call's fixed cost is time, not FLOPs ([TORCHAO-FP8]: the FP8 GEMM's speed-up approaches 2x only as the
    shapes grow): FP8 shortens a 124M model's weight GEMMs less at one sequence per micro-batch than at 16."""
    one = h100(1, 1)
    megatron = RunOptions(framework="megatron")

    def gemm_s(b: int, run: RunOptions) -> float:
        s = Strategy(micro_batch_size=b, micro_batch_num=16 // b)
        return price(GPT2, one, s, run).time_parts_s["gemm"]

    fp8 = replace(megatron, fp8=True)
    small, large = gemm_s(1, megatron) / gemm_s(1, fp8), gemm_s(16, megatron) / gemm_s(16, fp8)
    assert 1.0 < small < large < 2.1
