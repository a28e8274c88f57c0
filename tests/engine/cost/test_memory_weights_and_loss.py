"""Measured peaks beyond torchtitan on H100 ([CAL] §12), priced through `hp-plan estimate --json`: a loss run in
token chunks (torchtitan's ChunkedLossWrapper, its current model configs' loss) and FP8 weights held as the
parameter (Megatron --fp8-param-gather, Megatron-Bridge's FP8 current-scaling precision)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main as hp_plan
from engine.cost import constants as K
from tests.support.cli import estimate_in_process

ROOT = Path(__file__).resolve().parents[3]
RUNS = ROOT / "benchmarks" / "calibration_runs"


def _copy_run(name: str, tmp_path: Path, *edits: tuple[str, str]) -> Path:
    """The run folder copied (search.yaml names ./train.yaml; each copy its own folder), with each (old, new) text
    of its search.yaml replaced."""
    dst = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(RUNS / name, dst)
    f = dst / "search.yaml"
    text = f.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    f.write_text(text)
    return f


def _error(doc: dict[str, Any], measured: float) -> float:
    """Signed error against a measured allocator peak (RESERVED_GIB lies outside the allocator)."""
    return (float(doc["peak_memory_gib"]) - K.RESERVED_GIB - measured) / measured


def test_chunked_loss_prices_the_large_local_batch_run_at_its_measured_peak(tmp_path: Path) -> None:
    # Qwen3 8B, FSDP 4 on GB200, local batch 16 x 2048 tokens: measured 112.88 GiB (61 % of its memory).
    # One fp32 loss over all 32,768 tokens x 151,936 logits at 12 B is 56 GiB; ChunkedLossWrapper keeps an eighth.
    run = RUNS / "tt-qwen3-8b-4xgb200-fsdp4-lbs16"
    measured = json.loads((run / "expected.json").read_text())["peak_memory_gib"]
    chunked = estimate_in_process(run / "search.yaml")
    assert abs(_error(chunked, measured)) < 0.10
    assert chunked["fits"] is True
    # the same plan under the 2024-12 release: one eager fp32 loss (no chunks, not compiled)
    plain = estimate_in_process(_copy_run(run.name, tmp_path, ("'73aed7f6'", "'9dec370'")))
    assert _error(plain, measured) > 0.40
    logits_gib = 12 * 151936 * 16 * 2048 / 2**30
    saved = plain["memory_breakdown_gib"]["activations"] - chunked["memory_breakdown_gib"]["activations"]
    assert 0.8 * logits_gib < saved < logits_gib  # 7/8 of the logits, less the chunks' hidden-state copies


def test_a_release_that_compiles_its_loss_holds_two_16_bit_copies_of_the_logits(tmp_path: Path) -> None:
    # Llama 3.1 8B, FSDP 8, local batch 2 x 8192, compile, one loss chunk: as TT-BENCH's 2024-12 release ran it
    # (the eager fp32 loss: 12 bytes per logit at its backward) and as a 2025-06 release runs the same plan
    # (torch.compile'd cross-entropy: the bf16 logits and the bf16 gradient, 4)
    name = "llama31-8b-8xh100-96g-torchtitan-compile"
    eager = estimate_in_process(RUNS / name / "search.yaml")
    compiled = estimate_in_process(_copy_run(name, tmp_path, ("'9dec370'", "'e7c0cae'")))
    assert eager["framework_release"] == "0.0 (9dec370)" and compiled["framework_release"] == "0.1 (e7c0cae)"
    saved = eager["memory_breakdown_gib"]["activations"] - compiled["memory_breakdown_gib"]["activations"]
    assert saved == pytest.approx((12 - 4) * 2 * 8192 * 128256 / 2**30, rel=1e-6)
    uncompiled = estimate_in_process(_copy_run(name, tmp_path, ("'9dec370'", "'e7c0cae'"),
                                               ("  compile: true\n", "  compile: false\n")))
    assert uncompiled["memory_breakdown_gib"]["activations"] > compiled["memory_breakdown_gib"]["activations"]


def test_fp8_param_gather_holds_no_16_bit_weights(tmp_path: Path) -> None:
    # Llama 3 70B FP8-CS SFT, TP4 PP4 VPP5 DP2 on H100 (Megatron-Bridge): the weights are FP8 tensors with their
    # transpose (2 B/param), not bf16 + an FP8 cache (4 B/param); the embedding on the peak stage (the first) is
    # bf16 either way and never cached in FP8 (2 B/param): Megatron-Core's own module, not TransformerEngine's.
    name = "mbridge-llama3-70b-sft-32xh100-fp8-tp4pp4vpp5"
    stated = estimate_in_process(RUNS / name / "search.yaml")
    off = estimate_in_process(_copy_run(name, tmp_path, ("  fp8_param_gather: true\n", "  fp8_param_gather: false\n")))
    assert stated["stage_memory_gib"].index(stated["peak_memory_gib"]) == 0 == \
        off["stage_memory_gib"].index(off["peak_memory_gib"])
    params_on = stated["memory_breakdown_gib"]["parameters"]
    params_off = off["memory_breakdown_gib"]["parameters"]
    held = params_on * K.GIB / 2  # parameters on the rank, all at 2 bytes
    embedding = 128256 * 8192 / 4  # vocabulary-parallel over tp 4
    assert params_off == pytest.approx((4 * (held - embedding) + 2 * embedding) / K.GIB, rel=1e-9)
    assert stated["memory_breakdown_gib"]["gradients"] == params_on  # bf16 main gradients, as the recipe sets
    measured = json.loads((RUNS / name / "expected.json").read_text())["peak_memory_gib"]
    assert _error(stated, measured) < 0.15  # +44 % before; the first stage's figure, see docs/cost-model.md §2.4


def test_bad_loss_chunks_is_a_positioned_diagnostic(tmp_path: Path) -> None:
    path = _copy_run("tt-qwen3-8b-4xgb200-fsdp4-lbs16", tmp_path,
                     ("  compile: true\n", "  compile: true\n  loss_chunks: 0\n"))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        rc = hp_plan(["check", str(path)])
    out = buf.getvalue()
    assert rc != 0 and "loss_chunks" in out


def test_deepspeed_zero3_gathers_one_module_at_a_time() -> None:
    # NAR21 Table 2, 529.6B ZeRO-3 on 640 A100 at micro-batch 4: it trained. DeepSpeed gathers each module's own
    # parameters (DS-EST: the largest module, here the 20480 x 81920 first MLP matrix), not a whole 5.0B layer.
    doc = estimate_in_process(ROOT / "benchmarks" / "cases" / "N2-04.yaml")
    h = 20480
    assert abs(doc["memory_breakdown_gib"]["buffers"] - 2 * 2 * (h * 4 * h) / 2**30) < 1e-6
    assert doc["fits"] is True and doc["peak_memory_gib"] < 80.0  # 84.6 GiB, "does not fit", before
