"""The pipeline layout as run, end to end through `hp-plan` (check, estimate, search, explain) on Llama 3.1 405B
with Meta's layout (examples/llama3-405b: 126 layers + embedding + loss over 16 stages × 8 chunks), Megatron's
first/last-stage layer counts and per-chunk layer layout (DeepSeek-V3 as Megatron-Bridge lays it out on H100), and
HyperParallel's offsets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.catalog.flags import accepted_flags
from engine.config.layer_layout import parse_layout_text
from engine.explain.export import read_megatron
from tests.support.cli import ROOT, hp_plan, hp_plan_bounded, hp_plan_json
from tests.support.configs import DSV3_TRAIN, bridge_dsv3_train

EX = ROOT / "examples" / "llama3-405b"
SEARCH = str(EX / "search.yaml")
ACCOUNTING = ("  account_for_embedding_in_pipeline_split: true   # Megatron-Core's names for Meta's layout\n"
              "  account_for_loss_in_pipeline_split: true\n")




def _copy(tmp_path: Path, train: str, framework: str = "megatron") -> str:
    (tmp_path / "train.yaml").write_text(train)
    search = (EX / "search.yaml").read_text()
    assert "framework: megatron" in search
    (tmp_path / "search.yaml").write_text(search.replace("framework: megatron", f"framework: {framework}"))
    return str(tmp_path / "search.yaml")


def test_meta_layout_fits_where_vpp_8_was_refused(tmp_path: Path) -> None:
    est = hp_plan_json("estimate", SEARCH)
    assert est["verdict"] == "fits" and est["strategy"]["vpp"] == 8
    assert 74.0 < est["peak_memory_gib"] < 78.0  # 75.8 GiB on stage 1 (8 layers, 16 micro-batches in flight)
    assert not [d for d in est["diagnostics"] if d["code"] in ("HP407", "HP416", "HP505", "HP422")]
    # The same run without the accounting keys under Megatron (whose default split is even): 126 layers cannot
    # fill 128 chunks, refused as before, and HP416 says which keys would make it split.
    train = (EX / "train.yaml").read_text()
    assert ACCOUNTING in train
    plain = _copy(tmp_path, train.replace(ACCOUNTING, ""), "megatron")
    r = hp_plan("check", plain)
    assert r.returncode == 1
    assert "HP407" in r.stdout and "HP416" in r.stdout and "account_for_embedding_in_pipeline_split" in r.stdout
    # torchtitan's own split counts the embedding and the output as layers (its first/last_stage_less_layers
    # default to 1): the same file without the keys is the same plan (which does not fit there: torchtitan's
    # pipeline keeps the gradients unsharded until the last micro-batch).
    (tmp_path / "tt").mkdir()
    (tmp_path / "tk").mkdir()
    same = hp_plan_json("estimate", _copy(tmp_path / "tt", train.replace(ACCOUNTING, ""), "torchtitan"), code=1)
    keyed = hp_plan_json("estimate", _copy(tmp_path / "tk", train, "torchtitan"), code=1)
    assert same["stage_memory_gib"] == keyed["stage_memory_gib"] and same["step_time_s"] == keyed["step_time_s"]


def test_search_keeps_the_layout_and_finds_the_run(tmp_path: Path) -> None:
    # Searching FSDP and CP: Meta's FSDP with pipeline parallelism is not a plan Megatron-LM runs.
    search = tmp_path / "search.yaml"
    search.write_text((EX / "search.yaml").read_text() + "\nparallelism:\n  fsdp: auto\n  cp: auto\n")
    (tmp_path / "train.yaml").write_text((EX / "train.yaml").read_text())
    doc = hp_plan_json("search", str(search))
    best = doc["best"]
    assert best["strategy"]["vpp"] == 8 and best["verdict"] == "fits"
    # Meta's FSDP 16 with pp 16 is not a plan Megatron-LM runs: the search keeps the layout and finds Megatron's
    # distributed optimizer instead (the stated plan is priced, with HP530 at its dp_shard_size).
    assert best["strategy"]["dp_shard"] == 1
    assert best["strategy"]["optimizer_shard"] == best["strategy"]["dp"] * best["strategy"]["cp"]
    assert "HP530" in [d["code"] for d in hp_plan_json("estimate", SEARCH)["diagnostics"]]


def test_explain_shows_the_embedding_and_loss_chunks() -> None:
    doc = hp_plan_json("explain", SEARCH)
    stages = doc["stages"]
    assert len(stages) == 16 and [s["layers"] for s in stages] == [7] + [8] * 14 + [7]
    first, last = stages[0]["chunks"][0], stages[15]["chunks"][7]
    assert first == {**first, "layers": 0, "embedding": True, "loss": False}
    assert last == {**last, "layers": 0, "embedding": False, "loss": True}
    assert all(c["layers"] == 1 for s in stages for c in s["chunks"] if not (c["embedding"] or c["loss"]))
    # all-warm-up (16 micro-batches = pp): every chunk of stage 1 holds 16
    assert [c["in_flight"] for c in stages[1]["chunks"]] == [16.0] * 8
    text = hp_plan("explain", SEARCH).stdout
    assert "7 (E|1|1|1|1|1|1|1)" in text and "7 (1|1|1|1|1|1|1|L)" in text


def test_a_layout_megatron_refuses_is_an_error_at_its_key(tmp_path: Path) -> None:
    train = (EX / "train.yaml").read_text().replace("pp_interleave_num: 8", "pp_interleave_num: 6")
    r = hp_plan("check", _copy(tmp_path, train, "megatron"))
    assert r.returncode == 1
    line = next(x for x in r.stdout.splitlines() if "HP422" in x)
    assert "train.yaml:" in line and "128 do not split evenly into pp·vpp = 96" in line


def _unaccounted_1f1b_search(tmp_path: Path, extra: str) -> str:
    """The 405B example's search config at vpp 1 (1F1B), with no embedding or loss in the split, plus `extra`:
    written to tmp_path/s.yaml; returns its text."""
    text = (EX / "search.yaml").read_text().replace("./train.yaml", str(EX / "train.yaml"))
    text += ("parallelism: {vpp: 1}\npp_config:\n  pipeline_schedule: 1F1B\n  account_for_embedding_in_pipeline_split: "
             "false\n  account_for_loss_in_pipeline_split: false\n" + extra)
    (tmp_path / "s.yaml").write_text(text)
    return text


def test_first_and_last_stage_counts_in_a_search_config(tmp_path: Path) -> None:
    _unaccounted_1f1b_search(tmp_path, "  num_layers_in_first_pipeline_stage: 6\n"
                                       "  num_layers_in_last_pipeline_stage: 8\n")
    doc = hp_plan_json("explain", str(tmp_path / "s.yaml"))
    assert [s["layers"] for s in doc["stages"]] == [6] + [8] * 15
    assert doc["stages"][0]["chunks"] == [{"chunk": 0, "layers": 6, "embedding": True, "loss": False,
                                           "in_flight": 16.0}]


def test_a_search_keeps_to_the_stage_counts_the_files_state(tmp_path: Path) -> None:
    """Megatron-Core asserts the stated first/last-stage layer counts place the layers over pp: a candidate they do
    not fit is refused (counted), not priced with an even split the run would not get and `apply` could not
    write. 6 + 8 of 126 layers leave 112 for the middle stages: pp 4 and 16 fit, pp 8 does not."""
    text = _unaccounted_1f1b_search(tmp_path, "  num_layers_in_first_pipeline_stage: 6\n"
                                              "  num_layers_in_last_pipeline_stage: 8\n")
    assert "parallelism: {vpp: 1}\n" in text
    (tmp_path / "s.yaml").write_text(text.replace("parallelism: {vpp: 1}\n", "parallelism: {pp: auto, vpp: 1, "
                                                  "micro_batch_num: auto, fsdp: auto, cp: auto}\n"))
    doc = hp_plan_json("search", str(tmp_path / "s.yaml"), "--top", "10")
    pps = {e["strategy"]["pp"] for e in doc["top"]}
    assert pps and pps <= {1, 4, 16}, pps
    assert any("first/last-stage layers" in reason for reason in doc["refused"])


def test_hyperparallel_offsets_in_the_model_section(tmp_path: Path) -> None:
    text = _unaccounted_1f1b_search(tmp_path, "model:\n  offset: [-2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n")
    # ⌊126/16⌋ = 7 per stage: the offsets must place the 14 others; these place none (-2 + 0): refused
    r = hp_plan("check", str(tmp_path / "s.yaml"))
    assert r.returncode == 1
    line = next(x for x in r.stdout.splitlines() if "HP422" in x)
    offset_line = text.splitlines().index("  offset: [-2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]") + 1
    assert line.startswith(f"{tmp_path / 's.yaml'}:{offset_line}:11:") and "place 110 of L_eff = 126" in line
    (tmp_path / "s.yaml").write_text(text.replace("[-2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]",
                                                  "[-1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"))
    doc = hp_plan_json("explain", str(tmp_path / "s.yaml"))
    assert [s["layers"] for s in doc["stages"]] == [6] + [8] * 15
    # Exported as the stages' own layers: a layer layout where Megatron-Core takes one (0.13 on), MindSpeed-LLM's
    # --num-layer-list (no vpp); an older Megatron-Core has no flag for it (HP753)
    args = list(hp_plan_json("export", str(tmp_path / "s.yaml"), "--to", "megatron")["args"])
    listed = parse_layout_text(args[args.index("--pipeline-model-parallel-layout") + 1])
    assert [chunk.count("t") for chunk in listed] == [6] + [8] * 15
    ms = json.loads(hp_plan("export", str(tmp_path / "s.yaml"), "--to", "mindspeed", "--json").stdout)
    assert ms["args"][ms["args"].index("--num-layer-list") + 1] == ",".join(["6"] + ["8"] * 15)
    assert not [d for d in ms["diagnostics"] if d["code"] == "HP753" and d["path"] == "offset"]
    (tmp_path / "s.yaml").write_text((tmp_path / "s.yaml").read_text().replace(
        "  framework: megatron ", "  framework_version: '0.12'\n  framework: megatron "))
    old = json.loads(hp_plan("export", str(tmp_path / "s.yaml"), "--to", "megatron", "--json").stdout)
    assert "--pipeline-model-parallel-layout" not in old["args"]
    assert [d for d in old["diagnostics"] if d["code"] == "HP753" and d["path"] == "offset"]


PLAN_SEARCHED = "parallelism: {pp: auto, vpp: [8], micro_batch_num: auto, fsdp: auto, cp: auto}\n"


def test_search_chooses_the_accounting_where_megatron_offers_it_and_apply_writes_it(tmp_path: Path) -> None:
    """No layout stated, Megatron: vpp 8 over 16 stages exists only with the embedding and loss in the split; the
    search prices the plans with pp > 1 under that layout too, keeps the faster, says so (HP613), and apply
    writes Megatron-Core's keys, which read back as the plan."""
    train = (EX / "train.yaml").read_text().replace(ACCOUNTING, "")
    path = _copy(tmp_path, train, "megatron")
    # pp and vpp searched: the stated vpp 8 needs the accounting (HP407 without it); FSDP and CP searched too
    # (Meta's FSDP with pipeline parallelism is not a plan Megatron-LM runs).
    with open(path, "a") as f:
        f.write(PLAN_SEARCHED)
    doc = hp_plan_json("search", path)
    best = doc["best"]
    assert best["strategy"]["pp"] == 16 and best["strategy"]["vpp"] == 8
    assert best["pipeline_layout"]["embedding_in_split"] and best["pipeline_layout"]["loss_in_split"]
    assert any(d["code"] == "HP613" for d in doc["diagnostics"])
    assert "best: dp 8 · tp 8 · pp 16 · vpp 8 · cp 2 · mbs 1 · sp · rc off · emb+loss in pp split" in \
        hp_plan("search", path).stdout
    # --force: Meta's stated FSDP-with-pp plan (which Megatron-LM cannot run) is priced faster than Megatron's own
    r = hp_plan("apply", path, "--in-place", "--force")
    assert r.returncode == 0, r.stdout + r.stderr
    written = (tmp_path / "train.yaml").read_text()
    assert "account_for_embedding_in_pipeline_split: true" in written
    assert "account_for_loss_in_pipeline_split: true" in written
    text = Path(path).read_text()
    Path(path).write_text(text.replace(PLAN_SEARCHED, ""))
    est = hp_plan_json("estimate", path)  # the written train.yaml alone states the plan, layout included
    assert est["strategy"] == best["strategy"] and est["peak_memory_gib"] == best["peak_memory_gib"]
    assert est["step_time_s"] == best["step_time_s"]
    # torchtitan's own split already counts them: nothing to choose, nothing said
    (tmp_path / "tt2").mkdir()
    tt = hp_plan_json("search", _copy(tmp_path / "tt2", train, "torchtitan"), code=1)  # over the budget there
    assert tt["evaluated"] == 1 and not any(d["code"] == "HP613" for d in tt["diagnostics"])


