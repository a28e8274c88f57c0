"""A measured peak constrains the memory parts, each with its prior (engine.calibrate.memory_parts), through
`hp-plan calibrate`; and a ratios file's part ratios are read and checked (engine.ratios.ratiofile)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.calibrate.memory_parts import COUNTED, memory_spreads
from engine.calibrate.spreads import SHARED_FLOOR
from engine.ratios.ratiofile import parse_ratios
from engine.results import MEMORY_TERMS
from tests.support.cli import hp_plan_script as hp_plan


def _estimate(config: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    return json.loads(hp_plan("estimate", str(config), "--json", *extra).stdout)


def test_the_counted_memory_parts_have_the_floor_and_the_estimated_ones_the_bands_spread() -> None:
    spreads = memory_spreads("megatron", "hopper")
    assert set(spreads) == set(MEMORY_TERMS)
    assert all(spreads[p] == SHARED_FLOOR for p in COUNTED)
    assert all(spreads[p] > 100 * SHARED_FLOOR for p in set(MEMORY_TERMS) - COUNTED)


def test_a_measured_peak_moves_the_estimated_memory_parts_not_the_counted_ones(runs_dir: Path) -> None:
    uncal = _estimate(runs_dir / "a.yaml")
    peak = uncal["peak_memory_gib"] * 1.1
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: a.yaml\n    step_time_s: {uncal['step_time_s']}\n"
                    f"    peak_memory_gib: {peak}\n")
    out = runs_dir / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    mem = doc["memory_parts"]
    assert set(mem) == set(MEMORY_TERMS)
    assert all(abs(mem[p]["ratio"] - 1) < 1e-3 for p in COUNTED)  # byte counts of what the config states
    assert mem["activations"]["ratio"] > 1.05  # the 10% sits in what the model estimates
    assert doc["runs"][0]["calibrated_peak_gib"] == pytest.approx(peak, rel=0.01)  # the anchor, within 1%
    text = hp_plan("calibrate", str(runs)).stdout
    assert "memory parts (a measured peak, each part with its prior): parameters 1" in text


def test_the_calibrate_report_shows_every_part_its_ratio_and_why(runs_dir: Path) -> None:
    uncal = _estimate(runs_dir / "c.yaml")
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: c.yaml\n    step_time_s: {uncal['step_time_s'] * 1.2}\n")
    text = hp_plan("calibrate", str(runs)).stdout
    table = text[text.index("part ") : text.index("how each part moved")]
    for part in ("gemm", "attention", "elementwise", "tp_comm.intra", "dp_comm.inter", "pp_bubble"):
        assert f"\n{part} " in table
    assert "priced at nothing in these runs" in table  # e.g. expert traffic on a dense plan


def test_a_ratios_file_with_part_ratios_is_applied_part_by_part_and_an_unknown_part_refused(runs_dir: Path) -> None:
    ok = "ratios: {compute: 1.0}\nparts: {gemm: 2.0}\nmemory_ratio: 1.0\nfitted_on: []\n"
    ratios, diags = parse_ratios(ok, "r.yaml")
    assert ratios is not None and not diags
    assert ratios.of_part("gemm") == 2.0 and ratios.of_part("attention") == 1.0
    (runs_dir / "r.yaml").write_text(ok)
    plain, scaled = _estimate(runs_dir / "a.yaml"), _estimate(runs_dir / "a.yaml", "--ratios",
                                                              str(runs_dir / "r.yaml"))
    assert scaled["time_breakdown_s"]["compute"] > plain["time_breakdown_s"]["compute"]
    assert scaled["time_breakdown_s"]["tp_comm"] == pytest.approx(plain["time_breakdown_s"]["tp_comm"])
    bad, diags = parse_ratios("ratios: {compute: 1.0}\nparts: {matmul: 2.0}\nmemory_ratio: 1.0\n", "r.yaml")
    assert bad is None
    assert [d.code for d in diags] == ["HP810"] and "parts.matmul: unknown part" in diags[0].message
    assert diags[0].range.start.line == 1
