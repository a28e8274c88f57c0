"""DualPipeV ([DUALPIPE], MindSpeed-LLM `--schedules-method dualpipev`, [MS-DUALPIPEV]) as the user states it:
priced through `hp-plan estimate` (a smaller bubble than 1F1B, the all-to-alls and P2P hidden under the paired
forward/backward, the output layer on rank 0), refused where the stack cannot run it, exported where it can."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.cost.dualpipev import dualpipev_bubble, dualpipev_in_flight
from tests.support.cli import ROOT, hp_plan, hp_plan_json
from tests.support.configs import DSV3_A3

RUN = ROOT / "benchmarks" / "calibration_runs" / "ascend-qwen3-30b-a3b-16xa2-mindspeed"  # 48 layers, pp 2, ep 8


def _config(tmp_path: Path, schedule: str, overlap: bool, extra: str = "", framework: str = "mindspeed") -> str:
    (tmp_path / "train.yaml").write_text((RUN / "train.yaml").read_text())
    text = (RUN / "search.yaml").read_text().replace("pipeline_schedule: 1F1B", f"pipeline_schedule: {schedule}")
    text = text.replace("framework: mindspeed", f"framework: {framework}")
    path = tmp_path / f"{schedule}-{overlap}-{framework}.yaml"
    path.write_text(text + f"moe_a2a_overlap: {str(overlap).lower()}\n" + extra)
    return str(path)




def _codes(doc: dict[str, Any]) -> list[str]:
    return [d["code"] for d in doc["diagnostics"]]


def test_dualpipev_prices_a_smaller_bubble_and_hides_the_all_to_all(tmp_path: Path) -> None:
    one = hp_plan_json("estimate", _config(tmp_path, "1F1B", True))
    dual = hp_plan_json("estimate", _config(tmp_path, "dualpipev", True))
    assert dual["strategy"]["pipeline_schedule"] == "dualpipev" and "HP530" not in _codes(dual)
    t1, t2 = one["time_breakdown_s"], dual["time_breakdown_s"]
    assert 0 < t2["pp_bubble"] < t1["pp_bubble"]
    # cross-micro-batch (--moe-fb-overlap) never exposes more than the chunked overlap (here, with the experts at
    # MindSpeed's fitted share, both hide the all-to-alls and leave the same synchronous part)
    assert t2["ep_comm"] <= t1["ep_comm"]
    assert t2["pp_p2p"] == 0.0 < t1["pp_p2p"]  # the sends hide with the all-to-alls
    assert dual["step_time_s"] < one["step_time_s"]
    # The output layer and loss move to rank 0 (the V ends there): its memory rises, the last rank's falls.
    assert dual["stage_memory_gib"][0] > one["stage_memory_gib"][0]
    assert dual["stage_memory_gib"][1] < one["stage_memory_gib"][1]


def test_without_the_overlap_the_all_to_all_stays_exposed(tmp_path: Path) -> None:
    one = hp_plan_json("estimate", _config(tmp_path, "1F1B", False))
    dual = hp_plan_json("estimate", _config(tmp_path, "dualpipev", False))
    assert dual["time_breakdown_s"]["ep_comm"] == pytest.approx(one["time_breakdown_s"]["ep_comm"])
    assert dual["time_breakdown_s"]["pp_p2p"] == pytest.approx(2 * one["time_breakdown_s"]["pp_p2p"])


def test_stacks_without_dualpipev_refuse_it(tmp_path: Path) -> None:
    for framework in ("megatron", "torchtitan", "hyperparallel"):
        doc = hp_plan_json("estimate", _config(tmp_path, "dualpipev", True, framework=framework))
        assert [d for d in doc["diagnostics"] if d["code"] == "HP530" and "dualpipev" in d["message"]]


def test_mindspeed_refuses_dualpipev_with_context_parallelism(tmp_path: Path) -> None:
    path = _config(tmp_path, "dualpipev", True)
    text = Path(path).read_text().replace("cp: 1", "cp: 2").replace("dp: 8", "dp: 4").replace(
        "micro_batch_num: 32", "micro_batch_num: 64")
    Path(path).write_text(text)
    doc = hp_plan_json("estimate", path)
    assert [d for d in doc["diagnostics"] if d["code"] == "HP530" and "context parallelism" in d["message"]]


def test_dualpipev_needs_2pp_micro_batches(tmp_path: Path) -> None:
    path = _config(tmp_path, "dualpipev", True)
    text = Path(path).read_text().replace("global_batch_size: 256", "global_batch_size: 24")
    Path(path).write_text(text.replace("micro_batch_num: 32", "micro_batch_num: 3"))
    doc = hp_plan_json("estimate", path, code=1)
    assert [d for d in doc["diagnostics"] if d["code"] == "HP506" and "2·pp = 4" in d["message"]]


def test_export_writes_mindspeeds_flags_and_warns_elsewhere(tmp_path: Path) -> None:
    ms = hp_plan_json("export", _config(tmp_path, "dualpipev", True), "--to", "mindspeed")
    assert "--schedules-method dualpipev" in ms["text"] and "--moe-fb-overlap" in ms["text"]
    assert "--moe-alltoall-overlap-comm" not in ms["text"]
    flags = set((ROOT / "engine" / "catalog" / "data" / "mindspeed_flags.txt").read_text().split())
    assert {"--schedules-method", "--moe-fb-overlap"} <= flags
    meg = hp_plan_json("export", _config(tmp_path, "dualpipev", True), "--to", "megatron")
    assert [d for d in meg["diagnostics"] if d["code"] == "HP753" and "DualPipeV" in d["message"]]
    assert "--schedules-method" not in meg["text"]


def test_bubble_formula_for_equal_ranks() -> None:
    # p = 4 equal ranks: F = 1, B = 2, W = 1 per rank, F&B = F + B; MindSpeed's (PP − 1)(F&B + B − W) − F per
    # stage of half a rank = 3 × (1.5 + 1 − 0.5) − 0.5 = 5.5, against 1F1B's (p − 1)(F + B) = 9.
    p = 4
    st, f, b, w = (np.full((1, p), x) for x in (3.0, 1.0, 2.0, 1.0))
    assert dualpipev_bubble(st, f, b, w)[0] == pytest.approx(5.5)


def test_each_rank_holds_p_plus_half_micro_batches() -> None:
    mf = np.array([[4.0, 3.0, 2.0, 1.0, 0.0]])
    out = dualpipev_in_flight(np.array([True]), np.array([16.0]), mf)
    assert out.tolist() == [[4.5, 4.5, 4.5, 4.5, 0.0]]


def test_search_prices_a_stated_dualpipev_as_estimate_does(tmp_path: Path) -> None:
    path = _config(tmp_path, "dualpipev", True)
    text = Path(path).read_text().replace("  pp: 2", "  pp: [1, 2]").replace("  dp: 8", "  dp: auto")
    Path(path).write_text(text.replace("  micro_batch_num: 32", "  micro_batch_num: auto"))
    found = hp_plan_json("search", path)
    plans = {e["strategy"]["pp"]: e for e in found["top"]}
    assert plans[2]["strategy"]["pipeline_schedule"] == "dualpipev"
    assert plans[1]["strategy"]["pipeline_schedule"] == "1F1B"  # no pipeline, nothing to schedule
    stated = hp_plan_json("estimate", _config(tmp_path, "dualpipev", True))
    assert plans[2]["step_time_s"] == stated["step_time_s"]  # the same price, to the last digit


def test_search_counts_the_stack_refusing_dualpipev(tmp_path: Path) -> None:
    path = _config(tmp_path, "dualpipev", True, framework="megatron")
    text = Path(path).read_text().replace("  pp: 2", "  pp: [1, 2]").replace("  dp: 8", "  dp: auto")
    Path(path).write_text(text.replace("  micro_batch_num: 32", "  micro_batch_num: auto"))
    found = hp_plan_json("search", path)
    assert {e["strategy"]["pp"] for e in found["top"]} == {1}
    assert found["refused"] == {"pipeline parallelism under DualPipeV (the stack does not run that schedule)": 1}


def test_explain_names_the_schedule_and_puts_the_loss_on_rank_0(tmp_path: Path) -> None:
    doc = hp_plan_json("explain", _config(tmp_path, "dualpipev", True))
    assert doc["schedule"].startswith("DualPipeV")
    assert [[c["loss"] for c in st["chunks"]] for st in doc["stages"]] == [[True], [False]]




def _dsv3(tmp_path: Path, noop: str, framework: str = "mindspeed", schedule: str = "dualpipev") -> str:
    """MindSpeed-LLM's DeepSeek-V3 script on 512 A3 dies (pretrain_deepseek3_671b_4k_A3_ptd.sh: TP 2, PP 8, EP 16
    over TP, DualPipeV with --moe-fb-overlap, --noop-layers 61,62,63)."""
    path = tmp_path / f"dsv3-{framework}-{schedule}-{len(noop)}.yaml"
    path.write_text(DSV3_A3.replace("dualpipev NOOP", schedule + noop).replace("FRAMEWORK", framework))
    return str(path)


def test_deepseek_v3_runs_dualpipev_with_the_no_op_layers_mindspeed_pads_it_with(tmp_path: Path) -> None:
    """61 layers never split into 2·pp equal stages; MindSpeed pads them with identity layers (MS-NOOP), and the V
    puts them on rank 0, beside the embedding, the output layer and the MTP layer."""
    bare = hp_plan_json("estimate", _dsv3(tmp_path, ""), code=1)
    (hp505,) = [d for d in bare["diagnostics"] if d["code"] == "HP505"]
    assert "61 layers is not a multiple" in hp505["message"] and "noop_layers" in hp505["message"]
    doc = hp_plan_json("estimate", _dsv3(tmp_path, ', noop_layers: "61,62,63"'))
    assert doc["step_time_s"] > 0 and not [d for d in doc["diagnostics"] if d["severity"] == "error"]
    as_list = hp_plan_json("estimate", _dsv3(tmp_path, ", noop_layers: [63, 61, 62]"))
    assert as_list["step_time_s"] == doc["step_time_s"]
    # rank 0 builds 5 decoder layers (+ the MTP layer), the others 8 each; under 1F1B the last stage pads
    dual = hp_plan_json("explain", _dsv3(tmp_path, ', noop_layers: "61,62,63"'))
    assert [s["layers"] for s in dual["stages"]] == [6] + [8] * 7
    one = hp_plan_json("explain", _dsv3(tmp_path, ', noop_layers: "61,62,63"', schedule="1F1B"))
    assert [s["layers"] for s in one["stages"]] == [8] * 7 + [6]


def test_no_op_layers_export_to_mindspeed_and_are_said_where_the_stack_has_none(tmp_path: Path) -> None:
    path = _dsv3(tmp_path, ', noop_layers: "61,62,63"')
    r = hp_plan("export", path, "--to", "mindspeed")
    assert r.returncode == 0 and "--num-layers 64" in r.stdout and "--noop-layers 61,62,63" in r.stdout
    flags = set((ROOT / "engine" / "catalog" / "data" / "mindspeed_flags.txt").read_text().split())
    assert {"--num-layers", "--noop-layers"} <= flags
    r = hp_plan("export", path, "--to", "megatron")
    assert "HP753" in r.stdout + r.stderr and "no-op layers [61, 62, 63]" in r.stdout + r.stderr
    h100 = (DSV3_A3.replace("dualpipev NOOP", '1F1B, noop_layers: "61,62,63"').replace("FRAMEWORK", "megatron")
            .replace("device_type: A3", "device_type: H100").replace("cards_per_node: 16", "cards_per_node: 8")
            .replace("num_nodes: 32", "num_nodes: 64"))
    (tmp_path / "h100.yaml").write_text(h100)
    doc = hp_plan_json("estimate", str(tmp_path / "h100.yaml"))
    (hp533,) = [d for d in doc["diagnostics"] if d["code"] == "HP533"]
    assert "no no-op layers" in hp533["message"] and hp533["severity"] == "warning"
