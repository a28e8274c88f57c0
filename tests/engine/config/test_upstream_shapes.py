"""Files shaped like the ones HyperParallel's repositories ship ([HP] §2, D-005): each is read
as upstream reads it, through `hp-plan check` in a subprocess or check_file. The fixtures are written here, in
the shape of upstream's recipes, examples and SAPP-ND demos (never read from ../shared at test time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.check import check_file

ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return str(p)


def cli(*args: str) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "engine.cli", *args, "--json"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    return r.returncode, json.loads(r.stdout)


def codes(path: str, **kw) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.code for d in check_file(path, **kw).diagnostics]


def errors(path: str) -> list[str]:
    return [f"{d.code} {d.message}" for d in check_file(path).diagnostics if d.is_error]


# A from-config trainer recipe (ttachon examples/training_demo/train_qwen3_5_moe.yaml's shape): the model holds
# factory arguments directly, beside `_target_` and `config_path`.
FROM_CONFIG = """\
model:
  _target_: examples.training_demo.cropped.build_cropped_model
  config_path: {config_path}
  num_hidden_layers: 8
  num_experts: null
  experts_implementation: eager
  local_files_only: true
  torch_dtype: bfloat16
training: {{global_batch_size: 16, micro_batch_size: 1, max_grad_norm: 1.0}}
accelerator: {{tp_size: 1, cp_size: 1, ep_size: 8, pp_size: 1, sequence_parallel: false}}
fsdp_config: {{dp_shard_size: 16, reshard_after_forward: true}}
plan_overrides:
  - match: "*.mlp"
    when: ep
activation_checkpoint: {{mode: "off"}}
dataset: {{data_config: {{seq_length: 4096}}}}
dataloader: {{batch_size: 1}}
checkpoint: {{save_ckpt: false}}
debug: {{check_nan_inf: false}}
"""

CONFIG_JSON = {"model_type": "qwen3_moe", "num_hidden_layers": 40, "hidden_size": 2048, "num_attention_heads": 16,
               "num_key_value_heads": 4, "vocab_size": 151936, "intermediate_size": 6144, "head_dim": 128,
               "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 512}


def test_a_root_training_section_makes_a_train_yaml_even_with_model_facts_beside_target(tmp_path: Path) -> None:
    local = tmp_path / "cfg"
    local.mkdir()
    (local / "config.json").write_text(json.dumps(CONFIG_JSON))
    path = write(tmp_path, "train.yaml", FROM_CONFIG.format(config_path=str(local)))
    loaded = check_file(path, overrides=None)
    cfg = loaded.config
    assert cfg is not None and cfg.kind == "train"
    assert not [d for d in loaded.diagnostics if d.is_error], loaded.diagnostics
    assert "HP101" not in codes(path)
    # config_path names the config; the factory argument beside _target_ overrides its layer count
    assert cfg.model is not None and cfg.model.num_layers == 8 and cfg.model.hidden == 2048
    assert cfg.model.num_experts == 128  # `num_experts: null` keeps the config's experts
    assert cfg.locations["model.num_hidden_layers"].key.start.line == 3


def test_unresolvable_config_path_is_one_error_at_the_name(tmp_path: Path) -> None:
    path = write(tmp_path, "train.yaml", FROM_CONFIG.format(config_path="/nonexistent/Qwen3.5-35B-A3B-Base"))
    # The file is right (the trainer resolves the name where it runs): one warning at the name, no error.
    assert errors(path) == []
    diags = check_file(path).diagnostics
    named = [d for d in diags if d.code == "HP205"]
    assert len(named) == 1 and named[0].path == "model.config_path" and "prices nothing" in named[0].message
    assert "HP410" not in codes(path) and "HP201" not in codes(path)  # the model is unknown: no judgement on it
    rc, doc = cli("estimate", path, "--devices", "16", "--device-type", "A3")
    assert rc == 1 and "HP512" in [d["code"] for d in doc["diagnostics"]]  # and nothing is priced


def test_yaml_of_another_tool_is_left_alone(tmp_path: Path) -> None:
    # hyper_parallel/compile/examples/automodel_tp/config.yaml's shape: model facts, but train/parallel sections
    # that neither HyperParallel reader knows.
    path = write(tmp_path, "config.yaml", "model:\n  vocab_size: 32000\n  hidden_size: 256\n  num_hidden_layers: 2\n"
                 "  num_attention_heads: 4\ntrain:\n  max_steps: 10\n  batch_size: 2\n  seq_len: 128\n"
                 "parallel:\n  tp_size: 2\n  dp_size: 2\nlogging:\n  log_interval: 1\n")
    rc, doc = cli("check", path)
    assert rc == 0
    assert [d["code"] for d in doc["diagnostics"]] == ["HP008"]


def test_a_search_config_being_written_is_still_one(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "model:\n  num_hidden_layers: 10\n  hidden_size: 1024\n")
    cfg = check_file(path).config
    assert cfg is not None and cfg.kind == "search"


def test_recipe_fragment_without_a_model_names_config_path(tmp_path: Path) -> None:
    # examples/recipes/llama_tp.yaml: accelerator only. Upstream refuses it for a search too.
    path = write(tmp_path, "llama_tp.yaml", "accelerator:\n  tp_size: 2\n  sequence_parallel: true\n")
    errs = errors(path)
    assert len(errs) == 1 and errs[0].startswith("HP206") and "config_path" in errs[0]


# The older DeepSeek-V3 search example's shape (auto_parallel/examples/deepseek_v3_671b_512devices_search.yaml).
DSV3_SEARCH = """\
model:
  name: "deepseek"
  num_hidden_layers: 61
  hidden_size: 7168
  intermediate_size: 18432
  num_attention_heads: 128
  num_key_value_heads: 128
  vocab_size: 159744
  max_position_embeddings: 4096
  local_batch_size: 1
  kv_lora_rank: 512
  q_lora_rank: 1536
  qk_rope_head_dim: 64
  v_head_dim: 128
  num_experts: 256
  num_experts_per_tok: 8
  num_shared_experts: 1
  moe_intermediate_size: 2048
  first_k_dense_replace: 3
  mtp_depth: 1
