"""Memory as trained (D-010): no dropout masks at dropout 0, gradient and optimizer-state widths as the files
state them, the states as the stack holds them (FSDP2), the loss's peak as the framework computes it, and the
held-out measured peaks (benchmarks/memory_runs)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.check import check_file
from engine.cost import constants as K
from engine.cost import estimate
from engine.cost.memory import attention_dropout, dropout
from engine.specs import GIB, RecomputePlan, RunOptions, Strategy
from tests.engine.cost.shapes import GPT2, LLAMA8B, MOE, h100
from tests.support.cli import estimate_in_process

RUNS = Path(__file__).resolve().parents[3] / "benchmarks" / "memory_runs"

SEARCH = """\
model:
  num_hidden_layers: 12
  hidden_size: 768
  intermediate_size: 3072
  num_attention_heads: 12
  vocab_size: 50257
  max_position_embeddings: 1024
  hidden_act: gelu
  {extra}
cluster: {{num_nodes: 1, cards_per_node: 1, device_type: H100}}
parallelism: {{dp: 1, tp: 1, pp: 1, cp: 1, ep: 1, micro_batch_size: 8, micro_batch_num: 1}}
constraint: {{global_batch_size: 8}}
recompute: none
"""


def test_stated_dropout_zero_drops_the_masks() -> None:
    assert dropout(GPT2) and attention_dropout(GPT2)  # GPT recipe default: dropout 0.1
    no = replace(GPT2, hidden_dropout=0.0, attention_dropout=0.0)
    assert not dropout(no) and not attention_dropout(no)
    s = Strategy(micro_batch_size=8)
    with_masks = estimate(GPT2, h100(1, 1), RunOptions(), s, 80.0).memory_breakdown_gib["activations"]
    without = estimate(no, h100(1, 1), RunOptions(), s, 80.0).memory_breakdown_gib["activations"]
    assert without < with_masks


def test_dropout_read_from_the_files(tmp_path: Path) -> None:
    peaks = {}
    for extra in ("", "hidden_dropout: 0.0", "resid_pdrop: 0.0"):
        f = tmp_path / "search.yaml"
        f.write_text(SEARCH.format(extra=extra))
        cfg = check_file(str(f)).config
        assert cfg is not None and cfg.model is not None
        peaks[extra] = cfg.model.hidden_dropout
    assert peaks == {"": None, "hidden_dropout: 0.0": 0.0, "resid_pdrop: 0.0": 0.0}


# ----------------------------------------------------------------- optimizer states as the stack holds them
def _states(run: RunOptions, s: Strategy) -> float:
    b = estimate(LLAMA8B, h100(1, 8), run, s, 1e6).memory_breakdown_gib
    return b["parameters"] + b["gradients"] + b["optimizer"]


def test_fsdp2_holds_the_fp32_sharded_parameter_as_the_master() -> None:
    # Megatron: 2 (bf16 weight) + 4 (fp32 grad) + 4 (fp32 master) + 8 (Adam) = 18 B/param ([CAL] §6.1);
    # FSDP2: the sharded fp32 parameter is the master, bf16 only in the gather buffer: 4 + 4 + 8 = 16.
    s = Strategy(dp=8, dp_shard=8, micro_batch_size=1)
    mega = _states(RunOptions(framework="megatron"), s)
    titan = _states(RunOptions(framework="torchtitan"), s)
    assert titan / mega == pytest.approx(16 / 18, rel=1e-9)
    # pure bf16 training (no master, bf16 gradients and Adam states) is 2 + 2 + 4 = 8 on either stack
    pure = RunOptions(framework="torchtitan", grad_bytes=2, optimizer_state_bytes=2, master_weights=False)
    assert _states(pure, s) / mega == pytest.approx(8 / 18, rel=1e-9)


def test_torchtitan_pipeline_keeps_gathered_weights_and_unsharded_gradients() -> None:
    run = RunOptions(framework="torchtitan")
    flat = estimate(LLAMA8B, h100(1, 8), run, Strategy(dp=4, dp_shard=4, pp=2, micro_batch_num=4), 1e6)
    mega = estimate(LLAMA8B, h100(1, 8), replace(run, framework="megatron"),
                    Strategy(dp=4, dp_shard=4, pp=2, micro_batch_num=4), 1e6)
    # megatron shards the gradients 1/4 at 4 bytes; torchtitan under PP holds them whole in the fp32 reduce dtype
    assert flat.memory_breakdown_gib["gradients"] == pytest.approx(4 * mega.memory_breakdown_gib["gradients"], rel=1e-9)
    one_stage = estimate(LLAMA8B, h100(1, 8), run, Strategy(dp=8, dp_shard=8, micro_batch_size=1), 1e6)
    # without PP the same run reduce-scatters every micro-batch: 1/8 of all the gradients, not half of them whole
    assert one_stage.memory_breakdown_gib["gradients"] < flat.memory_breakdown_gib["gradients"] / 3


# ----------------------------------------------------------------------------------- the loss's own peak
def test_eager_fp32_loss_holds_twelve_bytes_per_logit_at_its_peak() -> None:
    # full recompute: layer activations do not depend on the framework, only the loss's logits do
    m = replace(LLAMA8B, seq_len=131072)
    s = Strategy(dp=2, dp_shard=8, cp=4, micro_batch_size=1, recompute=RecomputePlan("full"))
    # the unchunked loss (loss_chunks 1: torchtitan's releases before its ChunkedLossWrapper)
    act = {fw: estimate(m, h100(1, 8), RunOptions(framework=fw, loss_chunks=1), s, 1e6).memory_breakdown_gib["activations"]
           for fw in ("megatron", "torchtitan")}
    T, V = 131072 / 4, m.vocab
    assert (act["torchtitan"] - act["megatron"]) * GIB == pytest.approx((12 - 4) * T * V, rel=1e-6)


def test_vocabulary_parallel_loss_holds_sixteen_bytes_per_local_logit() -> None:
    # torchtitan with TP runs PyTorch's loss_parallel: (grad_input + exp(x)) * grad_output, 16 B per logit of V/t
    s = Strategy(dp=1, tp=8, micro_batch_size=1, sequence_parallel=True, recompute=RecomputePlan("full"))
    act = {fw: estimate(LLAMA8B, h100(1, 8), RunOptions(framework=fw, loss_chunks=1), s, 1e6)
           .memory_breakdown_gib["activations"] for fw in ("megatron", "torchtitan")}
    T, V = float(LLAMA8B.seq_len), LLAMA8B.vocab / 8
    assert (act["torchtitan"] - act["megatron"]) * GIB == pytest.approx((16 - 4) * T * V, rel=1e-6)


def test_128k_context_run_priced_at_its_measured_peak() -> None:
    # torchtitan Table 2: Llama 3.1 8B, FSDP 2 x CP 4, 131072 tokens, full AC: measured 84.0 GiB. Counting one
    # fp32 logits tensor (4 B) priced it at 45.9 GiB (-45%); the loss's backward peak (12 B) is the peak.
    # Compared as torchtitan measures it: the allocator's reserved peak, without RESERVED_GIB (outside it).
    doc = estimate_in_process(RUNS / "tt-8b-8gpu-cp4-128k.yaml")
    assert doc["fits"] is True
    assert abs((doc["peak_memory_gib"] - K.RESERVED_GIB) / 84.0 - 1) <= 0.10


def test_held_out_measured_peaks_no_run_that_trained_is_out_of_memory() -> None:
    expected = json.loads((RUNS / "expected.json").read_text())
    errors = {}
    for path in sorted(RUNS.glob("*.yaml")):
        doc = estimate_in_process(path)
        assert doc["fits"] is True, path.name
        priced = doc["peak_memory_gib"] - K.RESERVED_GIB  # the allocator's share, what torchtitan logs
        errors[path.stem] = priced / expected[path.stem]["measured_peak_gib"] - 1
    assert set(errors) == set(expected)
    # every Llama 3.1 8B row (one to 128 nodes, 8K to 256K tokens) and the 70B row within 10%; of the 405B
    # pipelined rows only CP 8 at 256K (measured 84.9, priced flat with CP 1-4) is the known gap
    # (docs/cost-model.md §2.4). Before the allocator overhead and the pipeline buffers: 11 of 17.
    assert all(abs(e) <= 0.10 for k, e in errors.items() if not k.startswith("tt-405b")), errors
    assert sum(abs(e) <= 0.10 for e in errors.values()) >= 16, errors
    assert all(e >= -0.12 for e in errors.values()), errors


# ------------------------------------------------------------------------------- dtypes read from the files
TRAIN = """\
model:
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
  torch_dtype: bfloat16
