"""The newest upstream recipe shapes ([HP] Corrections): model fields pass through (priced where the cost model
uses them, said once otherwise), sentinels upstream accepts, factories, catalog models named by a path, recipe
fragments, and the attention share of sliding-window, hybrid linear and sparse attention."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.check import check_file
from engine.config.model_facts import window_share
from engine.config.types import ClusterOverrides
from engine.diagnostics import Severity

# examples/deepseek_v4pro/train.yaml's shape (legacy schema): architecture fields of a family hp-plan has no name for.
V4 = """\
model:
  name: deepseek_v4pro
  weights_path: /workspace/models/deepseek-ai/DeepSeek-V4Pro
  config_overrides:
    vocab_size: 129280
    hidden_size: 7168
    num_hidden_layers: 61
    num_attention_heads: 128
    num_key_value_heads: 1
    head_dim: 512
    q_lora_rank: 1536
    o_lora_rank: 1024
    o_groups: 16
    qk_rope_head_dim: 64
    rope_head_dim: 64
    n_routed_experts: 384
    n_shared_experts: 1
    num_experts_per_tok: 6
    moe_intermediate_size: 3072
    num_hash_layers: 3
    hc_mult: 4
    index_n_heads: 64
    index_head_dim: 128
    index_topk: 1024
    num_nextn_predict_layers: 1
    torch_dtype: bfloat16
data: {max_seq_len: 8192}
train:
  global_batch_size: 8
  micro_batch_size: 1
  accelerator: {dp_shard: -1, tp: 1, cp: 1, pp: 1, ep: 1, etp: 0, comm_fusion: true}
  mixed_precision: {enabled: true, param_dtype: bfloat16, reduce_dtype: float32}
  gradient_checkpointing: {activation_checkpoint: full}
