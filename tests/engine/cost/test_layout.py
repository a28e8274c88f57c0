"""The pipeline layout as run (engine.cost.layout): Megatron-Core's embedding/loss accounting, first/last-stage
layer counts and per-chunk layer layout, HyperParallel's offsets, and the micro-batches each chunk keeps in flight under the interleaved
schedule, checked against a step-by-step replay of Megatron's order; then the priced stages."""

from __future__ import annotations

import numpy as np
import pytest

from engine.config.layer_layout import parse_layout_text
from engine.cost import CandidateTable, estimate, price_table
from engine.cost.layout import (
    LayoutError,
    chunk_in_flight,
    chunk_layer_stage,
    chunk_layers,
    chunk_type_counts,
    default_chunks,
    in_flight,
    mtp_stage,
    weighted_in_flight,
)
from engine.cost.strategy_rules import check_strategy
from engine.specs import ModelSpec, PipelineLayout, RunOptions, Strategy
from tests.engine.cost.shapes import DSV3, cluster

L405 = ModelSpec(name="llama3.1-405b", num_layers=126, hidden=16384, heads=128, kv_heads=8, vocab=128256,
                 ffn=53248, seq_len=8192)
META = PipelineLayout(embedding_in_split=True, loss_in_split=True)


def test_meta_layout_puts_the_embedding_and_the_loss_alone_in_their_chunks() -> None:
    c = chunk_layers(126, 0, 16, 8, META)
    assert c.shape == (16, 8) and int(c.sum()) == 126
    assert c[0, 0] == 0 and c[15, 7] == 0  # embedding-only, loss-only chunks
    assert (np.delete(c.ravel(), [0, 127]) == 1).all()
    assert chunk_type_counts(c, 126)[:, 0].tolist() == [7] + [8] * 14 + [7]


def test_accounting_that_does_not_divide_is_refused() -> None:
    with pytest.raises(LayoutError, match="128 do not split evenly into pp·vpp = 96"):
        chunk_layers(126, 0, 16, 6, META)
    with pytest.raises(LayoutError):  # only the embedding: 127 over 128 chunks
        chunk_layers(126, 0, 16, 8, PipelineLayout(embedding_in_split=True))


def test_megatron_first_and_last_stage_counts() -> None:
    c = chunk_layers(126, 0, 16, 1, PipelineLayout(first_stage_layers=6, last_stage_layers=8))
    assert c[:, 0].tolist() == [6] + [8] * 14 + [8]
    c2 = chunk_layers(126, 0, 16, 2, PipelineLayout(first_stage_layers=6, last_stage_layers=8))
    assert c2[0].tolist() == [3, 3] and c2[1].tolist() == [4, 4]
    with pytest.raises(LayoutError, match="do not split evenly over the other 14 stages"):
        chunk_layers(126, 0, 16, 1, PipelineLayout(first_stage_layers=5, last_stage_layers=8))
    with pytest.raises(LayoutError, match="divide by vpp 2"):
        chunk_layers(126, 0, 16, 2, PipelineLayout(first_stage_layers=7, last_stage_layers=7))
    with pytest.raises(LayoutError, match="together"):
        chunk_layers(126, 0, 16, 1, PipelineLayout(first_stage_layers=7, embedding_in_split=True))


def test_hyperparallel_offsets() -> None:
    # [HP] §2.7's DeepSeek-V3 recipe: 61 layers + 1 MTP in the offset, 16 stages, offset [1 ×15, -1].
    lay = PipelineLayout(offset=(*((1,),) * 15, (-1,)), mtp_in_offset=True)
    c = chunk_layers(61, 1, 16, 1, lay)
    assert c[:, 0].tolist() == [4] * 15 + [1] and int(c.sum()) == 61
    # per-chunk offsets under vpp 2 with the embedding and output in the offset: L_eff = 8 + 2 over 4 chunks
    lay2 = PipelineLayout(embedding_in_split=True, loss_in_split=True, offset=((0, 1), (0, 1)))
    assert chunk_layers(8, 0, 2, 2, lay2).tolist() == [[1, 3], [2, 2]]
    with pytest.raises(LayoutError, match="one per pipeline stage"):
        chunk_layers(61, 1, 8, 1, lay)
    with pytest.raises(LayoutError, match="place"):
        chunk_layers(61, 0, 16, 1, PipelineLayout(offset=(*((1,),) * 15, (-1,))))


