"""docs/diagnostics.md lists every code of engine.diagnostics.CODES (regenerate with docs/gen_diagnostics.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from engine.diagnostics import CODES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_code_is_documented() -> None:
    text = (DOCS / "diagnostics.md").read_text()
    missing = [c.code for c in CODES.values() if f"</a>{c.code} | {c.severity.value} | {c.title} |" not in text]
    assert missing == [], f"run `python docs/gen_diagnostics.py`: {missing} missing or stale"


def test_doc_is_exactly_the_generated_one() -> None:
    spec = importlib.util.spec_from_file_location("gen_diagnostics", DOCS / "gen_diagnostics.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (DOCS / "diagnostics.md").read_text() == mod.render(), "run `python docs/gen_diagnostics.py`"


def test_no_code_is_a_hint() -> None:
    """Severities follow what the user must see (docs/diagnostics.md, Severities): VS Code hides hints from
    the Problems panel, so no finding worth reporting may be one; HP611 (a faster plan) is information."""
    assert [c.code for c in CODES.values() if c.severity.value == "hint"] == []
    assert CODES["HP611"].severity.value == "information"
