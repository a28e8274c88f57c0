from dataclasses import replace

import pytest

from engine.catalog.devices import (
    H100_96G_CLOCK_MIDPOINT,
    H100_96G_SUSTAINED_SHARE,
    device_names,
    find_device,
    matmul_efficiency,
    matmul_rate_measured,
)
from engine.specs import DeviceSpec


def test_aliases_resolve_case_insensitively():
    assert find_device("h100").name == "H100"
    assert find_device(" Ascend910B ").name == "A2"
    assert find_device("ascend910_93").name == "A3"
    assert find_device(3).name == "A3"
    assert find_device("TPUv5") is None
    assert find_device(True) is None


def test_every_device_has_an_efficiency_and_sane_figures():
    for name in device_names():
        d = find_device(name)
        assert d is not None and d.peak_tflops > 50 and d.memory_gib >= 16
        assert d.intra_node_gb_s > d.inter_node_gb_s > 0 or d.name == "MI300X"
        assert 0.4 < matmul_efficiency(name) < 0.95


# [HW] §3.1 (MLE-ACC, mean of 100 iterations of the best shape found): measured TFLOP/s over the dense peak, per
# catalog row (the catalog rounds them to two or three digits); the Ascend rows from [HW] §4 (ASC-BENCH: 322.5 TF
# on a 910B2C of 354).
MEASURED_BF16_MAMF = {"A100": (271.2, 312.0), "A100-40G": (271.2, 312.0), "H100": (794.5, 989.0),
                      "H200": (794.5, 989.0), "B200": (1745.0, 2250.0), "B300": (1769.0, 2250.0),
                      "GB200": (1822.0, 2500.0), "MI300X": (668.4, 1300.0), "A2": (322.5, 354.0)}
MEASURED_FP8_MAMF = {"H100": (1402.6, 1979.0), "H200": (1453.4, 1979.0), "B200": (3432.5, 4500.0),
                     "B300": (3353.3, 4500.0), "GB200": (3615.6, 5000.0)}


def test_each_row_carries_its_measured_matmul_rate():
    for name, (mamf, peak) in MEASURED_BF16_MAMF.items():
        assert matmul_efficiency(name) == pytest.approx(mamf / peak, abs=1.5e-3), name
    for name, (mamf, peak) in MEASURED_FP8_MAMF.items():
        d = find_device(name)
        assert d is not None and d.fp8_matmul_efficiency == pytest.approx(mamf / peak, abs=1.5e-3), name


def test_every_matmul_rate_names_its_measurement_or_says_it_has_none():
    """A row's achievable matmul rate is a measurement it cites (MLE-ACC, ASC-BENCH; a part of the same die says
    whose), or the row lists it among its [U] figures."""
    for name in device_names():
        d = find_device(name)
        assert d is not None
        cited = "MLE-ACC" in d.source or "ASC-BENCH" in d.source
        assert cited or "matmul_efficiency" in d.unconfirmed, name


def _row(name: str) -> DeviceSpec:
    d = find_device(name)
    assert d is not None, name
    return d


def test_a_stand_in_matmul_rate_is_said_as_one():
    """The rows priced with another part's matmul rate (no measurement on theirs) say so, which the error band reads
    (engine.cost.band UNMEASURED_DEVICE); the measured rows and their same-die variants do not. With FP8 GEMMs the
    FP8 rate must be measured too; a spec stating no rate is priced with its catalog row's, and is that row."""
    stand_ins = {n for n in device_names() if not matmul_rate_measured(_row(n))}
    assert {"GB300", "V100", "H100-NVL", "H20"} <= stand_ins
    assert stand_ins.isdisjoint({*MEASURED_BF16_MAMF, "H100-96G", "H800", "910B3", "A3"})
    fp8_stand_ins = {n for n in device_names() if _row(n).fp8_tflops > 0 and not matmul_rate_measured(_row(n), True)}
    assert {"MI300X", "H20", "GB300"} <= fp8_stand_ins and fp8_stand_ins.isdisjoint(MEASURED_FP8_MAMF)
    assert matmul_rate_measured(replace(_row("H100"), matmul_efficiency=0.0))
    assert not matmul_rate_measured(replace(_row("H100"), name="H999", matmul_efficiency=0.0))
    gb300, gb200 = _row("GB300"), _row("GB200")
    assert gb300.generation == "blackwell"
    assert (gb300.peak_tflops, gb300.fp8_tflops, gb300.matmul_efficiency) == (
        gb200.peak_tflops, gb200.fp8_tflops, gb200.matmul_efficiency)
    assert gb300.cards_per_node == 72 and gb300.memory_gib == 279.0


def test_the_500w_h100_sustains_a_fitted_share_of_the_sxm_gemm_rate():
    """The H100 96 GB runs the SXM5 die under 500 W: its GEMMs are priced at the fitted share of the SXM5's measured
    rate (below torchtitan's midpoint statement, 0.92), every other figure as the row states."""
    sxm, part = find_device("H100"), find_device("H100-96G")
    assert sxm is not None and part is not None
    assert part.clock_fraction == H100_96G_SUSTAINED_SHARE < H100_96G_CLOCK_MIDPOINT
    assert part.matmul_efficiency == sxm.matmul_efficiency and part.peak_tflops == sxm.peak_tflops
    assert "clock_fraction" in part.unconfirmed and "FITTED" in part.source
