"""Small search configs stating one complete strategy (every dimension fixed), written into a folder: the
runs the calibration tests (tests/engine/calibrate, tests/e2e/test_calibration.py) fit ratios on."""

from __future__ import annotations

from pathlib import Path

STATED = """\
model:
  name: llama-8b-like
  num_hidden_layers: 32
  hidden_size: 4096
  intermediate_size: 14336
  num_attention_heads: 32
  num_key_value_heads: 8
  vocab_size: 128256
  max_position_embeddings: 8192
cluster: {{num_nodes: {nodes}, cards_per_node: 8, device_type: H100}}
parallelism: {{dp: {dp}, fsdp: {dp}, tp: {tp}, pp: 1, cp: 1, ep: 1, etp: 1, vpp: 1, micro_batch_size: 1,
  micro_batch_num: {mbn}, sequence_parallel: {sp}}}
constraint: {{global_batch_size: {gbs}, memory_limit_gb: 80}}
recompute: full
estimator:
  framework: torchtitan
{extra}"""


def stated_config(folder: Path, name: str, *, nodes: int = 1, tp: int = 1, gbs: int = 16, extra: str = "") -> Path:
    """A search config stating one complete strategy (every dimension fixed)."""
    dp = nodes * 8 // tp
    path = folder / name
    path.write_text(STATED.format(nodes=nodes, dp=dp, tp=tp, mbn=gbs // dp, gbs=gbs,
                                  sp="true" if tp > 1 else "false", extra=extra))
    return path
