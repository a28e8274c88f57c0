"""Shared models and clusters for the cost-model tests (shapes from [MODELS] and [CAL])."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.catalog.devices import find_device
from engine.specs import ClusterSpec, DeviceSpec, ModelSpec, RunOptions


def gpt(L: int, h: int, a: int, *, flash: bool = False) -> ModelSpec:
    """A NAR21/KOR22 GPT ([CAL] §0): GeLU ffn 4h, tied, learned positions, biases, s 2048, V 51200."""
    return ModelSpec(name=f"gpt-{L}x{h}", num_layers=L, hidden=h, heads=a, vocab=51200, ffn=4 * h, seq_len=2048,
                     tie_embeddings=True, gated_mlp=False, learned_positions=True, linear_bias=True,
                     use_flash_attention=flash)


def a100() -> DeviceSpec:
    d = find_device("A100")
    assert d is not None
    return d


def cluster(nodes: int, device: str = "A100", cards: int = 8) -> ClusterSpec:
    d = find_device(device)
    assert d is not None
    return ClusterSpec(d, nodes, cards, d.memory_gib, d.intra_node_gb_s, d.inter_node_gb_s)


LLAMA70B = ModelSpec(name="llama3-70b", num_layers=80, hidden=8192, heads=64, kv_heads=8, vocab=128256,
                     ffn=28672, seq_len=8192)
DSV3 = ModelSpec(name="deepseek-v3", num_layers=61, hidden=7168, heads=128, kv_heads=128, vocab=129280,
                 ffn=18432, num_experts=256, experts_per_tok=8, num_shared_experts=1, moe_ffn=2048,
                 first_k_dense=3, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128,
                 v_head_dim=128, mtp_depth=1, seq_len=4096)
# GPT-2 124M: GeLU ffn 4h, tied embeddings, learned positions, biases
GPT2 = ModelSpec(name="gpt2-124m", num_layers=12, hidden=768, heads=12, vocab=50257, ffn=3072, kv_heads=12,
                 seq_len=1024, gated_mlp=False, tie_embeddings=True, learned_positions=True, linear_bias=True)


def h100(nodes: int = 1, per_node: int = 8) -> ClusterSpec:
    return cluster(nodes, "H100", per_node)


# a DeepSeek-style MoE layer mix (64 routed experts, 8 active, one shared) at Llama-8B width
LLAMA8B = ModelSpec(name="llama-8b", num_layers=32, hidden=4096, heads=32, vocab=128256, ffn=14336, kv_heads=8,
                    seq_len=8192)
MOE = ModelSpec(name="moe", num_layers=8, hidden=4096, heads=32, vocab=32000, ffn=14336, kv_heads=8, seq_len=4096,
                num_experts=64, experts_per_tok=8, moe_ffn=1408, num_shared_experts=1, first_k_dense=1)

MEGATRON_RUN = RunOptions(selective_policy="attention", framework="megatron")
# NAR21 / KOR22 ran Megatron-LM before Megatron-Core, NAR21 Table 2's ZeRO-3 DeepSpeed's: Megatron's release "2021".
NAR21_RUN = RunOptions(selective_policy="attention", framework="megatron", framework_version="2021")


@pytest.fixture
def run() -> RunOptions:
    return MEGATRON_RUN


def run_of_train_yaml(tmp_path: Path, accelerator: str) -> RunOptions:
    """The RunOptions a minimal train.yaml with these `accelerator:` lines (indented two spaces) is read as;
    no diagnostic may call a key unknown."""
    from engine.config import load

    train = tmp_path / "train.yaml"
    train.write_text("model:\n  pretrained_model_name_or_path: gpt2\ntraining:\n  global_batch_size: 8\n"
                     "  micro_batch_size: 1\naccelerator:\n  tp_size: 1\n" + accelerator)
    loaded = load(str(train))
    assert not [d for d in loaded.diagnostics if d.code in ("HP010", "HP011") or "unknown" in d.message.lower()]
    assert loaded.config is not None
    return loaded.config.run
