"""Frameworks (docs/formats.md §5): stated facts change the price, what a trainer cannot run is a diagnostic and is
not searched, and every estimate says what it priced. Through the CLI where a user touches it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.catalog.devices import find_device
from engine.catalog.frameworks import FRAMEWORKS, find_framework
from engine.check import check_file
from engine.config.resolve import load
from engine.cost import CandidateTable, estimate, estimate_config, price_table
from engine.cost import constants as K
from engine.cost.collectives import Links
from engine.cost.memory import op_policy_recomputed_share
from engine.results import Estimate
from engine.specs import RecomputePlan, RunOptions, Strategy
from tests.engine.cost.shapes import LLAMA70B, cluster
from tests.support.cli import ROOT, hp_plan

RUNS = ROOT / "benchmarks" / "calibration_runs"
TITAN_8B = RUNS / "llama31-8b-8xh100-96g-torchtitan-compile" / "search.yaml"


def test_every_framework_states_its_facts() -> None:
    for fw in FRAMEWORKS.values():
        assert fw.selective_policies and fw.schedules and fw.attention_rate[""] > 0
    assert find_framework("NeMo") is FRAMEWORKS["megatron"] and find_framework("nonsense") is None
    assert not FRAMEWORKS["hyperparallel"].calibrated
    # HyperParallel pipelines: PipelineStage with GPipe, 1F1B and interleaved 1F1B ([HP] Corrections 1).
    assert set(FRAMEWORKS["hyperparallel"].schedules) == {"1F1B", "interleaved", "gpipe"}


def test_eager_kernels_cost_more_than_compiled_ones() -> None:
    cl = cluster(1, "H100")
    s = Strategy(dp=8, dp_shard=8, micro_batch_size=1, recompute=RecomputePlan("full"))
    eager = estimate(LLAMA70B, cl, RunOptions(framework="torchtitan"), s, 1e6)
    compiled = estimate(LLAMA70B, cl, RunOptions(framework="torchtitan", compile=True), s, 1e6)
    fused = estimate(LLAMA70B, cl, RunOptions(framework="megatron"), s, 1e6)
    assert eager.step_time_s > compiled.step_time_s
    assert compiled.framework == "torchtitan" and fused.framework == "megatron"


def test_op_policy_recomputes_every_second_matmul() -> None:
    share = op_policy_recomputed_share(LLAMA70B)
    assert 0.3 < share < 0.5  # wk, wo, w3 of wq, wk, wv, wo, w1, w3, w2
    cl = cluster(1, "H100")
    sel = Strategy(dp=8, dp_shard=8, recompute=RecomputePlan("selective"))
    op = estimate(LLAMA70B, cl, RunOptions(framework="torchtitan", selective_policy="op"), sel, 1e6)
    off = estimate(LLAMA70B, cl, RunOptions(framework="torchtitan"), replace(sel, recompute=RecomputePlan("off")), 1e6)
    assert op.time_breakdown_s["recompute"] > 0 and op.peak_memory_gib < off.peak_memory_gib


def test_full_mesh_groups_get_their_links_share() -> None:
    a2 = find_device("A2")
    assert a2 is not None and a2.full_mesh and a2.peak_tflops == 354.0
    links = Links(8, a2.intra_node_gb_s, a2.inter_node_gb_s, full_mesh=True, coll_eff_intra=a2.coll_eff_intra)
    size = np.array([1e9])
    t8, t4, t2 = (links.gather(size, np.array([n]), np.array([1]))[0] for n in (8, 4, 2))
    # ASC-BENCH reports output bytes / time (algorithm bandwidth): all-gather 149 / 64 / 38 GB/s on 8 / 4 / 2 cards
    # is bus bandwidth (n-1)/n of that, 130.4 / 48 / 19 ([HW] §4 read with its benchmark's code).
    assert abs(1e9 / t8 / 1e9 - 149) < 3  # the measured algorithm bandwidth, 8 cards
    assert abs(1e9 / t2 / 1e9 - 38) < 2  # one link of the mesh, 2 cards
    assert 1.0 < 1e9 / t4 / 1e9 / 64 < 1.2  # the links' share is optimistic at 4 cards (+16 %)
    ar8 = links.allreduce(size, np.array([8]), np.array([1]))[0]
    assert abs(1e9 / ar8 / 1e9 - 72) < 4  # the all-reduce's measured 72 GB/s (its buffer size / time)
    b3 = find_device("ascend910b4")
    assert b3 is not None and b3.peak_tflops == 295.0 and "intra_node_gb_s" in b3.unconfirmed


def test_fp8_is_faster_where_the_device_has_it() -> None:
    s = Strategy(dp=8, dp_shard=8, recompute=RecomputePlan("full"))
    bf16 = estimate(LLAMA70B, cluster(1, "H100"), RunOptions(framework="megatron"), s, 1e6)
    fp8 = estimate(LLAMA70B, cluster(1, "H100"), RunOptions(framework="megatron", fp8=True), s, 1e6)
    assert fp8.time_breakdown_s["compute"] < bf16.time_breakdown_s["compute"]
    a2 = estimate(LLAMA70B, cluster(1, "A2"), RunOptions(framework="mindspeed", fp8=True), s, 1e6)
    a2_bf16 = estimate(LLAMA70B, cluster(1, "A2"), RunOptions(framework="mindspeed"), s, 1e6)
    assert a2.step_time_s == a2_bf16.step_time_s  # no FP8 GEMMs: priced in BF16 (and HP532 says so)


def test_estimate_json_says_what_it_priced_and_the_flag_wins(tmp_path: Path) -> None:
    doc = json.loads(hp_plan("estimate", str(TITAN_8B), "--json").stdout)
    assert doc["framework"] == "torchtitan" and doc["device"] == "H100-96G"
    assert doc["calibration"] is None and "non" not in doc["mfu_convention"][:5]
    assert 0 < doc["causal_mfu"] < doc["mfu"]
    codes = {d["code"] for d in doc["diagnostics"]}
    assert "HP305" in codes  # 96 GB H100 is the 500 W part
    assert "HP531" not in codes  # the file states the selective policy the run used, torchtitan's "op"
    flagged = json.loads(hp_plan("estimate", str(TITAN_8B), "--json", "--framework", "megatron").stdout)
    assert flagged["framework"] == "megatron" and flagged["step_time_s"] < doc["step_time_s"]
    text = hp_plan("estimate", str(TITAN_8B)).stdout
    assert "priced for torchtitan 0.0 (9dec370) on H100-96G" in text and "MFU (model FLOPs, non-causal, of the BF16 peak)" in text
    bad = hp_plan("estimate", str(TITAN_8B), "--framework", "caffe")
    assert bad.returncode == 2 and "unknown framework" in bad.stderr


def test_estimator_section_is_read(tmp_path: Path) -> None:
    f = tmp_path / "search.yaml"
    f.write_text(TITAN_8B.read_text().replace("  compile: true", "  compile: false\n  fp8: true"))
    (tmp_path / "train.yaml").write_text((TITAN_8B.parent / "train.yaml").read_text())
    cfg = check_file(str(f)).config
    assert cfg is not None and cfg.run.framework == "torchtitan" and not cfg.run.compile and cfg.run.fp8
    est, _ = estimate_config(cfg)
    assert est is not None and est.framework == "torchtitan"


def test_blocked_table_carries_framework_and_causal_mfu() -> None:
    tab = CandidateTable.from_strategies([Strategy(dp=8, dp_shard=8)] * 3)
    pr = price_table(LLAMA70B, cluster(1, "H100"), RunOptions(framework="megatron"), tab, 1e6)
    assert pr.framework == "megatron" and pr.causal_mfu is not None and (pr.causal_mfu < pr.mfu).all()


def test_an_ep_overlap_the_stack_lacks_is_a_positioned_warning_and_changes_nothing(tmp_path: Path) -> None:
    """HP533 through the CLI: torchtitan has neither expert-parallel overlap, so stating them warns at the key
    and prices the plan as if unstated; MindSpeed offers both, so the same file there gets no HP533."""
    src = RUNS / "ascend-qwen3-30b-a3b-16xa2-mindspeed"
    (tmp_path / "train.yaml").write_text((src / "train.yaml").read_text())
    base = (src / "search.yaml").read_text()
    plain = tmp_path / "plain.yaml"
    plain.write_text(base.replace("framework: mindspeed", "framework: torchtitan"))
    stated = tmp_path / "search.yaml"
    stated.write_text(plain.read_text() + "moe_a2a_overlap: true\nmoe_shared_expert_overlap: true\n")
    doc = json.loads(hp_plan("estimate", str(stated), "--json").stdout)
    hits = {d["path"]: d for d in doc["diagnostics"] if d["code"] == "HP533"}
    assert set(hits) == {"moe_a2a_overlap", "moe_shared_expert_overlap"}
    lines = stated.read_text().splitlines()
    for path, d in hits.items():
        assert d["severity"] == "warning" and "torchtitan" in d["message"] and "mindspeed" in d["message"]
        assert lines[d["range"]["start"]["line"]].startswith(path)
    same = json.loads(hp_plan("estimate", str(plain), "--json").stdout)
    assert same["step_time_s"] == doc["step_time_s"]
    ms = stated.read_text().replace("framework: torchtitan", "framework: mindspeed")
    stated.write_text(ms)
    doc_ms = json.loads(hp_plan("estimate", str(stated), "--json").stdout)
    assert not [d for d in doc_ms["diagnostics"] if d["code"] == "HP533"]
    text = hp_plan("estimate", str(stated.with_name("plain.yaml"))).stdout
    assert "HP533" not in text


def test_a_tp_overlap_the_stack_lacks_is_a_positioned_warning_and_changes_nothing(tmp_path: Path) -> None:
    """HP533 for the TP comm-GEMM overlap: HyperParallel's trainer has none (Framework.tp_comm_overlap_name is
    empty), so stating it warns at the key and prices the TP collectives as if unstated; torchtitan's async TP
    is priced (the forward's collectives) and warns nothing."""
    src = RUNS / "llama31-70b-256xh100-96g-torchtitan-fsdp32tp8"
    (tmp_path / "train.yaml").write_text((src / "train.yaml").read_text())
    base = (src / "search.yaml").read_text()
    assert "framework: torchtitan" in base and "tp_comm_overlap" not in base
    plain = tmp_path / "plain.yaml"
    plain.write_text(base.replace("framework: torchtitan", "framework: hyperparallel"))
    stated = tmp_path / "search.yaml"
    stated.write_text(plain.read_text() + "tp_comm_overlap: true\n")
    doc = json.loads(hp_plan("estimate", str(stated), "--json").stdout)
    hits = [d for d in doc["diagnostics"] if d["code"] == "HP533"]
    assert [d["path"] for d in hits] == ["tp_comm_overlap"] and "torchtitan" in hits[0]["message"]
    assert stated.read_text().splitlines()[hits[0]["range"]["start"]["line"]].startswith("tp_comm_overlap")
    same = json.loads(hp_plan("estimate", str(plain), "--json").stdout)
    assert same["time_breakdown_s"]["tp_comm"] == doc["time_breakdown_s"]["tp_comm"] > 0
    stated.write_text(stated.read_text().replace("framework: hyperparallel", "framework: torchtitan"))
    tt = json.loads(hp_plan("estimate", str(stated), "--json").stdout)
    assert not [d for d in tt["diagnostics"] if d["code"] == "HP533"]
    assert tt["time_breakdown_s"]["tp_comm"] < same["time_breakdown_s"]["tp_comm"]


def test_a_cp_algorithm_the_stack_does_not_run_is_priced_as_its_ring_and_said(tmp_path: Path) -> None:
    """HP533 for the context-parallel algorithm (StackSpace.cp_algos): Megatron-Core runs Ulysses (its a2a
    cp_comm_type) and prices it; torchtitan rings only, so the same file there warns at the key and is priced,
    and banded, as the ring it runs."""
    src = RUNS / "llama31-405b-128xgb200-nemo"
    train = (src / "train.yaml").read_text()
    assert "context_parallel_algo: ring" in train
    (tmp_path / "train.yaml").write_text(train.replace("context_parallel_algo: ring", "context_parallel_algo: ulysses"))
    ring_dir = tmp_path / "ring"
    ring_dir.mkdir()
    (ring_dir / "train.yaml").write_text(train)
    search = (src / "search.yaml").read_text()
    assert "framework: megatron" in search
    for folder in (tmp_path, ring_dir):
        (folder / "mcore.yaml").write_text(search)
        (folder / "titan.yaml").write_text(search.replace("framework: megatron", "framework: torchtitan"))

    def run(path: Path) -> dict:  # type: ignore[type-arg]
        return json.loads(hp_plan("estimate", str(path), "--json").stdout)

    mcore, mcore_ring = run(tmp_path / "mcore.yaml"), run(ring_dir / "mcore.yaml")
    assert not [d for d in mcore["diagnostics"] if d["code"] == "HP533"]
    assert mcore["time_breakdown_s"]["cp_comm"] != mcore_ring["time_breakdown_s"]["cp_comm"]  # Ulysses priced
    titan, titan_ring = run(tmp_path / "titan.yaml"), run(ring_dir / "titan.yaml")
    hits = [d for d in titan["diagnostics"] if d["code"] == "HP533"]
    assert [d["path"] for d in hits] == ["accelerator.context_parallel_algo"] and "it runs ring" in hits[0]["message"]
    line = (tmp_path / "train.yaml").read_text().splitlines()[hits[0]["range"]["start"]["line"]]
    assert "context_parallel_algo" in line
    assert titan["step_time_s"] == titan_ring["step_time_s"]
    assert titan["error_band"] == titan_ring["error_band"]  # not "by ulysses": the ring is what runs


def _mindspeed_70b_on(tmp_path: Path, device: str) -> Path:
    """The 70B MindSpeed run (tp 8, `tp_comm_overlap`: the script's MC2) at the current release on `device`."""
    src = RUNS / "ascend-llama2-70b-32xa2-mindspeed"
    (tmp_path / "train.yaml").write_text((src / "train.yaml").read_text())
    text = (src / "search.yaml").read_text()
    assert "device_type: A2" in text and "framework_version: '1.0.RC3'" in text and "tp_comm_overlap: true" in text
    text = text.replace("device_type: A2", f"device_type: {device}").replace("framework_version: '1.0.RC3'", "")
    out = tmp_path / f"{device}.yaml"
    out.write_text(text)
    return out


def test_mc2_is_not_run_on_a3_so_a3_plans_are_priced_without_it_and_told(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """MindSpeed's MC2 "is not supported on Atlas 900 A3" ([MS-MC2]): the same plan states it on A2 silently and on
    A3 gets HP533 at the key; with a share of MC2 credited (as a fit one day would) the A2 plan's TP time falls
    and the A3 plan's does not; the exported launch line leaves `--use-ascend-mc2` out on A3 and says why."""
    a2, a3 = _mindspeed_70b_on(tmp_path, "A2"), _mindspeed_70b_on(tmp_path, "A3")
    doc2 = json.loads(hp_plan("estimate", str(a2), "--json").stdout)
    doc3 = json.loads(hp_plan("estimate", str(a3), "--json").stdout)
    assert not [d for d in doc2["diagnostics"] if d["code"] == "HP533"]
    hits = [d for d in doc3["diagnostics"] if d["code"] == "HP533"]
    assert [d["path"] for d in hits] == ["tp_comm_overlap"] and "does not run on A3" in hits[0]["message"]
    assert a3.read_text().splitlines()[hits[0]["range"]["start"]["line"]].startswith("tp_comm_overlap")

    monkeypatch.setattr(K, "MC2_ACHIEVED_SHARE", 1.0)

    def priced(path: Path, overlap: bool) -> Estimate:
        cfg = load(str(path)).config
        assert cfg is not None
        est, _ = estimate_config(replace(cfg, run=replace(cfg.run, tp_comm_overlap=overlap)))
        assert est is not None
        return est

    assert priced(a2, True).time_breakdown_s["tp_comm"] < priced(a2, False).time_breakdown_s["tp_comm"]
    assert priced(a3, True).time_breakdown_s["tp_comm"] == priced(a3, False).time_breakdown_s["tp_comm"] > 0

    on_a2, on_a3 = (json.loads(hp_plan("export", str(p), "--to", "mindspeed", "--json").stdout) for p in (a2, a3))
    assert "--use-ascend-mc2" in on_a2["args"] and "--use-ascend-mc2" not in on_a3["args"]
    (said,) = [d for d in on_a3["diagnostics"] if d["code"] == "HP753"]
    assert said["path"] == "tp_comm_overlap" and "priced without it" in said["message"]
    a3.write_text(a3.read_text().replace("framework: mindspeed", "framework: megatron"))  # priced with userbuffers
    (said,) = [d for d in json.loads(hp_plan("export", str(a3), "--to", "mindspeed", "--json").stdout)["diagnostics"]
               if d["code"] == "HP753"]
    assert "priced with megatron's overlap" in said["message"] and "runs slower than its price" in said["message"]