def test_offsets_that_count_the_mtp_layer_are_read_so_when_unstated() -> None:
    # Upstream's shipped sapp_nd DeepSeek-V3 config states the offsets and mtp_depth 1 but not mtp_in_offset: its
    # offsets sum only with the MTP layer counted, and upstream accepts the file (no false HP422).
    stated = PipelineLayout(offset=(*((1,),) * 15, (-1,)), mtp_in_offset=True)
    unstated = PipelineLayout(offset=(*((1,),) * 15, (-1,)))
    assert chunk_layers(61, 1, 16, 1, unstated).tolist() == chunk_layers(61, 1, 16, 1, stated).tolist()
    # Offsets that place neither count are still refused.
    with pytest.raises(LayoutError, match="place"):
        chunk_layers(61, 1, 16, 1, PipelineLayout(offset=((2,), *((1,),) * 14, (-1,))))


def test_layer_stage_follows_the_interleaved_order() -> None:
    c = chunk_layers(126, 0, 16, 8, META)
    st = chunk_layer_stage(c)
    assert st.shape == (126,)
    assert st[:3].tolist() == [1, 2, 3]  # layer 0 is on stage 1: stage 0's first chunk is the embedding
    assert st[-1] == 14  # the last layer is on stage 14: stage 15's last chunk is the loss


