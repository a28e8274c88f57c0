"""Hybrid Mamba models (engine.specs.HybridLayers): Nemotron-H's pattern read into layer kinds, its parameters and
FLOPs counted by hand from its config, and each layer priced as the pattern's mix: one block and one TP pair per
layer, the Mamba mixers' projections and scans, no score matrix outside the attention layers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.catalog.frameworks import FRAMEWORKS
from engine.check import check_file
from engine.cost import estimate, price_table
from engine.cost.layout import default_chunks
from engine.cost.model import model_stats
from engine.cost.table import CandidateTable
from engine.edit import apply_edits, set_value
from engine.specs import ModelSpec, PipelineLayout, RecomputePlan, RunOptions, Strategy
from tests.support.cli import hp_plan, hp_plan_json
from tests.support.configs import NANO, NANO_PATTERN, NEMOTRON_H_8B, NEMOTRON_H_PATTERN


def _model(tmp_path: Path, text: str = NEMOTRON_H_8B) -> ModelSpec:
    path = tmp_path / "search.yaml"
    path.write_text(text)
    config = check_file(str(path)).config
    assert config is not None and config.model is not None
    return config.model


def test_the_pattern_reads_as_layer_kinds_and_the_mlp_as_squared_relu(tmp_path: Path) -> None:
    m = _model(tmp_path)
    hy = m.hybrid
    assert hy is not None and (hy.mamba, hy.mlp, hy.attention) == (24, 24, 4)
    assert (hy.d_inner, hy.in_proj, hy.conv_dim) == (8192, 2 * 8192 + 2 * 8 * 128 + 128, 8192 + 2 * 8 * 128)
    assert not m.gated_mlp  # relu2: two matrices


def test_parameters_and_flops_count_each_kind_of_layer(tmp_path: Path) -> None:
    """By hand from the config: 8.10 B parameters; model FLOPs as Megatron-Core's hybrid counter sums them (each
    kind's layers, the scan at 7·d_inner·state, the logits), forward × 3."""
    h, s, V = 4096, 8192, 131072
    attention = h * 32 * 128 + 2 * h * 8 * 128 + 32 * 128 * h + h
    mlp = 2 * h * 21504 + h
    mamba = h * 18560 + 10240 * 5 + 3 * 128 + 8192 + 8192 * h + h
    total = 4 * attention + 24 * mlp + 24 * mamba + 2 * V * h + h
    stats = model_stats(_model(tmp_path))
    assert stats.total_params == pytest.approx(total, rel=1e-9) and 8.09e9 < total < 8.11e9
    per_token = (4 * 2 * (attention - h) + 24 * 2 * (mlp - h) + 24 * (2 * h * (18560 + 8192) + 7 * 8192 * 128)
                 + 4 * 2 * s * 32 * 256 + 2 * V * h)
    assert stats.flops_per_token_noncausal == pytest.approx(3 * per_token, rel=1e-9)


def test_each_layer_is_priced_as_the_mix_not_as_attention_and_mlp(tmp_path: Path) -> None:
    """The same model read without its pattern (52 attention + MLP layers) holds more weights and activations and
    takes longer; with it, the weights are the model's 8.10 B."""
    m = _model(tmp_path)
    uniform = replace(m, hybrid=None)
    run = RunOptions(framework="megatron")
    cfg = check_file(str(tmp_path / "search.yaml")).config
    assert cfg is not None and cfg.cluster is not None
    s = Strategy(dp=16, tp=2, pp=1, micro_batch_size=1, micro_batch_num=8, sequence_parallel=True,
                 recompute=RecomputePlan("off"))
    mixed, plain = (estimate(x, cfg.cluster, run, s, 80.0) for x in (m, uniform))
    weights = mixed.memory_breakdown_gib["parameters"] * 2 ** 30 / run.param_bytes * 2  # tp 2
    assert weights == pytest.approx(model_stats(m).total_params, rel=0.02)
    assert mixed.memory_breakdown_gib["activations"] < 0.8 * plain.memory_breakdown_gib["activations"]
    assert mixed.step_time_s < 0.75 * plain.step_time_s
    assert mixed.time_breakdown_s["tp_comm"] < 0.6 * plain.time_breakdown_s["tp_comm"]  # one pair per layer, not two