cluster: {num_nodes: 64, cards_per_node: 8, device_type: "A2", device_memory_gb: 58.0}
parallelism:
  dp: [8, 16, 32]
  tp: [2, 4, 8]
  pp: [4, 8, 16]
  cp: 1
  ep: [4, 8, 16]
  etp: ETP
  micro_batch_num: [8, 16, 32, 64, 128]
constraint: {global_batch_size: 1024, memory_limit_gb: 58.0}
recompute: "full"
pp_config: {stage_partition_mode: "uniform", pipeline_schedule: "1F1B"}
estimator: {framework: mindspeed}  # priced for MindSpeed (the figures below were taken on it)
"""


def test_etp_zero_means_follow_tp(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", DSV3_SEARCH.replace("ETP", "0"))
    loaded = check_file(path)
    assert not [d for d in loaded.diagnostics if d.is_error], loaded.diagnostics
    assert loaded.config is not None and loaded.config.dimensions["etp"].summary() == "etp: follows tp (declared)"
    rc, doc = cli("search", path, "--top", "3")
    assert rc == 0, doc
    best = doc["best"] if "best" in doc else doc["ranking"][0]
    s = best.get("strategy", best)
    assert s["etp"] == s["tp"] > 1  # every candidate prices its experts split over its own tp
    bad = write(tmp_path, "bad.yaml", DSV3_SEARCH.replace("ETP", "-1"))
    assert "HP109" in codes(bad)


def test_a_stated_1f1b_schedule_is_not_overridden_by_an_interleaved_vpp(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", DSV3_SEARCH.replace("ETP", "0"))
    cfg = check_file(path).config
    assert cfg is not None and cfg.dimensions["vpp"].summary() == "vpp: fixed 1 (declared)"
    assert cfg.dimensions["vpp"].location is not None and cfg.dimensions["vpp"].location.key.start.line == 31
    rc, doc = cli("search", path, "--top", "5")
    assert rc == 0
    for row in [doc["best"], *doc["top"]]:
        s = row.get("strategy", row)
        assert s["vpp"] == 1 and s["pipeline_schedule"] == "1F1B"
    # without the stated schedule the search may interleave
    free = write(tmp_path, "free.yaml", DSV3_SEARCH.replace("ETP", "0").replace(', pipeline_schedule: "1F1B"', ""))
    cfg = check_file(free).config
    assert cfg is not None and cfg.dimensions["vpp"].state == "absent"


# The SAPP-ND legacy demo's shape (sapp_nd/nd/yamls/hyper_qwen3_72b.yaml).
LEGACY_72B = """\
model:
  name: qwen3_5
  weights_path: /path/to/models/Qwen3-72B-Base
  param_init_type: "float32"
  compute_dtype: "bfloat16"
  config_overrides:
    vocab_size: 152064
    hidden_size: 8192
    intermediate_size: 29696
    num_hidden_layers: 80
    num_attention_heads: 64
    num_key_value_heads: 8
    max_position_embeddings: 4096
