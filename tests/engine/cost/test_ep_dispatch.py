"""Expert all-to-alls priced as dispatched (D-010): DeepEP sends a token once per destination node."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.cost import constants as K
from engine.cost import estimate
from engine.cost.collectives import Links
from engine.cost.communication import distinct_nodes
from engine.integers import MAX_MODEL_FACT
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import MOE, h100


def ep_comm(dispatcher: str, ep: int, nodes: int) -> float:
    s = Strategy(dp=8 * nodes, dp_shard=8 * nodes, ep=ep, micro_batch_num=2)
    e = estimate(MOE, h100(nodes), RunOptions(moe_dispatcher=dispatcher), s, 1e9)
    return e.time_breakdown_s["ep_comm"]


def test_distinct_nodes_is_bounded_by_topk_and_nodes() -> None:
    d = distinct_nodes(MOE, np.array([1.0, 2.0, 4.0, 64.0]))  # top-8, free routing
    assert d[0] == pytest.approx(1.0) and d[1] == pytest.approx(2 * (1 - 0.5**8))
    assert all(d <= np.minimum(8.0, [1, 2, 4, 64]) + 1e-12) and d[3] > 7


# DeepSeek-V3's routing: 256 experts in 8 groups, a token's top-8 from its top-4 groups ([MODELS] §2).
DSV3_ROUTING = replace(MOE, num_experts=256, experts_per_tok=8, expert_groups=8, groups_per_tok=4)


def test_group_limited_routing_reaches_at_most_its_groups_nodes() -> None:
    nodes = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    free, limited = distinct_nodes(MOE, nodes), distinct_nodes(DSV3_ROUTING, nodes)
    assert np.all(limited <= free + 1e-12)
    # One group per node (EP 64 on 8 nodes): exactly the 4 groups' nodes, against 5.25 free.
    assert limited[3] == pytest.approx(4.0) and free[3] == pytest.approx(8 * (1 - (7 / 8) ** 8))
    # Two groups per node (4 nodes): a node is missed when all 4 groups lie on the other 3, C(6,4)/C(8,4).
    assert limited[2] == pytest.approx(4 * (1 - 15 / 70))
    # A group over 2 nodes (16 nodes): 2 experts per group over its 2 nodes, 4 · 2 · (1 − ½²).
    assert limited[4] == pytest.approx(4 * 2 * (1 - 0.25))
    # Inside one node nothing crosses: the count stays one.
    assert limited[0] == pytest.approx(1.0)


def test_group_limited_routing_sends_less_across_nodes_only_with_deepep() -> None:
    run = RunOptions(moe_dispatcher="deepep")
    s = Strategy(dp=64, dp_shard=64, ep=64, micro_batch_num=2)
    free = estimate(replace(DSV3_ROUTING, expert_groups=0, groups_per_tok=0), h100(8), run, s, 1e9)
    limited = estimate(DSV3_ROUTING, h100(8), run, s, 1e9)
    assert 0 < limited.time_breakdown_s["ep_comm"] < free.time_breakdown_s["ep_comm"]
    a2a = RunOptions(moe_dispatcher="alltoall")  # every routed copy crosses: groups change nothing
    assert estimate(DSV3_ROUTING, h100(8), a2a, s, 1e9).time_breakdown_s["ep_comm"] == pytest.approx(
        estimate(replace(DSV3_ROUTING, expert_groups=0, groups_per_tok=0), h100(8), a2a, s, 1e9
                 ).time_breakdown_s["ep_comm"])


def test_deepep_crosses_nodes_at_its_measured_rdma_rate() -> None:
    links = Links(8, 450.0, 50.0)
    assert links.deepep_rdma == pytest.approx(50e9 * K.DEEPEP_RDMA_SHARE)
    assert links.deepep_rdma > links.be  # DeepEP's kernels beat NCCL's collective share of the NIC


def test_deepep_sends_less_across_nodes() -> None:
    across_a2a, across_deepep = ep_comm("alltoall", 32, 4), ep_comm("deepep", 32, 4)
    assert 0 < across_deepep < 0.6 * across_a2a
    assert ep_comm("deepep", 8, 1) == pytest.approx(ep_comm("alltoall", 8, 1))  # inside a node: the same


def test_megatron_folds_its_expert_groups_from_0_10() -> None:
    """MoE Parallel Folding ([MCORE-PS]): at tp 2 and etp 1 an EP group of 16 is 16 consecutive ranks (two nodes)
    from Megatron-Core 0.10, every second rank (four nodes) before; the all-to-all crosses more NICs then."""
    s = Strategy(dp=32, tp=2, ep=16, etp=1, micro_batch_num=2)
    run = RunOptions(framework="megatron", moe_dispatcher="deepep")
    folded = estimate(MOE, h100(8), run, s, 1e9)
    carved = estimate(MOE, h100(8), replace(run, framework_version="0.9"), s, 1e9)
    assert 0 < folded.time_breakdown_s["ep_comm"] < carved.time_breakdown_s["ep_comm"]


def test_group_counts_up_to_the_largest_model_fact_price_at_once() -> None:
    """A file may state n_group and topk_group up to MAX_MODEL_FACT: the count is a closed form (log-gamma), not
    a product over the groups (which took 36 s at 10⁷)."""
    huge = replace(DSV3_ROUTING, expert_groups=MAX_MODEL_FACT, groups_per_tok=MAX_MODEL_FACT - 1)
    nodes = np.array([8.0, 16.0])
    assert distinct_nodes(huge, nodes) == pytest.approx(distinct_nodes(MOE, nodes))
