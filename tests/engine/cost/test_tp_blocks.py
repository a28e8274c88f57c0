"""Tensor-parallel collectives priced per block as the stacks run them: a comm-GEMM overlap (TransformerEngine
userbuffers, MindSpeed's MC2) hides a collective only under the GEMM it is fused with (torchtitan's async TP
only the forward's), and a MoE block's pair is
the token dispatcher's (the routed copies gathered over the expert tensor-parallel group, never fused with a
GEMM). Shown through `hp-plan estimate --json` on the published MindSpeed runs and on small configs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.cost import constants as K
from engine.cost import estimate
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import MOE, h100
from tests.support.cli import ROOT, estimate_in_process

RUNS = ROOT / "benchmarks" / "calibration_runs"
TT70B = RUNS / "llama31-70b-256xh100-96g-torchtitan-fsdp32tp8"
MIXTRAL = RUNS / "ascend-mixtral-8x22b-64xa2-mindspeed"
LLAMA34B = RUNS / "ascend-llama2-34b-16xa2-mindspeed"


# A MindSpeed-LLM release that runs --use-mc2 (the runs' own, 1.0.RC3, switches it off: MINDSPEED_RELEASES).
MC2_RELEASE = ("framework_version: '1.0.RC3'", "framework_version: '2.2.0'")


def _estimate(folder: Path, tmp_path: Path, *edits: tuple[str, str]) -> dict:
    """`hp-plan estimate --json` on a copy of a run folder, with lines of its search config replaced."""
    dst = tmp_path / folder.name
    dst.mkdir(parents=True, exist_ok=True)
    for f in ("train.yaml", "search.yaml"):
        text = (folder / f).read_text()
        for old, new in edits if f == "search.yaml" else ():
            assert old in text
            text = text.replace(old, new)
        (dst / f).write_text(text)
    return estimate_in_process(dst / "search.yaml")


def test_mc2_hides_the_attention_pair_only_under_its_projections(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """LLaMA2-34B at tp 8 on 910B under a release that runs MC2, at its per-block bound (achieved share 1): the attention block's
    all-gather + reduce-scatter (0.9 ms each at HCCS rate) outlast its QKV and output projections, so MC2 leaves
    part of them exposed although the MLP's GEMMs would have room: the stated MC2 hides most of the TP time,
    not all of it."""
    monkeypatch.setattr(K, "MC2_ACHIEVED_SHARE", 1.0)
    on = _estimate(LLAMA34B, tmp_path, MC2_RELEASE)["time_breakdown_s"]["tp_comm"]
    off = _estimate(LLAMA34B, tmp_path / "off", MC2_RELEASE, ("tp_comm_overlap: true", "tp_comm_overlap: false"))
    off_tp = off["time_breakdown_s"]["tp_comm"]
    assert 0.15 * off_tp < on < 0.5 * off_tp


def test_moe_dispatcher_pair_is_not_hidden_by_mc2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mixtral 8x22B (tp 8 = etp 8, top-2), MC2 at its per-block bound: turning MC2 off exposes only the
    attention pairs; the MoE blocks' gathers of the routed copies are exposed either way (MindSpeed runs MoE MLPs
    without MC2), so the MoE model's TP time falls less with MC2 than the dense model's."""
    monkeypatch.setattr(K, "MC2_ACHIEVED_SHARE", 1.0)
    on = _estimate(MIXTRAL, tmp_path, MC2_RELEASE)["time_breakdown_s"]["tp_comm"]
    off = _estimate(MIXTRAL, tmp_path / "off", MC2_RELEASE, ("tp_comm_overlap: true", "tp_comm_overlap: false"))
    off_tp = off["time_breakdown_s"]["tp_comm"]
    assert on < off_tp
    assert on > 0.6 * off_tp  # the dispatcher's pairs, twice a dense MLP's bytes each, stay


def _tp(model_kw: dict, s: Strategy) -> float:
    run = RunOptions(framework="megatron", selective_policy="attention")
    return estimate(replace(MOE, **model_kw), h100(1), run, s, 1e9).time_breakdown_s["tp_comm"]


def test_moe_block_pair_carries_the_routed_copies_over_the_expert_tp_group() -> None:
    """At etp = tp the MoE block's pair grows with top-k (k copies of each token gathered); at etp 1 the block
    has no TP collective at all (its tokens reach the experts through the all-to-all), so only the
    attention pair and the dense layer's MLP pair remain."""
    s_etp = Strategy(tp=2, dp=4, ep=4, etp=2, sequence_parallel=True, micro_batch_num=4)
    assert _tp({"experts_per_tok": 8}, s_etp) > _tp({"experts_per_tok": 2}, s_etp)
    s_one = replace(s_etp, etp=1, ep=4)
    assert _tp({"experts_per_tok": 8}, s_one) == pytest.approx(_tp({"experts_per_tok": 2}, s_one))
    assert _tp({"experts_per_tok": 8}, s_one) < _tp({"experts_per_tok": 2}, s_etp)


def test_torchtitan_async_tp_pipelines_the_forward_collectives_only(tmp_path: Path) -> None:
    """Llama 3.1 70B at tp 8 with full recompute under torchtitan: every layer runs its TP pairs in the forward,
    the recomputed forward and the backward, three alike (plain DTensor TP hides none). Async TP pipelines the
    forward's two ([TT-ASYNCTP]: its end-to-end gain is the forward's), so a third of the TP time stays, and
    more (the attention block's pair outlasts its projections at this GQA width, a reduce-scatter's last chunk
    shows); were the backward's pipelined too, as TransformerEngine's
    userbuffers do (tests/engine/cost/test_overlap.py), nearly none would."""
    from engine.catalog.frameworks import FRAMEWORKS

    assert not FRAMEWORKS["torchtitan"].tp_comm_overlap_backward and FRAMEWORKS["megatron"].tp_comm_overlap_backward
    off = _estimate(TT70B, tmp_path / "off")["time_breakdown_s"]["tp_comm"]
    on = _estimate(TT70B, tmp_path / "on", ("recompute: full", "tp_comm_overlap: true\nrecompute: full"))
    assert off > 0 and off / 3 < on["time_breakdown_s"]["tp_comm"] < 0.5 * off
