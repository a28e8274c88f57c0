"""A framework's release (`estimator.framework_version`): facts that changed between releases priced as the stated
release ran them, unknown releases said (HP535), the current release by default, and the release named in output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.catalog.frameworks import (
    FRAMEWORKS,
    MEGATRON_RELEASES,
    MINDSPEED_RELEASES,
    TORCHTITAN_RELEASES,
    at_release,
    framework_of,
)
from engine.specs import RunOptions
from tests.support.cli import ROOT, hp_plan

RUN = ROOT / "benchmarks" / "calibration_runs" / "deepseek-v3-512xh100-nemo"
FEATURES = "  moe_dispatcher: deepep\nmoe_a2a_overlap: true\n"


def _config(tmp_path: Path, version: str | None) -> str:
    (tmp_path / "train.yaml").write_text((RUN / "train.yaml").read_text())
    lines = [ln for ln in (RUN / "search.yaml").read_text().splitlines() if "framework_version" not in ln]
    text = "\n".join(lines) + "\n"
    stated = f"  framework_version: '{version}'\n" if version is not None else ""
    text = text.replace("  framework: megatron\n", "  framework: megatron\n" + stated + FEATURES)
    path = tmp_path / f"search-{version}.yaml"
    path.write_text(text)
    return str(path)


def _estimate(path: str) -> dict[str, Any]:
    r = hp_plan("estimate", path, "--json")
    # exit 1: a release without --recompute-modules may price the plan over its budget (HP520)
    assert r.returncode in (0, 1) and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc, dict)
    return doc


def _codes(doc: dict[str, Any]) -> dict[str, str]:
    return {d["code"]: d["message"] for d in doc["diagnostics"]}


def test_current_release_by_default_and_named() -> None:
    assert framework_of(RunOptions(framework="megatron")).release == MEGATRON_RELEASES.current == "0.19"
    r = hp_plan("estimate", str(RUN / "search.yaml"))
    assert "priced for megatron 0.13 on H100" in r.stdout  # the folder states the release it ran


def test_an_older_release_prices_without_the_features_it_lacks(tmp_path: Path) -> None:
    now = _estimate(_config(tmp_path, None))
    v14 = _estimate(_config(tmp_path, "0.14"))
    v13 = _estimate(_config(tmp_path, "0.13"))
    v11 = _estimate(_config(tmp_path, "core_r0.11.0"))
    assert now["framework_release"] == "0.19" and v13["framework_release"] == "0.13"
    assert v11["framework_release"] == "0.11"
    assert v14["step_time_s"] == pytest.approx(now["step_time_s"])  # nothing this plan uses changed after 0.14
    ep = [d["time_breakdown_s"]["ep_comm"] for d in (now, v13, v11)]
    assert ep[0] < ep[1] < ep[2]  # no batch-level overlap before 0.14, no DeepEP before 0.12
    assert now["step_time_s"] < v13["step_time_s"] < v11["step_time_s"]
    assert "HP533" in _codes(v13) and "Megatron-Core 0.13" in _codes(v13)["HP533"]
    assert "HP535" in _codes(v11) and "DeepEP" in _codes(v11)["HP535"]
    assert "HP531" in _codes(v11)  # --recompute-modules came with 0.12 (core_v0.12.0's arguments.py)
    assert "HP531" not in _codes(_estimate(_config(tmp_path, "0.12")))  # not 0.13, as the changelog has it


def test_unknown_release_is_a_coded_warning_priced_as_current(tmp_path: Path) -> None:
    doc = _estimate(_config(tmp_path, "9.9"))
    hp535 = [d for d in doc["diagnostics"] if d["code"] == "HP535"]
    assert hp535 and hp535[0]["severity"] == "warning" and "priced as the current 0.19" in hp535[0]["message"]
    assert hp535[0]["range"]["start"]["line"] > 0  # at the key
    assert doc["framework_release"] == "0.19"


@pytest.mark.parametrize(("name", "rel"), [("megatron", MEGATRON_RELEASES), ("torchtitan", TORCHTITAN_RELEASES),
                                          ("mindspeed", MINDSPEED_RELEASES)])
def test_release_facts_are_cited_and_ordered(name: str, rel: Any) -> None:
    for fact in rel.facts:
        assert fact.since in rel.versions and fact.source.startswith("[")
        owner, _, attr = fact.field.rpartition(".")
        assert hasattr(getattr(FRAMEWORKS[name], owner) if owner else FRAMEWORKS[name], attr)
    assert FRAMEWORKS[name].release == rel.current


def test_megatron_versions_are_read_as_written() -> None:
    rel = MEGATRON_RELEASES
    assert rel.normalise("v0.12") == rel.normalise("0.12.3") == "0.12" and rel.normalise("0.1") is None
    assert at_release("megatron", "0.13").ep_overlap == "" and at_release("megatron", "0.14").ep_overlap == "batch"


def test_torchtitan_compiles_its_loss_from_0_1_and_chunks_it_on_main() -> None:
    # 9dec370 (2024-12, TT-BENCH): loss compile turned off (#755); e7c0cae (2025-06): build_cross_entropy_loss
    # compiles it under training.compile (#1033); main: ChunkedLossWrapper, 8 chunks
    old = framework_of(RunOptions(framework="torchtitan", framework_version="9dec370"))
    mid = framework_of(RunOptions(framework="torchtitan", framework_version="e7c0cae"))
    assert (old.release, old.loss_chunks, old.compiled_loss_peak_bytes) == ("0.0", 1, 0.0)
    assert (mid.release, mid.loss_chunks, mid.compiled_loss_peak_bytes) == ("0.1", 1, 4.0)
    assert framework_of(RunOptions(framework="torchtitan")).loss_chunks == 8
    assert TORCHTITAN_RELEASES.normalise("v0.2.1") == "0.2" and at_release("torchtitan", "v0.2.1").release == "0.2"


def test_each_stack_says_the_cp_algorithms_it_runs() -> None:
    """StackSpace.cp_algos: Megatron-Core all four (--cp-comm-type), MindSpeed no all-gather, torchtitan a ring
    only, HyperParallel colossalai / ulysses / hybrid; another is priced as the stack's ring."""
    from engine.catalog.frameworks import FRAMEWORKS

    runs = {name: fw.space.cp_algos for name, fw in FRAMEWORKS.items()}
    assert runs == {"megatron": ("ring", "ulysses", "hybrid", "allgather"),
                    "mindspeed": ("ring", "ulysses", "hybrid"), "torchtitan": ("ring",),
                    "hyperparallel": ("ring", "ulysses", "hybrid")}
    assert FRAMEWORKS["torchtitan"].space.cp_algo("ulysses") == "ring"
    assert FRAMEWORKS["mindspeed"].space.cp_algo("allgather") == "ring"
    assert FRAMEWORKS["megatron"].space.cp_algo("allgather") == "allgather"


