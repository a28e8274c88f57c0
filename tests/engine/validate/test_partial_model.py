"""A model with a required fact missing (no ModelSpec) still gets every degree rule whose facts are known,
with the same code, message and place as the complete model; rules needing the missing fact stay silent."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.diagnostics import Diagnostic
from engine.positions import Range

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def diags(tmp_path: Path, body: str, name: str = "t.yaml") -> list[Diagnostic]:
    p = tmp_path / name
    p.write_text(body)
    return list(check_file(str(p)).diagnostics)


def rules(found: list[Diagnostic]) -> list[tuple[str, str, str, Range]]:
    return [(d.code, d.message, d.path, d.range) for d in found if d.code.startswith("HP4")]


def completed(name: str, line: str, after: str) -> str:
    """The corpus file with the missing fact written on the line after `after`: the rules then run on a
    complete model, and every finding below that line moves down by one."""
    text = (CORPUS / name).read_text()
    assert after in text
    return text.replace(after, after + line, 1)


def shifted(found: list[tuple[str, str, str, Range]]) -> list[tuple[str, str, str, Range]]:
    return [(c, m, p, Range.of(r.start.line - 1, r.start.character, r.end.line - 1, r.end.character))
            for c, m, p, r in found]


def test_tp_not_dividing_hidden_with_heads_missing(tmp_path: Path) -> None:
    partial = check_file(str(CORPUS / "partial_tp_heads_missing.yaml")).diagnostics
    assert [d.code for d in partial if d.code not in ("HP303",)] == ["HP201", "HP403"]
    (d,) = [d for d in partial if d.code == "HP403"]
    assert d.range == Range.of(7, 11, 7, 12) and d.path == "accelerator.tp_size"
    assert d.message.startswith("hidden_size (4096) must be divisible by tp (3), remainder is 1")
    assert d.data == {"nearest_valid": 2, "valid": [1, 2, 4]}
    full = diags(tmp_path, completed("partial_tp_heads_missing.yaml", "    num_attention_heads: 32\n",
                                     "    hidden_size: 4096\n"))
    assert shifted(rules(full)) == rules(partial)


def test_pp_above_layers_with_vocab_missing(tmp_path: Path) -> None:
    partial = check_file(str(CORPUS / "partial_pp_vocab_missing.yaml")).diagnostics
    (d,) = [d for d in partial if d.code == "HP407"]
    assert d.range == Range.of(7, 11, 7, 13) and d.path == "accelerator.pp_size"
    assert d.message == "pp (64) exceeds the number of splittable layers (32): every stage needs at least one layer"
    assert d.data["valid"] == [1, 2, 4, 8, 16, 32]
    full = diags(tmp_path, completed("partial_pp_vocab_missing.yaml", "    vocab_size: 32000\n",
                                     "    num_attention_heads: 32\n"))
    assert shifted(rules(full)) == rules(partial)


def test_cp_with_sequence_not_divisible_and_heads_missing(tmp_path: Path) -> None:
    partial = check_file(str(CORPUS / "partial_cp_heads_missing.yaml")).diagnostics
    (d,) = [d for d in partial if d.code == "HP404"]
    assert d.range == Range.of(10, 11, 10, 12) and d.path == "accelerator.cp_size"
    assert "sequence length 8196 must be divisible by 2 × cp = 8" in d.message and "remainder is 4" in d.message
    full = diags(tmp_path, completed("partial_cp_heads_missing.yaml", "    num_attention_heads: 32\n",
                                     "    hidden_size: 2048\n"))
    assert shifted(rules(full)) == rules(partial)


def test_ep_with_experts_known_and_vocab_missing(tmp_path: Path) -> None:
    partial = check_file(str(CORPUS / "partial_ep_vocab_missing.yaml")).diagnostics
    (d,) = [d for d in partial if d.code == "HP405"]
    assert d.range == Range.of(12, 13, 12, 14) and d.path == "parallelism.ep"  # the `3` in [1, 2, 3, 4]
    assert d.message == "num_experts (8) must be divisible by ep (3), remainder is 2"
    assert d.data == {"nearest_valid": 2, "valid": [1, 2, 4, 8]}
    full = diags(tmp_path, completed("partial_ep_vocab_missing.yaml", "  vocab_size: 32000\n",
                                     "  num_experts_per_tok: 2\n"), name="s.yaml")
    assert shifted(rules(full)) == rules(partial)


def test_rules_needing_the_missing_fact_stay_silent(tmp_path: Path) -> None:
    # Layers unknown: no pp, vpp or recompute-range verdict against a layer count of "0".
    found = diags(tmp_path, "model:\n  name: x\n  config_overrides:\n    hidden_size: 4096\n"
                  "accelerator:\n  pp_size: 64\n  tp_size: 2\ncontext: {device_num: 128}\n")
    assert [d.code for d in found if d.code.startswith("HP4")] == []
    assert any(d.code == "HP201" and d.data.get("missing") == "num_hidden_layers" for d in found)
    # Heads and kv heads unknown: Ulysses' head rule is skipped, the sequence rule still runs.
    found = diags(tmp_path, "model:\n  name: x\n  config_overrides:\n    num_hidden_layers: 32\n"
                  "    hidden_size: 4096\n    vocab_size: 32000\n    num_experts: 8\n    moe_intermediate_size: 1024\n"
                  "accelerator:\n  cp_size: 3\n  context_parallel_algo: ulysses\ncontext: {device_num: 3}\n"
                  "dataset: {data_transform: {max_seq_len: 4096}}\n")
    assert [(d.code, "Ulysses" in d.message) for d in found if d.code.startswith("HP4")] == [("HP404", False)]


def test_kv_heads_known_heads_missing_still_bound_tp(tmp_path: Path) -> None:
    found = diags(tmp_path, "model:\n  name: x\n  config_overrides:\n    num_hidden_layers: 32\n"
                  "    hidden_size: 4096\n    num_key_value_heads: 8\naccelerator:\n  tp_size: 16\n"
                  "context: {device_num: 16}\ndataset: {data_transform: {max_seq_len: 4096}}\n")
    (d,) = [d for d in found if d.code == "HP403"]
    assert d.message.startswith("num_key_value_heads (8) must be divisible by tp (16)")
    assert d.range == Range.of(7, 11, 7, 13)
