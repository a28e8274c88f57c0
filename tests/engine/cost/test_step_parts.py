"""The step's parts (engine.cost.step_parts): the parts calibration fits one ratio each for are priced with the plan
(no second pricing pass), add up to the step time on every shown case, and split compute and each collective as
engine.specs.PRICED_PARTS names them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.config import load
from engine.cost import estimate_config
from engine.results import TIME_TERMS
from engine.specs import HOST_PART, PRICED_PARTS
from tests.support.cli import ROOT

CASES = sorted((ROOT / "benchmarks" / "cases").glob("*.yaml"))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_the_parts_add_up_to_the_step_and_to_each_time_term(case: Path) -> None:
    cfg = load(str(case)).config
    assert cfg is not None
    est, _diags = estimate_config(cfg)
    assert est is not None
    assert est.time_parts_s[HOST_PART] == 0.0  # the model prices no host time; a calibration adds it
    parts = {p: v for p, v in est.time_parts_s.items() if p != HOST_PART}
    assert set(parts) == set(PRICED_PARTS)
    assert math.isclose(sum(parts.values()), est.step_time_s, rel_tol=1e-12)
    for term in TIME_TERMS:
        of_term = sum(v for p, v in parts.items() if PRICED_PARTS[p] == term)
        assert math.isclose(of_term, est.time_breakdown_s[term], rel_tol=1e-12, abs_tol=1e-15)
    assert all(v >= -1e-12 * est.step_time_s for v in parts.values())
    assert parts["gemm"] > parts["attention"] >= 0.0  # every case is GEMM-bound
    for kind in ("tp_comm", "cp_comm", "ep_comm", "dp_comm", "pp_p2p"):
        assert parts[f"{kind}.intra"] == 0.0 or parts[f"{kind}.inter"] == 0.0  # one link class per kind


def test_tensor_parallelism_within_a_node_is_intra_node_and_data_parallelism_across_nodes_inter_node() -> None:
    cfg = load(str(ROOT / "benchmarks" / "cases" / "M-03.yaml")).config
    assert cfg is not None and cfg.cluster is not None and cfg.cluster.num_nodes > 1
    est, _diags = estimate_config(cfg)
    assert est is not None and est.strategy.tp <= cfg.cluster.cards_per_node
    assert est.time_breakdown_s["tp_comm"] > 0 and est.time_parts_s["tp_comm.inter"] == 0.0
    assert est.time_parts_s["tp_comm.intra"] == est.time_breakdown_s["tp_comm"]
    if est.time_breakdown_s["dp_comm"] > 0 and est.strategy.dp * est.strategy.tp > cfg.cluster.cards_per_node:
        assert est.time_parts_s["dp_comm.inter"] == est.time_breakdown_s["dp_comm"]
