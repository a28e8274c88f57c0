"""`hp-plan explain`, `compare`, `export` and `--tokens` end to end, in a subprocess (docs/formats.md §7)."""

from __future__ import annotations

import json
import shlex
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from engine.explain.export import read_megatron, read_torchtitan
from engine.specs import RecomputePlan, Strategy
from tests.support.cli import ROOT
from tests.support.cli import hp_plan_script as hp_plan
from tests.support.configs import DSV3_A3

EX = ROOT / "examples" / "explain"
ONE, INTER = str(EX / "1f1b.yaml"), str(EX / "interleaved.yaml")
LLAMA = str(ROOT / "examples" / "llama3-70b" / "search.yaml")
KINDS = {"forward", "backward", "recompute", "comm", "bubble", "optimizer"}
SVG = "{http://www.w3.org/2000/svg}"


def _json(*args: str, code: int | None = 0) -> dict[str, Any]:
    r = hp_plan(*args, "--json")
    assert "Traceback" not in r.stderr + r.stdout
    if code is not None:
        assert r.returncode == code, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def explained() -> dict[str, Any]:
    return _json("explain", INTER)


def test_explain_json_keeps_the_contract_keys(explained: dict[str, Any]) -> None:
    for key in ("strategy", "framework", "step_time_s", "stages", "bound", "timeline", "diagnostics"):
        assert key in explained
    assert explained["framework"] == "megatron"  # the example states the stack that pipelines
    assert len(explained["stages"]) == explained["strategy"]["pp"] == 4
    for row in explained["stages"]:
        assert set(row) >= {"stage", "layers", "memory_gib", "time_s"}
        assert set(row["memory_gib"]) == {"parameters", "gradients", "optimizer", "activations", "buffers", "reserved"}
        assert set(row["time_s"]) >= {"forward", "backward", "recompute", "comm", "idle"}
    assert sum(r["layers"] for r in explained["stages"]) == 32
    for iv in explained["timeline"]:
        assert set(iv) == {"stage", "kind", "micro_batch", "chunk", "start_s", "end_s"}
        assert iv["kind"] in KINDS
    assert explained["bound"] in {"compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "dp_comm", "pp_bubble",
                                  "pp_p2p", "optimizer", "memory"}


def test_explain_timeline_ends_at_the_estimates_step_time(explained: dict[str, Any]) -> None:
    est = _json("estimate", INTER)
    assert explained["step_time_s"] == est["step_time_s"]
    assert max(iv["end_s"] for iv in explained["timeline"]) == est["step_time_s"]
    fwd = [iv for iv in explained["timeline"] if iv["kind"] == "forward"]
    assert len(fwd) == 4 * 2 * 8  # stages × chunks × micro-batches


def test_explain_text_shows_every_stage_and_the_bound() -> None:
    r = hp_plan("explain", ONE)
    assert r.returncode == 0, r.stdout + r.stderr
    for i in range(4):
        assert f"stage  {i} |" in r.stdout
    assert "Bound: " in r.stdout and "1F1B" in r.stdout


