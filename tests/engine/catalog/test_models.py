"""The offline model catalog: every entry builds a consistent ModelSpec, and HF config.json aliases resolve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.catalog.models import CATALOG, lookup, normalize_fields, resolve
from engine.config import load


@pytest.mark.parametrize("model_id", [m.id for m in CATALOG])
def test_every_catalog_model_builds(tmp_path: Path, model_id: str) -> None:
    t = tmp_path / "train.yaml"
    t.write_text(f"model:\n  pretrained_model_name_or_path: {model_id}\n"
                 "dataset: {data_transform: {max_seq_len: 2048}}\n")
    loaded = load(str(t))
    assert [d.message for d in loaded.diagnostics if d.is_error] == []
    assert loaded.config is not None and loaded.config.model is not None
    assert loaded.config.model.seq_len == 2048


def test_published_shapes() -> None:
    ds = lookup("deepseek-ai/DeepSeek-V3-Base")
    assert ds is not None and ds.fields["num_experts"] == 256 and ds.fields["kv_lora_rank"] == 512
    q = lookup("qwen/qwen3-30b-a3b")
    assert q is not None and q.fields["moe_intermediate_size"] == 768 and q.fields["head_dim"] == 128
    gpt3 = lookup("gpt3-175b")
    assert gpt3 is not None and gpt3.fields["hidden_act"] == "gelu" and gpt3.fields["learned_positions"] is True


def test_hf_aliases() -> None:
    f = normalize_fields({"n_layer": 70, "n_head": 112, "hidden_size": 14336, "vocab_size": 250880,
                          "model_type": "bloom"})
    assert (f["num_hidden_layers"], f["num_attention_heads"], f["hidden_act"]) == (70, 112, "gelu")
    f = normalize_fields({"num_local_experts": 8, "intermediate_size": 14336})
    assert f["num_experts"] == 8
    f = normalize_fields({"shared_expert_intermediate_size": 5632, "moe_intermediate_size": 1408})
    assert f["num_shared_experts"] == 4 and f["intermediate_size"] == 5632  # [HP] §2.5 derivations
    f = normalize_fields({"text_config": {"num_hidden_layers": 3, "hidden_size": 64}})
    assert f["num_hidden_layers"] == 3


def test_resolve_never_uses_the_network(tmp_path: Path) -> None:
    r = resolve("some-org/some-unpublished-model")
    assert r.error is not None and "config_overrides" in r.error
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 8}))
    r = resolve(".", base_dir=str(tmp_path))
    assert r.error is None and r.fields["num_hidden_layers"] == 2
    (tmp_path / "bad.json").write_text("{nope")
    assert "not valid JSON" in (resolve("bad.json", base_dir=str(tmp_path)).error or "")


def test_a_config_json_nested_beyond_the_decoder_is_a_reason_not_an_error(tmp_path: Path) -> None:
    """`[[[[…` 100,000 deep made json.loads raise RecursionError, an internal error (HP900) in every command."""
    (tmp_path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    res = resolve(str(tmp_path))
    assert not res.fields and "nested too deeply" in (res.error or "")
