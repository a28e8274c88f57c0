"""`apply` writes only keys the file's own trainer reads, in the file's dialect, and what it writes passes that
trainer's strictness ([HP] Corrections): one test per dialect, on fixtures shaped like upstream's recipes."""

from __future__ import annotations

from pathlib import Path

import yaml

from engine.check import check_file
from engine.config.types import ClusterOverrides
from engine.document import parse
from engine.edit import strategy_edits
from engine.specs import RecomputePlan, Strategy
from engine.validate.trainer import strict_problems

# hyper_parallel/models/qwen3_5_moe/recipes/train.yaml's shape: the AutoModels trainer runs it.
TRAINER = """\
model:
  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: Qwen/Qwen3-30B-A3B
  torch_dtype: bfloat16
  attn_implementation: sdpa
training:
  train_iters: 10
  global_batch_size: 64
  micro_batch_size: 1
accelerator:
  tp_size: 1
  cp_size: 1
  ep_size: 8
  pp_size: 1
  sequence_parallel: false
  loss_parallel: false
fsdp_config:
  dp_shard_size: 64
  edp_shard_size: 8
  reshard_after_forward: true
activation_checkpoint:
  mode: full
dataset:
  data_transform: {max_seq_len: 4096}
optimizer:
  _target_: hyper_parallel.components.optim.AdamW
"""

# examples/glm5/train.yaml's shape: the legacy trainer (model / data / train roots).
LEGACY = """\
model:
  name: qwen3_moe
  config_overrides: {num_hidden_layers: 48, hidden_size: 2048, intermediate_size: 6144, num_attention_heads: 32,
                     num_key_value_heads: 4, vocab_size: 151936, num_experts: 128, num_experts_per_tok: 8,
                     moe_intermediate_size: 768}
data:
  max_seq_len: 4096
train:
  global_batch_size: 64
  micro_batch_size: 1
  accelerator:
    dp_shard: 8
    tp: 1
    cp: 1
    ep: 1
    comm_fusion: true
  gradient_checkpointing:
    activation_checkpoint: full
"""

PIPELINED = Strategy(dp=16, dp_shard=16, tp=2, pp=2, ep=8, vpp=2, pipeline_schedule="interleaved",
                     micro_batch_num=4, recompute=RecomputePlan("off", ((0, 23, "full"),)))


def _stated(text: str, tmp_path: Path, world: int) -> Strategy | None:
    p = tmp_path / "out.yaml"
    p.write_text(text)
    loaded = check_file(str(p), overrides=ClusterOverrides(devices=world, device_type="H100", explicit=True))
    return loaded.config.stated if loaded.config else None


def test_a_file_the_trainer_runs_gets_the_trainers_keys_and_passes_its_strictness(tmp_path: Path) -> None:
    r = strategy_edits(TRAINER, PIPELINED)
    assert r.ok, r.error
    data = yaml.safe_load(r.new_text)
    acc, ac = data["accelerator"], data["activation_checkpoint"]
    assert acc["pp_size"] == 2 and acc["pp_vpp"] == 2 and "pp_schedule" not in acc  # 1f1b is the default
    for search_only in ("pp_interleave_num", "pipeline_scheduler", "expert_tensor_parallel_degree",
                        "optimizer_weight_shard_size"):
        assert search_only not in acc
    assert ac["layer_ranges"] == [{"first": 0, "count": 24, "mode": "full"}] and "layers" not in ac
    # the expert shard follows ep and the data-parallel group: dp·cp·tp / (ep·etp)
    assert data["fsdp_config"]["edp_shard_size"] == 16 * 2 // 8
    root = parse(r.new_text).root
    assert root is not None and strict_problems(root) == []
    stated = _stated(r.new_text, tmp_path, PIPELINED.world_size)
    assert stated is not None and stated.pipeline_schedule == "interleaved" and stated.vpp == 2
    assert stated.recompute.mode_of(5) == "full" and stated.recompute.mode_of(30) == "off"


def test_a_trainer_file_refuses_a_plan_it_has_no_key_for(tmp_path: Path) -> None:
    zero1 = Strategy(dp=64, dp_shard=1, optimizer_shard=8, ep=8, micro_batch_num=1)
    r = strategy_edits(TRAINER, zero1)
    assert not r.ok and "no key for an optimizer shard" in (r.error or "")


def test_gpipe_is_written_as_the_trainers_pp_schedule(tmp_path: Path) -> None:
    s = Strategy(dp=32, dp_shard=32, pp=2, ep=8, micro_batch_num=2, pipeline_schedule="gpipe",
                 recompute=RecomputePlan("full"))
    r = strategy_edits(TRAINER, s)
    assert r.ok, r.error
    assert yaml.safe_load(r.new_text)["accelerator"]["pp_schedule"] == "gpipe"
    stated = _stated(r.new_text, tmp_path, s.world_size)
    assert stated is not None and stated.pipeline_schedule == "gpipe"


def test_a_legacy_file_keeps_its_dialect_and_can_now_interleave(tmp_path: Path) -> None:
    s = Strategy(dp=8, dp_shard=8, tp=2, pp=2, ep=8, vpp=2, pipeline_schedule="interleaved", micro_batch_num=8,
                 recompute=RecomputePlan("full"))
    r = strategy_edits(LEGACY, s)
    assert r.ok, r.error
    acc = yaml.safe_load(r.new_text)["train"]["accelerator"]
    assert acc["tp"] == 2 and acc["pp"] == 2 and acc["pp_vpp"] == 2 and acc["ep"] == 8
    assert not {"tp_degree", "pipeline_parallel_degree", "pp_interleave_num", "pipeline_scheduler"} & set(acc)
    assert _stated(r.new_text, tmp_path, s.world_size) == s
