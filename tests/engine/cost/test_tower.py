"""The vision tower's terms (engine.cost.tower): on stage 0 only, inside every breakdown, consistent with the
knapsack interface, and scaled by calibration like the rest."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.cost import CandidateTable, price_table
from engine.specs import ModelSpec, Ratios, RunOptions, VisionTower
from tests.engine.cost.shapes import cluster

TEXT = ModelSpec("vl-text", 16, 2048, 16, 32000, ffn=8192, kv_heads=4, seq_len=2048)
TOWER = VisionTower(num_layers=24, hidden=1024, heads=16, seq_len=1024, ffn=4096, out_hidden=2048, merge=2)
VL = replace(TEXT, vision=TOWER)


def table(**kw: object) -> CandidateTable:
    cols = {"dp": [4, 2, 1], "tp": [1, 2, 2], "pp": [2, 2, 4], "micro_batch_num": [4, 8, 8], "recompute": [0, 2, 1]}
    return CandidateTable.from_columns(**{**cols, **kw})  # type: ignore[arg-type]


def test_the_tower_adds_to_stage_0_only_and_the_breakdowns_still_add_up() -> None:
    cl, run = cluster(1, "H100"), RunOptions()
    a, b = price_table(TEXT, cl, run, table(), 80.0), price_table(VL, cl, run, table(), 80.0)
    assert not a.tower and set(b.tower) == {"memory_gib", "time_s", "layers", "visual_seq_len"}
    d_mem = b.stage_memory_gib - a.stage_memory_gib
    np.testing.assert_allclose(d_mem[:, 0], b.tower["memory_gib"], rtol=1e-9)
    np.testing.assert_allclose(np.nan_to_num(d_mem[:, 1:]), 0.0, atol=1e-9)
    total = sum(b.time_terms.values())
    np.testing.assert_allclose(total, b.step_time_s, rtol=1e-12)
    # Stage 0's own work per micro-batch grows by exactly the tower's (no FSDP: nothing else moves with it).
    parts = ("forward", "backward", "recompute", "tp_comm", "cp_comm")
    grow = sum(b.stage_time_parts[k][:, 0] - a.stage_time_parts[k][:, 0] for k in parts)
    np.testing.assert_allclose(grow * np.array([4, 8, 8]), b.tower["time_s"], rtol=1e-9)
    for k in parts:
        np.testing.assert_allclose(b.stage_time_parts[k][:, 1:], a.stage_time_parts[k][:, 1:], rtol=1e-12)
    assert (b.step_time_s > a.step_time_s).all() and (b.mfu != a.mfu).all()


def test_the_knapsack_interface_still_reproduces_stage_memory() -> None:
    pt = price_table(VL, cluster(1, "H100"), RunOptions(), table(recompute=[1, 1, 1]), 80.0)
    for i in range(len(pt)):
        pp = int(table().pp[i])
        acts = (pt.layer_count[i, :pp, :, None] * pt.in_flight[i, :pp, None, None]
                * pt.layer_act_one_gib[i][None, :, :])[:, :, 1].sum(axis=1)
        got = pt.stage_static_gib[i, :pp] + pt.stage_fixed_gib[i, :pp] + acts
        np.testing.assert_allclose(got, pt.stage_memory_gib[i, :pp], rtol=1e-9)


def test_recompute_shrinks_the_towers_activations_and_calibration_scales_its_share() -> None:
    cl = cluster(1, "H100")
    off = price_table(VL, cl, RunOptions(), table(recompute=[0, 0, 0]), 80.0)
    full = price_table(VL, cl, RunOptions(), table(recompute=[2, 2, 2]), 80.0)
    assert (full.tower["memory_gib"] < off.tower["memory_gib"]).all()
    assert (full.tower["time_s"] > off.tower["time_s"]).all()  # the forward again
    ratios = Ratios(time=(("compute", 3.0),), memory=2.0)
    cal = price_table(VL, cl, RunOptions(ratios=ratios), table(recompute=[0, 0, 0]), 80.0)
    np.testing.assert_allclose(cal.tower["memory_gib"], 2.0 * off.tower["memory_gib"], rtol=1e-12)
    np.testing.assert_allclose(cal.tower["time_s"], 3.0 * off.tower["time_s"], rtol=1e-12)


def test_bidirectional_attention_costs_more_than_a_causal_decoder_layer_of_the_same_shape() -> None:
    cl = cluster(1, "H100")
    t = CandidateTable.from_columns(dp=[8], tp=[1], pp=[1], micro_batch_num=[1])
    tower = price_table(replace(TEXT, vision=replace(TOWER, out_hidden=0)), cl, RunOptions(), t, 80.0)
    same = price_table(TOWER.layer_model(), cl, RunOptions(), t, 80.0)
    per_layer_decoder = float(same.layer_time_s[0, 0, 0])
    assert float(tower.tower["time_s"][0]) / TOWER.num_layers > per_layer_decoder * (1 + 1e-6)
    assert float(tower.tower["time_s"][0]) / TOWER.num_layers == pytest.approx(per_layer_decoder, rel=0.5)