def test_a_pattern_it_cannot_price_is_said_at_its_key_and_priced_uniform(tmp_path: Path) -> None:
    for pattern in (NEMOTRON_H_PATTERN.replace("-", "E", 1), NEMOTRON_H_PATTERN[:-1]):
        (tmp_path / str(len(pattern))).mkdir(exist_ok=True)
        text = NEMOTRON_H_8B.replace(NEMOTRON_H_PATTERN, pattern)
        path = tmp_path / str(len(pattern)) / "search.yaml"
        path.write_text(text)
        loaded = check_file(str(path))
        assert loaded.config is not None and loaded.config.model is not None
        assert loaded.config.model.hybrid is None
        (said,) = [d for d in loaded.diagnostics if d.code == "HP112"]
        assert said.path == "model.hybrid_override_pattern" and "uniform" in said.message
    _model(tmp_path)  # the whole pattern: priced as its kinds, nothing said
    assert not [d for d in check_file(str(tmp_path / "search.yaml")).diagnostics if d.code == "HP112"]


def test_estimate_through_the_cli_says_no_run_had_mamba_layers(tmp_path: Path) -> None:
    path = tmp_path / "search.yaml"
    path.write_text(NEMOTRON_H_8B)
    doc = hp_plan_json("estimate", str(path))
    assert not [d for d in doc["diagnostics"] if d["code"] in ("HP112", "HP215", "HP101")
                and "hybrid" in d.get("path", "") + d["message"]]
    assert any("hybrid Mamba layers" in b for b in doc["error_band"]["basis"])
    assert "Mamba" in hp_plan("estimate", str(path)).stdout




def test_moe_layers_in_the_pattern_count_as_moe_blocks(tmp_path: Path) -> None:
    """Nemotron 3 Nano by hand: 31.58 B parameters, 3.58 B active per token (its model card: 31.6 B, 3.5 B). Every
    layer is of the MoE type and holds its share of the pattern's MoE blocks."""
    m = _model(tmp_path, NANO)
    assert m.hybrid is not None and (m.hybrid.mamba, m.hybrid.moe, m.hybrid.attention) == (23, 23, 6)
    assert m.is_moe and m.first_k_dense == 0 and m.num_moe_layers == 52 and m.shared_ffn == 3712
    h, V = 2688, 131072
    attention = h * 32 * 128 + 2 * h * 2 * 128 + 32 * 128 * h + h
    d_inner = 64 * 64
    in_proj = 2 * d_inner + 2 * 8 * 128 + 64
    mamba = h * in_proj + (d_inner + 2 * 8 * 128) * 5 + 3 * 64 + d_inner + d_inner * h + h
    expert = 2 * h * 1856
    moe = 128 * expert + 2 * h * 3712 + h * 128 + h
    active_moe = 6 * expert + 2 * h * 3712 + h * 128 + h
    outside = 2 * V * h + h
    stats = model_stats(m)
    assert stats.total_params == pytest.approx(6 * attention + 23 * mamba + 23 * moe + outside, rel=1e-9)
    assert stats.active_params == pytest.approx(6 * attention + 23 * mamba + 23 * active_moe + outside, rel=1e-9)
    assert 31.5e9 < stats.total_params < 31.7e9


