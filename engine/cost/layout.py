"""Which layers each pipeline stage holds, and how many micro-batches of activations it keeps in flight.

Layer split: the model is cut into C = pp·v chunks (v = virtual chunks per stage when interleaved, else 1);
chunk j sits on stage j mod pp (Megatron's interleaved order). Each chunk gets ⌊L/C⌋ layers and the
L mod C extra layers go to chunks 1, 2, …: never to chunk 0, whose stage already holds the embedding and
the most micro-batches in flight ([HP] §6.7 puts them on the last chunk instead, next to the
output layer). MTP layers sit on the last stage, after the output layer (DeepSeek-V3 §2.2).

A stated layout (engine.specs.PipelineLayout: Megatron-Core's embedding/loss accounting, first/last-stage
layer counts and per-chunk layer layout, HyperParallel's per-stage offsets) replaces that split: `chunk_layers` gives the decoder layers of
every (stage, virtual chunk), the embedding always on stage 0's first chunk and the output layer and loss on the
last stage's last chunk, so a chunk may hold only the embedding or only the loss (Llama 3 §3.3.2: 405B trained
with 126 layers + embedding + loss over 16 stages × 8 chunks). With unequal chunks the micro-batches a stage
keeps in flight differ per chunk (`chunk_in_flight`, Megatron's interleaved order). Without a stated layout a
framework's own split is priced where it has one (torchtitan counts the embedding and output as one layer each,
`effective_layout`).
"""

from __future__ import annotations

import numpy as np

from engine.catalog.frameworks import effective_layout as effective_layout  # re-exported: the layout priced
from engine.specs import HYBRID_KIND_ORDER, PipelineLayout


class LayoutError(ValueError):
    """A stated layout that the framework would refuse for this pp·vpp (the message says why). `vpp`: where the
    fault is a layer layout's chunk count against pp·vpp, the vpp it sets (its chunks per stage): the fix may
    then belong at the vpp key rather than at the layout."""

    def __init__(self, message: str, vpp: int | None = None) -> None:
        super().__init__(message)
        self.vpp = vpp


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
    number of leading dense layers (L for a dense model).

    A stage's layers in closed form rather than chunk by chunk (a search prices this once per pipeline shape and
    block, D-009): its v chunks j = c·p + i hold `base` layers each and one more where 1 ≤ j ≤ r (chunk_bounds),
    so v·base plus the c in [lo, v) with c·p + i ≤ r, lo = 1 on stage 0 (chunk 0 never takes one). Only the
    chunks that reach into the leading dense layers are walked."""
    n = len(p)
    i = np.arange(P)[None, :]
    pp = p[:, None]
    vv = v[:, None]
    chunks = pp * vv
    base, r = L // chunks, L % chunks
    lo = (i == 0).astype(np.int64)
    extra = np.clip(np.minimum(vv - 1, (r - i) // pp) - lo + 1, 0, None)
    total = np.where(i < pp, vv * base + extra, 0).astype(np.float64)
    out = np.zeros((n, P, 2), dtype=np.float64)
    if first_dense >= L:  # dense model: every layer is type 0
        out[:, :, 0] = total
        return out
    dense = np.zeros((n, P), dtype=np.float64)
    for c in range(vmax if first_dense > 0 else 0):
        j = c * pp + i
        start, count = chunk_bounds(L, pp, vv, j)
        valid = (i < pp) & (c < vv)
        count = np.where(valid, count, 0)
        dense += np.clip(np.minimum(start + count, first_dense) - start, 0, count)
        if bool(((start >= first_dense) | ~valid).all()):
            break  # every later chunk of each stage starts later still
    out[:, :, 0] = dense
    out[:, :, 1] = total - dense
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


def default_chunks(L: int, p: int, v: int) -> np.ndarray:
    """(p, v) decoder layers of chunk c on stage i under the planner's even split (chunk_bounds)."""
    j = np.arange(p * v)
    _, count = chunk_bounds(L, np.full(p * v, p), np.full(p * v, v), j)
    return count.reshape(v, p).T.astype(np.int64)


