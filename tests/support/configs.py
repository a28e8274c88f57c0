"""Search configs the tests write: a Llama-3.1-8B-shaped model ([MODELS]) in the search-config format
(docs/formats.md), configs stating one complete strategy for the calibration tests, and DeepSeek-V3 laid out as
Megatron-Bridge's H100 recipe lays it out (a layer layout) and as MindSpeed-LLM's A3 script runs it (DualPipeV)."""

from __future__ import annotations

from pathlib import Path


def llama8b_model(*, seq_len: int = 8192, name: str | None = None) -> str:
    """The `model:` section of Llama-3.1-8B (32 layers, hidden 4096, GQA 32/8, vocab 128256)."""
    return ("model:\n" + (f"  name: {name}\n" if name else "")
            + "  num_hidden_layers: 32\n  hidden_size: 4096\n  intermediate_size: 14336\n"
            "  num_attention_heads: 32\n  num_key_value_heads: 8\n  vocab_size: 128256\n"
            f"  max_position_embeddings: {seq_len}\n")


STATED = llama8b_model(name="llama-8b-like") + """\
cluster: {{num_nodes: {nodes}, cards_per_node: 8, device_type: H100}}
parallelism: {{dp: {dp}, fsdp: {dp}, tp: {tp}, pp: 1, cp: 1, ep: 1, etp: 1, vpp: 1, micro_batch_size: 1,
  micro_batch_num: {mbn}, sequence_parallel: {sp}}}
constraint: {{global_batch_size: {gbs}, memory_limit_gb: 80}}
recompute: full
estimator:
  framework: torchtitan
{extra}"""


def stated_config(folder: Path, name: str, *, nodes: int = 1, tp: int = 1, gbs: int = 16, extra: str = "") -> Path:
    """A search config stating one complete strategy (every dimension fixed) on `nodes` 8xH100 nodes."""
    dp = nodes * 8 // tp
    path = folder / name
    path.write_text(STATED.format(nodes=nodes, dp=dp, tp=tp, mbn=gbs // dp, gbs=gbs,
                                  sp="true" if tp > 1 else "false", extra=extra))
    return path


DSV3_TRAIN = Path(__file__).parents[2] / "examples" / "deepseek-v3" / "train.yaml"
BRIDGE_H100_LAYOUT = '"Et|(tt|)*30mL"'  # Megatron-Bridge's DeepSeek-V3 recipe on 1,024 H100: pp 8 × vpp 4


def bridge_dsv3_train(folder: Path, layout: str = BRIDGE_H100_LAYOUT, vpp: int | None = 4) -> Path:
    """examples/deepseek-v3's train.yaml at pp 8 with `layout` as its pipeline_model_parallel_layout and vpp
    stated (None: left to the layout, as Megatron-LM takes it), interleaved, no FSDP."""
    text = DSV3_TRAIN.read_text()
    interleave = f"  pp_interleave_num: {vpp}\n" if vpp is not None else ""
    for old, new in (("  pp_size: 16\n", f"  pp_size: 8\n{interleave}  pipeline_model_parallel_layout: {layout}\n"),
                     ("  pipeline_scheduler: 1f1b\n", "  pipeline_scheduler: interleaved_1f1b\n"),
                     ("  dp_shard_size: 64             # dp = 2048 / (2 x 16) = 64\n", "  dp_shard_size: 1\n")):
        assert old in text
        text = text.replace(old, new)
    path = folder / "train.yaml"
    path.write_text(text)
    return path


def dsv3_model(optimizer_shard: int) -> str:
    """The `model:` section of DeepSeek-V3 (61 layers, MLA, 256 experts top-8, one shared, 3 dense layers, MTP 1),
    its optimizer states sharded over `optimizer_shard` ranks."""
    return "model:\n" + _DSV3_FIELDS + f"  optimizer_weight_shard_size: {optimizer_shard}\n"


_DSV3_FIELDS = """\
  name: deepseek-v3
  num_hidden_layers: 61
  hidden_size: 7168
  intermediate_size: 18432
  num_attention_heads: 128
  num_key_value_heads: 128
  vocab_size: 129280
  max_position_embeddings: 4096
  num_experts: 256
  num_experts_per_tok: 8
  num_shared_experts: 1
  moe_intermediate_size: 2048
  first_k_dense_replace: 3
  kv_lora_rank: 512
  q_lora_rank: 1536
  qk_rope_head_dim: 64
  qk_nope_head_dim: 128
  v_head_dim: 128
  mtp_depth: 1
"""


