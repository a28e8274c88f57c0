"""The GEMM rate a row prices (engine.cost.rows.build_rows): the device's measured matmul rate ([HW] §3.1, MAMF)
× the stack's fraction of it, never a fraction of the datasheet peak."""

from __future__ import annotations

import numpy as np
import pytest

from engine.catalog.devices import find_device
from engine.cost import CandidateTable, price_table
from engine.cost import constants as K
from engine.cost.rows import build_rows, layer_counts
from engine.specs import PipelineLayout, RunOptions, Strategy
from tests.engine.cost.shapes import DSV3, LLAMA8B, cluster


def _gemm_rate(framework: str, device: str) -> float:
    table = CandidateTable.from_strategies([Strategy(dp=8)], num_layers=LLAMA8B.num_layers)
    return build_rows(LLAMA8B, cluster(1, device), RunOptions(framework=framework), table, 1).gemm_rate


@pytest.mark.parametrize("device", ["A100", "H100", "H200"])
def test_cublas_stacks_price_one_fraction_of_the_devices_measured_rate(device: str) -> None:
    """torch.mm (torchtitan, HyperParallel's trainer) and TransformerEngine (Megatron) call the same cuBLAS
    kernels: one fraction of the device's MAMF prices both; what the stacks do differently is priced apart."""
    d = find_device(device)
    assert d is not None
    mamf = d.peak_tflops * K.TERA * d.matmul_efficiency
    for fw in ("megatron", "torchtitan", "hyperparallel"):
        assert _gemm_rate(fw, device) == pytest.approx(mamf * K.GEMM_FRACTION_OF_MAMF, rel=1e-12), fw


def test_the_500w_part_runs_its_gemms_at_its_sustained_share() -> None:
    d, sxm = find_device("H100-96G"), find_device("H100")
    assert d is not None and sxm is not None
    assert _gemm_rate("torchtitan", "H100-96G") == pytest.approx(_gemm_rate("torchtitan", "H100") * d.clock_fraction)


def test_the_500w_part_runs_its_attention_at_the_same_sustained_share() -> None:
    """The power cap slows every tensor-core kernel: the attention core of one long sequence takes 1 / the
    sustained share longer on the 500 W part than on the SXM5 (same die, same kernel), as its GEMMs do."""
    from dataclasses import replace

    from engine.cost.timing import attention_layer_core

    d = find_device("H100-96G")
    assert d is not None and d.clock_fraction < 1
    long = replace(LLAMA8B, seq_len=32768, use_flash_attention=True)
    table = CandidateTable.from_strategies([Strategy(dp=8)], num_layers=long.num_layers)
    fwd = {dev: attention_layer_core(build_rows(long, cluster(1, dev), RunOptions(framework="torchtitan"), table, 1))[0]
           for dev in ("H100", "H100-96G")}
    assert fwd["H100-96G"] == pytest.approx(fwd["H100"] / d.clock_fraction)


def test_the_npu_stack_keeps_its_own_fraction_of_the_ascend_rate() -> None:
    d = find_device("A2")
    assert d is not None
    assert _gemm_rate("mindspeed", "A2") == pytest.approx(
        d.peak_tflops * K.TERA * d.matmul_efficiency * K.MINDSPEED_GEMM_FRACTION_OF_MAMF)


@pytest.mark.parametrize("layout", [PipelineLayout(), PipelineLayout(first_stage_layers=5, last_stage_layers=4)])
def test_layer_counts_are_the_layout_the_pricing_places(layout: PipelineLayout) -> None:
    """rows.layer_counts, what a search's bound reads without pricing: DeepSeek-V3's dense and MoE layers and its
    MTP layer per stage exactly as price_table places them (PricedTable.layer_count), interleaved rows included."""
    rng = np.random.default_rng(7)
    n = 24
    pp = rng.choice([1, 2, 4, 8], n)
    sched = np.where(pp > 1, rng.integers(0, 2, n), 0)
    table = CandidateTable.from_columns(dp=64 // pp, tp=1, pp=pp, vpp=np.where(sched == 1, 2, 1), schedule=sched,
                                        micro_batch_num=16)
    run = RunOptions(framework="megatron", pipeline_layout=layout)
    priced = price_table(DSV3, cluster(8, "H100"), run, table, 80.0)
    np.testing.assert_array_equal(layer_counts(DSV3, run, table), priced.layer_count)
