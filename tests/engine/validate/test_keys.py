"""Unknown keys (engine/validate/keys.py): a "did you mean" per key up to the check's budget, then the known keys
(closed sections) or nothing (open sections), so a generated file of unknown keys is not hours of difflib."""

from __future__ import annotations

from pathlib import Path

import pytest

import engine.validate.keys as keys
from engine.check import check_file
from engine.diagnostics import MAX_DIAGNOSTICS

PLAN = """\
model: {num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 4, vocab_size: 128}
cluster: {num_nodes: 1, cards_per_node: 8, device_type: H100}
parallelism:
  tp: 1
"""


def test_suggestions_stop_at_the_checks_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = keys.did_you_mean

    def counted(word: str, choices: object, cutoff: float = 0.75) -> list[str]:
        calls.append(word)
        return real(word, choices, cutoff)  # type: ignore[arg-type]

    monkeypatch.setattr(keys, "did_you_mean", counted)
    n = MAX_DIAGNOSTICS + 300
    f = tmp_path / "plan.yaml"
    f.write_text(PLAN + "  tpz: 1\n" + "".join(f"  tp{i}x: 1\n" for i in range(n)))
    diags = check_file(str(f)).diagnostics
    assert len(calls) == MAX_DIAGNOSTICS  # one per key until the budget, none after
    unknown = [d for d in diags if d.code == "HP101"]
    assert unknown and all("unknown key" in d.message for d in unknown)
    # past the budget a closed section's key is still reported, with the known keys instead of a guess
    assert any("known keys:" in d.message for d in unknown)
    assert any("unknown key 'tpz' in parallelism; did you mean 'tp'?" in d.message for d in unknown)  # within it
