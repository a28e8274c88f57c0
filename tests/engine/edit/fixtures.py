"""train.yaml texts in the layouts users write: indentation widths, flow sections, CRLF, no final newline,
comments everywhere, non-ASCII, document markers, the legacy schema."""

from __future__ import annotations

TWO_SPACE = """\
# Llama-3.1-70B pretraining recipe
model:
  name: llama3-70b                       # free text (used in messages)
  pretrained_model_name_or_path: meta-llama/Llama-3.1-70B
  torch_dtype: bfloat16
training:
  train_iters: 1000
  global_batch_size: 128                 # sequences per optimizer step
  micro_batch_size: 1

accelerator:
  tp_size: 4       # within a node
  pp_size: 4
  cp_size: 2
  # ep is unused for a dense model
  sequence_parallel: true
  context_parallel_algo: ring
fsdp_config:
  dp_shard_size: 8
  reshard_after_forward: true
activation_checkpoint:
  mode: selective
dataset:
  data_transform:
    max_seq_len: 8192
"""

FOUR_SPACE = """\
model:
    pretrained_model_name_or_path: "meta-llama/Llama-3.1-8B"
    torch_dtype: 'bfloat16'
training:
    global_batch_size: 64
accelerator:
    tp_size: '2'
    pp_size: 1
dataset:
    data_transform:
        max_seq_len: 4096
"""

MIXED_INDENT = """\
model:
   pretrained_model_name_or_path: x/y
training:
 global_batch_size: 32
 micro_batch_size: 2
accelerator:
     tp_size: 2
     pp_size: 2
dataset:
  data_transform:
        max_seq_len: 2048
"""

FLOW = """\
model: {_target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained,
        pretrained_model_name_or_path: Qwen/Qwen3.5-35B-A3B-Base, torch_dtype: bfloat16, attn_implementation: sdpa}
training: {train_iters: 3, global_batch_size: 128, micro_batch_size: 1, max_grad_norm: 1.0}
accelerator: {tp_size: 1, cp_size: 1, ep_size: 8, pp_size: 1, sequence_parallel: false, loss_parallel: false}
fsdp_config: {dp_shard_size: 64, edp_shard_size: 8, replicate_params: [], reshard_after_forward: true,
              reshard_after_backward: true, requires_grad_sync: true, forward_prefetch_depth: 1,
              backward_prefetch_depth: 1, comm_fusion: false}
mixed_precision: {enabled: false}
activation_checkpoint: {mode: full}
activation_swap: none
dataset: {data_transform: {max_seq_len: 4096}}
optimizer: {_target_: hyper_parallel.components.optim.Muon}
"""

CRLF = TWO_SPACE.replace("\n", "\r\n")

NO_FINAL_NEWLINE = """\
model:
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
training:
  global_batch_size: 16
accelerator:
  tp_size: 1"""

COMMENTS = """\
# header comment
# second header line

model:  # the model
  # the name
  pretrained_model_name_or_path: deepseek-ai/DeepSeek-V3   # offline catalog
  # trailing comment in model

training:   # batch
  global_batch_size: 4096   # big
  # micro batch below
  micro_batch_size: 1  # one

# before accelerator
accelerator:  # degrees
  # tp first
  tp_size: 8  # tp
  # pp next
  pp_size: 16  # pp
  ep_size: 64  # ep
  # end of accelerator

# trailing comment of the file
"""

NON_ASCII = """\
model:
  name: "モデル-70B"             # 名前
  pretrained_model_name_or_path: meta-llama/Llama-3.1-70B
  description: café ünïcødé 🚀
training:
  global_batch_size: 128  # 批量 🚀
accelerator:
  tp_size: 8  # ⚡ intra-node
  pp_size: 2
"""

DOC_MARKERS = """\
%YAML 1.1
---
model:
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
training:
  global_batch_size: 64
  micro_batch_size: 1
accelerator:
  tp_size: 2
  pp_size: 1
...
"""

SECTIONS_MISSING = """\
model:
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B

dataset:
  data_transform:
    max_seq_len: 4096
"""

LAYERS_BLOCK = """\
model:
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
training:
  global_batch_size: 64
accelerator:
  tp_size: 2
activation_checkpoint:
  mode: selective
  layers:
    "0-3": full   # the first stages hold the most activations
  selective_policy: hyperparallel
"""

YES_NO = """\
model:
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
training:
  global_batch_size: 64
accelerator:
  tp_size: 2
  sequence_parallel: Yes
activation_checkpoint:
  mode: off
"""

LEGACY = """\
model:
  name: "test-dense"
  config_overrides: {num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 128256}
train:
  global_batch_size: 128
  micro_batch_size: 1
  accelerator: {dp_shard: 1, dp_replicate: 2, tp_degree: 4, pipeline_parallel_degree: 2}
  gradient_checkpointing: {activation_checkpoint: "selective"}
data:
  max_seq_len: 8192
"""

LEGACY_BLOCK = """\
model:
  name: test-dense
train:
  global_batch_size: 128   # sequences
  accelerator:
    tp_degree: 4
data:
  max_seq_len: 8192
"""

EMPTY_SECTIONS = """\
model:
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
training:
accelerator:   # filled by hp-plan apply
fsdp_config: ~
"""

AUTOMODELS: dict[str, str] = {
    "two_space": TWO_SPACE,
    "four_space": FOUR_SPACE,
    "mixed_indent": MIXED_INDENT,
    "flow": FLOW,
    "crlf": CRLF,
    "no_final_newline": NO_FINAL_NEWLINE,
    "comments": COMMENTS,
    "non_ascii": NON_ASCII,
    "doc_markers": DOC_MARKERS,
    "sections_missing": SECTIONS_MISSING,
    "layers_block": LAYERS_BLOCK,
    "yes_no": YES_NO,
    "empty_sections": EMPTY_SECTIONS,
}
LEGACY_FILES: dict[str, str] = {"legacy": LEGACY, "legacy_block": LEGACY_BLOCK}
