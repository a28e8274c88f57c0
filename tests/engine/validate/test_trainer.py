"""The AutoModels trainer's own refusals, said at the key ([HP] Corrections): the keys only a search reads and
near-miss typos in a file the trainer runs (HP113), compile with pipeline parallelism and fp32 main parameters
without float32 reduction (HP423); never on a train.yaml written for the search, never on an older build's own
fields. The trainer's offload keys and its CP algorithm are read and said."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.check import check_file
from engine.diagnostics import Severity

# hyper_parallel/models/qwen3_5_moe/recipes/train.yaml's shape (the trainer runs it: both factories stated)
RECIPE = """\
model:
  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
  torch_dtype: bfloat16
training: {train_iters: 10, global_batch_size: 64, micro_batch_size: 1, backend: hccl}
accelerator: {tp_size: 1, cp_size: 1, ep_size: 1, pp_size: 1, sequence_parallel: false, loss_parallel: false}
fsdp_config:
  dp_shard_size: 8
  edp_shard_size: 1
  reshard_after_forward: true
mixed_precision: {enabled: true}
activation_checkpoint: {mode: full}
compile: {enabled: false}
dataset: {data_transform: {max_seq_len: 4096}}
optimizer: {_target_: hyper_parallel.components.optim.AdamW}
"""


def _diags(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    p = tmp_path / "train.yaml"
    p.write_text(text)
    return check_file(str(p)).diagnostics


def test_the_recipe_itself_is_clean(tmp_path: Path) -> None:
    assert not [d for d in _diags(tmp_path, RECIPE) if d.effective_severity in (Severity.ERROR, Severity.WARNING)]


def test_compile_with_pipelines_is_refused_at_compile_enabled(tmp_path: Path) -> None:
    text = RECIPE.replace("pp_size: 1", "pp_size: 2").replace("compile: {enabled: false}", "compile: {enabled: true}")
    hit = [d for d in _diags(tmp_path, text) if d.code == "HP423"]
    assert hit and hit[0].effective_severity == Severity.ERROR and hit[0].path == "compile.enabled"
    assert hit[0].range.start.line == 12 and "compile is not supported together with pipeline parallelism" in hit[0].message


def test_fp32_main_params_need_float32_reduction(tmp_path: Path) -> None:
    text = RECIPE.replace("  reshard_after_forward: true\n", "  reshard_after_forward: true\n  mix_precision: "
                          "{param_dtype: bfloat16, reduce_dtype: bfloat16}\n").replace(
        "optimizer: {_target_: hyper_parallel.components.optim.AdamW}",
        "optimizer: {_target_: hyper_parallel.components.optim.AdamW, fp32_main_params: true}")
    hit = [d for d in _diags(tmp_path, text) if d.code == "HP423"]
    assert hit and hit[0].path == "optimizer.fp32_main_params"
    ok = text.replace("reduce_dtype: bfloat16", "reduce_dtype: float32")
    assert "HP423" not in {d.code for d in _diags(tmp_path, ok)}


def test_search_only_keys_and_typos_in_a_file_the_trainer_runs(tmp_path: Path) -> None:
    text = RECIPE.replace("backend: hccl}", "backend: hccl, micro_batch_num: 8}").replace(
        "loss_parallel: false}", "loss_parallel: false, pipeline_scheduler: 1f1b, tp_sise: 2}") + \
        "context: {device_num: 8}\n"
    hits = {d.path: d for d in _diags(tmp_path, text) if d.code == "HP113"}
    assert set(hits) == {"training.micro_batch_num", "accelerator.pipeline_scheduler", "accelerator.tp_sise", "context"}
    assert all(d.effective_severity == Severity.ERROR and "unknown configuration fields" in d.message
               for d in hits.values())
    assert "did you mean 'tp_size'" in hits["accelerator.tp_sise"].message
    # the same keys in a train.yaml written for the search (no factories): the search reads them, no refusal
    search_side = text.replace("  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained\n", "")
    assert not {d.code for d in _diags(tmp_path, search_side)} & {"HP113"}


def test_an_older_builds_own_fields_are_not_refused(tmp_path: Path) -> None:
    text = RECIPE.replace("  reshard_after_forward: true\n", "  reshard_after_forward: true\n"
                          "  defer_fsdp_grad_sync: true\n") + \
        "tokenizer: {_target_: transformers.AutoTokenizer.from_pretrained}\ngradient_checkpointing: {x: 1}\n" \
        "collate_fn: {_target_: pkg.Collator}\n"
    assert not [d for d in _diags(tmp_path, text) if d.effective_severity == Severity.ERROR]


def test_offload_keys_and_the_cp_algorithm_are_read(tmp_path: Path) -> None:
    text = RECIPE.replace("activation_checkpoint: {mode: full}", "activation_checkpoint: {mode: full, swap_inputs: true}"
                          ).replace("  reshard_after_forward: true\n", "  reshard_after_forward: true\n"
                                    "  enable_offload: true\n") + "activation_swap: attention\n" + \
        "plan_overrides:\n  - match: \"*.self_attn\"\n    when: cp\n    region_dispatch: false\n" \
        "    inner_wrapper: sdpa_hf_ulysses\n"
    p = tmp_path / "train.yaml"
    p.write_text(text)
    loaded = check_file(str(p))
    said = {d.path for d in loaded.diagnostics if d.code == "HP112"}
    assert {"activation_checkpoint.swap_inputs", "fsdp_config.enable_offload"} <= said and "activation_swap" not in said
    assert loaded.config is not None and loaded.config.run.cp_algo == "ulysses"
    assert loaded.config.run.swap_attention  # `activation_swap: attention`, priced as the attention swap


@pytest.mark.parametrize(("wrapper", "algo"), [("sdpa_hf_ulysses", "ulysses"), ("sdpa_hf_allgather", "allgather"),
                                               ("my_all_gather_cp", "allgather"), ("colossalai_ring", "ring")])
def test_a_cp_wrapper_is_read_as_the_algorithm_its_name_says(tmp_path: Path, wrapper: str, algo: str) -> None:
    """`plan_overrides` names the CP wrapper: its algorithm is what the name says (an all-gather wrapper is the
    all-gather CP `context_parallel_algo: all_gather` names, not a ring), without HP112 on the wrapper."""
    text = RECIPE + f"plan_overrides:\n  - match: \"*.self_attn\"\n    when: cp\n    inner_wrapper: {wrapper}\n"
    p = tmp_path / "train.yaml"
    p.write_text(text)
    loaded = check_file(str(p))
    assert loaded.config is not None and loaded.config.run.cp_algo == algo
    assert not any(d.code == "HP112" and "inner_wrapper" in d.path for d in loaded.diagnostics)


def test_the_trainer_needs_exactly_one_run_length(tmp_path: Path) -> None:
    both = RECIPE.replace("train_iters: 10,", "train_iters: 10, train_samples: 640,")
    hit = [d for d in _diags(tmp_path, both) if d.code == "HP423"]
    assert hit and hit[0].path == "training.train_samples" and "exactly one" in hit[0].message
    neither = RECIPE.replace("train_iters: 10, ", "")
    assert [d for d in _diags(tmp_path, neither) if d.code == "HP423" and d.path == "training"]


@pytest.mark.parametrize(("ranges", "code", "path"), [
    ("[{first: 0, count: 10, mode: full}, {first: 5, count: 3, mode: selective}]", "HP424", "[1].first"),
    ("[{first: 0, count: null, mode: full}, {first: 20, count: 4, mode: off}]", "HP424", "[0].count"),
    ("[{first: 30, count: 5, mode: full}]", "HP421", "[0].count"),
    ("[{first: 40, count: null, mode: full}]", "HP421", "[0].first"),
])
def test_layer_ranges_are_ordered_apart_and_on_the_model(tmp_path: Path, ranges: str, code: str, path: str) -> None:
    """The trainer's layer_ranges ([HP] Corrections 2): in order, without overlap, only the last open-ended, every
    range on the model's 32 layers; each breach at its own value."""
    text = RECIPE.replace("activation_checkpoint: {mode: full}",
                          f"activation_checkpoint: {{mode: full, layer_ranges: {ranges}}}")
    hits = [d for d in _diags(tmp_path, text) if d.code == code]
    assert hits and hits[0].path == f"activation_checkpoint.layer_ranges{path}", hits
    ok = RECIPE.replace("activation_checkpoint: {mode: full}", "activation_checkpoint: {mode: full, layer_ranges: "
                        "[{first: 0, count: 8, mode: full}, {first: 8, count: null, mode: off}]}")
    assert not [d for d in _diags(tmp_path, ok) if d.code in ("HP421", "HP424")]