def test_a_moe_pattern_is_priced_with_its_share_of_expert_traffic(tmp_path: Path) -> None:
    """The MoE blocks' all-to-alls, GEMMs and experts' weights are 23 of 52 layers' worth: against the same model
    with every layer a MoE layer (the uniform reading) they shrink by about that share."""
    m = _model(tmp_path, NANO)
    cfg = check_file(str(tmp_path / "search.yaml")).config
    assert cfg is not None and cfg.cluster is not None
    run = RunOptions(framework="megatron")
    s = Strategy(dp=16, tp=1, pp=1, ep=8, micro_batch_size=1, micro_batch_num=64, recompute=RecomputePlan("full"))
    mixed, plain = (estimate(x, cfg.cluster, run, s, 80.0) for x in (m, replace(m, hybrid=None)))
    share = 23 / 52
    assert mixed.time_breakdown_s["ep_comm"] == pytest.approx(share * plain.time_breakdown_s["ep_comm"], rel=1e-6)
    assert mixed.step_time_s < 0.8 * plain.step_time_s
    # MLP and MoE layers in one pattern are not priced as kinds: uniform, and said at the pattern
    text = NANO.replace(NANO_PATTERN, NANO_PATTERN.replace("E", "-", 1))
    (tmp_path / "mixed").mkdir()
    assert _model(tmp_path / "mixed", text).hybrid is None
    assert [d for d in check_file(str(tmp_path / "mixed" / "search.yaml")).diagnostics if d.code == "HP112"]


def test_tp_divides_the_mamba_heads_and_groups(tmp_path: Path) -> None:
    """Megatron-Core's MambaMixer asserts tp divides its heads and groups: a stated tp 16 is HP403 at tp, naming the
    groups (8); searched, tp 16 is a counted refusal and no plan has it."""
    text = (NEMOTRON_H_8B.replace("num_attention_heads: 32", "num_attention_heads: 64")
            .replace("num_key_value_heads: 8", "num_key_value_heads: 16")
            .replace("num_nodes: 4, cards_per_node: 8", "num_nodes: 2, cards_per_node: 16"))
    path = tmp_path / "search.yaml"
    path.write_text(text.replace("dp: 16, tp: 2,", "dp: 2, tp: 16,"))
    (said,) = [d for d in check_file(str(path)).diagnostics if d.code == "HP403"]
    assert said.path == "parallelism.tp" and "Mamba groups (n_groups) (8)" in said.message
    path.write_text(text.replace("dp: 16, tp: 2,", "dp: auto, tp: auto,"))
    found = hp_plan_json("search", str(path))
    assert found["refused"].get("tp does not divide the Mamba heads or groups", 0) > 0
    assert all(e["strategy"]["tp"] <= 8 for e in found["top"])


def test_every_recompute_policy_keeps_the_moe_share_of_a_moe_pattern(tmp_path: Path) -> None:
    """torchtitan's "op" policy and Megatron's modules keep the MoE blocks' share of their tensors: more routed
    copies keep more."""
    from engine.cost.memory import SELECTIVE, act_terms

    m = _model(tmp_path, NANO)
    fewer = replace(m, experts_per_tok=1)
    for policy, modules in (("op", ()), ("modules", ("layernorm",)), ("hyperparallel", ())):
        kept, less = (act_terms(x, True, SELECTIVE, policy, modules).split for x in (m, fewer))
        assert kept > less, policy


def _long_nemotron_h(cp: int, tp: int = 2) -> str:
    """Nemotron-H 8B at 64K tokens on 32 H100, with the stated cp and tp."""
    return (NEMOTRON_H_8B.replace("max_position_embeddings: 8192", "max_position_embeddings: 65536")
            .replace("dp: 16, tp: 2, pp: 1, cp: 1,", f"dp: {32 // cp // tp}, tp: {tp}, pp: 1, cp: {cp},"))