ON_H100 = ("--devices", "1024", "--device-type", "H100")


def _bridge_dsv3(tmp_path: Path, layout: str, vpp: int | None = 4) -> str:
    return str(bridge_dsv3_train(tmp_path, layout, vpp))


def test_megatrons_layer_layout_is_read_priced_and_exported(tmp_path: Path) -> None:
    """61 layers over 32 chunks: the even split would not divide (HP416); the layout lists each chunk, so the
    stages hold what it lists, nothing is flagged, and the flag comes back out of `export`."""
    path = _bridge_dsv3(tmp_path, '"Et|(tt|)*30mL"')
    doc = hp_plan_json("explain", path, *ON_H100, "--framework", "megatron")
    assert not [d for d in doc["diagnostics"] if d["code"] in ("HP407", "HP416", "HP422", "HP106")]
    chunks = [[c["layers"] for c in s["chunks"]] for s in doc["stages"]]
    assert chunks[0] == [1, 2, 2, 2] and chunks[7] == [2, 2, 2, 0] and all(c == [2] * 4 for c in chunks[1:7])
    assert [s["layers"] for s in doc["stages"]] == [7] + [8] * 6 + [7]  # stage 7: 6 layers and the MTP layer
    # Stated without pp_interleave_num, the layout's 32 chunks over pp 8 are the plan's vpp 4, as in Megatron-LM.
    (tmp_path / "bare").mkdir()
    bare = hp_plan_json("explain", _bridge_dsv3(tmp_path / "bare", '"Et|(tt|)*30mL"', vpp=None), *ON_H100,
                        "--framework", "megatron")
    assert bare["strategy"]["vpp"] == 4 and bare["stages"] == doc["stages"]
    flags = hp_plan("export", path, "--to", "megatron", *ON_H100).stdout
    assert "--pipeline-model-parallel-layout 'Et|" + "tt|" * 30 + "mL'" in flags
    assert "--num-virtual-stages-per-pipeline-rank" not in flags  # Megatron-LM takes vpp from the layout