data:
  max_seq_len: 4096
train:
  max_steps: 20
  global_batch_size: 4608
  micro_batch_size: 1
  micro_batch_num: MBN
  accelerator:
    dp_shard: 1
    dp_replicate: 32
    tp_degree: 4
    pipeline_parallel_degree: 8
    use_seq_parallel: true
    enable_parallel_optimizer: POE
    optimizer_weight_shard_size: 8
  gradient_checkpointing:
    activation_checkpoint: full
context:
  max_device_memory: "54GB"
"""


def legacy(tmp_path: Path, mbn: int = 144, poe: str = "true") -> str:
    return write(tmp_path, "hyper_qwen3_72b.yaml", LEGACY_72B.replace("MBN", str(mbn)).replace("POE", poe))


def test_legacy_micro_batch_num_is_read_and_checked(tmp_path: Path) -> None:
    path = legacy(tmp_path)
    rc, doc = cli("check", path, "--devices", "1024", "--device-type", "A2")
    assert rc == 0, doc
    assert not [d for d in doc["diagnostics"] if d["severity"] == "error"]
    cfg = check_file(path).config
    assert cfg is not None and cfg.stated is not None and cfg.stated.micro_batch_num == 144
    bad = legacy(tmp_path, mbn=100)
    diags = [d for d in check_file(bad).diagnostics if d.code == "HP402"]
    assert diags and diags[0].path == "train.micro_batch_num" and "needs micro_batch_num 144" in diags[0].message


def test_legacy_accelerator_keys_and_context_budget_are_priced(tmp_path: Path) -> None:
    path = legacy(tmp_path)
    cfg = check_file(path).config
    assert cfg is not None and cfg.stated is not None
    assert cfg.stated.sequence_parallel and cfg.stated.optimizer_shard == 8 and cfg.optimizer_shard == 8
    assert cfg.memory_limit_gb == 54.0
    rc, doc = cli("estimate", path, "--devices", "1024", "--device-type", "A2")
    assert rc == 0 and doc["budget_gib"] == 54.0
    assert doc["strategy"]["sequence_parallel"] is True and doc["strategy"]["optimizer_shard"] == 8
    off = check_file(legacy(tmp_path, poe="false")).config
    assert off is not None and off.optimizer_shard == 1  # enable_parallel_optimizer: false wins over the size


def test_legacy_apply_writes_its_own_edit(tmp_path: Path) -> None:
    legacy(tmp_path)
    search = write(tmp_path, "search.yaml", "train_yaml: ./hyper_qwen3_72b.yaml\n"
                   "cluster: {num_nodes: 128, cards_per_node: 8, device_type: A2}\n"
                   "parallelism: {dp: auto, tp: [4, 8], pp: [4, 8], vpp: 1}\n"
                   "estimator: {framework: torchtitan}\n")
    r = subprocess.run([sys.executable, "-m", "engine.cli", "apply", search, "--dry-run", "--force"],
                       capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # the legacy file's own keys are edited (which ones depends on the best plan the framework's numbers pick)
    assert "micro_batch_num" in r.stdout or "pipeline_parallel_degree" in r.stdout


TRAINER_PP = """\
model:
  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
  torch_dtype: bfloat16