def test_a_mamba_mixer_all_to_alls_its_inputs_and_output_under_cp(tmp_path: Path) -> None:
    """MCORE-MAMBA-CP by hand: before the scan z, x (d_inner/tp each), B, C (groups/tp × state each, repeated up to
    cp where fewer groups) and dt (heads/tp); after it y (d_inner/tp). A rank's cp communication per layer is the
    attention layers' share of the ring and the Mamba layers' share of these all-to-alls, both ways, with the copies
    around them: three of what goes in (the all-to-all's layout, the concatenation, the load-balancing reorder), two
    of what comes out, each read and written once."""
    import numpy as np

    from engine.cost.communication import _attention_cp, _mamba_cp, layer_comm, mamba_cp_widths
    from engine.cost.memory import layer_activations
    from engine.cost.rows import DENSE, FULL, OFF, build_rows
    from engine.cost.table import CandidateTable
    from engine.cost.timing import layer_compute

    m = _model(tmp_path, _long_nemotron_h(2))
    t, cp = np.array([2.0, 2.0]), np.array([2.0, 16.0])
    before, after = mamba_cp_widths(m, t, cp)
    assert before.tolist() == [2 * 4096 + 2 * 4 * 128 + 64, 2 * 4096 + 2 * 16 * 128 + 64]
    assert after.tolist() == [4096, 4096]

    cfg = check_file(str(tmp_path / "search.yaml")).config
    assert cfg is not None and cfg.cluster is not None
    table = CandidateTable.from_strategies([Strategy(dp=8, tp=2, cp=2, micro_batch_num=2, sequence_parallel=True)],
                                           num_layers=m.num_layers)
    r = build_rows(m, cfg.cluster, RunOptions(framework="megatron"), table, 1)
    bytes_per = 2 * r.T[0]  # BF16 activations of the rank's 32,768 tokens
    by_hand = sum(r.links.alltoall(np.array([bytes_per * w]), table.cp, table.tp)[0] for w in (9280, 4096))
    hbm = 3.35e12 * 0.8  # H100 SXM HBM3 at the streaming efficiency
    by_hand += 2 * bytes_per * (3 * 9280 + 2 * 4096) / hbm
    assert _mamba_cp(r)[0] == pytest.approx(by_hand, rel=1e-12)
    lc = layer_compute(r, layer_activations(r))
    fwd, tot = _attention_cp(r, lc)
    comm = layer_comm(r, lc).cp[0, DENSE]
    assert comm[OFF] == pytest.approx(4 / 52 * tot[0] + 24 / 52 * 2 * by_hand, rel=1e-12)
    assert comm[FULL] - comm[OFF] == pytest.approx(4 / 52 * fwd[0] + 24 / 52 * by_hand, rel=1e-12)  # the re-run forward


def test_cp_prices_the_ring_on_the_attention_layers_under_their_own_core(tmp_path: Path) -> None:
    """A pattern of attention and MLP layers only (no Mamba mixer): its 26 attention layers ring as the uniform
    model's 52 do, each hiding its transfers under its own attention core, so half the uniform model's cp time
    (before, each ring hid under half a core). Through the CLI, a Mamba pattern at cp 2 prices its all-to-alls."""
    _model(tmp_path, _long_nemotron_h(2))
    inside = hp_plan_json("estimate", str(tmp_path / "search.yaml"), code=1)  # 136 GiB: over the budget
    assert inside["time_breakdown_s"]["cp_comm"] > 0
    m = _model(tmp_path, _long_nemotron_h(16).replace(NEMOTRON_H_PATTERN, "*-" * 26))
    assert m.hybrid is not None and (m.hybrid.attention, m.hybrid.mamba) == (26, 0)
    cfg = check_file(str(tmp_path / "search.yaml")).config
    assert cfg is not None and cfg.cluster is not None
    s = Strategy(dp=1, tp=2, pp=1, cp=16, micro_batch_size=1, micro_batch_num=128, sequence_parallel=True,
                 recompute=RecomputePlan("off"))
    run = RunOptions(framework="megatron")
    mixed, plain = (estimate(x, cfg.cluster, run, s, 80.0) for x in (m, replace(m, hybrid=None)))
    assert mixed.time_breakdown_s["cp_comm"] == pytest.approx(0.5 * plain.time_breakdown_s["cp_comm"], rel=1e-9)


