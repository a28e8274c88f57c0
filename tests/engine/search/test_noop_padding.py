"""The search pads a layer count with no-op layers where the stack does (engine.search.passes.noop_passes): a
DualPipeV split, and an interleaved one that must fill pp·vpp equal chunks, of DeepSeek-V3's 61 layers on
MindSpeed-LLM, end to end through `hp-plan search`, `estimate` and `apply`; and the refusals of a space with
DualPipeV's rules in it (engine.search.space.config_groups)."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.search.passes import LayoutPass, noop_passes
from engine.specs import PipelineLayout
from tests.support.cli import hp_plan, hp_plan_json
from tests.support.configs import DSV3_A3, DSV3_TRAIN

DPV_LAYERS = "layers not a multiple of 2·pp (DualPipeV's stages)"
SEARCHED = ("parallelism: {dp: 32, tp: 2, pp: 8, cp: 1, ep: 32, etp: 1, vpp: 1, micro_batch_size: 1, "
            "micro_batch_num: 120,\n              sequence_parallel: true}")


def _dsv3(tmp_path: Path, noop: str = "", framework: str = "mindspeed", parallelism: str = "",
          schedule: str = "dualpipev") -> Path:
    """MindSpeed-LLM's DeepSeek-V3 A3 search config (tests.support.configs.DSV3_A3) under `schedule`, `noop` after
    it."""
    text = DSV3_A3.replace("dualpipev NOOP", schedule + noop).replace("FRAMEWORK", framework)
    if parallelism:
        assert SEARCHED in text
        text = text.replace(SEARCHED, parallelism)
    path = tmp_path / "search.yaml"
    path.write_text(text)
    return path


def test_paddings_are_the_fewest_no_op_layers_at_the_end_per_pp(tmp_path: Path) -> None:
    config = check_file(str(_dsv3(tmp_path, parallelism="parallelism: {pp: auto, cp: 1, vpp: 1}"))).config
    assert config is not None
    # 512 devices: pp 2 … 32 cut 64 slots into 2·pp stages; pp 64 would need more no-op layers than layers
    assert noop_passes(config) == [LayoutPass(PipelineLayout(noop_layers=(61, 62, 63)), (2, 4, 8, 16, 32))]


def test_no_padding_where_the_stack_has_none_or_the_file_states_a_layout(tmp_path: Path) -> None:
    for folder, noop, framework in (("megatron", "", "megatron"), ("stated", ', noop_layers: "61,62,63"', "mindspeed")):
        (tmp_path / folder).mkdir()
        config = check_file(str(_dsv3(tmp_path / folder, noop, framework))).config
        assert config is not None and noop_passes(config) == []
    # Under 1F1B MindSpeed-LLM runs the uneven split itself, and the padding too: the search prices both
    (tmp_path / "one").mkdir()
    config = check_file(str(_dsv3(tmp_path / "one", schedule="1F1B"))).config
    assert config is not None
    assert noop_passes(config) == [LayoutPass(PipelineLayout(noop_layers=(61, 62, 63)), (8,), (1,))]


def test_the_search_finds_mindspeeds_own_plan_padded_and_prices_it_as_the_stated_padding(tmp_path: Path) -> None:
    """The stated plan (pp 8) has no split without padding: the search pads it as MindSpeed's script does, says so
    (HP614 at the schedule, with the quick fix), and prices exactly what the file with the padding states."""
    found = hp_plan_json("search", str(_dsv3(tmp_path)))
    best = found["best"]
    assert best["strategy"]["pp"] == 8 and best["pipeline_layout"]["noop_layers"] == [61, 62, 63]
    assert DPV_LAYERS not in found["refused"]
    hp614 = [d for d in found["diagnostics"] if d["code"] == "HP614"]
    assert len(hp614) == 1 and hp614[0]["severity"] == "information"
    assert hp614[0]["path"] == "pp_config.pipeline_schedule" and "no plan fits without it" in hp614[0]["message"]
    assert hp614[0]["data"]["set_at"] == {"path": "pp_config.noop_layers", "value": "61,62,63"}
    assert not [d for d in found["diagnostics"] if d["severity"] == "error"]
    (tmp_path / "stated").mkdir()
    stated = hp_plan_json("estimate", str(_dsv3(tmp_path / "stated", ', noop_layers: "61,62,63"')))
    assert stated["step_time_s"] == best["step_time_s"] and stated["peak_memory_gib"] == best["peak_memory_gib"]
    text = hp_plan("search", str(_dsv3(tmp_path))).stdout
    assert "best: dp 32 · tp 2 · pp 8 · ep 32 · mbs 1 · sp · rc full · noop layers 61,62,63" in text


def test_a_searched_pp_ranks_padded_and_unpadded_plans_together(tmp_path: Path) -> None:
    path = _dsv3(tmp_path, parallelism="parallelism: {pp: auto, cp: 1, vpp: 1, micro_batch_size: 1}")
    found = hp_plan_json("search", str(path))
    for e in found["top"]:
        padded = (e["pipeline_layout"] or {}).get("noop_layers")
        assert padded == ([61, 62, 63] if e["strategy"]["pp"] > 1 else None)
    assert {e["strategy"]["pp"] > 1 for e in found["top"]} == {True, False}  # both kinds in one ranking
    assert DPV_LAYERS not in found["refused"]


def test_a_stack_without_no_op_layers_refuses_as_before(tmp_path: Path) -> None:
    """Megatron-LM runs no DualPipeV: every pipelined candidate is refused, and nothing is padded."""
    found = hp_plan_json("search", str(_dsv3(tmp_path, framework="megatron")), code=1)
    assert found["best"] is None and not [d for d in found["diagnostics"] if d["code"] == "HP614"]


def test_a_refusal_weighs_only_candidates_the_search_s_rules_let_in(tmp_path: Path) -> None:
    """A stated padding that does not cut (61 + 1 over 16 stages): the lists' refusal prices the widened space
    under DualPipeV's rules too, so its closest plan is never one the search itself refused (it read "takes ."
    when the widened space left DualPipeV out)."""
    found = hp_plan_json("search", str(_dsv3(tmp_path, ', noop_layers: "61"')), code=1)
    hp601 = [d for d in found["diagnostics"] if d["code"] == "HP601"]
    assert hp601 and all(DPV_LAYERS in d["message"] and "takes ." not in d["message"] for d in hp601)
    assert {d["data"]["dimension"] for d in hp601} == {"tp", "pp", "ep"}
    pp = next(d for d in hp601 if d["data"]["dimension"] == "pp")
    assert pp["data"]["fitting"] == [1]  # without a pipeline nothing is cut


def test_apply_writes_the_padding_and_the_file_reads_back_as_the_plan(tmp_path: Path) -> None:
    path = _dsv3_train_yaml(tmp_path, 2, 8, 64)
    cluster = ("--framework", "mindspeed", "--device-type", "A3", "--nodes", "32", "--cards-per-node", "16")
    found = hp_plan_json("search", str(path), *cluster)
    r = hp_plan("apply", str(path), "--in-place", "--force", *cluster)
    assert r.returncode == 0, r.stdout + r.stderr
    written = path.read_text()
    assert 'noop_layers: "61,62,63"' in written and "# A first guess" in written
    est = hp_plan_json("estimate", str(path), *cluster)
    best = found["best"]
    assert est["strategy"] == best["strategy"] and est["step_time_s"] == best["step_time_s"]
    assert not [d for d in est["diagnostics"] if d["code"] in ("HP505", "HP422")]


def _dsv3_train_yaml(folder: Path, tp: int, pp: int, ep: int) -> Path:
    """examples/deepseek-v3's train.yaml (tests.support.configs.DSV3_TRAIN) under DualPipeV at (tp, pp, ep), no
    FSDP."""
    train = DSV3_TRAIN.read_text()
    for old, new in (("pipeline_scheduler: 1f1b", "pipeline_scheduler: dualpipev"), ("tp_size: 2", f"tp_size: {tp}"),
                     ("pp_size: 16", f"pp_size: {pp}"), ("ep_size: 64 ", f"ep_size: {ep} "),
                     ("dp_shard_size: 64 ", "dp_shard_size: 1  ")):
        assert old in train
        train = train.replace(old, new)
    folder.mkdir(exist_ok=True)
    (folder / "train.yaml").write_text(train)
    return folder / "train.yaml"


def _dsv3_train(folder: Path, tp: int, pp: int, ep: int) -> Path:
    """_dsv3_train_yaml's train.yaml and a search config on 512 A3 dies under MindSpeed naming it."""
    _dsv3_train_yaml(folder, tp, pp, ep)
    (folder / "search.yaml").write_text("train_yaml: ./train.yaml\n"
                                        "cluster: {num_nodes: 32, cards_per_node: 16, device_type: A3}\n"
                                        "estimator: {framework: mindspeed}\n")
    return folder / "search.yaml"


