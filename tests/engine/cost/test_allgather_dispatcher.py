"""Megatron-Core's all-gather token dispatcher (`moe_dispatcher: allgather`, engine.cost.communication.ep_allgather):
every member of the expert tensor-and-expert-parallel group receives the whole group's tokens, so its bytes grow
with the group, not with top-k; it carries its own TP gather, runs no expert-parallel overlap, and the stacks
without it say so."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.cost import constants as K
from engine.cost import estimate
from engine.cost.communication import ep_allgather, moe_tp_collective
from engine.cost.rows import build_rows
from engine.cost.table import CandidateTable
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import MOE, h100
from tests.support.cli import ROOT, hp_plan

GATHER = RunOptions(framework="megatron", selective_policy="attention", moe_dispatcher="allgather")


def _rows(run: RunOptions, s: Strategy):  # type: ignore[no-untyped-def]
    table = CandidateTable.from_strategies([s], num_layers=MOE.num_layers)
    return build_rows(MOE, h100(2), run, table, 1)


def test_one_dispatch_gathers_the_whole_group_s_tokens() -> None:
    """ep 8 × etp 2 = 16 members over 2 nodes: each receives 16 × T/t tokens' hidden states (the all-gather's
    output), at the hierarchical rate, and the TP pair of the all-to-all dispatcher is not run beside it."""
    s = Strategy(dp=8, tp=2, ep=8, etp=2, sequence_parallel=True, micro_batch_num=4)
    r = _rows(GATHER, s)
    total = K.ACT_BYTES * MOE.seq_len / 2 * MOE.hidden * 16
    assert ep_allgather(r)[0] == pytest.approx(r.links.gather(np.array([total]), np.array([16]), np.ones(1))[0])
    assert moe_tp_collective(r)[0] == 0.0
    assert moe_tp_collective(_rows(replace(GATHER, moe_dispatcher="alltoall"), s))[0] > 0.0


def test_its_bytes_grow_with_the_group_not_with_top_k() -> None:
    """Doubling EP doubles what each member receives while the all-to-all's stays top-k copies: with top-2 the
    gather over 16 ranks costs more than the all-to-all, with top-8 less (its hierarchical gather leaves a node
    through every NIC at once)."""
    small, big = Strategy(dp=16, ep=8, micro_batch_num=4), Strategy(dp=16, ep=16, micro_batch_num=4)
    top2 = replace(MOE, experts_per_tok=2)

    def ep(model, run, s):  # type: ignore[no-untyped-def]
        return estimate(model, h100(2), run, s, 1e9).time_breakdown_s["ep_comm"]

    a2a = replace(GATHER, moe_dispatcher="alltoall")
    assert ep(MOE, GATHER, big) > ep(MOE, GATHER, small)
    assert ep(top2, GATHER, big) > ep(top2, a2a, big)
    assert ep(MOE, GATHER, big) < ep(MOE, a2a, big)


def test_no_expert_parallel_overlap_runs_with_it() -> None:
    s = Strategy(dp=16, ep=16, micro_batch_num=4)
    plain = estimate(MOE, h100(2), GATHER, s, 1e9).time_breakdown_s["ep_comm"]
    asked = replace(GATHER, moe_a2a_overlap=True, moe_shared_expert_overlap=True)
    assert estimate(MOE, h100(2), asked, s, 1e9).time_breakdown_s["ep_comm"] == pytest.approx(plain)


GROK = ROOT / "benchmarks" / "calibration_runs" / "grok1-314b-512xh100-nemo"


def _grok(tmp_path: Path, framework: str = "megatron", extra: str = "", release: str = "0.13") -> tuple[dict, Path]:
    dst = tmp_path / f"{framework}-{release}"
    dst.mkdir()
    (dst / "train.yaml").write_text((GROK / "train.yaml").read_text())
    text = (GROK / "search.yaml").read_text().replace(
        "  framework: megatron", f"  framework: {framework}\n  moe_dispatcher: allgather").replace(
        "framework_version: '0.13'", f"framework_version: '{release}'") + extra
    (dst / "search.yaml").write_text(text)
    out = hp_plan("estimate", str(dst / "search.yaml"), "--json")
    assert out.returncode in (0, 1) and out.stdout, out.stderr  # 1: priced, over the budget (torchtitan's memory)
    return json.loads(out.stdout), dst / "search.yaml"


def test_grok_priced_with_the_all_gather_end_to_end(tmp_path: Path) -> None:
    """Grok-1 on 512 H100 (ep 8, etp 4, top-2): its 32-member gather moves 16× the all-to-all's copies, so the
    expert communication grows; its capacity factor (token drop) is one Megatron runs only with the all-to-all
    dispatchers (HP530, priced as stated); `export --to megatron` writes the dispatcher back."""
    doc, path = _grok(tmp_path)
    plain = json.loads(hp_plan("estimate", str(GROK / "search.yaml"), "--json").stdout)
    assert doc["time_breakdown_s"]["ep_comm"] > 2 * plain["time_breakdown_s"]["ep_comm"]
    assert not [d for d in doc["diagnostics"] if d["code"] == "HP533"]
    assert [d for d in doc["diagnostics"] if d["code"] == "HP530" and "capacity factor" in d["message"]]
    exported = hp_plan("export", str(path), "--to", "megatron")
    assert "--moe-token-dispatcher-type allgather" in exported.stdout


def test_a_stack_without_it_or_an_overlap_it_refuses_is_said(tmp_path: Path) -> None:
    doc, _ = _grok(tmp_path, "torchtitan")
    hits = [d for d in doc["diagnostics"] if d["code"] == "HP533" and "all-gather token dispatcher" in d["message"]]
    assert hits and "megatron" in hits[0]["message"]
    doc, _ = _grok(tmp_path, "megatron", "moe_a2a_overlap: true\n", release="0.16")
    assert [d for d in doc["diagnostics"] if d["code"] == "HP530" and "moe_a2a_overlap" in d["message"]]
    # a release without the overlap (0.13, Grok's) says so once: HP533, not HP530 as well
    doc, _ = _grok(tmp_path, "megatron", "moe_a2a_overlap: true\n")
    assert [d["code"] for d in doc["diagnostics"] if "moe_a2a_overlap" in d["message"]] == ["HP533"]


def test_its_buffer_holds_the_whole_group_s_tokens_and_export_drops_the_overlaps(tmp_path: Path) -> None:
    """The dispatch buffer of the all-gather holds etp·ep ranks' tokens (Grok-1: 32 of them, against top-2
    copies): more buffers than the all-to-all's; and the overlaps Megatron refuses with it are not exported."""
    doc, path = _grok(tmp_path, "megatron", "moe_a2a_overlap: true\nmoe_shared_expert_overlap: true\n",
                      release="0.16")
    plain = json.loads(hp_plan("estimate", str(GROK / "search.yaml"), "--json").stdout)
    assert doc["memory_breakdown_gib"]["buffers"] > plain["memory_breakdown_gib"]["buffers"]
    exported = hp_plan("export", str(path), "--to", "megatron")
    assert "--overlap-moe-expert-parallel-comm" not in exported.stdout
    assert "--moe-shared-expert-overlap" not in exported.stdout and "HP753" in exported.stderr