def test_a_layer_layout_that_does_not_fit_is_said_at_its_value(tmp_path: Path) -> None:
    (tmp_path / "vpp").mkdir()
    path = _bridge_dsv3(tmp_path / "vpp", '"Et|(tt|)*30mL"', vpp=2)
    r = hp_plan("check", path, *ON_H100, "--framework", "megatron")
    text = (tmp_path / "vpp" / "train.yaml").read_text()
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "pipeline_model_parallel_layout" in t)
    assert r.returncode == 1 and f"train.yaml:{line}:35: error HP422" in r.stdout
    assert "4 per stage at pp 8, where the plan runs vpp 2" in r.stdout and "pp_interleave_num 4" in r.stdout
    # Its quick fix is at the vpp key (Megatron-LM takes vpp from the layout): the data says which and to what.
    (hp422,) = [d for d in hp_plan_json("check", path, *ON_H100, "--framework", "megatron", code=1)["diagnostics"]
                if d["code"] == "HP422"]
    assert hp422["data"] == {"set_at": {"path": "accelerator.pp_interleave_num", "value": 4}}
    # A stack that takes no layer layout (HyperParallel, the default) does not refuse it: it runs its own split,
    # which is what it is priced with, and HP533 says so at the layout.
    assert "HP422" not in hp_plan("check", path, *ON_H100).stdout
    est = hp_plan_json("estimate", path, *ON_H100, code=1)  # 1: it does not fit (HP520)
    assert [d for d in est["diagnostics"] if d["code"] == "HP533" and d["path"].endswith("layout")]
    (tmp_path / "bad").mkdir()
    r = hp_plan("check", _bridge_dsv3(tmp_path / "bad", '"Et|(tt|)*30mX"'), *ON_H100)
    assert r.returncode == 1 and "error HP106" in r.stdout and "'X' is not a layer symbol" in r.stdout
    (tmp_path / "huge").mkdir()
    r = hp_plan_bounded("check", _bridge_dsv3(tmp_path / "huge", '"E(t|)*999999999999L"'), *ON_H100)
    assert r.returncode == 1 and "past 65,536 symbols" in r.stdout and "Traceback" not in r.stdout + r.stderr