def test_a_schedule_stated_in_the_train_yaml_gets_the_note_there_without_a_quick_fix(tmp_path: Path) -> None:
    """A search config naming a train.yaml that states DualPipeV: HP614 sits at the train.yaml's schedule, and
    carries no quick fix (its set_at would write a search config's pp_config into the train.yaml)."""
    found = hp_plan_json("search", str(_dsv3_train(tmp_path, 4, 16, 32)))
    assert found["best"]["pipeline_layout"]["noop_layers"] == [61, 62, 63]
    (hp614,) = [d for d in found["diagnostics"] if d["code"] == "HP614"]
    assert hp614["path"] == "accelerator.pipeline_scheduler" and hp614["file"].endswith("train.yaml")
    assert "set_at" not in hp614["data"] and hp614["data"]["noop_layers"] == [61, 62, 63]


def test_where_nothing_fits_padded_the_refusal_is_the_padded_plans(tmp_path: Path) -> None:
    """tp 2 · pp 8 · ep 64 padded needs 106.5 GiB of the A3's 64: the refusal says that budget, not DualPipeV's
    layer rule, which MindSpeed's padding lifts; the same refusal as the file with the padding stated."""
    found = hp_plan_json("search", str(_dsv3_train(tmp_path / "plain", 2, 8, 64)), code=1)
    said = [d["message"] for d in found["diagnostics"] if d["code"] == "HP601"]
    assert said and not [m for m in said if DPV_LAYERS in m]
    path = _dsv3_train(tmp_path / "stated", 2, 8, 64)
    train = path.parent / "train.yaml"
    train.write_text(train.read_text().replace("dualpipev\n", 'dualpipev\n  noop_layers: "61,62,63"\n'))
    stated = hp_plan_json("search", str(path), code=1)
    assert said == [d["message"] for d in stated["diagnostics"] if d["code"] == "HP601"]


