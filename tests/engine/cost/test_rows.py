"""The GEMM rate a row prices (engine.cost.rows.build_rows): the device's measured matmul rate ([HW] §3.1, MAMF)
× the stack's fraction of it, never a fraction of the datasheet peak."""

from __future__ import annotations

import pytest

from engine.catalog.devices import find_device
from engine.cost import CandidateTable
from engine.cost import constants as K
from engine.cost.rows import build_rows
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import LLAMA8B, cluster


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
