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
    step reads the same both ways, the peak as given reads more than 20 points below this repository's copy
    (the current release's chunked loss), whose error is accuracy.py's own, and HP536's finding is printed."""
    as_given = importlib.import_module("as_given")
    name = "llama31-8b-8xh100-96g-torchtitan-compile"
    given = tmp_path / "runs" / name
    given.mkdir(parents=True)
    for f in ("train.yaml", "expected.json"):
        (given / f).write_text((ROOT / "benchmarks" / "calibration_runs" / name / f).read_text())
    ours = (ROOT / "benchmarks" / "calibration_runs" / name / "search.yaml").read_text()
    stripped = "\n".join(line for line in ours.splitlines()
                         if not line.lstrip().startswith(("framework_version:", "loss_chunks:")))
    assert len(stripped.splitlines()) == len(ours.splitlines()) - 2  # the two keys, on lines of their own
    (given / "search.yaml").write_text(stripped)
    (tmp_path / "runs" / "no-expectation").mkdir()
    (tmp_path / "runs" / "no-expectation" / "search.yaml").write_text(stripped)
    assert as_given.main(["--dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out.splitlines()
    (row,) = [line for line in out if line.startswith(name)]
    cells = row.split()
    assert cells[1] == cells[2]
    (scored,) = [r for r in accuracy.score_s10([r for r in accuracy.s10_runs() if r.id == name])]
    assert scored.memory_error is not None and cells[4] == f"{100 * scored.memory_error:+.1f}%"
    assert float(cells[3].rstrip("%")) < float(cells[4].rstrip("%")) - 20
    assert "before main: step +0%, peak +" in row
    assert any(line.startswith("no-expectation") and "no expected.json" in line for line in out)


def test_as_given_skips_without_the_reference_folder_and_refuses_a_wrong_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    as_given = importlib.import_module("as_given")
    monkeypatch.setattr(as_given, "CANDIDATES", (tmp_path / "absent",))
    assert as_given.main([]) == 0
    assert capsys.readouterr().out.startswith("skipped")
    with pytest.raises(SystemExit) as exit_:
        as_given.main(["--dir", str(tmp_path / "typo")])
    assert exit_.value.code == 2