training: {global_batch_size: 8, micro_batch_size: 1, max_grad_norm: 1.0}
accelerator: {tp_size: 1, cp_size: 1, ep_size: 1, pp_size: 2, pp_micro_batch_num: 4, pp_schedule: SCHED, pp_vpp: 2}
fsdp_config: {dp_shard_size: 2, reshard_after_forward: true}
dataset: {data_transform: {max_seq_len: 4096}}
"""


def test_trainer_pipeline_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "pp.yaml", TRAINER_PP.replace("SCHED", "interleaved_1f1b"))
    rc, doc = cli("estimate", path, "--devices", "4", "--device-type", "A2")
    assert rc == 0, doc
    s = doc["strategy"]
    assert (s["pp"], s["vpp"], s["micro_batch_num"], s["pipeline_schedule"]) == (2, 2, 4, "interleaved")
    other = write(tmp_path, "pp2.yaml", TRAINER_PP.replace("SCHED", "zbv"))
    diags = check_file(other).diagnostics
    assert not [d for d in diags if d.is_error]
    info = [d for d in diags if d.code == "HP112" and d.path == "accelerator.pp_schedule"]
    assert info and "priced as 1F1B" in info[0].message
    assert "HP101" not in [d.code for d in diags]


def test_old_key_search_config_states_its_sequence_length_as_seq_len(tmp_path: Path) -> None:
    # examples/moe_llm_search.yaml at an older commit: n_layers, dim, inter_dim, n_heads, n_kv_heads, seq_len.
    path = write(tmp_path, "moe.yaml", "model:\n  name: mixtral\n  n_layers: 32\n  dim: 4096\n  inter_dim: 14336\n"
                 "  n_heads: 32\n  n_kv_heads: 8\n  vocab_size: 32000\n  seq_len: 32768\n  num_experts: 8\n"
                 "  num_experts_per_tok: 2\n  moe_inter_dim: 14336\n"
                 "cluster: {num_nodes: 8, cards_per_node: 8, device_type: ascend}\n"
                 "parallelism: {tp: [1, 2, 4, 8], pp: [1, 2, 4], cp: 1, ep: [1, 2, 4, 8], etp: 1}\n"
                 "constraint: {global_batch_size: 256}\n")
    loaded = check_file(path)
    assert loaded.config is not None and loaded.config.model is not None
    assert loaded.config.model.seq_len == 32768 and loaded.config.model.num_layers == 32
    assert "HP207" not in [d.code for d in loaded.diagnostics]
    assert loaded.config.locations["model.max_position_embeddings"].key.start.line == 8


def test_ignored_bandwidth_keys_are_named_as_ours(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "model: {num_hidden_layers: 2, hidden_size: 256, num_attention_heads: 4, "
                 "vocab_size: 1000, max_position_embeddings: 1024}\n"
                 "cluster: {num_nodes: 1, device_type: A2, intra_node_bandwidth_gbps: 200.0}\n")
    d = [d for d in check_file(path).diagnostics if d.code == "HP102"]
    assert len(d) == 1 and d[0].data["replace_key"] == "intra_node_bandwidth_gb_s"
    assert "ignored, by HyperParallel and by hp-plan" in d[0].message and "upstream" not in d[0].message


LLAMA_TRAIN = ROOT / "examples" / "llama3-70b" / "train.yaml"
RC_SEARCH = """\
train_yaml: {train}
cluster: {{num_nodes: 16, cards_per_node: 8, device_type: H100, device_memory_gb: 80}}
parallelism: {{tp: [4, 8], pp: [4, 8], cp: 1, ep: 1, vpp: 1, micro_batch_size: 1, fsdp: 1{rc_dim}}}
constraint: {{global_batch_size: 512, memory_limit_gb: 76}}
{extra}
"""


def rc_search(tmp_path: Path, name: str, extra: str = "", rc_dim: str = "") -> str:
    # priced for torchtitan (its "op" selective policy)
    extra = (extra.replace("estimator: {", "estimator: {framework: torchtitan, ") if "estimator:" in extra
             else extra + "\nestimator: {framework: torchtitan}")
    return write(tmp_path, name, RC_SEARCH.format(train=LLAMA_TRAIN, extra=extra, rc_dim=rc_dim))


def best_recompute(path: str) -> str:
    rc, doc = cli("search", path, "--top", "5")
    assert rc == 0, doc
    rcs = {str(row["strategy"]["recompute"]) for row in [doc["best"], *doc["top"]]}
    return str(doc["best"]["strategy"]["recompute"]) + "|" + ",".join(sorted(rcs))


def test_recompute_modes_narrow_auto(tmp_path: Path) -> None:
    free = best_recompute(rc_search(tmp_path, "free.yaml", "recompute: auto"))
    assert "selective" in free  # the premise: with all three modes, selective is chosen somewhere
    for extra in ("recompute: auto\nrecompute_modes: [off, full]",
                  "recompute: auto\nestimator: {recompute_modes: [off, full], cp_algo: ring}"):
        narrowed = best_recompute(rc_search(tmp_path, "n.yaml", extra))
        assert "selective" not in narrowed, (extra, narrowed)
    bad = rc_search(tmp_path, "bad.yaml", "recompute: auto\nrecompute_modes: [off, swap]")
    d = [d for d in check_file(bad).diagnostics if d.is_error]
    assert [x.code for x in d] == ["HP106"] and "unknown recompute modes ['swap']" in d[0].message


def test_recompute_as_a_parallelism_dimension(tmp_path: Path) -> None:
    listed = rc_search(tmp_path, "l.yaml", rc_dim=", recompute: [off, full]")
    cfg = check_file(listed).config
    assert cfg is not None and cfg.recompute == "auto" and cfg.recompute_modes == ("off", "full")
    assert "selective" not in best_recompute(listed)
    one = check_file(rc_search(tmp_path, "o.yaml", rc_dim=", recompute: full")).config
    assert one is not None and one.recompute == "full"
    auto = check_file(rc_search(tmp_path, "a.yaml", rc_dim=", recompute: auto")).config
    assert auto is not None and auto.recompute == "auto" and auto.recompute_modes == ()


# An AutoModels recipe stating the trainer's micro-batch count (training.micro_batch_num, where HyperParallel's
# priced yaml puts it, [HP] §4.2), on 8 devices: 32 = 4 x 1 x dp 8.
AUTOMODELS_MBN = """\
model:
  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
  torch_dtype: bfloat16