def test_cp_splits_the_mamba_heads_and_groups(tmp_path: Path) -> None:
    """Megatron-Core asserts each cp rank takes whole heads of a tp rank's and whole groups (or an equal share of
    one): with 96 heads in 6 groups, a stated cp 4 is HP404 at cp naming the cp values that split them; searched,
    cp 4 and 8 are counted refusals and no plan has them; 8 groups at cp 16 share each group over two ranks."""
    text = (NEMOTRON_H_8B.replace("dp: 16, tp: 2, pp: 1, cp: 1,", "dp: 8, tp: 1, pp: 1, cp: 4,")
            .replace("mamba_num_heads: 128", "mamba_num_heads: 96").replace("n_groups: 8", "n_groups: 6"))
    path = tmp_path / "search.yaml"
    path.write_text(text)
    (said,) = [d for d in hp_plan_json("check", str(path), code=1)["diagnostics"] if d["code"] == "HP404"]
    assert said["path"] == "parallelism.cp" and "[1, 2, 3, 6, 12, 24, 48, 96]" in said["message"]
    assert said["data"]["nearest_valid"] == 3  # the editor's quick fix
    path.write_text(text.replace("dp: 8, tp: 1, pp: 1, cp: 4,", "dp: auto, tp: 1, pp: 1, cp: auto,"))
    found = hp_plan_json("search", str(path))
    assert found["refused"].get("cp does not split the Mamba heads or groups of a tp rank", 0) > 0
    assert {e["strategy"]["cp"] for e in found["top"]} <= {1, 2}
    path.write_text(_long_nemotron_h(16, tp=1))
    assert not [d for d in check_file(str(path)).diagnostics if d.code == "HP404"]


def test_a_pipeline_stage_holds_the_parameters_of_its_own_layers_kinds(tmp_path: Path) -> None:
    """A pipeline cuts the pattern by position: at pp 8 (a split HyperParallel's search may price; Megatron-Core
    runs only equal stages, below) Nemotron-H 8B's stages hold 6 or 7 consecutive layers of the pattern, so a
    stage of Mamba and MLP layers holds more weights than one with attention layers. Each stage's parameters are
    its own layers' (counted by hand from the pattern), the total the model's."""
    h, t = 4096, 1
    attention = h * 32 * 128 + 2 * h * 8 * 128 + 32 * 128 * h + h
    mlp = 2 * h * 21504 + h
    mamba = h * 18560 + 10240 * 5 + 3 * 128 + 8192 + 8192 * h + h
    per_kind = {"*": attention, "-": mlp, "M": mamba}
    m = _model(tmp_path)
    cfg = check_file(str(tmp_path / "search.yaml")).config
    assert cfg is not None and cfg.cluster is not None
    run = RunOptions(framework="hyperparallel")
    s = Strategy(dp=4, tp=t, pp=8, micro_batch_size=1, micro_batch_num=8, recompute=RecomputePlan("off"))
    sizes = default_chunks(len(NEMOTRON_H_PATTERN), 8, 1)[:, 0]
    starts = [int(sum(sizes[:i])) for i in range(8)]
    layers = [sum(per_kind[c] for c in NEMOTRON_H_PATTERN[a:a + int(n)]) for a, n in zip(starts, sizes, strict=True)]
    assert max(layers) > 1.2 * min(layers)  # the stages differ by their kinds, not only by their layer counts
    # each stage's parameters as priced: its decoder layers, the embedding on stage 0, the output layer and the
    # final norm on the last
    table = CandidateTable.from_strategies([s], m.num_layers)
    ne = price_table(m, cfg.cluster, run, table, 80.0).stage_parts["ne"][0]
    io = [h * 131072.0] + [0.0] * 6 + [h * 131072.0 + h]
    assert [float(x) for x in ne] == pytest.approx([a + b for a, b in zip(layers, io, strict=True)], rel=1e-9)
    megatron = RunOptions(framework="megatron")  # its 16-bit weights are the parameters term
    flat = estimate(m, cfg.cluster, megatron, replace(s, pp=1, dp=32), 80.0)
    total = sum(layers) + 2 * h * 131072 + h
    assert flat.memory_breakdown_gib["parameters"] * 2 ** 30 / megatron.param_bytes == pytest.approx(total, rel=1e-9)


PARALLELISM = "parallelism: {dp: 16, tp: 2, pp: 1, cp: 1, ep: 1, micro_batch_size: 1}"


