"""MindSpeed's swap-attention priced as the stack runs it (docs/cost-model.md §4.2): memory freed and host copies.

`--swap-attention` (Ascend/MindSpeed docs/features/swap_attention.md; mindspeed/core/memory/swap_attention/
prefetch.py, [MS-SWAP]) wraps every layer's self-attention module in saved-tensor hooks: each tensor the block
saves for its backward (0.5 MB and larger) is copied to pinned host memory on a side stream as it is saved; the
module's forward hook makes the compute stream wait for those copies and frees the device storage; the backward
hook of a later layer prefetches them back. So the device keeps none of a layer's attention activations between
its forward and its backward (the backward working set of one layer, priced in fixed_activations, holds the one
layer whose copies are in flight), and the forward shows what the copies take beyond the block's own forward.
"""

from __future__ import annotations

import numpy as np

from engine.cost import constants as K
from engine.cost.model import attn_shape
from engine.cost.rows import FULL, OFF, SELECTIVE, Rows


def swaps(r: Rows) -> bool:
    """The run swaps attention activations: stated, on a stack that runs it, with flash attention (its
    prerequisite: MindSpeed asserts --use-flash-attn)."""
    return bool(r.run.swap_attention and r.fw.swaps_attention and r.model.use_flash_attention)


def _attention_bytes_per_token(r: Rows, mode: int) -> tuple[float, float]:
    """(sequence-parallel sharded, tp-split) bytes per token the attention block saves in a recompute mode: the
    QKV projection's input (the norm output; an MLA latent), Q, K, V, the output projection's input and flash
    attention's log-sum-exp (engine.cost.memory.act_terms' attention terms), less what the stated recompute
    modules drop. The layer input the input norm saves is outside the block and stays."""
    a = attn_shape(r.model)
    lin = r.lin_bytes
    unsplit = lin * r.h + lin * a.latent
    split = K.ACT_BYTES * (a.q_width + a.kv_width) + lin * a.out_width + K.FLASH_LSE_BYTES * a.heads
    if mode == SELECTIVE and r.policy == "modules":
        on = set(r.modules)
        if "layernorm" in on:
            unsplit -= lin * r.h
        if "core_attn" in on:
            split -= K.FLASH_LSE_BYTES * a.heads
        if "mla_up_proj" in on and r.model.is_mla:
            split -= K.ACT_BYTES * (a.q_width + a.kv_width)
    return unsplit, split


def swapped_bytes(r: Rows) -> np.ndarray:
    """(n, 2, 3) bytes of one layer and micro-batch that leave the device under swap-attention, per layer type and
    recompute mode: the attention block's saved tensors where the layer keeps them (off, selective); none for a
    fully recomputed layer (it keeps only its input) or when the run does not swap."""
    out = np.zeros((r.n, 2, 3))
    if not swaps(r):
        return out
    for mode in (OFF, SELECTIVE):
        unsplit, split = _attention_bytes_per_token(r, mode)
        out[:, :, mode] = (r.T * (unsplit / r.sp_div + split / r.t))[:, None]
    out[:, :, FULL] = 0.0
    return out


def exposed_copy_time(r: Rows, swapped: np.ndarray, attn_block_fwd: np.ndarray) -> np.ndarray:
    """(n, 2, 3) seconds per layer and micro-batch the device waits for the host copies: the block's forward
    hook makes the compute stream wait for the device-to-host copies, which started as each tensor was saved
    during the block's forward (`attn_block_fwd` (n,): its projections and attention core), so what the copy
    takes beyond that shows. The copies back are launched layers ahead in the backward and are priced hidden.
    The host link is the device's (`host_link_gb_s`, GB/s, engine.catalog.devices)."""
    link = r.cluster.device.host_link_gb_s * K.GB
    if link <= 0:
        return np.zeros_like(swapped)
    return np.maximum(swapped / link - attn_block_fwd[:, None, None], 0.0)
