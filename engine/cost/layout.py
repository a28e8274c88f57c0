"""Which layers each pipeline stage holds, and how many micro-batches of activations it keeps in flight.

Layer split: the model is cut into C = pp·v chunks (v = virtual chunks per stage when interleaved, else 1);
chunk j sits on stage j mod pp (Megatron's interleaved order). Each chunk gets ⌊L/C⌋ layers and the
L mod C extra layers go to chunks 1, 2, …: never to chunk 0, whose stage already holds the embedding and
the most micro-batches in flight ([HP] §6.7 puts them on the last chunk instead, next to the
output layer). MTP layers sit on the last stage, after the output layer (DeepSeek-V3 §2.2).
"""

from __future__ import annotations

import numpy as np


def chunk_bounds(L: int, p: np.ndarray, v: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first layer, layer count) of chunk j (arrays broadcast)."""
    c = p * v
    base = L // c
    r = L % c
    count = base + ((j >= 1) & (j <= r))
    start = j * base + np.clip(j - 1, 0, r)
    return start, count


def stage_type_counts(L: int, first_dense: int, p: np.ndarray, v: np.ndarray, P: int, vmax: int) -> np.ndarray:
    """(n, P, 2): dense and MoE layers per stage (stages past a row's pp hold 0). `first_dense` = the
    number of leading dense layers (L for a dense model)."""
    n = len(p)
    i = np.arange(P)[None, :]
    pp = p[:, None]
    vv = v[:, None]
    out = np.zeros((n, P, 2), dtype=np.float64)
    for c in range(vmax):
        j = c * pp + i
        valid = (i < pp) & (c < vv)
        start, count = chunk_bounds(L, pp, vv, j)
        count = np.where(valid, count, 0)
        if first_dense >= L:  # dense model: every layer is type 0
            out[:, :, 0] += count
            continue
        dense = np.clip(np.minimum(start + count, first_dense) - start, 0, count)
        out[:, :, 0] += dense
        out[:, :, 1] += count - dense
    return out


def layer_stage(L: int, p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(n, L): the stage of each global layer."""
    c = p * v
    base = (L // c)[:, None]
    r = (L % c)[:, None]
    layer = np.arange(L)[None, :]
    rest = layer - base
    big = base + 1
    in_first = layer < base
    in_big = (~in_first) & (rest < r * big)
    j_big = 1 + rest // big
    safe_base = np.maximum(base, 1)
    j_small = 1 + r + (rest - r * big) // safe_base
    j = np.where(in_first, 0, np.where(in_big, j_big, j_small))
    return j % p[:, None]


def in_flight(p: np.ndarray, v: np.ndarray, m: np.ndarray, P: int) -> np.ndarray:
    """(n, P): micro-batches whose activations stage i holds at its peak.

    1F1B: min(p − i, m) (KOR22 §4.2.3; [HP] §6.8). Interleaved with v chunks: Megatron's warm-up
    runs (p − i − 1)·2 + (v − 1)·p chunk-micro-batches before the first backward, plus the one in flight,
    each of 1/v of the stage's layers, so min(that + 1, m·v) / v; for stage 0 this is KOR22's factor
    p·(1 + (p − 1)/(p·v)). Zero past a row's pp.
    """
    i = np.arange(P)[None, :]
    pp = p[:, None]
    vv = v[:, None]
    mm = m[:, None]
    out = np.minimum(pp - i, mm).astype(np.float64)
    if (v > 1).any():
        inter = np.minimum((pp - i - 1) * 2 + (vv - 1) * pp + 1, mm * vv) / vv
        out = np.where(vv > 1, inter, out)
    return np.where(i < pp, np.maximum(out, 1.0), 0.0)