"""


def _check(tmp_path: Path, text: str, name: str = "train.yaml", devices: int | None = None):  # type: ignore[no-untyped-def]
    p = tmp_path / name
    p.write_text(text)
    over = ClusterOverrides(devices=devices, device_type="H100", explicit=True) if devices else None
    return check_file(str(p), overrides=over)


def _bad(loaded) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{d.code} {d.message}" for d in loaded.diagnostics
            if d.effective_severity in (Severity.ERROR, Severity.WARNING)]


def test_new_model_fields_pass_through_and_unpriced_ones_are_said_once(tmp_path: Path) -> None:
    loaded = _check(tmp_path, V4, devices=8)
    assert _bad(loaded) == []
    said = [d for d in loaded.diagnostics if d.code == "HP215"]
    assert len(said) == 1 and said[0].effective_severity == Severity.INFORMATION
    assert {"o_lora_rank", "o_groups", "rope_head_dim", "hc_mult"} <= set(said[0].data["keys"])
    assert "index_topk" not in said[0].data["keys"]  # priced: the indexer and the sparse attention
    hash_note = [d for d in loaded.diagnostics if d.code == "HP112" and "num_hash_layers" in d.path]
    assert hash_note and hash_note[0].effective_severity == Severity.INFORMATION
    cfg = loaded.config
    assert cfg is not None and cfg.model is not None and cfg.model.is_moe and cfg.model.mtp_depth == 1
    # sparse attention over 1024 of 8192 keys plus the indexer's 64 x 128 scores per causal pair
    d_qk, d_v = 512, 512  # no kv_lora_rank: the cost model's attention shape is head_dim for both
    want = window_share(1024, 8192) + 64 * 128 / (128 * (d_qk + d_v))
    assert cfg.model.attention_span == pytest.approx(want)
    assert cfg.stated is not None and cfg.stated.dp_shard == 8 and cfg.stated.etp == cfg.stated.tp  # -1, 0


def test_window_and_linear_attention_shares(tmp_path: Path) -> None:
    base = ("model:\n  pretrained_model_name_or_path: x\n  config_overrides:\n    num_hidden_layers: 4\n"
            "    hidden_size: 2880\n    num_attention_heads: 64\n    num_key_value_heads: 8\n    head_dim: 64\n"
            "    vocab_size: 201088\n    sliding_window: 128\n{extra}"
            "training: {{global_batch_size: 8}}\ndataset: {{data_transform: {{max_seq_len: 4096}}}}\n")
    gpt_oss = base.format(extra="    layer_types: [sliding_attention, full_attention, sliding_attention, "
                          "full_attention]\n")
    m = _check(tmp_path, gpt_oss).config.model
    assert m.attention_span == pytest.approx((1 + window_share(128, 4096)) / 2)
    qwen_next = base.format(extra="    full_attention_interval: 4\n    use_sliding_window: false\n"
                            "    linear_num_key_heads: 16\n")
    loaded = _check(tmp_path, qwen_next)
    assert loaded.config.model.attention_span == pytest.approx(0.25)  # one full layer in four, three linear
    note = [d for d in loaded.diagnostics if d.code == "HP112" and "linear_num_key_heads" in d.path]
    assert note and "recurrence" in note[0].message
    biased = _check(tmp_path, base.format(extra="    linear_bias: true\n"))
    assert not [d for d in biased.diagnostics if d.code == "HP112"]  # a priced key, not a linear-attention width
    qwen2 = base.format(extra="    use_sliding_window: false\n")
    assert _check(tmp_path, qwen2).config.model.attention_span == 1.0


def test_sentinels_upstream_accepts(tmp_path: Path) -> None:
    text = ("model:\n  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained\n"
            "  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n  torch_dtype: auto\n"
            "training: {global_batch_size: 64}\naccelerator: {tp_size: 2}\nfsdp_config: {dp_shard_size: -1}\n"
            "activation_checkpoint: {mode: null}\ndataset: {data_transform: {max_seq_len: 4096}}\n")
    loaded = _check(tmp_path, text, devices=16)
    assert _bad(loaded) == []
    s = loaded.config.stated
    assert s is not None and s.dp_shard == 8 and s.recompute.mode == "off"


def test_a_model_an_unreadable_factory_builds_is_unknown_not_dense(tmp_path: Path) -> None:
    text = ("model:\n  _target_: my_pkg.models.build_moe\n  hidden_size: 2048\n  num_hidden_layers: 24\n"
            "  num_attention_heads: 16\n  vocab_size: 32000\n"
            "training: {global_batch_size: 64}\naccelerator: {tp_size: 1, ep_size: 4}\n"
            "dataset: {data_transform: {max_seq_len: 4096}}\n")
    loaded = _check(tmp_path, text, devices=8)
    codes = {d.code for d in loaded.diagnostics}
    assert "HP410" not in codes and "HP205" in codes and loaded.config.model is None
    # the factory's arguments stated in config_overrides are the model's facts: priced, experts still unknown
    text = text.replace("  hidden_size: 2048\n", "  config_overrides:\n    hidden_size: 2048\n").replace(
        "  num_hidden_layers: 24\n  num_attention_heads: 16\n  vocab_size: 32000\n",
        "    num_hidden_layers: 24\n    num_attention_heads: 16\n    vocab_size: 32000\n")
    loaded = _check(tmp_path, text, devices=8)
    assert loaded.config.model is not None and "HP410" not in {d.code for d in loaded.diagnostics}


def test_a_path_whose_last_component_names_a_catalog_model(tmp_path: Path) -> None:
    text = ("model:\n  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained\n"
            "  pretrained_model_name_or_path: /models/checkpoints/Qwen3-30B-A3B\n"
            "training: {global_batch_size: 64}\ndataset: {data_transform: {max_seq_len: 4096}}\n")
    loaded = _check(tmp_path, text)
    hit = [d for d in loaded.diagnostics if d.code == "HP214"]
    assert hit and hit[0].effective_severity == Severity.INFORMATION and "Qwen/Qwen3-30B-A3B" in hit[0].message
    assert loaded.config.model is not None and loaded.config.model.num_experts == 128
    unknown = _check(tmp_path, text.replace("Qwen3-30B-A3B", "my-private-model"))
    assert "HP205" in {d.code for d in unknown.diagnostics}


def test_a_recipe_fragments_cp_wrapper_is_read(tmp_path: Path) -> None:
    """models/deepseek_v3/recipes/mla_ulysses.yaml: a fragment (no model: HP206, as upstream refuses it too) whose
    CP wrapper names its algorithm in its own `strategy` argument."""
    text = ("accelerator:\n  tp_size: 2\n  cp_size: 4\nplan_overrides:\n  - match: \"model.layers.*.self_attn\"\n"
            "    inner_target: self\n    inner_wrapper:\n      _target_: pkg.context_parallel.mla_cp_wrapper\n"
            "      strategy: expanded_ulysses\n")
    loaded = _check(tmp_path, text)
    assert [d.code for d in loaded.diagnostics if d.effective_severity == Severity.ERROR] == ["HP206"]
    assert loaded.config.run.cp_algo == "ulysses"


def test_mindformers_model_config_and_legacy_text_config(tmp_path: Path) -> None:
    text = ("run_mode: train\nparallel_config: {data_parallel: 8}\ncontext: {device_id: 0}\n"
            "model:\n  model_config:\n    type: LlamaConfig\n    seq_length: 4096\n    hidden_size: 4096\n"
            "    num_layers: 32\n    num_heads: 32\n    vocab_size: 32000\n    intermediate_size: 11008\n"
            "optimizer: {type: AdamW}\n")
    loaded = _check(tmp_path, text)
    assert _bad(loaded) == [] and loaded.config.model is not None and loaded.config.model.num_layers == 32