def test_a_search_config_s_layer_layout_sets_the_vpp_nothing_else_states(tmp_path: Path) -> None:
    """The layout in the search config's pp_config, vpp stated nowhere: the plan is the layout's pp 8 × vpp 4,
    interleaved, as Megatron-LM runs it (not a search over vpp that the layout fits once)."""
    train = Path(_bridge_dsv3(tmp_path, '"Et|(tt|)*30mL"', vpp=None))
    text = train.read_text()
    train.write_text(text.replace("  pipeline_model_parallel_layout: \"Et|(tt|)*30mL\"\n", "")
                     .replace("  pipeline_scheduler: interleaved_1f1b\n", ""))
    search = tmp_path / "search.yaml"
    search.write_text("train_yaml: ./train.yaml\n"
                      "cluster: {num_nodes: 128, cards_per_node: 8, device_type: H100}\n"
                      "parallelism: {dp: 64, fsdp: 1, tp: 2, pp: 8, cp: 1, ep: 64, etp: 1, micro_batch_size: 1}\n"
                      "constraint: {global_batch_size: 4096}\n"
                      "pp_config:\n  pipeline_model_parallel_layout: \"Et|(tt|)*30mL\"\n"
                      "estimator: {framework: megatron}\n")
    doc = hp_plan_json("explain", str(search))
    assert doc["strategy"]["vpp"] == 4 and doc["schedule"].startswith("interleaved")
    assert [[c["layers"] for c in s["chunks"]] for s in doc["stages"]][7] == [2, 2, 2, 0]
    assert not [d for d in doc["diagnostics"] if d["code"] in ("HP416", "HP422")]