INTERLEAVED = ("parallelism: {dp: auto, tp: 2, pp: PPS, cp: 1, ep: 32, etp: 1, vpp: auto, micro_batch_size: 1, "
               "micro_batch_num: 120,\n              sequence_parallel: true}")
VPP_SPLIT = "layers not in pp·vpp equal chunks (the stack runs no uneven interleaved split)"


def test_interleaved_paddings_keep_a_real_layer_in_every_chunk(tmp_path: Path) -> None:
    """pp 2 pads 61 layers to 62 for vpp 1, to 64 for vpp 2, 4, 8 and to 66 for vpp 3 (vpp 5…7 would leave a chunk
    of no-op layers only); pp 8 pads to 64 for vpp 1 and 2 (32 chunks of 2 would hold 3 no-op layers). One pass per
    padding and vpp values, so each pass's pp × vpp is exactly the pairs it serves."""
    path = _dsv3(tmp_path, parallelism=INTERLEAVED.replace("PPS", "[2, 8]"), schedule="interleaved")
    config = check_file(str(path)).config
    assert config is not None
    pad3, pad5 = PipelineLayout(noop_layers=(61, 62, 63)), PipelineLayout(noop_layers=(61, 62, 63, 64, 65))
    pad1 = PipelineLayout(noop_layers=(61,))
    assert noop_passes(config) == [LayoutPass(pad1, (2,), (1,)), LayoutPass(pad3, (2,), (2, 4, 8)),
                                   LayoutPass(pad5, (2,), (3,)), LayoutPass(pad3, (8,), (1, 2))]
    (tmp_path / "megatron").mkdir()  # Megatron-Core runs the uneven interleaved split itself: nothing to pad
    config = check_file(str(_dsv3(tmp_path / "megatron", framework="megatron", schedule="interleaved",
                                  parallelism=INTERLEAVED.replace("PPS", "[2, 8]")))).config
    assert config is not None and noop_passes(config) == []


