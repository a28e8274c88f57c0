"""check_file (engine/check.py): the findings of one check are bounded (MAX_DIAGNOSTICS), the errors first, with
one HP011 saying how many more there were; a file of 300,000 unknown keys made `check --json` take 2.5 GB."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.diagnostics import MAX_DIAGNOSTICS
from tests.support.cli import ROOT

PLAN = (ROOT / "examples" / "explain" / "1f1b.yaml").read_text()


def test_a_flood_of_findings_is_cut_to_the_first_ones_and_says_how_many_more(tmp_path: Path) -> None:
    n = MAX_DIAGNOSTICS + 500
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN.replace("parallelism:\n", "parallelism:\n" + "".join(f"  tq{i}: 1\n" for i in range(n)), 1))
    diags = check_file(str(path)).diagnostics
    assert len(diags) == MAX_DIAGNOSTICS + 1
    head, kept = diags[0], diags[1:]
    assert head.code == "HP011" and f"{n - MAX_DIAGNOSTICS:,} more findings" in head.message
    unknown = [d for d in kept if d.code == "HP101"]
    assert len(unknown) == MAX_DIAGNOSTICS and unknown[0].path == "parallelism.tq0"  # the first ones, in order
    assert [d.range.start.line for d in kept] == sorted(d.range.start.line for d in kept)


def test_a_file_under_the_bound_keeps_every_finding(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN.replace("parallelism:\n", "parallelism:\n" + "".join(f"  tq{i}: 1\n" for i in range(50)), 1))
    codes = [d.code for d in check_file(str(path)).diagnostics]
    assert "HP011" not in codes and codes.count("HP101") == 50
