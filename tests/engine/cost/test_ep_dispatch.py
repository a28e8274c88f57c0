"""Expert all-to-alls priced as dispatched (D-010): DeepEP sends a token once per destination node."""

from __future__ import annotations

import numpy as np
import pytest

from engine.cost import estimate
from engine.cost.communication import distinct_nodes
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import MOE, h100


def ep_comm(dispatcher: str, ep: int, nodes: int) -> float:
    s = Strategy(dp=8 * nodes, dp_shard=8 * nodes, ep=ep, micro_batch_num=2)
    e = estimate(MOE, h100(nodes), RunOptions(moe_dispatcher=dispatcher), s, 1e9)
    return e.time_breakdown_s["ep_comm"]


def test_distinct_nodes_is_bounded_by_topk_and_nodes() -> None:
    d = distinct_nodes(8.0, np.array([1.0, 2.0, 4.0, 64.0]))
    assert d[0] == pytest.approx(1.0) and d[1] == pytest.approx(2 * (1 - 0.5**8))
    assert all(d <= np.minimum(8.0, [1, 2, 4, 64]) + 1e-12) and d[3] > 7


def test_deepep_sends_less_across_nodes() -> None:
    across_a2a, across_deepep = ep_comm("alltoall", 32, 4), ep_comm("deepep", 32, 4)
    assert 0 < across_deepep < 0.6 * across_a2a
    assert ep_comm("deepep", 8, 1) == pytest.approx(ep_comm("alltoall", 8, 1))  # inside a node: the same