def test_a_nemo_container_names_its_megatron_core() -> None:
    """Megatron-Bridge's performance tables name a container, not a Megatron-Core release ([MB-VERSIONS])."""
    rel = MEGATRON_RELEASES
    assert rel.normalise("nemo-25.11") == rel.normalise("25.11") == "0.15"
    assert rel.normalise("25.09") == "0.14" and rel.normalise("NeMo-26.02") == "0.16"
    assert rel.normalise("26.04") == "0.17" and rel.normalise("nemo-26.06") == "0.18"
    assert rel.normalise("26.08") is None  # not on the versions page read: HP535, priced as the current release
    assert at_release("megatron", "25.09").ep_overlap == "batch" and not at_release("megatron", "nemo-24.09").deepep


@pytest.mark.parametrize(("name", "runs"), [
    # micro-batches 3..12 on pp 4: Megatron-Core groups them by pp (MCORE-SCHED); torch.distributed.pipelining
    # runs max(1, m // pp) rounds that must divide m (TORCH-PIPE); HyperParallel's own schedule takes any count.
    ("megatron", [False, True, False, False, False, True, False, False, False, True]),
    ("mindspeed", [False, True, False, False, False, True, False, False, False, True]),
    ("torchtitan", [True, True, True, True, True, True, False, True, False, True]),
    ("hyperparallel", [True] * 10),
])
def test_each_stack_groups_interleaved_micro_batches_its_own_way(name: str, runs: list[bool]) -> None:
    space = FRAMEWORKS[name].space
    assert [bool(space.interleave_runs(m, 4)) for m in range(3, 13)] == runs
    # the search asks the same question of whole columns
    assert space.interleave_runs(np.arange(3, 13), np.full(10, 4)).tolist() == runs