training: {{global_batch_size: 8, micro_batch_size: 1}}
accelerator: {{tp_size: 1, pp_size: 1, cp_size: 1}}
fsdp_config: {{dp_shard_size: 8}}
{mp}
activation_checkpoint: {{mode: full}}
dataset: {{data_transform: {{max_seq_len: 4096}}}}
context: {{device_num: 8}}
"""


def _run_of(tmp_path: Path, text: str, name: str = "train.yaml") -> RunOptions:
    f = tmp_path / name
    f.write_text(text)
    cfg = check_file(str(f)).config
    assert cfg is not None
    return cfg.run


def test_mixed_precision_read_from_the_train_yaml(tmp_path: Path) -> None:
    off = _run_of(tmp_path, TRAIN.format(mp="mixed_precision: {enabled: false}"))
    assert (off.param_bytes, off.grad_bytes, off.optimizer_state_bytes, off.master_weights) == (2, 2, 2, False)
    on = _run_of(tmp_path, TRAIN.format(mp="mixed_precision: {enabled: true, param_dtype: bfloat16, "
                                           "reduce_dtype: bfloat16}"))
    assert (on.param_bytes, on.grad_bytes, on.optimizer_state_bytes, on.master_weights) == (2, 2, 4, True)
    unstated = _run_of(tmp_path, TRAIN.format(mp=""))
    assert (unstated.grad_bytes, unstated.master_weights) == (4, True)
    legacy = ("model: {name: llama3-8b}\ntrain:\n  global_batch_size: 8\n  micro_batch_size: 1\n"
              "  mixed_precision: {enabled: false}\n  accelerator: {dp_shard: 8, tp_degree: 1}\n"
              "data: {max_seq_len: 4096}\n")
    lg = _run_of(tmp_path, legacy, "legacy.yaml")
    assert (lg.grad_bytes, lg.master_weights) == (2, False)


def test_estimator_dtypes_read_and_bad_values_diagnosed_at_the_value(tmp_path: Path) -> None:
    base = SEARCH.format(extra="hidden_dropout: 0.0")
    run = _run_of(tmp_path, base + "estimator: {grad_dtype: bf16, optimizer_state_dtype: bfloat16, "
                                   "master_weights: false}\n", "s.yaml")
    assert (run.grad_bytes, run.optimizer_state_bytes, run.master_weights) == (2, 2, False)
    f = tmp_path / "bad.yaml"
    f.write_text(base + "estimator:\n  grad_dtype: fp8\n  master_weights: sometimes\n")
    diags = {d.path: d for d in check_file(str(f)).diagnostics if d.code in ("HP104", "HP106")}
    assert set(diags) == {"estimator.grad_dtype", "estimator.master_weights"}
    assert diags["estimator.grad_dtype"].range.start.line == base.count("\n") + 1


def test_cli_estimate_prices_pure_bf16_states(tmp_path: Path) -> None:
    f = tmp_path / "train.yaml"
    f.write_text(TRAIN.format(mp="mixed_precision: {enabled: false}"))
    pure = estimate_in_process(f)["memory_breakdown_gib"]
    f.write_text(TRAIN.format(mp=""))
    mixed = estimate_in_process(f)["memory_breakdown_gib"]
    assert pure["gradients"] == pytest.approx(mixed["gradients"] / 2)
    assert pure["parameters"] + pure["optimizer"] == pytest.approx((mixed["parameters"] + mixed["optimizer"]) / 2)


def test_muon_keeps_one_state_per_parameter(tmp_path: Path) -> None:
    # HyperParallel's recipes train with Muon in pure bf16 ([HP] §6.3: Muon bf16 1·2 = 2 B of optimizer state)
    muon = TRAIN.format(mp="mixed_precision: {enabled: false}\noptimizer: {_target_: hyper_parallel.components.optim.Muon}")
    adam = TRAIN.format(mp="mixed_precision: {enabled: false}\noptimizer: {_target_: torch.optim.AdamW}")
    assert _run_of(tmp_path, muon).optimizer_states == 1
    assert _run_of(tmp_path, adam, "adam.yaml").optimizer_states == 2
    f = tmp_path / "m.yaml"
    f.write_text(muon)
    m = estimate_in_process(f)["memory_breakdown_gib"]
    f.write_text(adam)
    a = estimate_in_process(f)["memory_breakdown_gib"]
    assert m["optimizer"] == pytest.approx(a["optimizer"] / 2)


# ------------------------------------------- the allocator's reserve and torch.distributed.pipelining's buffers
def test_allocator_overhead_scales_what_the_allocator_holds_and_reports_it_as_reserved() -> None:
    from engine.catalog.frameworks import FRAMEWORKS
    s = Strategy(dp=8, dp_shard=8, micro_batch_size=1)
    titan = estimate(LLAMA8B, h100(1, 8), RunOptions(framework="torchtitan"), s, 1e6)
    b = titan.memory_breakdown_gib
    held = sum(v for k, v in b.items() if k != "reserved")  # states, activations, buffers: the allocator's
    f = FRAMEWORKS["torchtitan"].allocator_overhead
    assert f > 0
    assert b["reserved"] == pytest.approx(K.RESERVED_GIB + f * held, rel=1e-9)
    assert titan.peak_memory_gib == pytest.approx((1 + f) * held + K.RESERVED_GIB, rel=1e-9)
    # Megatron's published figures are formula figures: no allocator overhead there
    mega = estimate(LLAMA8B, h100(1, 8), RunOptions(framework="megatron"), s, 1e6).memory_breakdown_gib
    assert mega["reserved"] == pytest.approx(K.RESERVED_GIB, rel=1e-12)


def test_torch_pipelining_keeps_a_receive_buffer_per_micro_batch() -> None:
    # torchtitan's pipeline stages hold, per micro-batch, a forward receive buffer (not on the first chunk) and
    # an output-gradient receive buffer (not on the last), plus the first rank's stage outputs in flight; the
    # buffer term grows with the micro-batch count at a fixed micro-batch, Megatron's (one send + one receive)
    # does not.
    run = RunOptions(framework="torchtitan")
    full = RecomputePlan("full")

    def buffers(fw: str, mbn: int) -> float:
        s = Strategy(dp=4, dp_shard=4, pp=2, micro_batch_size=1, micro_batch_num=mbn, recompute=full)
        return estimate(LLAMA8B, h100(1, 8), replace(run, framework=fw), s, 1e6).memory_breakdown_gib["buffers"]

    one = 2.0 * LLAMA8B.seq_len * LLAMA8B.hidden / GIB  # one micro-batch's residual stream, bf16
    # 2 stages: each rank has one receive set per micro-batch (rank 0: gradients; rank 1: inputs); rank 0 (the
    # peak with its 2 micro-batches in flight) also keeps those 2 outputs
    assert buffers("torchtitan", 8) - buffers("torchtitan", 4) == pytest.approx(4 * one, rel=1e-9)
    assert buffers("megatron", 8) == pytest.approx(buffers("megatron", 4), rel=1e-12)


# ------------------------------------------------------------------ selective "op" checkpointing, eager vs compiled
def test_compiled_op_policy_does_not_keep_the_block_output_eager_checkpointing_caches() -> None:
    # Eager selective checkpointing caches every saved op's output, the last matmul's (w2, h per token) too,
    # though the residual add's backward never reads it; torch.compile's partitioner keeps only what the
    # backward reads. torchtitan Table 1 measures eager 82.4 GiB, compiled 77.0 GiB for the same run.
    s = Strategy(dp=8, dp_shard=8, micro_batch_size=2, recompute=RecomputePlan("selective"))
    act = {c: estimate(LLAMA8B, h100(1, 8), RunOptions(framework="torchtitan", compile=c, selective_policy="op"),
                       s, 1e6).memory_breakdown_gib["activations"] for c in (False, True)}
    T = 2 * LLAMA8B.seq_len
    assert (act[False] - act[True]) * GIB == pytest.approx(2 * LLAMA8B.hidden * T * LLAMA8B.num_layers, rel=1e-9)
    # full recompute keeps only the layer input either way
    full = replace(s, recompute=RecomputePlan("full"))
    same = {c: estimate(LLAMA8B, h100(1, 8), RunOptions(framework="torchtitan", compile=c), full,
                        1e6).memory_breakdown_gib["activations"] for c in (False, True)}
    assert same[False] == pytest.approx(same[True], rel=1e-12)


# ------------------------------------------------- interleaved pipelines: one chunk's unsharded gradients at a time
def _titan_pp(mbn: int, vpp: int) -> Any:
    s = Strategy(dp=4, dp_shard=4, pp=2, vpp=vpp, micro_batch_size=1, micro_batch_num=mbn,
                 pipeline_schedule="interleaved" if vpp > 1 else "1F1B", recompute=RecomputePlan("full"))
    return estimate(LLAMA8B, h100(1, 8), RunOptions(framework="torchtitan"), s, 1e6)


def test_one_round_interleaved_pipeline_holds_one_chunks_unsharded_gradients() -> None:
    # torch.distributed.pipelining reduce-scatters a chunk's gradients at its last micro-batch's backward;
    # Interleaved1F1B with one round (m < 2p) runs each chunk's backwards together, last chunk first, so only
    # the largest chunk's unsharded fp32 gradients exist at once. With two rounds every chunk accumulates.
    plain = _titan_pp(4, 1).memory_breakdown_gib["gradients"]
    one_round = _titan_pp(2, 2).memory_breakdown_gib["gradients"]
    two_rounds = _titan_pp(4, 2).memory_breakdown_gib["gradients"]
    assert two_rounds == pytest.approx(plain, rel=1e-9)
    # Llama 8B over 2 stages × 2 chunks, torchtitan's split counting the embedding and the output as layers
    # (34 over 4 chunks): the peak (last) stage holds chunk 1 with 9 layers and chunk 3 with 7 layers + the
    # final norm and output projection, the larger
    layer = 4 * (LLAMA8B.hidden * (2 * 4096 + 2 * 1024) + 3 * LLAMA8B.hidden * LLAMA8B.ffn + 2 * LLAMA8B.hidden)
    head = 4 * (LLAMA8B.vocab * LLAMA8B.hidden + LLAMA8B.hidden)
    assert one_round * GIB == pytest.approx(max(9 * layer, 7 * layer + head), rel=1e-6)
    assert plain * GIB == pytest.approx(16 * layer + head, rel=1e-6)
    # the per-stage terms the tables print say the same
    s = Strategy(dp=4, dp_shard=4, pp=2, vpp=2, micro_batch_size=1, micro_batch_num=2, pipeline_schedule="interleaved",
                 recompute=RecomputePlan("full"))
    est = estimate(LLAMA8B, h100(1, 8), RunOptions(framework="torchtitan"), s, 1e6)
    stage_total = sum(v for v in est.memory_breakdown_gib.values())
    assert stage_total == pytest.approx(est.peak_memory_gib, rel=1e-9)


def test_measured_interleaved_row_sits_below_the_1f1b_one() -> None:
    # torchtitan Table 5 (405B, 8 micro-batches on PP 8): 1F1B 82.5 GiB, interleaved 72.7 GiB measured
    one = estimate_in_process(RUNS / "tt-405b-512gpu-3d-1f1b.yaml")["peak_memory_gib"]
    inter = estimate_in_process(RUNS / "tt-405b-512gpu-3d-interleaved.yaml")["peak_memory_gib"]
    assert 0.5 * (82.5 - 72.7) < one - inter < 1.5 * (82.5 - 72.7)


def test_megatron_keeps_no_expert_outputs_from_0_13() -> None:
    """Megatron-Core 0.13 applies the router's probabilities in the experts' activation ([MCORE-MOE]): the
    combine's backward no longer reads the routed copies' outputs, so they are not held (16 bits × h per copy
    and MoE layer); the combine still streams them, so the step time does not move."""
    s = Strategy(dp=8, ep=8, micro_batch_num=1)
    run = RunOptions(framework="megatron")
    now = estimate(MOE, h100(1), run, s, 1e6)
    before = estimate(MOE, h100(1), replace(run, framework_version="0.12"), s, 1e6)
    moe_layers = MOE.num_layers - MOE.first_k_dense
    outputs = moe_layers * MOE.seq_len * MOE.experts_per_tok * 2 * MOE.hidden / GIB
    got = before.memory_breakdown_gib["activations"] - now.memory_breakdown_gib["activations"]
    assert got == pytest.approx(outputs, rel=1e-9)
    assert now.step_time_s == pytest.approx(before.step_time_s, rel=1e-12)