def _dsv3_search(folder: Path, vpp: int, version: str = "") -> str:
    """DeepSeek-V3 (61 layers) on 512 H100 at pp 8 × `vpp` with no layout stated: the planner's split is uneven."""
    text = DSV3_TRAIN.read_text()
    assert "  dp_shard_size: 64             # dp = 2048 / (2 x 16) = 64\n" in text
    (folder / "train.yaml").write_text(text.replace("  dp_shard_size: 64             # dp = 2048 / (2 x 16) = 64\n",
                                                    "  dp_shard_size: 1\n"))
    release = f", framework_version: \"{version}\"" if version else ""
    (folder / "search.yaml").write_text(
        "train_yaml: ./train.yaml\ncluster: {num_nodes: 64, cards_per_node: 8, device_type: H100}\n"
        f"parallelism: {{dp: 32, fsdp: 1, tp: 2, pp: 8, cp: 1, ep: 64, etp: 1, vpp: {vpp}, micro_batch_size: 1}}\n"
        "constraint: {global_batch_size: 4096}\n"
        f"pp_config: {{pipeline_schedule: {'interleaved' if vpp > 1 else '1F1B'}, pp_interleave_num: {vpp}}}\n"
        f"estimator: {{framework: megatron{release}}}\n")
    return str(folder / "search.yaml")


@pytest.mark.parametrize("vpp", [1, 4])
def test_an_uneven_priced_split_is_exported_as_the_layout_megatron_runs(tmp_path: Path, vpp: int) -> None:
    """61 layers over 8 (or 32) chunks: Megatron-LM refuses to guess a split, so `export` writes the one the plan
    was priced with as --pipeline-model-parallel-layout, which reads back as the same plan and the same chunks;
    MindSpeed runs it as --num-layer-list without vpp; where the stack has no such flag (MindSpeed with vpp,
    Megatron-Core before 0.13) HP753 says what to set instead."""
    search = _dsv3_search(tmp_path, vpp)
    doc = hp_plan_json("export", search, "--to", "megatron")
    args = list(doc["args"])
    layout = args[args.index("--pipeline-model-parallel-layout") + 1]
    assert "--num-virtual-stages-per-pipeline-rank" not in args
    assert not [d for d in doc["diagnostics"] if d["code"] == "HP753"]
    chunks = [[c["layers"] for c in s["chunks"]] for s in hp_plan_json("explain", search)["stages"]]
    listed = parse_layout_text(layout)
    assert [[listed[c * 8 + i].count("t") for c in range(vpp)] for i in range(8)] == chunks
    assert listed[0].startswith("E") and listed[-1].endswith("mL")
    got = read_megatron(args, 512, 61)
    assert (got.pp, got.vpp) == (8, vpp)
    for target, folder, version in (("mindspeed", "ms", ""), ("megatron", "old", "0.12")):
        (tmp_path / folder).mkdir()
        r = hp_plan("export", _dsv3_search(tmp_path / folder, vpp, version), "--to", target, "--json")
        doc = json.loads(r.stdout)  # exit 1 where that release's plan does not fit; the flags come out all the same
        assert "--pipeline-model-parallel-layout" not in doc["args"]
        said = [d for d in doc["diagnostics"] if d["code"] == "HP753" and "61 layers do not split evenly" in d["message"]]
        if target == "mindspeed" and vpp == 1:  # MindSpeed-LLM's --num-layer-list runs the priced stages
            args = list(doc["args"])
            listed = [int(n) for n in args[args.index("--num-layer-list") + 1].split(",")]
            assert listed == [sum(c) for c in chunks] and not said
            assert "--num-layer-list" in accepted_flags("mindspeed")
        else:
            assert said and ("--noop-layers" in said[0]["message"]) == (target == "mindspeed")
            assert "--num-layer-list" not in doc["args"]