def test_explain_svg_is_well_formed_and_shows_every_stage(tmp_path: Path) -> None:
    out = tmp_path / "plan.svg"
    r = hp_plan("explain", INTER, "--svg", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    for i in range(4):
        assert texts.count(f"stage {i}") == 2  # a lane and a memory bar
    classes = [r.get("class") for r in root.iter(f"{SVG}rect")]
    assert classes.count("forward") == 4 * 2 * 8 and classes.count("backward") == 4 * 2 * 8
    for label in ("forward", "backward", "bubble", "GiB per device", "time in the step (s)", "budget"):
        assert label in texts
    assert any(c == "mem-activations" for c in classes)


def test_explain_of_a_plan_over_budget_says_memory_and_exits_1() -> None:
    doc = _json("explain", ONE, "--memory-gb", "20", code=1)
    assert doc["bound"] == "memory"
    assert any(d["code"] == "HP520" for d in doc["diagnostics"])
    assert doc["timeline"]


def test_explain_bad_input_is_one_json_document_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("parallelism: [\n")
    doc = _json("explain", str(bad), code=1)
    assert doc["stages"] == [] and doc["diagnostics"]


def test_compare_speedup_is_the_ratio_of_the_two_estimates() -> None:
    doc = _json("compare", ONE, INTER)
    a, b = _json("estimate", ONE), _json("estimate", INTER)
    assert doc["a"]["tokens_per_s"] == a["tokens_per_s"] and doc["b"]["tokens_per_s"] == b["tokens_per_s"]
    assert doc["speedup"] == pytest.approx(b["tokens_per_s"] / a["tokens_per_s"], rel=1e-12)
    low, high = doc["error_band"]
    g = (a["error_band"]["order"] ** 2 + b["error_band"]["order"] ** 2) ** 0.5  # the two plans' band, combined
    assert (low, high) == pytest.approx((1 / (1 + g), 1 + g)) and 0 < g < 0.5
    assert doc["within_error"] == (low <= doc["speedup"] <= high)
    assert doc["within_error"] is False  # interleaving halves a 0.3 s bubble in a 1.3 s step
    terms = [d["term"] for d in doc["differences"]]
    assert terms[0] == "time_breakdown_s.pp_bubble"
    assert "memory_breakdown_gib.activations" in terms
    for d in doc["differences"]:
        assert set(d) >= {"term", "a", "b"}


def test_compare_a_plan_with_itself_is_inside_the_error_band() -> None:
    doc = _json("compare", ONE, ONE)
    assert doc["speedup"] == 1.0 and doc["within_error"] is True and doc["differences"] == []
    assert any(d["code"] == "HP752" for d in doc["diagnostics"])


def test_compare_best_prices_the_stated_plan_against_the_search() -> None:
    doc = _json("compare", LLAMA, "--best")
    stated = _json("estimate", str(ROOT / "examples" / "llama3-70b" / "train.yaml"), "--devices", "1024",
                   "--device-type", "H100", "--memory-gb", "76", code=None)
    assert doc["a"]["strategy"]["tp"] == stated["strategy"]["tp"] == 8
    best = _json("search", LLAMA, "--top", "1")["best"]
    assert doc["b"]["strategy"] == best["strategy"]
    assert doc["speedup"] == pytest.approx(best["tokens_per_s"] / doc["a"]["tokens_per_s"], rel=1e-12)


def test_compare_best_states_the_plan_hp_plan_search_compares_with() -> None:
    """`compare --best` prices the stated plan by the one rule (engine.search.stated), so its "a" column is
    the plan HP610/HP611 of `hp-plan search` and the server's hover compare with."""
    from engine.check import check_file
    from engine.search.stated import stated_estimate

    config = check_file(LLAMA).config
    assert config is not None
    expected = stated_estimate(config)
    assert expected is not None
    a = _json("compare", LLAMA, "--best")["a"]
    assert a["strategy"] == expected.strategy.to_json()
    assert a["tokens_per_s"] == pytest.approx(expected.tokens_per_s, rel=1e-12)
    assert a["peak_memory_gib"] == pytest.approx(expected.peak_memory_gib, rel=1e-12)


def test_compare_needs_exactly_one_of_file_b_and_best() -> None:
    assert hp_plan("compare", ONE).returncode == 2
    assert hp_plan("compare", ONE, INTER, "--best").returncode == 2


def test_compare_names_file_b_on_file_b_findings(tmp_path: Path) -> None:
    """A finding in FILE_B is said at FILE_B's line, in the text and in --json (`file`); it had been printed under
    FILE_A's name at a line FILE_A does not have."""
    b = tmp_path / "b.yaml"
    b.write_text(Path(ONE).read_text() + "\n\nunknown_top_key: 1\n")
    line = len(b.read_text().splitlines())
    r = hp_plan("compare", ONE, str(b))
    assert f"{b}:{line}:1: error HP101" in r.stdout and f"{ONE}:{line}" not in r.stdout, r.stdout
    doc = _json("compare", ONE, str(b), code=None)
    assert [d.get("file") for d in doc["diagnostics"] if d["code"] == "HP101"] == [str(b)]


def test_compare_refuses_different_models(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(Path(ONE).read_text().replace("num_hidden_layers: 32", "num_hidden_layers: 16"))
    doc = _json("compare", ONE, str(other), code=1)
    assert any(d["code"] == "HP754" for d in doc["diagnostics"])


def _strategy(doc: dict[str, Any]) -> Strategy:
    s = dict(doc)
    s.pop("dp_replicate")
    s.pop("global_batch_size")
    s["recompute"] = RecomputePlan(mode=s["recompute"])
    return Strategy(**s)


@pytest.mark.parametrize("target", ["megatron", "mindspeed", "torchtitan"])
@pytest.mark.parametrize("file", [ONE, INTER, LLAMA])
def test_export_round_trips_the_strategy(target: str, file: str) -> None:
    doc = _json("export", file, "--to", target)
    want = _strategy(doc["strategy"])
    if target == "torchtitan":
        tomllib.loads(doc["text"])
        got = read_torchtitan(doc["text"], 80 if file == LLAMA else 32)
        want = Strategy(**{**{f: getattr(want, f) for f in want.__dataclass_fields__}, "optimizer_shard": 1})
    else:
        flags = doc["text"].split("\n\n")[0]  # MindSpeed's FSDP2 route appends its fsdp2_config.yaml
        argv = [a for line in flags.splitlines() if not line.startswith("#")
                for a in shlex.split(line.rstrip("\\"))]
        assert tuple(argv) == tuple(doc["args"])
        got = read_megatron(argv, want.world_size, 80 if file == LLAMA else 32)
        if "--use-torch-fsdp2" in argv:
            # MindSpeed's FSDP2 route states recompute in its fsdp2_config.yaml (after the flags), not in flags
            assert ("recompute_modules:" in doc["text"]) == (want.recompute.mode != "off")
            got = Strategy(**{**{f: getattr(got, f) for f in got.__dataclass_fields__}, "recompute": want.recompute})
        if want.dp_shard not in (1, want.dp * want.cp):
            # HSDP (FSDP over part of dp·cp): Megatron's and MindSpeed's FSDP shard over the whole group, so the
            # export says it cannot run the plan as priced (HP753) and writes the whole-group FSDP it can run
            assert any(d["code"] == "HP753" and d["path"] == "dp_shard" for d in doc["diagnostics"])
            want = Strategy(**{**{f: getattr(want, f) for f in want.__dataclass_fields__},
                               "dp_shard": want.dp * want.cp})
    assert got == want


def test_export_names_what_megatron_cannot_express() -> None:
    doc = _json("export", ONE, "--to", "megatron")
    assert "--tensor-model-parallel-size" in doc["args"] and "--sequence-parallel" in doc["args"]
    assert doc["args"][doc["args"].index("--pipeline-model-parallel-size") + 1] == "4"
    tt = _json("export", LLAMA, "--to", "torchtitan")
    assert 'fsdp_reshard_after_forward = "always"' in tt["text"]


@pytest.mark.parametrize("command", ["estimate", "explain"])
def test_tokens_gives_days_and_device_hours(command: str) -> None:
    doc = _json(command, ONE, "--tokens", "15e12")
    est = doc if command == "estimate" else _json("estimate", ONE)
    ttt = doc["time_to_train"]
    seconds = 15e12 / est["tokens_per_s"]
    assert ttt["days"] == pytest.approx(seconds / 86400)
    assert ttt["device_hours"] == pytest.approx(seconds / 3600 * 16)
    assert ttt["steps"] == -(-15e12 // (16 * 8192))


def test_tokens_on_search_and_compare() -> None:
    doc = _json("search", ONE, "--tokens", "1.5T")
    assert doc["best"]["time_to_train"]["tokens"] == 1.5e12
    assert doc["top"][0]["time_to_train"]["days"] == pytest.approx(1.5e12 / doc["top"][0]["tokens_per_s"] / 86400)
    cmp = _json("compare", ONE, INTER, "--tokens", "300B")
    assert cmp["time_to_train"]["b"]["days"] < cmp["time_to_train"]["a"]["days"]


@pytest.mark.parametrize("tokens", ["lots", "0.5", "1e308"])
def test_tokens_rejects_nonsense(tokens: str) -> None:
    """Half a token had read as one step of microseconds; 1e308 printed 300-digit step and day counts."""
    r = hp_plan("estimate", ONE, "--tokens", tokens)
    assert r.returncode == 2 and "token count" in r.stderr


def test_a_budget_of_one_step_takes_one_step_time() -> None:
    doc = _json("estimate", ONE, "--tokens", "1")
    assert doc["time_to_train"]["steps"] == 1 and doc["time_to_train"]["seconds"] == doc["step_time_s"]


def test_export_of_a_plan_over_budget_prints_it_and_exits_1() -> None:
    doc = _json("export", ONE, "--to", "megatron", "--memory-gb", "20", code=1)
    assert doc["args"] and any(d["code"] == "HP520" for d in doc["diagnostics"])


MINDSPEED_SEARCH = ("parallelism: {dp: 32, tp: 2, pp: 8, cp: 1, ep: 32, etp: 1, vpp: 1, micro_batch_size: 1, "
                    "micro_batch_num: 120,\n              sequence_parallel: true}")


@pytest.mark.parametrize("schedule", ["dualpipev", "interleaved"])
def test_explain_and_export_of_a_searched_best_carry_the_layout_the_search_chose(tmp_path: Path,
                                                                                  schedule: str) -> None:
    """DeepSeek-V3's best plan on MindSpeed-LLM pads its 61 layers with 61,62,63 (engine.search.passes), under
    DualPipeV and under an interleaved split. explain prices those chunks (each stage's memory as the file stating the
    padding prices it) and export writes the padding: both used the files' own split, so export printed a plan
    MindSpeed refuses and explain rescaled a timeline of another split."""
    searched = MINDSPEED_SEARCH if schedule == "dualpipev" else MINDSPEED_SEARCH.replace(
        "pp: 8, cp: 1, ep: 32, etp: 1, vpp: 1", "pp: [8, 16], cp: 1, ep: 32, etp: 1, vpp: [2, 3, 4]")
    text = DSV3_A3.replace("dualpipev NOOP", schedule).replace("FRAMEWORK", "mindspeed").replace(MINDSPEED_SEARCH,
                                                                                              searched)
    (tmp_path / "search.yaml").write_text(text)
    explained = _json("explain", str(tmp_path / "search.yaml"))
    s = explained["strategy"]
    pinned = text.replace(searched, MINDSPEED_SEARCH.replace("vpp: 1", f"vpp: {s['vpp']}")).replace(
        f"{schedule}}}", f'{schedule}, noop_layers: "61,62,63"}}')
    (tmp_path / "stated.yaml").write_text(pinned)
    stated = _json("estimate", str(tmp_path / "stated.yaml"))
    assert stated["strategy"] == s and stated["step_time_s"] == explained["step_time_s"]
    assert [r["total_gib"] for r in explained["stages"]] == pytest.approx(stated["stage_memory_gib"], rel=1e-9)
    assert sum(r["layers"] for r in explained["stages"]) == 61 + 1  # the MTP layer; no-op layers build nothing
    if schedule == "interleaved":
        assert not [d for d in explained["diagnostics"] if d["code"] == "HP750"]
    text_out = hp_plan("explain", str(tmp_path / "search.yaml")).stdout
    assert "noop layers 61,62,63 on mindspeed" in text_out
    exported = _json("export", str(tmp_path / "search.yaml"), "--to", "mindspeed")
    assert exported["strategy"] == s
    flags = " ".join(exported["args"])
    assert "--num-layers 64" in flags and "--noop-layers 61,62,63" in flags


CAL = ROOT / "benchmarks" / "calibration_runs"


def _flag_args(doc: dict[str, Any]) -> list[str]:
    return [str(a) for a in doc["args"]]


def test_export_writes_the_fp8_weights_the_price_gathered_in_fp8() -> None:
    """`estimator.fp8_param_gather` halves the weights' bytes in the price (engine.cost.fp8), so Megatron's
    export carries `--fp8-param-gather` beside the recipe; torchtitan's fragment writes no FP8 and says so."""
    file = str(CAL / "llama3-8b-8xb200-mbridge-fp8" / "search.yaml")
    args = _flag_args(_json("export", file, "--to", "megatron"))
    assert args[args.index("--fp8-recipe") + 1] == "tensorwise" and "--fp8-param-gather" in args
    tt = _json("export", file, "--to", "torchtitan")
    assert any(d["code"] == "HP753" and d["path"] == "fp8" for d in tt["diagnostics"])


def test_export_writes_the_moe_routing_the_price_assumed(tmp_path: Path) -> None:
    """A stated capacity factor is priced as the token-drop path padded to capacity, a forced balance as every
    expert at the mean load: both move the busiest rank's work, so both are exported (or named, HP753)."""
    src = CAL / "qwen3-235b-256xgb200-mbridge"
    dropped = _json("export", str(src / "search.yaml"), "--to", "megatron")
    args = _flag_args(dropped)
    assert args[args.index("--moe-expert-capacity-factor") + 1] == "1"
    assert "--moe-pad-expert-input-to-capacity" in args and "--moe-router-force-load-balancing" not in args
    # The same run, dropless and force-balanced (the capacity factor taken out of its train.yaml)
    (tmp_path / "train.yaml").write_text("".join(
        line for line in (src / "train.yaml").read_text().splitlines(keepends=True)
        if "capacity_factor" not in line))
    search = (src / "search.yaml").read_text().replace("train_yaml: ./train.yaml",
                                                       "train_yaml: ./train.yaml\nmoe_router_force_load_balancing: true")
    (tmp_path / "search.yaml").write_text(search)
    forced = _json("export", str(tmp_path / "search.yaml"), "--to", "megatron")
    args = _flag_args(forced)
    assert "--moe-router-force-load-balancing" in args and "--moe-expert-capacity-factor" not in args
    ms = _json("export", str(tmp_path / "search.yaml"), "--to", "mindspeed")
    assert any(d["code"] == "HP753" and d["path"] == "moe_router_force_load_balancing" for d in ms["diagnostics"])
    tt = _json("export", str(tmp_path / "search.yaml"), "--to", "torchtitan")
    assert any(d["code"] == "HP753" and d["path"] == "moe_router_force_load_balancing" for d in tt["diagnostics"])


def test_export_names_the_precision_and_compile_it_cannot_write(tmp_path: Path) -> None:
    """What the price assumed and no target flag sets is named (HP753), never dropped: torchtitan's compile (its keys
    changed by release), 16-bit Adam moments on torchtitan, and training without fp32 master weights anywhere."""
    src = CAL / "llama31-8b-8xh100-96g-torchtitan-compile"
    for name in ("search.yaml", "train.yaml"):
        (tmp_path / name).write_text((src / name).read_text())
    codes = {d["path"] for d in _json("export", str(tmp_path / "search.yaml"), "--to", "torchtitan")["diagnostics"]
             if d["code"] == "HP753"}
    assert "compile" in codes and "master_weights" not in codes
    text = (tmp_path / "search.yaml").read_text().replace(
        "  compile: true", "  compile: true\n  master_weights: false\n  optimizer_state_dtype: bfloat16")
    (tmp_path / "search.yaml").write_text(text)
    for target, want in (("torchtitan", {"compile", "master_weights", "optimizer_state_dtype"}),
                         ("megatron", {"master_weights"})):
        doc = _json("export", str(tmp_path / "search.yaml"), "--to", target)
        assert want <= {d["path"] for d in doc["diagnostics"] if d["code"] == "HP753"}, (target, doc["diagnostics"])
    assert "--use-precision-aware-optimizer" in _flag_args(_json("export", str(tmp_path / "search.yaml"), "--to",
                                                                 "megatron"))


TRAIN_1024 = """\
model:
  name: llama3-70b
  pretrained_model_name_or_path: meta-llama/Llama-3.1-70B
  torch_dtype: bfloat16
training: {global_batch_size: 512, micro_batch_size: 1}
accelerator: {tp_size: 8, pp_size: 4, cp_size: 1, ep_size: 1, sequence_parallel: true}
fsdp_config: {dp_shard_size: 32}
activation_checkpoint: {mode: full}
dataset: {data_transform: {max_seq_len: 8192}}
"""


def test_best_sets_the_stated_strategys_errors_aside_as_apply_does(tmp_path: Path) -> None:
    """A train.yaml stating its 1,024-GPU plan, asked about 64 H100: the stated FSDP shard 32 cannot divide dp 2
    (HP413), which apply repairs by writing the searched plan. explain --best and export --best price and print that
    same plan (they refused on HP413); without --best both still refuse the stated plan."""
    path = tmp_path / "train.yaml"
    path.write_text(TRAIN_1024)
    cluster = ("--devices", "64", "--device-type", "H100")
    applied = _json("apply", str(path), *cluster, "--dry-run")["strategy"]
    explained = _json("explain", str(path), "--best", *cluster)
    assert explained["strategy"]["tp"] == applied["tp"] and explained["strategy"]["dp"] == applied["dp"]
    assert any(d["code"] == "HP413" for d in explained["diagnostics"])  # said, not blocking
    assert explained["set_aside"] == ["HP413"]
    exported = _json("export", str(path), "--best", "--to", "megatron", *cluster)
    assert exported["set_aside"] == ["HP413"]
    said = hp_plan("export", str(path), "--best", "--to", "megatron", *cluster)
    assert said.returncode == 0 and "errors (HP413) are set aside: --best prices the searched plan" in said.stderr
    assert f"--tensor-model-parallel-size {applied['tp']}" in exported["text"] or applied["tp"] == 1
    for command in (("explain",), ("export", "--to", "megatron")):
        stated = _json(*command, str(path), *cluster, code=1)
        assert any(d["code"] == "HP413" for d in stated["diagnostics"]) and stated["strategy"] is None
    # nothing to search without a model: --best explains nothing either
    path.write_text(TRAIN_1024.replace("Llama-3.1-70B", "no-such/model-anywhere").replace("name: llama3-70b\n", ""))
    assert _json("explain", str(path), "--best", *cluster, code=None)["strategy"] is None