# MindSpeed-LLM's DeepSeek-V3 script on 512 A3 dies (pretrain_deepseek3_671b_4k_A3_ptd.sh: TP 2, PP 8, EP 16 over
# TP, DualPipeV with --moe-fb-overlap): a search config whose `NOOP` (pp_config, after the schedule) and `FRAMEWORK`
# the tests fill in.
DSV3_A3 = dsv3_model(32) + """\
cluster: {num_nodes: 32, cards_per_node: 16, device_type: A3}
parallelism: {dp: 32, tp: 2, pp: 8, cp: 1, ep: 32, etp: 1, vpp: 1, micro_batch_size: 1, micro_batch_num: 120,
              sequence_parallel: true}
constraint: {global_batch_size: 3840}
recompute: full
moe_a2a_overlap: true
pp_config: {pipeline_schedule: dualpipev NOOP}
estimator: {framework: FRAMEWORK}
"""


# Nemotron-H 8B (nvidia/Nemotron-H-8B-Base-8K config.json): 24 Mamba-2, 24 MLP and 4 attention layers.
NEMOTRON_H_PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
NEMOTRON_H_8B = f"""\
model:
  num_hidden_layers: 52
  hidden_size: 4096
  intermediate_size: 21504
  num_attention_heads: 32
  num_key_value_heads: 8
  head_dim: 128
  vocab_size: 131072
  max_position_embeddings: 8192
  hybrid_override_pattern: "{NEMOTRON_H_PATTERN}"
  mamba_num_heads: 128
  mamba_head_dim: 64
  n_groups: 8
  ssm_state_size: 128
  conv_kernel: 4
  mlp_hidden_act: relu2
  residual_in_fp32: false
cluster: {{num_nodes: 4, cards_per_node: 8, device_type: H100}}
parallelism: {{dp: 16, tp: 2, pp: 1, cp: 1, ep: 1, micro_batch_size: 1}}
constraint: {{global_batch_size: 128}}
estimator: {{framework: megatron}}
"""


# Nemotron 3 Nano 30B-A3B (NemotronHConfig): 23 Mamba-2, 23 MoE and 6 attention layers, 128 experts top-6 of width
# 1,856 and one shared expert of 3,712, squared ReLU.
NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
NANO = f"""\
model:
  num_hidden_layers: 52
  hidden_size: 2688
  num_attention_heads: 32
  num_key_value_heads: 2
  head_dim: 128
  vocab_size: 131072
  max_position_embeddings: 8192
  hybrid_override_pattern: "{NANO_PATTERN}"
  mamba_num_heads: 64
  mamba_head_dim: 64
  n_groups: 8
  ssm_state_size: 128
  n_routed_experts: 128
  num_experts_per_tok: 6
  n_shared_experts: 1
  moe_intermediate_size: 1856
  moe_shared_expert_intermediate_size: 3712
  mlp_hidden_act: relu2
cluster: {{num_nodes: 2, cards_per_node: 8, device_type: H100}}
parallelism: {{dp: 16, tp: 1, pp: 1, cp: 1, ep: 8, micro_batch_size: 1}}
constraint: {{global_batch_size: 1024}}
estimator: {{framework: megatron}}
"""


# DeepSeek-V3 on 128 H100 nodes whose search config chooses the recompute modules (`MODS`: auto or a list) on a
# stack (`FW`): the search's `recompute_modules: auto` (tests/engine/cost/test_recompute_modules.py, explain).
AUTO_TRAIN = """\
model:
  pretrained_model_name_or_path: deepseek-ai/DeepSeek-V3
  torch_dtype: bfloat16
training:
  global_batch_size: 8192
  micro_batch_size: 1
accelerator:
  tp_size: 2
  pp_size: 8
  cp_size: 1
  ep_size: 64
  sequence_parallel: true
activation_checkpoint:
  mode: selective
dataset:
  data_transform:
    max_seq_len: 4096
"""
AUTO_SEARCH = """\
train_yaml: ./train.yaml
cluster: {num_nodes: 128, cards_per_node: 8, device_type: H100}
parallelism: {tp: [1, 2, 4], pp: 8, cp: 1, ep: 64, etp: 1, vpp: 1, micro_batch_size: 1, sequence_parallel: auto}
constraint: {global_batch_size: 8192, memory_limit_gb: 80}
recompute: selective
recompute_modules: MODS
estimator: {framework: FW, fp8: true, optimizer_state_dtype: bf16}
"""
