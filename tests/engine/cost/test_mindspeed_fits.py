"""MindSpeed-LLM on 910B as its published runs measured it: the routed experts' MLP runs at its fitted share of the
NPU GEMM rate, and MC2 reaches its share of the per-block overlap bound in the releases that run it (none of the
runs' own: 1.0.RC3 switches --use-mc2 off). Both are facts of the mindspeed stack (engine.catalog.frameworks:
Framework.mc2, Framework.npu_gemms, MINDSPEED_RELEASES): Megatron's runs on NVIDIA do not move with them. Shown
through `hp-plan estimate --json` on the run folders of benchmarks/calibration_runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.cost import constants as K
from tests.support.cli import ROOT, estimate_in_process, hp_plan

RUNS = ROOT / "benchmarks" / "calibration_runs"
ASCEND_MOE = ("ascend-qwen3-30b-a3b-16xa2-mindspeed", "ascend-mixtral-8x22b-64xa2-mindspeed")
NVIDIA_MOE = ("deepseek-v3-512xh100-nemo", "grok1-314b-512xh100-nemo", "qwen3-235b-256xgb200-mbridge")


def _measured_step(folder: Path) -> float:
    """The step a run published as tokens/s/device implies (benchmarks/accuracy.py, s10_runs)."""
    exp = json.loads((folder / "expected.json").read_text())
    if exp["step_time_s"]:
        return float(exp["step_time_s"])
    return float(exp["global_batch_size"] * exp["seq_len"] / (exp["devices"] * exp["tokens_per_s_per_device"]))


def _step(run_id: str) -> float:
    return float(estimate_in_process(RUNS / run_id / "search.yaml")["step_time_s"])


@pytest.mark.parametrize("run_id", ["ascend-llama2-34b-16xa2-mindspeed", "ascend-llama2-70b-32xa2-mindspeed",
                                    *ASCEND_MOE])
def test_mindspeed_runs_priced_within_ten_percent(run_id: str) -> None:
    """The runs the shares are fitted on, through the CLI a user runs: MC2 priced at its per-block bound (before
    their release was known to switch it off) read the 34B −20.4 %; the MoE path at the dense rate priced
    Qwen3-30B-A3B −31.0 % and Mixtral 8x22B −40.7 %."""
    folder = RUNS / run_id
    out = hp_plan("estimate", str(folder / "search.yaml"), "--json")
    assert out.returncode == 0, out.stderr
    step = json.loads(out.stdout)["step_time_s"]
    assert abs(step / _measured_step(folder) - 1) < 0.10


def test_seventy_b_states_the_mc2_its_script_passes() -> None:
    """Every MindSpeed run whose script passes --use-mc2 (as its train.yaml's source notes say) states it as
    `tp_comm_overlap: true`: what the script asks, which its release does not run (the next test)."""
    for folder in sorted(RUNS.glob("ascend-*-mindspeed")):
        if "--use-mc2" in (folder / "train.yaml").read_text():
            assert "tp_comm_overlap: true" in (folder / "search.yaml").read_text(), folder.name


def _as_release(src: Path, dest: Path, version: str, overlap: bool = True) -> Path:
    """The run folder `src` copied to `dest`, its search config stating MindSpeed-LLM `version` (and MC2 or not)."""
    for f in ("train.yaml", "search.yaml"):
        text = (src / f).read_text()
        if f == "search.yaml":
            text = re.sub(r"framework_version: '[^']*'", f"framework_version: '{version}'", text)
            assert version in text
        (dest / f).write_text(text if overlap else text.replace("tp_comm_overlap: true", "tp_comm_overlap: false"))
    return dest / "search.yaml"


def test_mc2_as_each_release_runs_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """LLaMA2-34B. As run (1.0.RC3, whose argument checks set use_mc2 off): priced without MC2 at any share, and
    HP533 says so at the key. From 2.2.0, where --use-mc2 runs: the exposed TP time lies MC2_ACHIEVED_SHARE of the
    way from MC2 off to the per-block bound, whatever the share."""
    src = RUNS / "ascend-llama2-34b-16xa2-mindspeed"
    (tmp_path / "off").mkdir()
    (tmp_path / "new").mkdir()
    off = estimate_in_process(_as_release(src, tmp_path / "off", "2.2.0", overlap=False))["time_breakdown_s"]["tp_comm"]
    current = _as_release(src, tmp_path / "new", "2.2.0")
    tp, as_run = {}, {}
    for share in (0.0, 0.4, 1.0):
        monkeypatch.setattr(K, "MC2_ACHIEVED_SHARE", share)
        tp[share] = estimate_in_process(current)["time_breakdown_s"]["tp_comm"]
        as_run[share] = estimate_in_process(src / "search.yaml")["time_breakdown_s"]["tp_comm"]
    assert tp[0.0] == pytest.approx(off)
    assert tp[1.0] < 0.5 * off
    assert tp[0.4] == pytest.approx(off + 0.4 * (tp[1.0] - off), rel=1e-6)
    assert as_run[0.0] == pytest.approx(off) and as_run[1.0] == pytest.approx(off)
    said = hp_plan("estimate", str(src / "search.yaml"))
    assert "HP533" in said.stderr + said.stdout and "MindSpeed-LLM 1.0.RC3" in said.stderr + said.stdout


def test_expert_share_moves_the_ascend_moe_runs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The experts' share is the mindspeed stack's: at 1 (the dense NPU rate) the two Ascend MoE runs are
    faster than at the fitted share; Megatron's MoE runs on H100 and GB200 are priced the same either way,
    and so is every dense MindSpeed run."""
    fitted = {r: _step(r) for r in (*ASCEND_MOE, *NVIDIA_MOE, "ascend-llama2-7b-8xa2-mindspeed")}
    monkeypatch.setattr(K, "MINDSPEED_EXPERT_GEMM_SHARE", 1.0)
    for r in ASCEND_MOE:
        assert _step(r) < 0.85 * fitted[r]
    for r in (*NVIDIA_MOE, "ascend-llama2-7b-8xa2-mindspeed"):
        assert _step(r) == pytest.approx(fitted[r], rel=1e-9)


def test_mc2_share_does_not_move_megatron_userbuffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """MC2's share is MindSpeed's: Megatron's --tp-comm-overlap (TransformerEngine userbuffers) keeps the
    per-block bound. Grok-1's and the GB200 405B's runs are priced the same at any MC2 share."""
    runs = ("grok1-314b-512xh100-nemo", "llama31-405b-128xgb200-nemo")
    fitted = {r: _step(r) for r in runs}
    monkeypatch.setattr(K, "MC2_ACHIEVED_SHARE", 1.0)
    for r in runs:
        assert _step(r) == pytest.approx(fitted[r], rel=1e-9)
