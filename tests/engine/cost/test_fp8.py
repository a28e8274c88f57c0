"""FP8 as the stacks run it (engine.cost.fp8): a stack that caches no FP8 weight pays its weight casts every
micro-batch, one that gathers its weights in FP8 only their transposed copy, and TransformerEngine neither."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.catalog.devices import find_device
from engine.catalog.frameworks import FRAMEWORKS
from engine.cost import constants as K
from engine.cost.fp8 import FP8_GATHERED_WEIGHT_BYTES, RECIPES
from engine.cost.model import layer_params
from engine.specs import ModelSpec
from tests.support.cli import ROOT, estimate_in_process

RUN = ROOT / "benchmarks" / "memory_runs" / "tt-8b-8gpu-compile-fp8.yaml"  # Llama 3.1 8B, FSDP 8, torchao Float8


def _variant(tmp_path: Path, name: str, estimator_lines: str) -> Path:
    text = RUN.read_text()
    assert "  fp8: true\n" in text
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace("  fp8: true\n", "  fp8: true\n" + estimator_lines))
    return path


def test_only_the_fsdp2_stacks_recast_their_weights() -> None:
    assert not FRAMEWORKS["torchtitan"].caches_fp8_weights
    assert FRAMEWORKS["megatron"].caches_fp8_weights and FRAMEWORKS["mindspeed"].caches_fp8_weights
    # tensorwise: two casts a micro-batch (forward, then the backward's layout), each an amax read and a cast
    assert RECIPES["tensorwise"].weight_cast_bytes == 2 * (2 + 2 + 1)


def test_torchao_pays_its_weight_casts_per_micro_batch_unless_the_weights_arrive_in_fp8(tmp_path: Path) -> None:
    cast = estimate_in_process(_variant(tmp_path, "cast", ""))
    gathered = estimate_in_process(_variant(tmp_path, "gathered", "  fp8_param_gather: true\n"))
    m = ModelSpec(name="llama3.1-8b", num_layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256,
                  seq_len=8192, gated_mlp=True)
    weights = 32 * layer_params(m, False).split  # FSDP gathers the whole layer on each rank (tp 1)
    dev = find_device("H100-96G")
    assert dev is not None
    hbm = dev.hbm_tb_s * K.TERA * K.HBM_EFFICIENCY
    per_micro_batch = (RECIPES["tensorwise"].weight_cast_bytes - FP8_GATHERED_WEIGHT_BYTES) * weights / hbm
    # one micro-batch a step (local batch 2); the recomputed matmuls' casts are not priced apart
    compute = cast["time_breakdown_s"]["compute"] - gathered["time_breakdown_s"]["compute"]
    assert compute == pytest.approx(per_micro_batch, rel=1e-6)
    # and the FSDP all-gathers move 1 byte per linear weight instead of 2 (engine.cost.memory.gathered_bytes),
    # into a working buffer that holds the gathered layer at 1 byte (engine.cost.memory.buffers)
    assert gathered["time_breakdown_s"]["dp_comm"] < cast["time_breakdown_s"]["dp_comm"]
    lp = layer_params(m, False)
    buffers = cast["memory_breakdown_gib"]["buffers"] - gathered["memory_breakdown_gib"]["buffers"]
    assert buffers == pytest.approx((2 - K.FP8_GATHER_BYTES) * (lp.split + lp.rep) / K.GIB, rel=1e-9)
    assert per_micro_batch == pytest.approx(0.029, rel=0.05)  # 7.0 G weights × 8 B over 1.92 TB/s


def test_weights_kept_whole_as_the_fp8_gather_hold_one_byte_but_the_embedding_and_output_layer() -> None:
    """FSDP2 without resharding keeps the gathered weights whole between forward and backward: 16-bit, or, where
    they are gathered in FP8 (torchao's float8 all-gather), the FP8 gather, 1 byte a linear weight; the embedding and
    output layer are never FP8 and stay 2 (engine.cost.memory.StageParams.io_adjust_b)."""
    from dataclasses import replace

    from engine.cost import CandidateTable
    from engine.cost.memory import stage_params
    from engine.cost.model import embedding_params, head_params
    from engine.cost.rows import build_rows
    from engine.specs import RecomputePlan, RunOptions, Strategy
    from tests.engine.cost.shapes import LLAMA8B, h100

    table = CandidateTable.from_strategies([Strategy(dp=8, dp_shard=8, recompute=RecomputePlan("selective"))],
                                           num_layers=LLAMA8B.num_layers)
    run = RunOptions(framework="torchtitan", fp8=True, fp8_recipe="tensorwise", reshard_after_forward=False)
    held = {}
    for gather in (False, True):
        sp = stage_params(build_rows(LLAMA8B, h100(), replace(run, fp8_param_gather=gather), table, 1))
        held[gather] = (sp.static_b[0, 0], sp.ne_stage[0, 0])
    (plain, params), (gathered, _) = held[False], held[True]
    e_split, e_rep = embedding_params(LLAMA8B)
    h_split, h_rep = head_params(LLAMA8B)
    io = e_split + e_rep + h_split + h_rep
    assert plain - gathered == pytest.approx((2 - K.FP8_GATHER_BYTES) * (params - io), rel=1e-12)  # linear only