def chunk_layers(L: int, mtp: int, p: int, v: int, lay: PipelineLayout, v_shape: bool = False) -> np.ndarray:
    """(p, v) decoder layers of chunk c on stage i (model order: chunk j = c·p + i), as the stated layout
    places them; raises LayoutError where the framework refuses the layout for this pp·vpp. MTP layers are
    not in the counts (they sit on the last stage, or where a layer layout puts them: mtp_stage). `v_shape`: the
    plan runs DualPipeV (each rank two of the 2·pp stages, folded into a V), which only no-op layers place apart."""
    if lay.noop_layers:
        return _noop_chunks(L, p, v, lay, v_shape)
    if lay.layer_layout:
        return _listed_chunks(L, mtp, p, v, lay)
    if lay.offset:
        return _offset_chunks(L, mtp, p, v, lay)
    if lay.first_stage_layers or lay.last_stage_layers:
        return _uneven_chunks(L, p, v, lay)
    if lay.embedding_in_split or lay.loss_in_split:
        return _accounted_chunks(L, p, v, lay)
    return default_chunks(L, p, v)


def _listed_chunks(L: int, mtp: int, p: int, v: int, lay: PipelineLayout) -> np.ndarray:
    """Megatron-Core's `pipeline_model_parallel_layout`: each chunk's decoder layers as listed, after the checks
    its PipelineParallelLayerLayout makes (MCORE-PPLAYOUT: the list divides into pp stages and so sets vpp; the
    embedding first and the loss last, once each; every decoder layer and every MTP layer listed, the MTP layers
    after the decoder layers, together in one chunk, the last chunk of their stage). Megatron-LM takes it alone,
    without the other layout options."""
    if lay.offset or lay.first_stage_layers or lay.last_stage_layers or lay.embedding_in_split \
            or lay.loss_in_split:
        raise LayoutError("Megatron-Core takes pipeline_model_parallel_layout alone, not with first/last-stage layer "
                          "counts, the embedding/loss accounting or offsets")
    chunks = lay.layer_layout
    if len(chunks) != p * v:
        if len(chunks) % p:
            raise LayoutError(f"the layout lists {len(chunks)} chunks, no whole number per stage at pp {p}")
        raise LayoutError(f"the layout lists {len(chunks)} chunks, {len(chunks) // p} per stage at pp {p}, where the "
                          f"plan runs vpp {v} (Megatron-LM takes vpp from the layout: state pp_interleave_num "
                          f"{len(chunks) // p})", vpp=len(chunks) // p)
    flat = "".join(chunks)
    if not flat or flat[0] != "E" or flat[-1] != "L" or flat.count("E") != 1 or flat.count("L") != 1:
        raise LayoutError("the layout must begin with the embedding (E) and end with the loss (L), each once")
    if flat.count("t") != L:
        raise LayoutError(f"the layout lists {flat.count('t')} decoder layers (t); the model has {L}")
    if flat.count("m") != mtp:
        raise LayoutError(f"the layout lists {flat.count('m')} MTP layers (m); the model has {mtp}")
    if mtp:
        holding = [j for j, c in enumerate(chunks) if "m" in c]
        if "t" in flat[flat.index("m"):]:
            raise LayoutError("the decoder layers (t) must all come before the MTP layers (m)")
        if len(holding) > 1 or holding[0] // p != v - 1:
            raise LayoutError("the MTP layers (m) must sit together in one chunk, the last chunk of their stage")
    out = np.zeros((p, v), dtype=np.int64)
    for j, chunk in enumerate(chunks):
        out[j % p, j // p] = chunk.count("t")
    return out


def _noop_chunks(L: int, p: int, v: int, lay: PipelineLayout, v_shape: bool) -> np.ndarray:
    """MindSpeed-LLM's no-op layers (MS-NOOP): L + k slots, k of them identity layers at the stated indices, split
    evenly into pp·vpp chunks (into 2·pp stages under DualPipeV, rank i holding stage i and stage 2·pp − 1 − i, so
    (p, 1)); each chunk builds its slots less the no-op ones in it. MindSpeed pads so that the count splits: one
    that does not, or an index past the padded count, is refused here."""
    if lay.layer_layout or lay.offset or lay.first_stage_layers or lay.last_stage_layers or lay.embedding_in_split \
            or lay.loss_in_split:
        raise LayoutError("MindSpeed-LLM takes no-op layers with its even split only, not with a layer layout, "
                          "first/last-stage layer counts, offsets or the embedding/loss accounting")
    k = len(lay.noop_layers)
    total = L + k
    if lay.noop_layers[-1] >= total:
        raise LayoutError(f"no-op layer {lay.noop_layers[-1]} is past the padded layer count {L} + {k} = {total} "
                          "(MindSpeed-LLM numbers them in it from 0)")
    chunks, what = (2 * p, "2·pp") if v_shape else (p * v, "pp·vpp")
    if total % chunks:
        raise LayoutError(f"{L} layers and {k} no-op layers = {total} do not split evenly into {what} = {chunks} "
                          "stages")
    size = total // chunks
    real = size - np.bincount(np.asarray(lay.noop_layers, dtype=np.int64) // size, minlength=chunks)
    if v_shape:
        return (real[:p] + real[::-1][:p])[:, None].astype(np.int64)
    return real.reshape(v, p).T.astype(np.int64)


def mtp_stage(lay: PipelineLayout, p: int) -> int:
    """The stage that holds the MTP layers: the last, unless a layer layout puts them on another (Megatron-Core's
    standalone MTP stage)."""
    j = next((j for j, c in enumerate(lay.layer_layout) if "m" in c), None)
    return p - 1 if j is None else j % p


def _accounted_chunks(L: int, p: int, v: int, lay: PipelineLayout) -> np.ndarray:
    """Megatron-Core `get_num_layers_to_build`: (L + e + l) / (p·v) per chunk, one fewer on the first chunk of
    stage 0 (the embedding) and on the last chunk of the last stage (the loss)."""
    e, lo = int(lay.embedding_in_split), int(lay.loss_in_split)
    total = L + e + lo
    if lay.remainder_first:
        return _weighted_chunks(total, e, lo, p, v)
    if total % (p * v):
        what = " + ".join(["layers"] + ["embedding"] * e + ["loss"] * lo)
        raise LayoutError(f"{what} = {total} do not split evenly into pp·vpp = {p * v} chunks "
                          "(Megatron-Core asserts it when the embedding or loss is accounted in the split)")
    out = np.full((p, v), total // (p * v), dtype=np.int64)
    out[0, 0] -= e
    out[p - 1, v - 1] -= lo
    if (out < 0).any():
        raise LayoutError(f"{total // (p * v)} layer per chunk leaves nothing for the embedding and the loss")
    return out


def _weighted_chunks(total: int, e: int, lo: int, p: int, v: int) -> np.ndarray:
    """torchtitan `generate_llm_fqn_per_model_part` (TT-SRC): ⌊total/C⌋ per model chunk, the first total mod C
    chunks one more, the embedding's and the output's weight taken off the first and the last chunk; torchtitan
    refuses a split whose chunks hold fewer slots than those weights."""
    c = p * v
    base, extra = divmod(total, c)
    if base < max(e, lo, 1):
        raise LayoutError(f"{total} layers with the embedding and output over {c} chunks leave fewer than one per "
                          "chunk (torchtitan refuses it)")
    order = np.full(c, base, dtype=np.int64)
    order[:extra] += 1
    order[0] -= e
    order[-1] -= lo
    return order.reshape(v, p).T.copy()


def _uneven_chunks(L: int, p: int, v: int, lay: PipelineLayout) -> np.ndarray:
    """Megatron-Core's first/last-stage layer counts: the other stages share the rest evenly; under
    interleaving every stage's count divides by vpp (TransformerConfig checks)."""
    if lay.embedding_in_split or lay.loss_in_split:
        raise LayoutError("Megatron-Core refuses first/last-stage layer counts together with the embedding or "
                          "loss accounted in the split")
    stages = np.zeros(p, dtype=np.int64)
    left, rest = L, p
    for idx, n in ((0, lay.first_stage_layers), (p - 1, lay.last_stage_layers)):
        if n and p > 1:
            stages[idx] = n
            left -= n
            rest -= 1
    if left < 0 or (rest == 0 and left) or (rest and left % rest):
        raise LayoutError(f"after the first/last-stage layer counts, {left} layers do not split evenly over the "
                          f"other {rest} stages")
    for i in range(p):
        if not ((i == 0 and lay.first_stage_layers) or (i == p - 1 and lay.last_stage_layers)) or p == 1:
            stages[i] = left // rest if rest else 0
    if p == 1:
        stages[0] = L
    if (stages % v).any():
        raise LayoutError(f"stage layer counts {stages.tolist()} do not divide by vpp {v}")
    return np.repeat((stages // v)[:, None], v, axis=1)


def _offset_chunks(L: int, mtp: int, p: int, v: int, lay: PipelineLayout) -> np.ndarray:
    """HyperParallel's offsets ([HP] §6.7): ⌊L_eff/(p·v)⌋ + offset per chunk, a per-stage offset on the
    stage's last chunk; the embedding and output (emb_out_in_offset) and the MTP layers (mtp_in_offset)
    take their places in the first and last chunks. Offsets that place the MTP layers too, with
    mtp_in_offset unstated, are read as counting them: upstream's own DeepSeek-V3 search config writes
    `offset: [1 ×15, -1]` for 61 layers and one MTP layer over pp 16 ([HP] §4), which sums only so."""
    if len(lay.offset) != p:
        raise LayoutError(f"offset has {len(lay.offset)} entries for pp {p}: one per pipeline stage")
    m = mtp if lay.mtp_in_offset else 0
    out = _placed_by_offsets(L, m, p, v, lay)
    if int(out.sum()) != L and m == 0 and mtp > 0:
        with_mtp = _placed_by_offsets(L, mtp, p, v, lay)
        if int(with_mtp.sum()) == L and not (with_mtp < 0).any():
            return with_mtp
    if (out < 0).any() or int(out.sum()) != L:
        emb, loss = int(lay.embedding_in_split), int(lay.loss_in_split)
        eff = L + m + emb + loss
        raise LayoutError(f"the offsets place {int(out.sum()) + emb + loss + m} of L_eff = {eff} layers "
                          f"(⌊{eff}/{p * v}⌋ = {eff // (p * v)} per chunk + offset)")
    return out


def _placed_by_offsets(L: int, m: int, p: int, v: int, lay: PipelineLayout) -> np.ndarray:
    """(p, v) decoder layers per chunk that the offsets place when m MTP layers are in the split."""
    emb, loss = int(lay.embedding_in_split), int(lay.loss_in_split)
    eff = L + m + emb + loss
    out = np.full((p, v), eff // (p * v), dtype=np.int64)
    for i, o in enumerate(lay.offset):
        if len(o) == 1:
            out[i, v - 1] += o[0]
        elif len(o) == v:
            out[i] += np.asarray(o, dtype=np.int64)
        else:
            raise LayoutError(f"offset entry {i} has {len(o)} values for vpp {v}: one, or one per chunk")
    out[0, 0] -= emb
    out[p - 1, v - 1] -= loss + m
    return out


def layout_or_default(L: int, mtp: int, p: int, v: int, lay: PipelineLayout,
                      v_shape: bool = False) -> tuple[np.ndarray, bool]:
    """(chunks, whether the stated layout applies): a layout that does not fit this pp·vpp (an offset list
    written for another pp, a split that does not divide) is priced with the even split, as HyperParallel
    adapts its offsets to each candidate ([HP] §5.8); the stated plan gets the refusal (engine.cost.strategy_rules)."""
    if not lay.stated:
        return default_chunks(L, p, v), False
    try:
        return chunk_layers(L, mtp, p, v, lay, v_shape), True
    except LayoutError:
        return default_chunks(L, p, v), False


def chunk_type_counts(chunks: np.ndarray, first_dense: int) -> np.ndarray:
    """(p, 2) dense and MoE decoder layers per stage from (p, v) chunks laid in model order."""
    p, v = chunks.shape
    order = chunks.T.reshape(-1)  # model order j = c·p + i
    starts = np.concatenate([[0], np.cumsum(order)[:-1]])
    dense = np.clip(np.minimum(starts + order, first_dense) - starts, 0, order)
    out = np.zeros((p, 2))
    stage = np.arange(p * v) % p
    np.add.at(out[:, 0], stage, dense)
    np.add.at(out[:, 1], stage, order - dense)
    return out


def chunk_kind_counts(pattern: str, chunks: np.ndarray) -> np.ndarray:
    """(p, K) layers of each hybrid kind (engine.specs.HYBRID_KIND_ORDER) per stage from (p, v) chunks laid in
    model order over the `pattern`'s layers (one kind per layer, model order). Megatron-Core cuts a hybrid pattern
    into the pipeline's stages by position (MCORE-HYBRID), as it does any decoder (MCORE-PP), so a stage holds the
    kinds its layers are, not the pattern's mix."""
    codes = np.fromiter((HYBRID_KIND_ORDER.index(c) for c in pattern), dtype=np.int64, count=len(pattern))
    out = np.zeros((chunks.shape[0], len(HYBRID_KIND_ORDER)))
    np.add.at(out, (chunk_layer_stage(chunks), codes), 1.0)
    return out


def chunk_layer_stage(chunks: np.ndarray) -> np.ndarray:
    """(L,) the stage of each global layer from (p, v) chunks laid in model order."""
    p, v = chunks.shape
    order = chunks.T.reshape(-1)
    return np.repeat(np.arange(p * v) % p, order)


def chunk_in_flight(p: int, v: int, m: int, weights: np.ndarray) -> np.ndarray:
    """(p, v) micro-batches each chunk of each stage holds when the stage's activations peak.

    1F1B (v = 1): min(p − i, m). Interleaved (Megatron-Core `forward_backward_pipelining_with_interleaving`):
    stage i runs W = min(2(p − i − 1) + (v − 1)·p, m·v) warm-up forwards, then one forward and one backward
    at a time; forward k runs chunk (k mod p·v) // p (groups of pp micro-batches per chunk) and backward k
    chunk v − 1 − that. W + 1 chunk-micro-batches are in flight after every steady-state forward; which chunks
    they belong to changes, so the moment kept is the one holding the most layers (`weights`, (p, v) layers
    per chunk). The pattern repeats every p·v steps, so those are the moments looked at.
    """
    if v == 1:
        return np.minimum(p - np.arange(p), m).astype(np.float64)[:, None]
    out = np.zeros((p, v))
    c = np.arange(v)[None, :]
    total = m * v
    for i in range(p):
        warm = min(2 * (p - i - 1) + (v - 1) * p, total)
        steps = np.arange(max(min(total - warm, p * v), 1))[:, None]
        done_f = np.minimum(warm + 1 + steps, total)
        done_b = np.where(warm >= total, 0, steps)
        held = _chunk_done(done_f, c, p, v) - _chunk_done(done_b, v - 1 - c, p, v)  # (steps, v)
        out[i] = held[int(np.argmax(held @ weights[i]))]
    return out


def _chunk_done(k: np.ndarray, chunk: np.ndarray, p: int, v: int) -> np.ndarray:
    """How many of the first k chunk-micro-batches (forward order) belong to `chunk` (groups of p)."""
    return (k // (p * v)) * p + np.clip(k % (p * v) - chunk * p, 0, p)


def weighted_in_flight(chunks: np.ndarray, m: int) -> np.ndarray:
    """(p,) micro-batches in flight per stage as one factor on the stage's layers: Σ_c held_c·layers_c /
    Σ_c layers_c (equal chunks: in_flight's value). A stage without layers keeps the schedule's count."""
    p, v = chunks.shape
    w = chunks.astype(np.float64)
    held = chunk_in_flight(p, v, m, w)
    layers = w.sum(axis=1)
    plain = held.sum(axis=1) / v
    return np.where(layers > 0, (held * w).sum(axis=1) / np.maximum(layers, 1.0), plain)