def test_a_stack_without_a_layer_layout_is_told_so_and_priced_with_its_own_split(tmp_path: Path) -> None:
    """MindSpeed's Megatron-Core (0.12) has no --pipeline-model-parallel-layout: HP533 at the layout, and the
    stages are the stack's own split (61 layers over 32 chunks: the extra layers on chunks 1, 2, …)."""
    path = _bridge_dsv3(tmp_path, '"Et|(tt|)*30mL"')
    doc = hp_plan_json("explain", path, *ON_H100, "--framework", "mindspeed")
    said = [d for d in doc["diagnostics"] if d["code"] == "HP533" and "layer layout" in d["message"]]
    assert said and said[0]["path"] == "accelerator.pipeline_model_parallel_layout"
    chunks = [[c["layers"] for c in s["chunks"]] for s in doc["stages"]]
    assert chunks[0] == [1, 2, 2, 2] and chunks[1] == [2, 2, 2, 2] and chunks[7] == [2, 2, 2, 1]  # the layout: [2, 2, 2, 0]


def test_a_plan_priced_with_torchtitans_split_exports_that_split_to_megatron(tmp_path: Path) -> None:
    """torchtitan counts the embedding and the output as layers of its split; exported to Megatron-LM without a
    layout the plan would run Megatron's even split instead of the priced one. Where the count divides, the
    accounting flags reproduce it (Llama 3.1 405B: 126 + 2 over 16 × 8 chunks); where it does not (Llama 3 70B:
    80 + 2 over 4 × 5), the priced chunks are written as the layer layout, and MindSpeed, which has neither for
    such a split, gets HP753 naming the priced stages."""
    train = (EX / "train.yaml").read_text()
    search = _copy(tmp_path, train.replace(ACCOUNTING, ""), "torchtitan")
    args = hp_plan_json("export", search, "--to", "megatron", code=1)["args"]  # 1: it does not fit torchtitan
    assert "--account-for-embedding-in-pipeline-split" in args and "--account-for-loss-in-pipeline-split" in args
    assert "--pipeline-model-parallel-layout" not in args
    (tmp_path / "mg").mkdir()
    as_megatron = hp_plan_json("explain", _copy(tmp_path / "mg", train, "megatron"))
    as_torchtitan = hp_plan_json("explain", search, code=1)
    assert [s["layers"] for s in as_megatron["stages"]] == [s["layers"] for s in as_torchtitan["stages"]]
    (tmp_path / "70b").mkdir()
    shutil.copy(ROOT / "examples" / "llama3-70b" / "train.yaml", tmp_path / "70b" / "train.yaml")
    small = tmp_path / "70b" / "search.yaml"
    small.write_text("train_yaml: ./train.yaml\ncluster: {num_nodes: 128, cards_per_node: 8, device_type: H100}\n"
                     "estimator: {framework: torchtitan}\n")
    chunks = [[c["layers"] for c in s["chunks"]] for s in hp_plan_json("explain", str(small))["stages"]]
    assert chunks[1][0] == 5 and chunks[3][4] == 3  # the remainder on the first chunks, the output on the last
    doc = hp_plan_json("export", str(small), "--to", "megatron")
    listed = parse_layout_text(doc["args"][doc["args"].index("--pipeline-model-parallel-layout") + 1])
    assert [[listed[c * 4 + i].count("t") for c in range(5)] for i in range(4)] == chunks
    ms = hp_plan_json("export", str(small), "--to", "mindspeed")
    assert [d for d in ms["diagnostics"] if d["code"] == "HP753" and "torchtitan's split" in d["message"]
            and "[20, 21, 20, 19] layers per stage" in d["message"]]
