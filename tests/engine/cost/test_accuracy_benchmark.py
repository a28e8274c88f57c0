"""benchmarks/accuracy.py keeps its promises: flagged cases say so in their case files and in the table, and a
fitted constant is what its fit on the named runs gives (no hand-set value beside a fit that says otherwise)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
accuracy = importlib.import_module("accuracy")


def test_flagged_cases_exist_and_their_case_files_say_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = {c.id: c for c in accuracy._cases()}
    assert set(accuracy.FLAGGED) <= set(cases)
    monkeypatch.setattr(accuracy, "CASES_DIR", tmp_path)
    accuracy.write_cases(list(cases.values()))
    for cid in accuracy.FLAGGED:
        head = (tmp_path / f"{cid}.yaml").read_text().splitlines()[:3]
        assert any(line.startswith("# FLAGGED: micro-batch size unpublished") for line in head)
        # priced at the documented default, never tuned per case: [CAL] §5 states b = 1
        assert cases[cid].mbs == 1
    unflagged = (tmp_path / "M-03.yaml").read_text()
    assert "FLAGGED" not in unflagged
    committed = (ROOT / "benchmarks" / "cases" / "M-04.yaml").read_text()
    assert "# FLAGGED:" in committed  # the committed case file is the one the benchmark writes


@pytest.mark.parametrize("constant", sorted(accuracy.FRACTION_FITS))
def test_framework_gemm_fractions_are_their_fits_on_their_named_runs(constant: str) -> None:
    runs = accuracy.s10_runs()
    ids = accuracy.FRACTION_FITS[constant]
    assert {r.id for r in runs} >= set(ids)  # the named runs exist
    value, errors = accuracy.fit_fraction(runs, constant)
    assert value == accuracy.get_fitted(constant)
    # MC2's share ends at the edge of its range (0: no more hidden than with MC2 off), where the 34B still reads
    # -6.4 %: no value of the share can bring it closer, so its bound is that of the best the constant can do;
    # the experts' share serves two MoE runs on two expert code paths (grouped and sequential), -5.0 % / +3.2 %
    bound = {"MC2_ACHIEVED_SHARE": 0.07, "MINDSPEED_EXPERT_GEMM_SHARE": 0.06}.get(constant, 0.05)
    assert len(errors) == 2 and max(abs(e) for e in errors) < bound


def test_a_flagged_case_is_not_evidence_of_the_models_error() -> None:
    # its error is set by the unpublished choice, so the error band's evidence leaves it out
    from engine.cost import band_evidence

    assert accuracy.FLAGGED
    assert not {r.id for r in band_evidence.STEP_ROWS} & set(accuracy.FLAGGED)


def test_as_given_prices_a_run_both_ways_and_says_what_its_unstated_release_moves(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/as_given.py on a reference folder holding the TT-BENCH 8B run written without its release: the
    file as given reads its peak ~28 % low (the current release's chunked loss), this repository's copy +1.7 %,
    and HP536's boundary is printed beside them."""
    as_given = importlib.import_module("as_given")
    name = "llama31-8b-8xh100-96g-torchtitan-compile"
    given = tmp_path / "runs" / name
    given.mkdir(parents=True)
    for f in ("train.yaml", "expected.json"):
        (given / f).write_text((ROOT / "benchmarks" / "calibration_runs" / name / f).read_text())
    ours = (ROOT / "benchmarks" / "calibration_runs" / name / "search.yaml").read_text()
    (given / "search.yaml").write_text("\n".join(line for line in ours.splitlines()
                                                 if not line.lstrip().startswith(("framework_version:", "loss_chunks:"))))
    assert as_given.main(["--dir", str(tmp_path / "runs")]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith(name)]
    cells = row.split()
    assert cells[1:3] == ["-2.6%", "-2.6%"]
    assert float(cells[3].rstrip("%")) < -20 and cells[4] == "+1.7%"
    assert "before main (the chunked loss" in row


def test_as_given_skips_without_the_reference_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    as_given = importlib.import_module("as_given")
    assert as_given.main(["--dir", str(tmp_path / "absent")]) == 0
    assert capsys.readouterr().out.startswith("skipped")