def test_megatron_is_offered_only_the_hybrid_splits_it_runs(tmp_path: Path) -> None:
    """Megatron-Core cuts a hybrid pattern without '|' separators into pp equal stages and runs it without virtual
    stages (MCORE-HYBRID): the search over pp and vpp offers Nemotron-H 8B (52 layers) pp 1, 2 and 4 at vpp 1 and
    counts the rest as refused; HyperParallel's search has no such rule."""
    auto = NEMOTRON_H_8B.replace(PARALLELISM, "parallelism: {tp: 1, cp: 1, ep: 1}")
    assert auto != NEMOTRON_H_8B
    (tmp_path / "megatron.yaml").write_text(auto)
    (tmp_path / "hp.yaml").write_text(auto.replace("framework: megatron", "framework: hyperparallel"))
    doc = hp_plan_json("search", str(tmp_path / "megatron.yaml"), "--top", "50")
    shapes = {(e["strategy"]["pp"], e["strategy"]["vpp"]) for e in doc["top"]}
    assert shapes and all(52 % pp == 0 and vpp == 1 for pp, vpp in shapes)
    assert doc["refused"]["pp does not divide a hybrid pattern's layers (the stack cuts it into equal stages)"] > 0
    assert doc["refused"]["vpp > 1 on a hybrid pattern (the stack runs it without virtual stages)"] > 0
    other = hp_plan_json("search", str(tmp_path / "hp.yaml"), "--top", "50")
    assert not [k for k in other["refused"] if "hybrid pattern" in k]
    # MindSpeed-LLM runs its Mamba2 hybrids on Megatron-Core's model (MS-SSM); first/last-stage layers lift the pp
    # rule, not the virtual-stage one
    m = _model(tmp_path, NEMOTRON_H_8B)
    assert FRAMEWORKS["mindspeed"].space.hybrid_split(m, PipelineLayout()) == "even"
    assert FRAMEWORKS["megatron"].space.hybrid_split(m, PipelineLayout(first_stage_layers=12)) == "stated"
    assert FRAMEWORKS["hyperparallel"].space.hybrid_split(m, PipelineLayout()) == ""


@pytest.mark.parametrize(("degrees", "field", "said", "fix"), [
    # the fix keeps the 32 devices: pp 4 divides the 52 layers and dp·pp = 32 (pp 13 would not)
    ("dp: 4, tp: 1, pp: 8, vpp: 1", "pp", "pp 8 does not divide its 52 layers (pp 2, 4, 13, 26, 52 would)", 4),
    ("dp: 8, tp: 1, pp: 4, vpp: 2", "vpp", "without virtual pipeline stages (vpp 2)", 1),
])
def test_a_stated_hybrid_split_megatron_refuses_is_said_at_its_key(tmp_path: Path, degrees: str, field: str,
                                                                  said: str, fix: int) -> None:
    path = tmp_path / "search.yaml"
    text = NEMOTRON_H_8B.replace(PARALLELISM, "parallelism: {" + degrees + ", cp: 1, ep: 1, micro_batch_size: 1}")
    path.write_text(text.replace("constraint: {global_batch_size: 128}",
                                 "constraint: {global_batch_size: 128}\npp_config: {pipeline_schedule: "
                                 + ("interleaved" if "vpp: 2" in degrees else "1F1B") + "}"))
    doc = hp_plan_json("estimate", str(path))
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "HP530"]
    assert said in d["message"] and doc["step_time_s"] > 0  # priced all the same
    start, end = d["range"]["start"], d["range"]["end"]
    line = path.read_text().splitlines()[start["line"]]
    assert line[:start["character"]].endswith(f" {field}: ") and line[start["character"]:end["character"]] == \
        degrees.split(f" {field}: ")[1].split(",")[0]
    # its quick fix (the editor's "Set `pp` to 4", engine.edit.set_value) writes the value the stack runs
    assert d["data"] == {"nearest_valid": fix}
    edit = set_value(path.read_text(), d["path"], fix)
    assert f" {field}: {fix}," in apply_edits(path.read_text(), edit.edits)
    even = NEMOTRON_H_8B.replace(PARALLELISM, "parallelism: {dp: 8, tp: 1, pp: 4, vpp: 1, cp: 1, ep: 1, "
                                              "micro_batch_size: 1}")
    path.write_text(even)
    assert not [d for d in hp_plan_json("estimate", str(path))["diagnostics"] if d["code"] == "HP530"]
