"""The corpus of bad inputs in tests/corpus: each file gets exactly the expected codes at the expected ranges
(0-based start line, start character, end line, end character). Advisory codes that depend on what a file
leaves unsaid (no cluster, no sequence length, device type assumed) are left out of the comparison."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.check import check_file

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
ADVISORY = {"HP302", "HP303", "HP207"}

EXPECTED: dict[str, list[tuple[str, tuple[int, int, int, int]]]] = {
    "alias_bomb.yaml": [("HP006", (1, 7, 1, 9))],
    "binary.yaml": [("HP004", (0, 6, 0, 7))],
    "bool_degree.yaml": [("HP103", (3, 6, 3, 10))],
    "duplicate_key.yaml": [("HP003", (3, 2, 3, 9)), ("HP003", (4, 2, 4, 9))],
    "empty.yaml": [("HP010", (0, 0, 0, 0))],
    "ep_cp_dense.yaml": [("HP410", (3, 6, 3, 7))],  # HP411 needs a stated plan to price (engine.validate.cp_pays)
    "experts_ep.yaml": [("HP405", (13, 13, 13, 14))],
    "expert_groups_uneven.yaml": [("HP209", (11, 11, 11, 12))],
    "topk_group_over.yaml": [("HP209", (12, 14, 12, 16))],
    "fixed_not_in_list.yaml": [("HP406", (5, 13, 5, 14))],
    "float_degree.yaml": [("HP103", (3, 11, 3, 14))],
    "gbs_not_divisible.yaml": [("HP402", (3, 21, 3, 24))],
    "half_typed.yaml": [("HP001", (3, 11, 3, 12))],
    "heads_kv.yaml": [("HP202", (6, 25, 6, 26))],
    "latin1.yaml": [("HP004", (1, 11, 1, 12))],
    # Megatron-Core's layer layout: a repetition past the bound is refused before it is unrolled; one that lists
    # 31 of the model's 32 decoder layers is refused at its value by the stack that takes it (Megatron-Core).
    "layout_bomb.yaml": [("HP106", (4, 34, 4, 69))],
    "layout_misfit.yaml": [("HP422", (5, 34, 5, 68))],
    "memory_above_device.yaml": [("HP409", (3, 19, 3, 21))],
    "min_product.yaml": [("HP408", (6, 2, 6, 4))],
    "missing_model_fields.yaml": [("HP201", (2, 2, 2, 18))],
    "missing_train_yaml.yaml": [("HP009", (0, 12, 0, 32))],
    "negative_degree.yaml": [("HP109", (3, 11, 3, 13))],
    "pp_exceeds_layers.yaml": [("HP407", (3, 11, 3, 13))],
    # Half-written models (a required fact missing): the rules whose facts are known still fire.
    "partial_cp_heads_missing.yaml": [("HP201", (2, 2, 2, 18)), ("HP404", (10, 11, 10, 12))],
    "partial_ep_vocab_missing.yaml": [("HP201", (1, 0, 1, 5)), ("HP405", (12, 13, 12, 14))],
    "partial_pp_vocab_missing.yaml": [("HP201", (2, 2, 2, 18)), ("HP407", (7, 11, 7, 13))],
    "partial_tp_heads_missing.yaml": [("HP201", (2, 2, 2, 18)), ("HP403", (7, 11, 7, 12))],
    "python_tag.yaml": [("HP007", (1, 8, 1, 39)), ("HP106", (1, 8, 1, 54))],
    "seq_not_divisible_cp.yaml": [("HP404", (3, 11, 3, 12))],
    "string_degree.yaml": [("HP103", (3, 11, 3, 14))],
    "tabs.yaml": [("HP001", (3, 0, 3, 1))],
    "top_level_list.yaml": [("HP002", (0, 0, 0, 1))],
    "tp_not_dividing.yaml": [("HP403", (3, 11, 3, 12))],
    "typo_tp_sise.yaml": [("HP101", (3, 2, 3, 9))],
    "unknown_device.yaml": [("HP301", (3, 15, 3, 20))],
    "unresolvable_model.yaml": [("HP205", (1, 33, 1, 54))],
    "world_size.yaml": [("HP412", (3, 11, 3, 12)), ("HP412", (4, 11, 4, 12)), ("HP304", (6, 14, 6, 17))],
}


def test_every_corpus_file_has_an_expectation() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name: str) -> None:
    loaded = check_file(str(CORPUS / name))
    got = [
        (d.code, (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character))
        for d in loaded.diagnostics
        if d.code not in ADVISORY
    ]
    assert got == EXPECTED[name]
    assert all(d.file is None for d in loaded.diagnostics)


def test_five_megabyte_file_is_analysed() -> None:
    head = ("model:\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n"
            "dataset:\n  data_transform:\n    max_seq_len: 4096\n  files:\n")
    # Long rows keep this test quick; benchmarks/hostile_inputs.py times a node-dense 5 MB file.
    rows = "".join(f"    - /data/corpus/{'x' * 230}/shard-{i:07d}.jsonl\n" for i in range(20_000))
    text = head + rows + "accelerator:\n  tp_sise: 2\n"
    assert len(text.encode()) > 5_000_000
    loaded = check_file("big.yaml", text=text)
    got = [(d.code, d.range.start.line) for d in loaded.diagnostics if d.code not in ADVISORY]
    assert got == [("HP101", 20_007)]


def test_five_thousand_levels_of_nesting() -> None:
    for text in ("a: " + "[" * 5000 + "]" * 5000 + "\n", "".join(" " * i + "k:\n" for i in range(5000))):
        loaded = check_file("deep.yaml", text=text)
        assert [d.code for d in loaded.diagnostics] == ["HP005"]


def test_oversized_file_refused_without_parsing(tmp_path: Path) -> None:
    p = tmp_path / "huge.yaml"
    p.write_bytes(b"a: 1\n" * (11 * 1024 * 1024 // 5))
    loaded = check_file(str(p))
    assert [d.code for d in loaded.diagnostics] == ["HP005"]


@pytest.mark.parametrize(("name", "nearest"), [("expert_groups_uneven.yaml", 4), ("topk_group_over.yaml", 8)])
def test_expert_groups_offer_the_nearest_valid_value(name: str, nearest: int) -> None:
    """HP209's quick fix: the largest divisor of the 64 experts not above n_group 6; topk_group down to n_group."""
    (d,) = [d for d in check_file(str(CORPUS / name)).diagnostics if d.code == "HP209"]
    assert d.data["nearest_valid"] == nearest