training:
  global_batch_size: 32
  micro_batch_size: 1
  micro_batch_num: MBN
  max_grad_norm: 1.0
accelerator: {tp_size: 1, pp_size: 1, cp_size: 1, ep_size: 1}
fsdp_config: {dp_shard_size: 8}
activation_checkpoint: {mode: full}
dataset: {data_transform: {max_seq_len: 4096}}
context: {device_num: 8}
"""


def test_automodels_training_micro_batch_num_is_read_priced_and_checked(tmp_path: Path) -> None:
    path = write(tmp_path, "train.yaml", AUTOMODELS_MBN.replace("MBN", "4"))
    rc, doc = cli("estimate", path, "--device-type", "H100")
    assert rc == 0 and doc["strategy"]["micro_batch_num"] == 4
    assert "HP101" not in [d["code"] for d in doc["diagnostics"]]
    bad = write(tmp_path, "bad.yaml", AUTOMODELS_MBN.replace("MBN", "2"))
    hp402 = [d for d in check_file(bad).diagnostics if d.code == "HP402"]
    assert hp402 and hp402[0].path == "training.micro_batch_num" and "needs micro_batch_num 4" in hp402[0].message


def test_automodels_apply_rewrites_a_stated_micro_batch_num_and_adds_none(tmp_path: Path) -> None:
    write(tmp_path, "train.yaml", AUTOMODELS_MBN.replace("MBN", "4"))
    search = write(tmp_path, "search.yaml", "train_yaml: ./train.yaml\n"
                   "cluster: {num_nodes: 1, cards_per_node: 8, device_type: H100}\n"
                   "parallelism: {tp: [2], pp: 1, dp: auto, fsdp: auto}\n")
    r = subprocess.run([sys.executable, "-m", "engine.cli", "apply", search, "--dry-run", "--force"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "training.micro_batch_num: 4 -> 8" in r.stderr + r.stdout  # tp 2 leaves dp 4: 32 = 8 x 1 x 4
    bare = AUTOMODELS_MBN.replace("  micro_batch_num: MBN\n", "")
    write(tmp_path, "train.yaml", bare)
    r = subprocess.run([sys.executable, "-m", "engine.cli", "apply", search, "--dry-run", "--force"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "micro_batch_num" not in r.stdout + r.stderr  # the trainer derives it


def test_the_dtypes_upstream_reads_set_the_widths_priced(tmp_path: Path) -> None:
    """B_p and B_c as HyperParallel takes them ([HP] §2.5-§2.6, §6.3): the AutoModels root model_init_dtype is the
    stored weights' width; model.compute_dtype (a run key) and the legacy train.mixed_precision.param_dtype (when
    mixed precision is on) the compute width when torch_dtype is not stated."""
    init = write(tmp_path, "init.yaml", AUTOMODELS_MBN.replace("MBN", "4") + "model_init_dtype: float32\n")
    loaded = check_file(init)
    assert loaded.config is not None and (loaded.config.run.param_bytes, loaded.config.run.master_weights) == (4, False)
    assert "model_init_dtype" not in [d.path for d in loaded.diagnostics]
    no_init = check_file(write(tmp_path, "bf16.yaml", AUTOMODELS_MBN.replace("MBN", "4"))).config
    assert no_init is not None and (no_init.run.param_bytes, no_init.run.master_weights) == (2, True)
    compute = AUTOMODELS_MBN.replace("MBN", "4").replace("torch_dtype: bfloat16", "compute_dtype: float32")
    cfg = check_file(write(tmp_path, "compute.yaml", compute)).config
    assert cfg is not None and cfg.run.param_bytes == 4
    # The legacy demo without its model dtypes: train.mixed_precision.param_dtype is the compute width.
    bare = LEGACY_72B.replace("MBN", "144").replace("POE", "true").replace('  param_init_type: "float32"\n', "").replace(
        '  compute_dtype: "bfloat16"\n', "")
    mp = bare.replace("  gradient_checkpointing:", "  mixed_precision: {enabled: ENABLED, param_dtype: float32}\n"
                      "  gradient_checkpointing:")
    on = check_file(write(tmp_path, "on.yaml", mp.replace("ENABLED", "true"))).config
    off = check_file(write(tmp_path, "off.yaml", mp.replace("ENABLED", "false"))).config
    assert on is not None and off is not None and (on.run.param_bytes, off.run.param_bytes) == (4, 2)


def test_a_stated_loss_parallel_prices_the_logits(tmp_path: Path) -> None:
    base = AUTOMODELS_MBN.replace("MBN", "8").replace("tp_size: 1", "tp_size: 2").replace("dp_shard_size: 8",
                                                                                          "dp_shard_size: 4")
    _rc, split = cli("estimate", write(tmp_path, "lp.yaml", base.replace("ep_size: 1", "ep_size: 1, loss_parallel: "
                                                                         "true")), "--device-type", "H100")
    _rc, whole = cli("estimate", write(tmp_path, "nolp.yaml", base.replace("ep_size: 1", "ep_size: 1, loss_parallel: "
                                                                           "false")), "--device-type", "H100")
    # false: every TP rank holds the whole vocabulary's fp32 logits (2 x 4096 tokens x 128256 x 4 B more than ÷ 2)
    assert whole["memory_breakdown_gib"]["activations"] > split["memory_breakdown_gib"]["activations"] + 1.0
    assert "HP101" not in [d["code"] for d in whole["diagnostics"]]


def test_keys_upstream_reads_that_change_the_run_are_flagged(tmp_path: Path) -> None:
    kimi = AUTOMODELS_MBN.replace("MBN", "4").replace(
        "  torch_dtype: bfloat16\n", "  torch_dtype: bfloat16\n  freeze_patterns: [\"model.vision_tower*\"]\n").replace(
        "fsdp_config: {dp_shard_size: 8}", "fsdp_config: {dp_shard_size: 8, enable_offload: true}")
    flagged = {d.path for d in check_file(write(tmp_path, "kimi.yaml", kimi)).diagnostics if d.code == "HP112"}
    assert {"model.freeze_patterns", "fsdp_config.enable_offload", "training.max_grad_norm"} <= flagged
    legacy_text = LEGACY_72B.replace("MBN", "144").replace("POE", "true").replace(
        "  gradient_checkpointing:", "  optimizer: {type: adamw, max_grad_norm: 1.0}\n  gradient_checkpointing:")
    flagged = {d.path for d in check_file(write(tmp_path, "l.yaml", legacy_text)).diagnostics if d.code == "HP112"}
    assert "train.optimizer.max_grad_norm" in flagged
    search = write(tmp_path, "s.yaml", "model: {name: m, num_hidden_layers: 8, hidden_size: 1024, num_attention_heads: 8,"
                   " vocab_size: 32000, max_position_embeddings: 4096}\ncluster: {num_nodes: 1, device_type: A2}\n"
                   "pp_config: {pp_degree: 2, micro_batch_num: 8}\n")
    assert "pp_config.micro_batch_num" in {d.path for d in check_file(search).diagnostics if d.code == "HP112"}


def test_legacy_sequence_parallel_rides_in_the_accelerator_and_wins(tmp_path: Path) -> None:
    """A legacy train.accelerator rides verbatim into the yaml HyperParallel prices, where a stated sequence_parallel
    wins over use_seq_parallel ([HP] §2.6, §4.2)."""
    text = LEGACY_72B.replace("MBN", "144").replace("POE", "true").replace("use_seq_parallel: true",
                                                                          "sequence_parallel: false\n    "
                                                                          "use_seq_parallel: true")
    loaded = check_file(write(tmp_path, "sp.yaml", text))
    assert loaded.config is not None and loaded.config.stated is not None
    assert loaded.config.stated.sequence_parallel is False
    assert "HP101" not in [d.code for d in loaded.diagnostics]
    only = LEGACY_72B.replace("MBN", "144").replace("POE", "true").replace("use_seq_parallel", "sequence_parallel")
    cfg = check_file(write(tmp_path, "only.yaml", only)).config
    assert cfg is not None and cfg.stated is not None and cfg.stated.sequence_parallel is True
    flagged = check_file(write(tmp_path, "s.yaml", "model: {name: m, num_hidden_layers: 8, hidden_size: 1024, "
                                                   "num_attention_heads: 8, vocab_size: 32000, max_position_embeddings: "
                                                   "4096}\ncluster: {num_nodes: 1, device_type: A2}\n"
                                                   "pp_config: {pp_degree: 2, layer_offset_range: [-1, 1]}\n"))
    assert "pp_config.layer_offset_range" in {d.path for d in flagged.diagnostics if d.code == "HP112"}


def test_legacy_apply_writes_sequence_parallel_in_the_files_own_spelling(tmp_path: Path) -> None:
    write(tmp_path, "hyper_qwen3_72b.yaml", LEGACY_72B.replace("MBN", "144").replace("POE", "true").replace(
        "use_seq_parallel: true", "sequence_parallel: false"))
    search = write(tmp_path, "search.yaml", "train_yaml: ./hyper_qwen3_72b.yaml\n"
                   "cluster: {num_nodes: 128, cards_per_node: 8, device_type: A2}\n"
                   "parallelism: {dp: auto, tp: [8], pp: [8], vpp: 1, sequence_parallel: true}\n"
                   "estimator: {framework: torchtitan}\n")
    r = subprocess.run([sys.executable, "-m", "engine.cli", "apply", search, "--dry-run", "--force"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "train.accelerator.sequence_parallel: false -> true" in r.stdout + r.stderr
    assert "use_seq_parallel" not in r.stdout + r.stderr
