"""HyperParallel pipelines ([HP] Corrections 1: PipelineStage with GPipe, 1F1B and interleaved 1F1B): the default
framework prices a stated pp, searches pipelined plans, and finds one where only pipelines fit."""

from __future__ import annotations

import json
from pathlib import Path

from engine.check import check_file
from engine.cost import estimate
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import LLAMA70B, cluster
from tests.support.cli import hp_plan

LLAMA8B = ("model: {num_hidden_layers: 32, hidden_size: 4096, intermediate_size: 14336, num_attention_heads: 32,\n"
           "        num_key_value_heads: 8, vocab_size: 128256, max_position_embeddings: 4096}\n"
           "cluster: {num_nodes: 2, cards_per_node: 8, device_type: H100}\n"
           "constraint: {global_batch_size: 256}\n")


def _search(path: Path) -> dict:
    out = hp_plan("search", str(path), "--json", "--top", "50")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_search_listing_only_pipelines_returns_the_fastest_pipelined_plan(tmp_path: Path) -> None:
    f = tmp_path / "search.yaml"
    f.write_text(LLAMA8B + "parallelism: {pp: [2, 4]}\n")
    doc = _search(f)
    assert "HP530" not in {d["code"] for d in doc["diagnostics"]}
    best, top = doc["best"], doc["top"]
    assert best is not None and best["strategy"]["pp"] in (2, 4)
    assert all(e["strategy"]["pp"] in (2, 4) for e in top)
    # the fastest, up to the search's near-tie band where it prefers the simpler plan (engine.cost.equivalence)
    assert best["step_time_s"] <= min(e["step_time_s"] for e in top) * (1 + doc["equivalence_band"])
    # the same search without the list may choose any pp, and is never slower
    f.write_text(LLAMA8B)
    free = _search(f)
    assert min(e["step_time_s"] for e in free["top"]) <= min(e["step_time_s"] for e in top) + 1e-12


def test_the_default_framework_finds_a_plan_for_405b_on_2048_devices(tmp_path: Path) -> None:
    f = tmp_path / "search.yaml"
    f.write_text("model: {name: meta-llama/Llama-3.1-405B, num_hidden_layers: 126, hidden_size: 16384,\n"
                 "        intermediate_size: 53248, num_attention_heads: 128, num_key_value_heads: 8,\n"
                 "        vocab_size: 128256, max_position_embeddings: 8192}\n"
                 "cluster: {num_nodes: 256, cards_per_node: 8, device_type: H100}\n"
                 "constraint: {global_batch_size: 2048}\n")
    doc = _search(f)
    assert doc["best"] is not None, doc["diagnostics"]
    s = doc["best"]["strategy"]
    assert s["pp"] > 1 and s["dp"] * s["tp"] * s["pp"] * s["cp"] == 2048
    assert doc["best"]["peak_memory_gib"] <= 80


def test_a_stated_pipeline_is_priced_with_no_refusal(tmp_path: Path) -> None:
    train = tmp_path / "train.yaml"
    train.write_text(
        "model:\n  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained\n"
        "  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n"
        "training: {train_iters: 2, global_batch_size: 32, micro_batch_size: 1}\n"
        "accelerator: {tp_size: 1, cp_size: 1, ep_size: 1, pp_size: 2, pp_micro_batch_num: 8, pp_schedule: gpipe,"
        " pp_vpp: 1}\n"
        "fsdp_config: {dp_shard_size: 4}\n"
        "activation_checkpoint: {mode: full}\n"
        "dataset: {data_transform: {max_seq_len: 4096}}\n"
        "optimizer: {_target_: hyper_parallel.components.optim.AdamW}\n")
    out = hp_plan("estimate", str(train), "--json", "--devices", "8", "--device-type", "H100")
    doc = json.loads(out.stdout)
    assert not [d for d in doc["diagnostics"] if d["severity"] in ("error", "warning")], doc["diagnostics"]
    cfg = check_file(str(train)).config
    assert cfg is not None and cfg.pipeline_schedule == "gpipe"
    train.write_text(train.read_text().replace("pp_schedule: gpipe, pp_vpp: 1", "pp_schedule: 1f1b, pp_vpp: 2"))
    cfg = check_file(str(train)).config
    assert cfg is not None and cfg.pipeline_schedule == "interleaved"


def test_gpipe_holds_every_micro_batch_where_1f1b_holds_pp() -> None:
    """GPipe's forward of all m micro-batches before any backward keeps m micro-batches' activations; 1F1B
    keeps at most pp on the first stage (NAR21 §2.2): same bubble, more memory."""
    cl = cluster(4, "H100")
    one = Strategy(dp=8, dp_shard=8, pp=4, micro_batch_num=16)
    gp = Strategy(dp=8, dp_shard=8, pp=4, micro_batch_num=16, pipeline_schedule="gpipe")
    run = RunOptions(framework="hyperparallel")
    a, b = estimate(LLAMA70B, cl, run, one, 1e9), estimate(LLAMA70B, cl, run, gp, 1e9)
    assert b.peak_memory_gib > a.peak_memory_gib
    assert abs(b.step_time_s - a.step_time_s) / a.step_time_s < 0.02


def test_a_stated_gpipe_schedule_is_what_the_search_prices(tmp_path: Path) -> None:
    """GPipe holds every micro-batch's activations at its peak ([HP] Corrections 1): a search config stating it is
    searched under it (vpp 1, the plans run GPipe), and the best plan stated and estimated reads the same peak and
    step; 1F1B's search prices the same plan smaller."""
    f = tmp_path / "search.yaml"
    f.write_text(LLAMA8B + "parallelism: {pp: [2], tp: 1, micro_batch_size: 1}\nrecompute: full\n"
                 "pp_config: {pipeline_schedule: gpipe}\n")
    doc = _search(f)
    assert doc["top"] and all(e["strategy"]["pipeline_schedule"] == "gpipe" and e["strategy"]["vpp"] == 1
                              for e in doc["top"])
    best = doc["best"]["strategy"]
    stated = tmp_path / "stated.yaml"
    stated.write_text(LLAMA8B + f"parallelism: {{pp: 2, tp: 1, dp: {best['dp']}, fsdp: {best['dp_shard']}, cp: 1, "
                      "ep: 1, vpp: 1, micro_batch_size: 1, sequence_parallel: false}\nrecompute: full\n"
                      "pp_config: {pipeline_schedule: gpipe}\n")
    est = json.loads(hp_plan("estimate", str(stated), "--json").stdout)
    assert est["strategy"]["pipeline_schedule"] == "gpipe"
    assert est["peak_memory_gib"] == doc["best"]["peak_memory_gib"]
    assert est["step_time_s"] == doc["best"]["step_time_s"]
    stated.write_text(stated.read_text().replace("pipeline_schedule: gpipe", "pipeline_schedule: 1F1B"))
    one_f = json.loads(hp_plan("estimate", str(stated), "--json").stdout)
    assert one_f["strategy"]["pipeline_schedule"] == "1F1B" and one_f["peak_memory_gib"] < est["peak_memory_gib"]
