"""HP112: every key HyperParallel reads that hp-plan does not price is said so at the key (D-005), on files
shaped like upstream's recipes; keys that say nothing (off, none, zeros) are not flagged."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.diagnostics import Severity
from tests.support.cli import hp_plan
from tests.support.configs import NEMOTRON_H_8B

RECIPE = """\
model:
  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
  torch_dtype: bfloat16
  attn_implementation: sdpa
training: {global_batch_size: 64, micro_batch_size: 1, max_grad_norm: 1.0}
accelerator: {tp_size: 1, cp_size: 1, ep_size: 1, pp_size: 1, sequence_parallel: false, loss_parallel: false}
fsdp_config: {dp_shard_size: 8, edp_shard_size: 1, reshard_after_forward: true, reshard_after_backward: false}
mixed_precision: {enabled: false}
activation_checkpoint: {mode: full}
activation_swap: SWAP
dataset: {data_transform: {max_seq_len: 4096}}
optimizer: {_target_: hyper_parallel.components.optim.Muon}
context: {expert_shard: group, visual_seq_len: 576, device_num: 8}
"""


def flagged(tmp_path: Path, text: str, name: str = "train.yaml") -> dict[str, str]:
    p = tmp_path / name
    p.write_text(text)
    diags = check_file(str(p)).diagnostics
    out = {}
    for d in diags:
        if d.code == "HP112":
            assert d.effective_severity == Severity.INFORMATION
            assert d.message.startswith("read by HyperParallel, not priced by hp-plan: ")
            out[d.path] = d.message
    return out


def test_recipe_keys_read_but_not_priced_are_flagged_at_the_key(tmp_path: Path) -> None:
    got = flagged(tmp_path, RECIPE.replace("SWAP", "attention"))  # the attention swap is priced (engine.cost.swap)
    assert set(got) == {"training.max_grad_norm", "fsdp_config.edp_shard_size", "fsdp_config.reshard_after_backward",
                        "context.expert_shard", "context.visual_seq_len"}
    # a Llama has no vision tower: the visual sequence prices nothing (a multimodal model's is priced, test_vision)
    assert "no tower is stated" in got["context.visual_seq_len"]
    # `mixed_precision` is read and priced either way (enabled, param_dtype, reduce_dtype: the state widths,
    # tests/engine/cost/test_memory_as_trained.py); only fsdp_config's copy of the policy is not read
    on = flagged(tmp_path, RECIPE.replace("SWAP", "none").replace("{enabled: false}", "{enabled: true, param_dtype: "
                                                                   "bfloat16}"), "on.yaml")
    assert "mixed_precision" not in on
    # Muon (the recipe's) and AdamW are priced (one and two states per parameter); another optimizer is flagged
    lion = flagged(tmp_path, RECIPE.replace("SWAP", "none").replace("optim.Muon", "optim.Lion"), "lion.yaml")
    assert "AdamW" in lion["optimizer._target_"]


def test_values_that_say_nothing_are_not_flagged(tmp_path: Path) -> None:
    got = flagged(tmp_path, RECIPE.replace("SWAP", "none").replace("reshard_after_backward: false",
                                                                  "reshard_after_backward: true"))
    assert "activation_swap" not in got and "fsdp_config.reshard_after_backward" not in got


LEGACY = """\
model:
  name: test-dense
  config_overrides: {num_hidden_layers: 8, hidden_size: 1024, num_attention_heads: 16, num_key_value_heads: 4,
                     intermediate_size: 3072, vocab_size: 32000}
data: {max_seq_len: 4096}
train:
  global_batch_size: 32
  accelerator: {dp_shard: 4, tp: 2, pp: 1, cp: 2, pp_layer_split: [4, 4], ulysses_degree: ULY, zero_stage: ZERO,
                reshard_after_forward: false, cpu_offload: true, async_cp: true, comm_fusion: true,
                moe_token_dispatcher_type: DISPATCH}