def _replay(p: int, v: int, m: int, i: int, w: np.ndarray) -> tuple[float, int]:
    """Megatron's interleaved order on stage i, one op at a time: (most layer-micro-batches held, most
    chunk-micro-batches held)."""
    total = m * v
    warm = min(2 * (p - i - 1) + (v - 1) * p, total)
    fwd_chunk = [(k % (p * v)) // p for k in range(total)]
    bwd_chunk = [v - 1 - (k % (p * v)) // p for k in range(total)]
    held = np.zeros(v)
    best_w, best_n = 0.0, 0
    f = b = 0
    ops = ["F"] * warm + ["F", "B"] * (total - warm) + ["B"] * warm
    for op in ops:
        if op == "F":
            held[fwd_chunk[f]] += 1
            f += 1
        else:
            held[bwd_chunk[b]] -= 1
            b += 1
        best_w = max(best_w, float(held @ w))
        best_n = max(best_n, int(held.sum()))
    return best_w, best_n


@pytest.mark.parametrize(("p", "v", "m"), [(4, 2, 8), (4, 3, 12), (16, 8, 32), (16, 8, 16), (8, 4, 64)])
def test_chunk_in_flight_is_megatrons_order(p: int, v: int, m: int) -> None:
    c = chunk_layers(p * v - 2, 0, p, v, META).astype(float)
    held = chunk_in_flight(p, v, m, c)
    plain = in_flight(np.array([p]), np.array([v]), np.array([m]), p)[0]
    for i in range(p):
        best_w, best_n = _replay(p, v, m, i, c[i])
        assert float(held[i] @ c[i]) == best_w
        assert held[i].sum() == best_n == plain[i] * v


def test_equal_chunks_keep_the_schedules_count() -> None:
    for p, v, m in ((4, 2, 8), (8, 5, 16), (16, 8, 16)):
        got = weighted_in_flight(default_chunks(p * v * 2, p, v), m)
        np.testing.assert_allclose(got, in_flight(np.array([p]), np.array([v]), np.array([m]), p)[0])
    assert chunk_in_flight(4, 1, 8, np.ones((4, 1)))[:, 0].tolist() == [4, 3, 2, 1]  # 1F1B: p − i


def _meta(layout: PipelineLayout, m: int = 16) -> Strategy:
    return Strategy(dp=16, dp_shard=16, tp=8, pp=16, vpp=8, micro_batch_num=m, sequence_parallel=True,
                    pipeline_schedule="interleaved")


def test_405b_meta_layout_is_priced_and_fits() -> None:
    cl = cluster(256, "H100")
    run = RunOptions(framework="megatron", selective_policy="attention", reshard_after_forward=False,
                     pipeline_layout=META)
    e = estimate(L405, cl, run, _meta(META), 80.0)
    assert e.verdict == "fits" and e.peak_memory_gib < 80.0
    stages = e.stage_memory_gib
    assert len(stages) == 16 and stages[0] < stages[1] and stages[15] < stages[1]
    assert check_strategy(L405, cl, _meta(META), META) == []
    assert {p.code for p in check_strategy(L405, cl, _meta(META))} == {"HP505"}  # 128 chunks for 126 layers


def test_stated_layout_priced_alike_in_a_table_and_alone() -> None:
    cl = cluster(256, "H100")
    run = RunOptions(framework="megatron", pipeline_layout=META)
    rows = [Strategy(dp=2048 // (8 * p), tp=8, pp=p, vpp=v, micro_batch_num=m, sequence_parallel=True,
                     pipeline_schedule="interleaved" if v > 1 else "1F1B", recompute=_rc(rc))
            for p, v, m, rc in ((16, 8, 32, "off"), (16, 4, 32, "full"), (8, 1, 16, "selective"), (32, 4, 64, "full"),
                                (16, 6, 32, "full"))]
    pr = price_table(L405, cl, run, CandidateTable.from_strategies(rows), 80.0)
    for i, s in enumerate(rows):
        e = estimate(L405, cl, run, s, 80.0)
        assert e.peak_memory_gib == float(pr.peak_gib[i]) and e.step_time_s == float(pr.step_time_s[i])
    counts = pr.layer_count[:, :, 0]
    assert counts[0, 0] == 7 and counts[2, 0] == 15 and counts[2, 7] == 15  # (126 + 2) / 8 = 16 per stage
    # vpp 6: 128 does not divide by 96 chunks, so that row is priced with the even split; the refusal (HP422)
    # is the reader's finding alone (engine.validate.pipeline), never the cost model's a second time
    assert counts[4, :16].tolist() == default_chunks(126, 16, 6).sum(axis=1).tolist()
    assert check_strategy(L405, cl, rows[4], META) == []


def _rc(mode: str):  # type: ignore[no-untyped-def]
    from engine.specs import RecomputePlan

    return RecomputePlan(mode)  # type: ignore[arg-type]


def test_mtp_and_moe_types_follow_the_chunks() -> None:
    lay = PipelineLayout(offset=(*((1,),) * 15, (-1,)), mtp_in_offset=True)
    c = chunk_layers(DSV3.num_layers, DSV3.mtp_depth, 16, 1, lay)
    t = chunk_type_counts(c, DSV3.first_k_dense)
    assert t[0].tolist() == [3, 1] and t[1].tolist() == [0, 4] and int(t.sum()) == 61


def test_torchtitans_own_split_counts_the_embedding_and_output() -> None:
    """torchtitan `generate_llm_fqn_per_model_part` (input/output weight 1): the extra slots go to the first
    chunks, nothing needs to divide; it is what torchtitan prices when the files state no layout."""
    from engine.cost.layout import effective_layout

    lay = effective_layout(RunOptions(framework="torchtitan"))
    assert lay.embedding_in_split and lay.loss_in_split and lay.remainder_first
    assert not effective_layout(RunOptions(framework="megatron")).stated
    assert chunk_layers(32, 0, 8, 1, lay)[:, 0].tolist() == [4, 5, 4, 4, 4, 4, 4, 3]
    assert chunk_layers(126, 0, 16, 8, lay).tolist() == chunk_layers(126, 0, 16, 8, META).tolist()
    with pytest.raises(LayoutError, match="torchtitan refuses"):
        chunk_layers(126, 0, 16, 16, lay)  # 128 slots over 256 chunks
    cl = cluster(256, "H100")
    s = Strategy(dp=16, tp=8, pp=16, micro_batch_num=16, sequence_parallel=True)
    tt = price_table(L405, cl, RunOptions(framework="torchtitan"), CandidateTable.from_strategies([s]), 80.0)
    assert tt.layer_count[0, :16, 0].tolist() == [7] + [8] * 14 + [7]


H100_RECIPE = PipelineLayout(layer_layout=parse_layout_text("Et|(tt|)*30mL"))  # Megatron-Bridge, DSv3 on H100


def test_a_layer_layout_places_each_chunk_as_listed() -> None:
    c = chunk_layers(DSV3.num_layers, DSV3.mtp_depth, 8, 4, H100_RECIPE)
    assert c.shape == (8, 4) and int(c.sum()) == 61
    assert c[0].tolist() == [1, 2, 2, 2] and c[7].tolist() == [2, 2, 2, 0]  # "Et" first, "mL" last
    assert (c[1:7] == 2).all()
    assert mtp_stage(H100_RECIPE, 8) == 7
    # Megatron-Core's docstring example gives the MTP layer a chunk of its own, on the stage before the loss's.
    own = PipelineLayout(layer_layout=parse_layout_text("Ettt|(tt|)*29,m|L"))
    assert chunk_layers(61, 1, 16, 2, own)[14].tolist() == [2, 0] and mtp_stage(own, 16) == 14


@pytest.mark.parametrize(("layers", "mtp", "p", "v", "text", "message"), [
    (61, 1, 8, 2, "Et|(tt|)*30mL", "32 chunks, 4 per stage at pp 8, where the plan runs vpp 2"),
    (61, 1, 6, 4, "Et|(tt|)*30mL", "no whole number per stage at pp 6"),
    (62, 1, 8, 4, "Et|(tt|)*30mL", "61 decoder layers"),
    (61, 0, 8, 4, "Et|(tt|)*30mL", "1 MTP layers"),
    (61, 1, 8, 4, "tE|(tt|)*30mL", "begin with the embedding"),
    (61, 1, 8, 4, "Et|(tt|)*29tm|tL", "before the MTP layers"),
    (61, 2, 8, 4, "Et|m|(tt|)*28,ttt|tmL", "before the MTP layers"),
    (62, 1, 8, 4, "Et|(tt|)*29tm|ttL", "before the MTP layers"),
])
def test_a_layer_layout_megatron_core_refuses_is_refused_with_its_reason(
        layers: int, mtp: int, p: int, v: int, text: str, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        chunk_layers(layers, mtp, p, v, PipelineLayout(layer_layout=parse_layout_text(text)))


def test_the_mtp_layers_sit_in_the_last_chunk_of_their_stage_and_together() -> None:
    split = PipelineLayout(layer_layout=parse_layout_text("Et|(tt|)*29,ttm|mL"))
    with pytest.raises(LayoutError, match="together in one chunk"):
        chunk_layers(61, 2, 8, 4, split)
    early = PipelineLayout(layer_layout=parse_layout_text("E" + "t" * 61 + "m|L||"))  # m on vpp rank 0 of 2
    with pytest.raises(LayoutError, match="last chunk of their stage"):
        chunk_layers(61, 1, 2, 2, early)
    with pytest.raises(LayoutError, match="alone"):
        chunk_layers(61, 1, 8, 4, PipelineLayout(layer_layout=H100_RECIPE.layer_layout, loss_in_split=True))


def test_the_priced_stages_follow_the_layer_layout_and_its_mtp_stage() -> None:
    """Stage by stage the priced layers are the layout's; the MTP layer's weights move to the stage the layout
    gives it (the output layer and the loss stay on the last)."""
    cl = cluster(64, "H100")
    s = Strategy(dp=4, tp=2, pp=16, vpp=2, ep=8, micro_batch_num=32, sequence_parallel=True,
                 pipeline_schedule="interleaved")
    own = PipelineLayout(layer_layout=parse_layout_text("Ettt|(tt|)*29,m|L"))
    last = PipelineLayout(layer_layout=parse_layout_text("Ettt|(tt|)*28,t|t|mL"))
    pr = price_table(DSV3, cl, RunOptions(framework="megatron", pipeline_layout=own),
                     CandidateTable.from_strategies([s]), 80.0)
    at_last = price_table(DSV3, cl, RunOptions(framework="megatron", pipeline_layout=last),
                          CandidateTable.from_strategies([s]), 80.0)
    layers = pr.layer_count.sum(axis=2)[0]  # decoder + MTP layers per stage
    assert layers[:16].tolist() == [5] + [4] * 13 + [3, 2]  # stage 14: 2 + the MTP layer; 15: 2 and the loss
    assert at_last.layer_count.sum(axis=2)[0][14:16].tolist() == [3, 3]
    assert float(pr.stage_memory_gib[0, 15]) < float(at_last.stage_memory_gib[0, 15])  # the MTP layer moved off


def test_noop_layers_take_places_in_the_split_and_cost_nothing() -> None:
    """MindSpeed-LLM's `--noop-layers` (MS-NOOP): DeepSeek-V3's 61 layers + 3 identity layers numbered 61-63 in the
    padded count of 64; every chunk builds its slots less the no-op ones in it."""
    lay = PipelineLayout(noop_layers=(61, 62, 63))
    assert chunk_layers(61, 1, 8, 1, lay).ravel().tolist() == [8] * 7 + [5]  # 1F1B: the last stage pads
    inter = chunk_layers(61, 1, 4, 2, lay)  # chunk j = c·p + i: the last chunk (stage 3, chunk 1) pads
    assert inter.tolist() == [[8, 8], [8, 8], [8, 8], [8, 5]]
    # DualPipeV: 2·pp stages of 4 slots folded into a V, rank i holding stage i and stage 15 − i: rank 0 pads,
    # the rank that also holds the embedding, the output layer and the MTP layer
    assert chunk_layers(61, 1, 8, 1, lay, v_shape=True).ravel().tolist() == [5] + [8] * 7
    spread = chunk_layers(10, 0, 2, 1, PipelineLayout(noop_layers=(1, 2)), v_shape=True)  # 4 stages of 3 slots
    assert spread.ravel().tolist() == [4, 6]  # rank 0: stage 0 (slots 0-2, two no-op) + stage 3: 1 + 3 real


@pytest.mark.parametrize(("lay", "p", "v", "dpv", "why"), [
    (PipelineLayout(noop_layers=(61, 62)), 8, 1, True, "63 do not split evenly into 2·pp = 16"),
    (PipelineLayout(noop_layers=(61, 62, 64)), 8, 1, False, "past the padded layer count"),
    (PipelineLayout(noop_layers=(61, 62, 63), first_stage_layers=4), 8, 1, False, "even split only"),
])
def test_noop_layers_mindspeed_would_refuse_are_refused(lay: PipelineLayout, p: int, v: int, dpv: bool,
                                                        why: str) -> None:
    with pytest.raises(LayoutError, match=why):
        chunk_layers(61, 1, p, v, lay, v_shape=dpv)


@pytest.mark.parametrize(("value", "want"), [('"61,62,63"', (61, 62, 63)), ("[63, 61, 62, 61]", (61, 62, 63)),
                                             ("7", (7,)), ('""', ()), ('"1,,2"', None), ("[-1]", None),
                                             ("[1.5]", None), ("{a: 1}", None)])
def test_noop_layers_are_read_as_mindspeed_writes_them(tmp_path, value: str, want: tuple[int, ...] | None) -> None:  # type: ignore[no-untyped-def]
    from engine.check import check_file

    p = tmp_path / "s.yaml"
    p.write_text("model: {num_hidden_layers: 61, hidden_size: 1024, num_attention_heads: 8, vocab_size: 1000}\n"
                 "cluster: {num_nodes: 1, cards_per_node: 8, device_type: A2}\n"
                 f"parallelism: {{pp: 8, tp: 1, cp: 1, dp: 1}}\npp_config: {{noop_layers: {value}}}\n"
                 "estimator: {framework: mindspeed}\n")
    loaded = check_file(str(p))
    bad = [d for d in loaded.diagnostics if d.code == "HP103"]
    if want is None:
        assert bad and bad[0].path == "pp_config.noop_layers"
    else:
        assert not bad and loaded.config is not None and loaded.config.run.pipeline_layout.noop_layers == want
