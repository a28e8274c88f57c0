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
