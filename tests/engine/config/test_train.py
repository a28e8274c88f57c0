"""The train.yaml reader (engine/config/train.py): a local config.json's values are typed before any rule reads
them. NaN, Infinity, a string or a list where a count belongs made every command an internal error (HP900)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.check import check_file
from tests.support.cli import ROOT

TRAIN = (ROOT / "examples" / "llama3-70b" / "train.yaml").read_text()
GOOD = {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100}


@pytest.mark.parametrize("key, raw, code", [
    ("num_hidden_layers", "NaN", "HP103"),
    ("hidden_size", "Infinity", "HP103"),
    ("num_attention_heads", '"8"', "HP103"),
    ("vocab_size", "[100]", "HP103"),
    ("moe_intermediate_size", "NaN", "HP103"),
    ("tie_word_embeddings", "1", "HP104"),
    ("capacity_factor", "NaN", "HP105"),
])
def test_a_config_json_value_of_the_wrong_kind_is_said_at_the_name_not_an_internal_error(
        tmp_path: Path, key: str, raw: str, code: str) -> None:
    body = json.dumps({**GOOD, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32})
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(body[:-1] + f', "{key}": {raw}}}')
    path = tmp_path / "train.yaml"
    path.write_text(TRAIN.replace("meta-llama/Llama-3.1-70B", "./model"))
    diags = check_file(str(path)).diagnostics
    assert "HP900" not in [d.code for d in diags], diags
    (hit,) = [d for d in diags if d.code == code and key in d.message]
    line = path.read_text().splitlines()[hit.range.start.line]
    assert line[hit.range.start.character:].startswith("./model")  # at the name that led to the config.json


def test_a_well_typed_config_json_is_read_as_before(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({**GOOD, "capacity_factor": 1, "hidden_act": "silu"}))
    path = tmp_path / "train.yaml"
    path.write_text(TRAIN.replace("meta-llama/Llama-3.1-70B", "./model"))
    codes = [d.code for d in check_file(str(path)).diagnostics]
    assert not {"HP103", "HP104", "HP105", "HP106", "HP201", "HP900"} & set(codes), codes
