"""The model's own errors on the shown runs, what engine.cost.band derives its widths from.

Written by `benchmarks/accuracy.py --write-band` (do not edit by hand; rerun it after a change to the model):
one Row per shown run, d = measured / priced − 1, the leave-one-out error where a constant was fitted on that
run (docs/cost-model.md, "The error band").
"""

from __future__ import annotations

from typing import NamedTuple


class Row(NamedTuple):
    """One run's deviation, with what the band groups it by."""

    id: str
    model: str  # rows of one model on one stack and device differ only in their plan (ordering_spread)
    framework: str
    generation: str
    features: tuple[str, ...]
    deviation: float
    # the model's hidden size, trained sequence length, the plan's context-parallel degree and algorithm and
    # whether it offloads activations to the host (the band's evidence envelope, engine.cost.band.Shape)
    hidden: int = 0
    seq_len: int = 0
    cp: int = 1
    cp_algo: str = "ring"
    offload: bool = False
    # the plan's pipeline-parallel degree (a pipelined plan's peak is the memory band's PIPELINE feature)
    pp: int = 1


STEP_ROWS: tuple[Row, ...] = (
    Row('N1-01', '24x2304', 'megatron', 'ampere', (), -0.0331, 2304, 2048, 1, 'ring'),
    Row('N1-02', '30x3072', 'megatron', 'ampere', (), -0.0050, 3072, 2048, 1, 'ring'),
    Row('N1-03', '36x4096', 'megatron', 'ampere', (), -0.0173, 4096, 2048, 1, 'ring'),
    Row('N1-04', '40x6144', 'megatron', 'ampere', (), -0.0199, 6144, 2048, 1, 'ring'),
    Row('N1-05', '48x8192', 'megatron', 'ampere', (), 0.0400, 8192, 2048, 1, 'ring', pp=2),
    Row('N1-06', '60x10240', 'megatron', 'ampere', (), 0.0548, 10240, 2048, 1, 'ring', pp=4),
    Row('N1-07', '80x12288', 'megatron', 'ampere', (), 0.0333, 12288, 2048, 1, 'ring', pp=8),
    Row('N1-08', '96x16384', 'megatron', 'ampere', (), 0.0154, 16384, 2048, 1, 'ring', pp=16),
    Row('N1-09', '105x20480', 'megatron', 'ampere', (), -0.0165, 20480, 2048, 1, 'ring', pp=35),
    Row('N1-10', '128x25600', 'megatron', 'ampere', (), 0.0033, 25600, 2048, 1, 'ring', pp=64),
    Row('N2-01', '96x12288', 'megatron', 'ampere', (), 0.0622, 12288, 2048, 1, 'ring'),
    Row('N2-02', '96x12288', 'megatron', 'ampere', (), -0.0232, 12288, 2048, 1, 'ring'),
    Row('N2-03', '96x12288', 'megatron', 'ampere', (), 0.0412, 12288, 2048, 1, 'ring'),
    Row('N2-04', '105x20480', 'megatron', 'ampere', (), 0.1104, 20480, 2048, 1, 'ring'),
    Row('N2-05', '105x20480', 'megatron', 'ampere', (), -0.1259, 20480, 2048, 1, 'ring'),
    Row('N2-06', '105x20480', 'megatron', 'ampere', (), -0.0519, 20480, 2048, 1, 'ring'),
    Row('N2-07', '96x12288', 'megatron', 'ampere', (), 0.0563, 12288, 2048, 1, 'ring', pp=12),
    Row('N2-08', '96x12288', 'megatron', 'ampere', (), 0.0489, 12288, 2048, 1, 'ring', pp=12),
    Row('N2-09', '96x12288', 'megatron', 'ampere', (), 0.0399, 12288, 2048, 1, 'ring', pp=12),
    Row('N2-10', '105x20480', 'megatron', 'ampere', (), 0.0251, 20480, 2048, 1, 'ring', pp=35),
    Row('N2-11', '105x20480', 'megatron', 'ampere', (), 0.0180, 20480, 2048, 1, 'ring', pp=35),
    Row('N2-12', '105x20480', 'megatron', 'ampere', (), 0.0086, 20480, 2048, 1, 'ring', pp=35),
    Row('K5-22B-full', '48x6144', 'megatron', 'ampere', (), 0.0007, 6144, 2048, 1, 'ring'),
    Row('K5-22B-sel', '48x6144', 'megatron', 'ampere', (), 0.0339, 6144, 2048, 1, 'ring'),
    Row('K5-175B-full', '96x12288', 'megatron', 'ampere', (), -0.0027, 12288, 2048, 1, 'ring', pp=8),
    Row('K5-175B-sel', '96x12288', 'megatron', 'ampere', (), 0.0165, 12288, 2048, 1, 'ring', pp=8),
    Row('K5-530B-full', '105x20480', 'megatron', 'ampere', (), -0.0443, 20480, 2048, 1, 'ring', pp=35),
    Row('K5-530B-sel', '105x20480', 'megatron', 'ampere', (), -0.0237, 20480, 2048, 1, 'ring', pp=35),
    Row('K5-1T-full', '128x25600', 'megatron', 'ampere', (), -0.0727, 25600, 2048, 1, 'ring', pp=64),
    Row('K5-1T-sel', '128x25600', 'megatron', 'ampere', (), -0.0708, 25600, 2048, 1, 'ring', pp=64),
    Row('K5-530B-DP8', '105x20480', 'megatron', 'ampere', (), -0.0045, 20480, 2048, 1, 'ring', pp=35),
    Row('M-01', '24x2048', 'megatron', 'hopper', (), 0.2911, 2048, 4096, 1, 'ring'),
    Row('M-02', '30x4096', 'megatron', 'hopper', (), 0.1858, 4096, 4096, 1, 'ring'),
    Row('M-03', '32x6144', 'megatron', 'hopper', (), -0.0556, 6144, 4096, 1, 'ring'),
    Row('M-05', '84x8192', 'megatron', 'hopper', (), -0.0672, 8192, 4096, 1, 'ring', pp=2),
    Row('M-06', '92x10240', 'megatron', 'hopper', (), 0.0032, 10240, 4096, 1, 'ring', pp=4),
    Row('M-07', '96x12288', 'megatron', 'hopper', (), 0.0039, 12288, 4096, 1, 'ring', pp=6),
    Row('M-08', '96x16384', 'megatron', 'hopper', (), -0.0592, 16384, 4096, 1, 'ring', pp=8),
    Row('M-09', '112x18432', 'megatron', 'hopper', (), -0.0245, 18432, 4096, 1, 'ring', pp=16),
    Row('ascend-llama2-34b-16xa2-mindspeed', 'ascend-llama2-34b-16xa2-mindspeed', 'mindspeed', 'ascend', (), 0.0685, 8192, 4096, 1, 'ring', pp=2),
    Row('ascend-llama2-70b-32xa2-mindspeed', 'ascend-llama2-70b-32xa2-mindspeed', 'mindspeed', 'ascend', (), -0.0606, 8192, 4096, 1, 'ring', pp=4),
    Row('ascend-llama2-7b-8xa2-mindspeed', 'ascend-llama2-7b-8xa2-mindspeed', 'mindspeed', 'ascend', (), 0.0647, 4096, 4096, 1, 'ring', pp=2),
    Row('ascend-mixtral-8x22b-64xa2-mindspeed', 'ascend-mixtral-8x22b-64xa2-mindspeed', 'mindspeed', 'ascend', ('moe', 'long_context'), -0.1013, 6144, 32768, 2, 'ring', pp=4),
    Row('ascend-qwen3-30b-a3b-16xa2-mindspeed', 'ascend-qwen3-30b-a3b-16xa2-mindspeed', 'mindspeed', 'ascend', ('moe',), 0.0752, 2048, 4096, 1, 'ring', pp=2),
    Row('deepseek-v3-512xh100-nemo', 'deepseek-v3-512xh100-nemo', 'megatron', 'hopper', ('moe',), 0.1062, 7168, 4096, 1, 'ring', pp=8),
    Row('grok1-314b-512xh100-nemo', 'grok1-314b-512xh100-nemo', 'megatron', 'hopper', ('moe',), 0.0543, 6144, 8192, 2, 'ring', pp=8),
    Row('llama3-8b-64xa100-torchtitan', 'llama3-8b-64xa100-torchtitan', 'torchtitan', 'ampere', (), 0.0198, 4096, 8192, 1, 'ring'),
    Row('llama3-8b-8xb200-mbridge-fp8', 'llama3-8b-8xb200-mbridge-fp8', 'megatron', 'blackwell', ('fp8',), -0.0240, 4096, 8192, 1, 'ring'),
    Row('llama31-405b-128xgb200-nemo', 'llama31-405b-128xgb200-nemo', 'megatron', 'blackwell', (), 0.0355, 16384, 8192, 2, 'ring', pp=8),
    Row('llama31-70b-256xh100-96g-torchtitan-fsdp32tp8', 'llama31-70b-256xh100-96g-torchtitan-fsdp32tp8', 'torchtitan', 'hopper', (), -0.0392, 8192, 8192, 1, 'ring'),
    Row('llama31-8b-8xh100-96g-torchtitan-compile', 'llama31-8b-8xh100-96g-torchtitan-compile', 'torchtitan', 'hopper', (), 0.0498, 4096, 8192, 1, 'ring'),
    Row('qwen3-235b-256xgb200-mbridge', 'qwen3-235b-256xgb200-mbridge', 'megatron', 'blackwell', ('moe',), -0.0270, 4096, 4096, 1, 'ring', pp=8),
)
MEMORY_ROWS: tuple[Row, ...] = (
    Row('llama31-8b-8xh100-96g-torchtitan-compile', 'llama31-8b-8xh100-96g-torchtitan-compile', 'torchtitan', 'hopper', (), -0.0167, 4096, 8192, 1, 'ring'),
    Row('mbridge-llama3-70b-sft-32xh100-fp8-tp4pp4vpp5', 'mbridge-llama3-70b-sft-32xh100-fp8-tp4pp4vpp5', 'megatron', 'hopper', ('fp8',), -0.1177, 8192, 4096, 1, 'ring', pp=4),
    Row('mbridge-moonlight-16b-8xh100-tp2ep8-norecompute', 'mbridge-moonlight-16b-8xh100-tp2ep8-norecompute', 'megatron', 'hopper', ('moe',), -0.0282, 2048, 4096, 1, 'ring'),
    Row('tt-qwen3-8b-4xgb200-fsdp4-lbs16', 'tt-qwen3-8b-4xgb200-fsdp4-lbs16', 'torchtitan', 'blackwell', (), -0.0069, 4096, 2048, 1, 'ring'),
    Row('tt-405b-512gpu-3d-1f1b', '405b', 'torchtitan', 'hopper', ('fp8',), 0.0955, 16384, 8192, 1, 'ring', pp=8),
    Row('tt-405b-512gpu-3d-interleaved', '405b', 'torchtitan', 'hopper', ('fp8',), 0.0971, 16384, 8192, 1, 'ring', pp=8),
    Row('tt-405b-512gpu-4d-cp1-32k', '405b', 'torchtitan', 'hopper', ('long_context', 'fp8'), -0.0001, 16384, 32768, 1, 'ring', pp=8),
    Row('tt-405b-512gpu-4d-cp2-64k', '405b', 'torchtitan', 'hopper', ('long_context', 'fp8'), 0.0074, 16384, 65536, 2, 'ring', pp=8),
    Row('tt-405b-512gpu-4d-cp4-128k', '405b', 'torchtitan', 'hopper', ('long_context', 'fp8'), 0.0234, 16384, 131072, 4, 'ring', pp=8),
    Row('tt-405b-512gpu-4d-cp8-256k', '405b', 'torchtitan', 'hopper', ('long_context', 'fp8'), 0.1269, 16384, 262144, 8, 'ring', pp=8),
    Row('tt-70b-256gpu-2d', '70b', 'torchtitan', 'hopper', ('fp8',), -0.0223, 8192, 8192, 1, 'ring'),
    Row('tt-8b-128gpu-compile-fp8', '8b', 'torchtitan', 'hopper', ('fp8',), -0.0084, 4096, 8192, 1, 'ring'),
    Row('tt-8b-128gpu-compile', '8b', 'torchtitan', 'hopper', (), -0.0052, 4096, 8192, 1, 'ring'),
    Row('tt-8b-128gpu-eager', '8b', 'torchtitan', 'hopper', (), 0.0017, 4096, 8192, 1, 'ring'),
    Row('tt-8b-8gpu-compile-fp8', '8b', 'torchtitan', 'hopper', ('fp8',), -0.0193, 4096, 8192, 1, 'ring'),
    Row('tt-8b-8gpu-compile', '8b', 'torchtitan', 'hopper', (), -0.0167, 4096, 8192, 1, 'ring'),
    Row('tt-8b-8gpu-cp1-32k', '8b', 'torchtitan', 'hopper', ('long_context', 'fp8'), -0.0251, 4096, 32768, 1, 'ring'),
    Row('tt-8b-8gpu-cp2-64k', '8b', 'torchtitan', 'hopper', ('long_context', 'fp8'), -0.0249, 4096, 65536, 2, 'ring'),
    Row('tt-8b-8gpu-cp4-128k', '8b', 'torchtitan', 'hopper', ('long_context', 'fp8'), -0.0272, 4096, 131072, 4, 'ring'),
    Row('tt-8b-8gpu-cp8-256k', '8b', 'torchtitan', 'hopper', ('long_context', 'fp8'), -0.0214, 4096, 262144, 8, 'ring'),
    Row('tt-8b-8gpu-eager', '8b', 'torchtitan', 'hopper', (), -0.0057, 4096, 8192, 1, 'ring'),
)
