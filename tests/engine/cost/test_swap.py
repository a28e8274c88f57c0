"""MindSpeed's swap-attention priced as the stack runs it (engine.cost.swap): the attention block's saved tensors
leave the device between forward and backward, the forward waits only for what the host copies take beyond the
block's own forward, and a stack without it says so (HP533) and prices the plan without it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.cost import estimate
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import LLAMA8B, cluster
from tests.support.cli import ROOT, hp_plan

MIXTRAL = ROOT / "benchmarks" / "calibration_runs" / "ascend-mixtral-8x22b-64xa2-mindspeed"


def _run(tmp_path: Path, swap: bool, framework: str = "mindspeed") -> dict:
    dst = tmp_path / f"{framework}-{swap}"
    dst.mkdir(parents=True)
    (dst / "train.yaml").write_text((MIXTRAL / "train.yaml").read_text())
    text = (MIXTRAL / "search.yaml").read_text()
    assert "swap_attention: true" in text  # the published run's script passes --swap-attention
    text = text.replace("swap_attention: true", f"swap_attention: {str(swap).lower()}")
    text = text.replace("framework: mindspeed", f"framework: {framework}")
    (dst / "search.yaml").write_text(text)
    out = hp_plan("estimate", str(dst / "search.yaml"), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_swap_frees_the_attention_activations_and_hides_its_copies(tmp_path: Path) -> None:
    """Mixtral 8x22B at 32K on 64 A2 (the published run): the swap frees every layer's attention activations
    (Q, K, V, the projections' inputs: about half of what a layer keeps with its MoE block recomputed) and the
    copies (≈ 84 MB per layer and micro-batch over the 17 GB/s host link, 4.9 ms) hide under the block's
    forward (projections and 32K attention, ≈ 6 ms): same step time, lower peak."""
    on, off = _run(tmp_path, True), _run(tmp_path, False)
    act_on, act_off = on["memory_breakdown_gib"]["activations"], off["memory_breakdown_gib"]["activations"]
    assert 0.3 * act_off < act_on < 0.7 * act_off
    assert on["peak_memory_gib"] < off["peak_memory_gib"] - 3.0
    assert on["step_time_s"] == pytest.approx(off["step_time_s"])
    # its release (1.0.RC3) runs the swap; the HP533 it gets is for the script's --use-mc2, which it switches off
    assert not [d for d in on["diagnostics"] if d["code"] == "HP533" and d["path"] == "swap_attention"]
    assert [d["path"] for d in on["diagnostics"] if d["code"] == "HP533"] == ["tp_comm_overlap"]


def test_a_stack_without_the_swap_says_so_and_prices_without_it(tmp_path: Path) -> None:
    on, off = _run(tmp_path, True, "megatron"), _run(tmp_path, False, "megatron")
    hits = [d for d in on["diagnostics"] if d["code"] == "HP533"]
    assert hits and "swap_attention" in hits[0]["message"] and "mindspeed" in hits[0]["message"]
    assert on["peak_memory_gib"] == pytest.approx(off["peak_memory_gib"])


def test_copies_that_outlast_the_block_show_in_the_step() -> None:
    """The forward waits for the copies only where they outlast the block: Llama 8B at 8K and tp 8 copies 27 MB
    per layer and micro-batch (1.6 ms at A2's 17 GB/s) beside a 0.7 ms attention block, so the step grows there;
    over a link fast enough it does not. The memory saving is the same either way."""
    run = RunOptions(framework="mindspeed", swap_attention=True)
    s = Strategy(tp=8, sequence_parallel=True, micro_batch_num=4)
    slow = cluster(1, "A2")
    cl = replace(slow, device=replace(slow.device, host_link_gb_s=1000.0))
    fast_on = estimate(LLAMA8B, cl, run, s, 1e9)
    fast_off = estimate(LLAMA8B, cl, replace(run, swap_attention=False), s, 1e9)
    slow_on = estimate(LLAMA8B, slow, run, s, 1e9)
    assert fast_on.step_time_s == pytest.approx(fast_off.step_time_s)
    assert slow_on.step_time_s > fast_on.step_time_s
    assert slow_on.peak_memory_gib == pytest.approx(fast_on.peak_memory_gib)
    assert fast_on.peak_memory_gib < fast_off.peak_memory_gib


def test_the_export_carries_the_swap_the_price_assumed() -> None:
    out = hp_plan("export", str(MIXTRAL / "search.yaml"), "--to", "mindspeed")
    assert out.returncode == 0, out.stderr
    assert "--swap-attention" in out.stdout


def test_hyperparallels_activation_swap_is_the_attention_swap(tmp_path: Path) -> None:
    """HyperParallel's trainer key `activation_swap: attention` ([HP] Corrections 4) is priced as the attention
    swap: the 70B example's activations (selective recompute keeps the attention block's) drop; `none` (its
    default) prices as the key absent."""
    base = (ROOT / "examples" / "llama3-70b" / "train.yaml").read_text()
    assert "  mode: full" in base
    base = base.replace("  mode: full", "  mode: selective")

    def priced(extra: str) -> dict:
        path = tmp_path / f"train-{len(extra)}.yaml"
        path.write_text(base + extra)
        out = hp_plan("estimate", str(path), "--devices", "1024", "--device-type", "H100", "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        return json.loads(out.stdout)

    plain, none, swapped = priced(""), priced("activation_swap: none\n"), priced("activation_swap: attention\n")
    assert none["peak_memory_gib"] == plain["peak_memory_gib"]
    act = swapped["memory_breakdown_gib"]["activations"]
    assert act < plain["memory_breakdown_gib"]["activations"] and swapped["peak_memory_gib"] < plain["peak_memory_gib"]
    assert not [d for d in swapped["diagnostics"] if d["code"] == "HP533" or d.get("path") == "activation_swap"]
