"""Search configs the tests write: a Llama-3.1-8B-shaped model ([MODELS]) in the search-config format
(docs/formats.md), and configs stating one complete strategy for the calibration tests."""

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
