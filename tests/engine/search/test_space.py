"""The vectorised space equals a plain loop over every combination under the documented rules."""

from __future__ import annotations

import pytest

from engine.search.space import (
    R_MBN_PP,
    R_SP_CP,
    R_TP_HEADS,
    R_TP_NODE,
    enumerate_space,
)
from engine.specs import ClusterSpec, DeviceSpec, ModelSpec
from tests.engine.search.reference import loop_space

DEV = DeviceSpec("H100", 989.0, 80.0, 3.35, 450.0, 50.0)


def cluster(nodes: int, per_node: int = 8) -> ClusterSpec:
    return ClusterSpec(DEV, nodes, per_node, 80.0, 450.0, 50.0)


DENSE = ModelSpec(name="d", num_layers=6, hidden=512, heads=8, vocab=1000, ffn=1536, kv_heads=4, seq_len=2048)
MOE = ModelSpec(name="m", num_layers=5, hidden=512, heads=8, vocab=1000, ffn=1536, kv_heads=8, seq_len=1024,
                num_experts=8, experts_per_tok=2, moe_ffn=256, first_k_dense=1)


def as_set(space) -> set[tuple[int, ...]]:
    cols = [space.columns[k] for k in ("tp", "pp", "cp", "dp", "mbs", "mbn", "fsdp", "etp", "ep", "vpp", "sp")]
    rows = list(zip(*(c.tolist() for c in cols), strict=True))
    assert len(rows) == len(set(rows)), "duplicate candidates"
    return set(rows)


@pytest.mark.parametrize(("model", "nodes", "g", "restrict"), [
    (DENSE, 2, 32, {}),
    (DENSE, 4, 48, {"tp": (1, 2, 16), "micro_batch_size": (1, 2)}),
    (DENSE, 2, 64, {"dp": (2, 4), "vpp": (1, 2, 3), "sequence_parallel": (1,)}),
    (MOE, 2, 32, {}),
    (MOE, 1, 16, {"ep": (2, 4, 3), "micro_batch_num": (4, 8)}),
])
def test_space_equals_plain_loops(model: ModelSpec, nodes: int, g: int, restrict: dict) -> None:
    cl = cluster(nodes)
    space = enumerate_space(model, cl, g, restrict)
    assert as_set(space) == loop_space(model, cl, g, restrict)


def test_invariants_hold_on_every_row() -> None:
    cl = cluster(4)
    s = enumerate_space(MOE, cl, 64, {})
    c = s.columns
    assert len(s) > 0
    assert ((c["dp"] * c["tp"] * c["pp"] * c["cp"]) == cl.world_size).all()
    assert ((c["dp"] * c["mbs"] * c["mbn"]) == 64).all()
    assert ((c["pp"] == 1) | (c["mbn"] >= c["pp"])).all()
    assert (((c["dp"] * c["cp"]) % c["fsdp"]) == 0).all()
    assert ((MOE.num_experts % c["ep"]) == 0).all()


def test_rows_are_in_nest_order_and_deterministic() -> None:
    a = enumerate_space(DENSE, cluster(2), 32, {})
    b = enumerate_space(DENSE, cluster(2), 32, {})
    keys = list(zip(*(a.columns[k].tolist() for k in ("tp", "pp", "cp", "mbs", "fsdp", "etp", "ep", "vpp", "sp")),
                    strict=True))
    assert keys == sorted(keys)
    for k in a.columns:
        assert (a.columns[k] == b.columns[k]).all()


def test_refusals_are_counted_and_attributed() -> None:
    s = enumerate_space(DENSE, cluster(2), 4, {"tp": (3, 16, 8, 2)})
    assert s.refused[R_TP_NODE] == 1  # 16 > 8 devices per node (3 is refused earlier: it does not divide 16)
    assert R_TP_NODE in s.value_reasons["tp"][16]
    assert s.refused[R_MBN_PP] > 0  # a batch of 4 cannot feed long pipelines
    s2 = enumerate_space(DENSE, cluster(1), 32, {"tp": (8,)})
    assert R_TP_HEADS in s2.value_reasons["tp"][8]  # 4 KV heads
    assert len(s2) == 0
    s3 = enumerate_space(DENSE, cluster(1), 32, {"cp": (2,), "sequence_parallel": (1,), "tp": (2,)})
    assert s3.refused[R_SP_CP] > 0 and len(s3) == 0
