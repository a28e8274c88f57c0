"""The vectorised space equals a plain loop over every combination under the documented rules."""

from __future__ import annotations

import numpy as np
import pytest

from engine.search.space import (
    COLUMNS,
    R_MBN_PP,
    R_SP_CP,
    R_TP_HEADS,
    R_TP_NODE,
    _Builder,
    _Ctx,
    _level_cp_dp,
    _level_ep,
    _level_fsdp_etp,
    _level_mbs,
    _level_sp_os,
    _level_tp_pp,
    _level_vpp,
    divisors,
    enumerate_groups,
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
    # a listed 16 spans the nodes, which runs: the heads refuse it (3 is refused earlier: it does not divide 16)
    assert R_TP_NODE not in s.refused and R_TP_HEADS in s.value_reasons["tp"][16]
    assert enumerate_space(DENSE, cluster(2), 4, {}).refused[R_TP_NODE] == 1  # auto leaves tp 16 out
    assert s.refused[R_MBN_PP] > 0  # a batch of 4 cannot feed long pipelines
    s2 = enumerate_space(DENSE, cluster(1), 32, {"tp": (8,)})
    assert R_TP_HEADS in s2.value_reasons["tp"][8]  # 4 KV heads
    assert len(s2) == 0
    s3 = enumerate_space(DENSE, cluster(1), 32, {"cp": (1, 2), "sequence_parallel": (1,), "tp": (2,)})
    assert s3.refused[R_SP_CP] > 0 and set(s3.columns["cp"].tolist()) == {1}
    # a single stated cp is no candidate of HyperParallel's: its CP checks never run ([HP] §5.13)
    s4 = enumerate_space(DENSE, cluster(1), 32, {"cp": (2,), "sequence_parallel": (1,), "tp": (2,)})
    assert R_SP_CP not in s4.refused and len(s4) > 0


def _plain_nest(model: ModelSpec, cl: ClusterSpec, g: int, restrict: dict, cp_algo: str, os_shard: int):  # type: ignore[no-untyped-def]
    """Every level over every partial candidate, unfactored: the nest the factored enumeration stands for."""
    c = _Ctx(model, cl.world_size, g, cl.cards_per_node, divisors(cl.world_size), restrict, cp_algo, os_shard)
    b = _Builder(cols={})
    _level_tp_pp(b, c)
    _level_cp_dp(b, c)
    _level_mbs(b, c)
    _level_fsdp_etp(b, c)
    _level_ep(b, c)
    _level_vpp(b, c)
    _level_sp_os(b, c)
    return b


@pytest.mark.parametrize(("model", "nodes", "per_node", "g", "restrict", "cp_algo", "os_shard"), [
    (DENSE, 2, 8, 32, {}, "ring", 1),
    (DENSE, 4, 8, 48, {"tp": (1, 2, 16), "micro_batch_size": (1, 2)}, "ulysses", 2),
    (DENSE, 3, 4, 64, {"dp": (2, 4), "vpp": (1, 2, 3), "sequence_parallel": (1,)}, "ring", 1),
    (MOE, 2, 8, 32, {}, "ring", 1),
    (MOE, 4, 8, 64, {"etp": (0,)}, "ulysses", 1),
    (MOE, 2, 8, 16, {"etp": (1, 2), "fsdp": (1, 3, 4)}, "ring", 2),
    (MOE, 1, 8, 16, {"ep": (2, 4, 3), "micro_batch_num": (4, 8)}, "ring", 1),
])
def test_factored_enumeration_counts_as_the_plain_nest(model: ModelSpec, nodes: int, per_node: int, g: int,
                                                       restrict: dict, cp_algo: str, os_shard: int) -> None:
    """Levels 5-9 run once per key or prefix, each row weighted by the partial candidates it stands for:
    the same rows in the same order, the same refusal counts and the same reasons per value."""
    cl = cluster(nodes, per_node)
    plain = _plain_nest(model, cl, g, restrict, cp_algo, os_shard)
    groups = enumerate_groups(model, cl, g, restrict, cp_algo=cp_algo, optimizer_shard=os_shard)
    space = groups.materialise()
    assert groups.total == len(space) == plain.cols["tp"].shape[0]
    for k in ("tp", "pp", "cp", "dp", "mbs", "mbn", "fsdp", "etp", "ep", "vpp", "sp"):
        assert space.columns[k].tolist() == plain.cols[k].tolist(), k
    assert dict(space.refused) == dict(plain.refused)
    assert {d: {v: tuple(r) for v, r in m.items()} for d, m in plain.value_reasons.items()} == \
        {d: dict(m) for d, m in space.value_reasons.items()}
    # Any subset of groups materialises as the same rows of the whole space, in its order.
    some = np.arange(0, len(groups), 3)
    part = groups.materialise(some)
    whole = {tuple(int(space.columns[k][i]) for k in COLUMNS): i for i in range(len(space))}
    idx = [whole[tuple(int(part.columns[k][i]) for k in COLUMNS)] for i in range(len(part))]
    assert idx == sorted(idx) and len(idx) == int(groups.weight[some].sum())