"""


def test_the_legacy_trainers_unread_accelerator_keys_are_said(tmp_path: Path) -> None:
    """The legacy trainer's train.accelerator keys hp-plan does not price ([HP] Corrections) get HP112 at the key
    when they change the run; a ZeRO-3, an all-to-all dispatcher and a Ulysses degree of 1 are what is priced."""
    changed = flagged(tmp_path, LEGACY.replace("ULY", "2").replace("ZERO", "1").replace("DISPATCH", "allgather"))
    acc = "train.accelerator."
    assert set(changed) == {acc + k for k in ("pp_layer_split", "ulysses_degree", "zero_stage",
                                              "reshard_after_forward", "cpu_offload", "async_cp", "comm_fusion",
                                              "moe_token_dispatcher_type")}
    priced = flagged(tmp_path, LEGACY.replace("ULY", "1").replace("ZERO", "3").replace("DISPATCH", "alltoall"),
                     "priced.yaml")
    assert not {acc + k for k in ("ulysses_degree", "zero_stage", "moe_token_dispatcher_type")} & set(priced)


def test_search_config_model_run_keys(tmp_path: Path) -> None:
    text = ("model: {name: ds, num_hidden_layers: 61, hidden_size: 7168, num_attention_heads: 128, vocab_size: 1000,"
            " max_position_embeddings: 4096, intermediate_size: 18432, multiple_of: 256, offset: [1, -1],"
            " softmax_compute_type: float32, recompute_slice_activation: true, param_init_type: float32}\n"
            "cluster: {num_nodes: 1, device_type: A2}\n")
    got = flagged(tmp_path, text, "s.yaml")
    # offsets are priced now (engine.cost.layout): read, not flagged
    assert set(got) == {"model.softmax_compute_type", "model.recompute_slice_activation"}
    zeros = flagged(tmp_path, text.replace("offset: [1, -1]", "offset: 0").replace(
        "recompute_slice_activation: true", "recompute_slice_activation: false"), "z.yaml")
    assert set(zeros) == {"model.softmax_compute_type"}


def test_param_init_type_and_eager_attention_are_priced(tmp_path: Path) -> None:
    text = ("model: {name: m, num_hidden_layers: 4, hidden_size: 1024, num_attention_heads: 8, vocab_size: 32000,"
            " max_position_embeddings: 4096, compute_dtype: bfloat16 INIT}\ncluster: {num_nodes: 1, device_type: A2}\n")
    (tmp_path / "a.yaml").write_text(text.replace("INIT", ", param_init_type: float32"))
    (tmp_path / "b.yaml").write_text(text.replace("INIT", ""))
    fp32 = check_file(str(tmp_path / "a.yaml")).config
    bf16 = check_file(str(tmp_path / "b.yaml")).config
    assert fp32 is not None and bf16 is not None
    assert (fp32.run.param_bytes, fp32.run.master_weights) == (4, False)
    assert (bf16.run.param_bytes, bf16.run.master_weights) == (2, True)
    (tmp_path / "t.yaml").write_text(RECIPE.replace("SWAP", "none").replace("sdpa", "eager"))
    eager = check_file(str(tmp_path / "t.yaml")).config
    assert eager is not None and eager.model is not None and eager.model.use_flash_attention is False


# Nemotron-H 8B (tests/support/configs.py) with fields the planner does not price beside its own, and a vision tower
# with a typo.
NEMOTRON_H = NEMOTRON_H_8B.replace("  residual_in_fp32: false\n", "  mamba_hidden_act: silu\n  chunk_size: 128\n"
                                   "  residual_in_fp32: false\n  vision: {hiden_size: 1280}\n")


def test_a_search_configs_model_fields_pass_through_and_near_misses_are_named(tmp_path: Path) -> None:
    """A search config's model fields are the model's ([HP] §2.7: HyperParallel's search drops the ones its spec does
    not know): Nemotron-H's `mamba_hidden_act` beside the priced `mlp_hidden_act` is no typo error, but since a
    misspelt priced field would be dropped as silently, HP215 names the field each is spelt like."""
    p = tmp_path / "search.yaml"
    p.write_text(NEMOTRON_H)
    diags = check_file(str(p)).diagnostics
    assert not [d for d in diags if d.code == "HP101" and d.path.startswith("model.") and
                not d.path.startswith("model.vision.")]
    (said,) = [d for d in diags if d.code == "HP215"]
    assert said.effective_severity == Severity.INFORMATION and said.path == "model"
    assert said.data["keys"] == ["mamba_hidden_act", "chunk_size", "residual_in_fp32"]
    assert said.data["near"] == {"mamba_hidden_act": "mlp_hidden_act"}
    assert "mamba_hidden_act (did you mean mlp_hidden_act?)" in said.message
    assert "HyperParallel's search drops" in said.message
    # the hybrid pattern is priced as its layer kinds (engine.specs.HybridLayers): nothing said at its key
    assert not [d for d in diags if d.code == "HP112" and d.path == "model.hybrid_override_pattern"]
    # the vision tower's own section is still checked: a near miss there is a typo
    assert [d for d in diags if d.code == "HP101" and d.path == "model.vision.hiden_size"]
    # as the user sees it: without the tower, `hp-plan check` passes and says the fields once
    p.write_text(NEMOTRON_H.replace("  vision: {hiden_size: 1280}\n", ""))
    r = hp_plan("check", str(p))
    assert r.returncode == 0 and "0 errors, 0 warnings" in r.stdout
    assert r.stdout.count("HP215") == 1 and "mamba_hidden_act (did you mean mlp_hidden_act?)" in r.stdout


def test_a_model_with_thousands_of_unknown_fields_is_said_once_and_briefly(tmp_path: Path) -> None:
    fields = "".join(f"  field_{i}: {i}\n" for i in range(3000))
    p = tmp_path / "search.yaml"
    p.write_text(NEMOTRON_H.replace("  mamba_head_dim: 64\n", fields))
    (said,) = [d for d in check_file(str(p)).diagnostics if d.code == "HP215"]
    assert len(said.data["keys"]) == 3003 and said.message.endswith("and 2983 more")
    assert len(said.message) < 1000
