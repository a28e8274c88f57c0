"""A trace's categories onto the priced parts (engine.calibrate.profiler_trace.part_seconds): each category's
seconds spread over the parts it covers in proportion to their priced seconds, recompute shared by the three
compute kernels' categories, so each covered part takes its category's measured ÷ priced ratio."""

from __future__ import annotations

import pytest

from engine.calibrate.profiler_trace import TraceReading, part_seconds

PRICED = {"gemm": 6.0, "attention": 2.0, "elementwise": 2.0, "recompute": 5.0, "tp_comm.intra": 1.0,
          "dp_comm.inter": 3.0, "ep_comm.intra": 0.0, "pp_bubble": 0.0, "optimizer": 0.5}


def _reading(parts: dict[str, float], idle: float = 0.0) -> TraceReading:
    return TraceReading(("t.json",), 20.0, parts, idle, 3, 1, 1, None)


def test_each_compute_category_covers_its_part_and_its_share_of_recompute() -> None:
    # GEMM 1.5× priced (its own 6 s + its 60% of recompute's 5 s = 9 s priced -> 13.5 s), attention 0.5× (2 + 1
    # -> 1.5 s), element-wise as priced (2 + 1 -> 3 s)
    out = part_seconds(_reading({"gemm": 13.5, "attention": 1.5, "elementwise": 3.0}), PRICED)
    assert out["gemm"] / PRICED["gemm"] == pytest.approx(1.5)
    assert out["attention"] / PRICED["attention"] == pytest.approx(0.5)
    assert out["elementwise"] / PRICED["elementwise"] == pytest.approx(1.0)
    # recompute replays the three in the forward's proportions: 0.6·1.5 + 0.2·0.5 + 0.2·1.0
    assert out["recompute"] / PRICED["recompute"] == pytest.approx(0.6 * 1.5 + 0.2 * 0.5 + 0.2 * 1.0)
    total = sum(out[k] for k in ("gemm", "attention", "elementwise", "recompute"))
    assert total == pytest.approx(13.5 + 1.5 + 3.0)  # every measured second is placed once


def test_collectives_share_one_ratio_and_a_part_priced_at_nothing_takes_none() -> None:
    out = part_seconds(_reading({"collective": 8.0, "alltoall": 1.0, "optimizer": 1.0}, idle=2.0), PRICED)
    assert out["tp_comm.intra"] / 1.0 == pytest.approx(2.0) and out["dp_comm.inter"] / 3.0 == pytest.approx(2.0)
    assert "ep_comm.intra" not in out and "pp_bubble" not in out  # nothing priced there: nothing to scale
    assert out["optimizer"] == pytest.approx(1.0)


def test_an_unsplit_compute_category_takes_the_kernel_categories_in() -> None:
    out = part_seconds(_reading({"compute": 10.0, "gemm": 5.0}), PRICED)
    assert sum(out[k] for k in ("gemm", "attention", "elementwise", "recompute")) == pytest.approx(15.0)
    assert out["gemm"] / PRICED["gemm"] == pytest.approx(out["attention"] / PRICED["attention"])