def test_mindspeed_releases_run_what_their_argument_checks_let_through() -> None:
    """MindSpeed-LLM 1.0.RC3 (the four 2024 runs' release) switches --use-mc2, the expert all-to-all overlap and
    no-op layers off in its argument checks, has no DualPipeV and no FSDP2; 2.2.0 has them all. Its tags, its
    MindSpeed core tags and the Qwen3 run's master commit all name a release."""
    rc3, now = at_release("mindspeed", "v1.0.RC3.0"), framework_of(RunOptions(framework="mindspeed"))
    assert now.release == MINDSPEED_RELEASES.current == "26.1.0"
    assert (rc3.release, rc3.tp_comm_overlap_name, rc3.ep_overlap, rc3.noop_layers) == ("1.0.RC3", "", "", False)
    assert "dualpipev" not in rc3.schedules and rc3.space.fsdp == "" and rc3.swaps_attention
    assert not at_release("mindspeed", "1.0.RC2").swaps_attention
    v22 = at_release("mindspeed", "2.2")
    assert v22.tp_comm_overlap_name and "dualpipev" in v22.schedules and v22.space.fsdp == "whole"
    assert at_release("mindspeed", "2.1.0").space.fsdp == "" and not at_release("mindspeed", "2.1.0").tp_comm_overlap_name
    rel = MINDSPEED_RELEASES
    assert rel.normalise("2.2.0_core_r0.12.1") == "2.2.0" and rel.normalise("master-9d6963b1") == "26.0.0"
    assert rel.normalise("1.0.rc3_core_r0.7.0") == "1.0.RC3" and rel.normalise("3.0") is None


def test_mindspeed_search_offers_only_what_the_release_runs(tmp_path: Path) -> None:
    """A DeepSeek-class search on A2 under MindSpeed-LLM 1.0.RC3 offers no DualPipeV and no FSDP (the search refuses
    them, counted), and a stated DualPipeV is said (HP5xx at the schedule); under the current release both run."""
    src = ROOT / "benchmarks" / "calibration_runs" / "ascend-qwen3-30b-a3b-16xa2-mindspeed"
    (tmp_path / "train.yaml").write_text((src / "train.yaml").read_text())
    text = (src / "search.yaml").read_text().replace("'master-9d6963b1'", "'1.0.RC3'")
    assert "'1.0.RC3'" in text
    (tmp_path / "search.yaml").write_text(text)
    est = _estimate(str(tmp_path / "search.yaml"))
    assert est["framework_release"].startswith("1.0.RC3")
    stated = text.replace("pipeline_schedule: 1F1B", "pipeline_schedule: dualpipev")
    assert stated != text
    (tmp_path / "dualpipev.yaml").write_text(stated)
    codes = _codes(_estimate(str(tmp_path / "dualpipev.yaml")))
    assert any("dualpipev" in m.lower() and "1.0.RC3" in m for m in codes.values()), codes
    (tmp_path / "now.yaml").write_text(stated.replace("'1.0.RC3'", "'26.1.0'"))
    assert not any("dualpipev" in m.lower() and "does not run" in m for m in _codes(_estimate(str(tmp_path / "now.yaml"))).values())
