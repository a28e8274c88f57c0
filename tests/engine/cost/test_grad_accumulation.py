"""Weight-gradient accumulation (RunOptions.gradient_accumulation_fusion / gemm_gradient_accumulation_fusion):
what an unfused accumulation costs, where each framework's recipes stand, and that files and exports carry it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.catalog.frameworks import FRAMEWORKS
from engine.cost import estimate
from engine.explain.export import export
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import LLAMA8B, MOE, cluster, run_of_train_yaml

A2 = cluster(1, "A2")
S = Strategy(dp=4, pp=2, micro_batch_size=1, micro_batch_num=16, optimizer_shard=4)
MINDSPEED = RunOptions(framework="mindspeed")


def _step(run: RunOptions, model=LLAMA8B, s: Strategy = S) -> float:
    return estimate(model, A2, run, s, 64.0).step_time_s


def test_mindspeed_prices_its_scripts_unfused_dense_accumulation() -> None:
    assert FRAMEWORKS["megatron"].grad_accum_fusion and not FRAMEWORKS["mindspeed"].grad_accum_fusion
    unstated = _step(MINDSPEED)
    fused = _step(replace(MINDSPEED, gradient_accumulation_fusion=True))
    assert _step(replace(MINDSPEED, gradient_accumulation_fusion=False)) == unstated
    # 12 bytes per parameter and micro-batch at the HBM rate: the busiest stage holds about half of 8B
    est = estimate(LLAMA8B, A2, MINDSPEED, S, 64.0)
    per_mb = 4.0e9 * 12 / (A2.device.hbm_tb_s * 1e12 * 0.8)
    assert unstated - fused == pytest.approx(S.micro_batch_num * per_mb, rel=0.25)
    assert est.time_breakdown_s["compute"] > estimate(LLAMA8B, A2, replace(MINDSPEED, gradient_accumulation_fusion=True),
                                                      S, 64.0).time_breakdown_s["compute"]


def test_megatron_and_fsdp2_stacks_pay_nothing_unless_stated() -> None:
    mega = RunOptions(framework="megatron")
    assert _step(mega) == _step(replace(mega, gradient_accumulation_fusion=True))
    assert _step(replace(mega, gradient_accumulation_fusion=False)) > _step(mega)
    titan = RunOptions(framework="torchtitan")
    s = Strategy(dp=8, dp_shard=8, micro_batch_size=1, micro_batch_num=4)
    assert _step(replace(titan, gradient_accumulation_fusion=False), s=s) == _step(titan, s=s)


def test_grouped_expert_accumulation_follows_its_own_flag() -> None:
    s = Strategy(dp=8, ep=8, micro_batch_size=1, micro_batch_num=8, optimizer_shard=8)
    fused = _step(replace(MINDSPEED, gemm_gradient_accumulation_fusion=True), MOE, s)
    unfused = _step(replace(MINDSPEED, gemm_gradient_accumulation_fusion=False), MOE, s)
    assert _step(MINDSPEED, MOE, s) == fused  # MindSpeed's grouped-GEMM scripts mostly fuse it
    assert unfused > fused


def test_files_carry_the_flags_and_exports_write_them(tmp_path: Path) -> None:
    r = run_of_train_yaml(tmp_path, "  gradient_accumulation_fusion: false\n  gemm_gradient_accumulation_fusion: true\n")
    assert (r.gradient_accumulation_fusion, r.gemm_gradient_accumulation_fusion) == (False, True)
    assert "--no-gradient-accumulation-fusion" in export(S, LLAMA8B, MINDSPEED, "mindspeed").args
    assert "--no-gradient-accumulation-fusion" not in export(S, LLAMA8B, RunOptions(framework="megatron"),
                                                             "megatron").args
    s = Strategy(dp=8, ep=8, micro_batch_size=1, micro_batch_num=8, optimizer_shard=8)
    assert "--gemm-gradient-accumulation-fusion" in export(s, MOE, MINDSPEED, "mindspeed").args