def test_mindspeed_interleaves_layers_in_equal_chunks_padded_as_the_stack_pads(tmp_path: Path) -> None:
    """MindSpeed-LLM's uneven split (--num-layer-list) refuses virtual stages (MS-NUMLAYERLIST): DeepSeek-V3's 61
    layers unpadded interleave on no pp·vpp there (counted refusals), so its interleaved plans are the padded ones,
    each filling pp·vpp equal chunks. The best is one (HP614 at the declared vpp, with the quick fix), priced to the
    digit as the file stating that padding. Megatron-Core takes the uneven split as a layer layout: no padding."""
    for framework in ("mindspeed", "megatron"):
        (tmp_path / framework).mkdir()
        searched = INTERLEAVED.replace("PPS", "[8, 16]").replace("vpp: auto", "vpp: [2, 3, 4]")
        path = _dsv3(tmp_path / framework, framework=framework, parallelism=searched, schedule="interleaved")
        found = hp_plan_json("search", str(path))
        interleaved = [e for e in found["top"] if e["strategy"]["vpp"] > 1]
        assert interleaved
        if framework == "megatron":
            assert not found["refused"].get(VPP_SPLIT)
            assert not [e for e in interleaved if (e["pipeline_layout"] or {}).get("noop_layers")]
            continue
        assert found["refused"].get(VPP_SPLIT)
        for e in interleaved:
            s, pad = e["strategy"], e["pipeline_layout"]["noop_layers"]
            assert (61 + len(pad)) % (s["pp"] * s["vpp"]) == 0 and pad == list(range(61, 61 + len(pad)))
        best = found["best"]
        assert (best["strategy"]["pp"], best["strategy"]["vpp"]) == (8, 2)
        assert best["pipeline_layout"]["noop_layers"] == [61, 62, 63]
        (hp614,) = [d for d in found["diagnostics"] if d["code"] == "HP614"]
        assert hp614["path"] == "parallelism.vpp" and "fill pp·vpp = 16 equal chunks" in hp614["message"]
        assert "(no plan fits without it)" in hp614["message"]  # vpp 2…4 only: every unpadded split is refused
        assert hp614["data"]["set_at"] == {"path": "pp_config.noop_layers", "value": "61,62,63"}
        stated = path.read_text().replace("pp: [8, 16]", "pp: 8").replace("vpp: [2, 3, 4]", "vpp: 2").replace(
            "interleaved}", 'interleaved, noop_layers: "61,62,63"}')
        path.write_text(stated)
        est = hp_plan_json("estimate", str(path))
        assert est["step_time_s"] == best["step_time_s"] and est["peak_memory_gib"] == best["peak_memory_gib"]
        assert not [d for d in est["diagnostics"] if d["severity"] in ("error", "warning")]


def test_a_plain_split_pads_where_the_balance_is_better_and_says_so(tmp_path: Path) -> None:
    """Under 1F1B MindSpeed-LLM runs 61 layers over pp 8 unevenly (--num-layer-list), the extra layers on the first
    stages; padded to 64 the last stage, which holds the output layer and the loss, runs 5 of them. The search
    prices both and, the padded one faster, says so (HP614), priced to the digit as the file stating it."""
    path = _dsv3(tmp_path, schedule="1F1B")
    found = hp_plan_json("search", str(path))
    best = found["best"]
    assert (best["strategy"]["pp"], best["strategy"]["vpp"]) == (8, 1)
    assert best["pipeline_layout"]["noop_layers"] == [61, 62, 63]
    (hp614,) = [d for d in found["diagnostics"] if d["code"] == "HP614"]
    assert "split into 8 equal stages" in hp614["message"] and "× the tokens/s of the best plan without it" in \
        hp614["message"]
    (tmp_path / "stated").mkdir()
    est = hp_plan_json("estimate", str(_dsv3(tmp_path / "stated", ', noop_layers: "61,62,63"', schedule="1F1B")))
    assert est["step_time_s"] == best["step_time_s"] and est["peak_memory_gib"] == best["peak_memory_gib"]


def test_where_nothing_fits_interleaved_the_refusal_is_the_padded_plans(tmp_path: Path) -> None:
    """vpp 2 only, on a 40 GB budget: every interleaved candidate is the padding pass's (the plain pass builds
    none), so the refusal is the budget those padded plans miss, not the split rule the padding lifts."""
    searched = INTERLEAVED.replace("PPS", "8").replace("vpp: auto", "vpp: 2")
    path = _dsv3(tmp_path, parallelism=searched, schedule="interleaved")
    path.write_text(path.read_text().replace("constraint: {global_batch_size: 3840}",
                                             "constraint: {global_batch_size: 3840, memory_limit_gb: 40}"))
    found = hp_plan_json("search", str(path), code=1)
    assert found["best"] is None and found["evaluated"] >= 1 and not found["refused"].get(VPP_SPLIT)
    said = [d for d in found["diagnostics"] if d["severity"] == "error"]
    assert said and not [d for d in said if VPP_SPLIT in d["message"]]
    assert any("GiB" in d["message"] for d in said)
