"""engine.config: train.yaml and search-config semantics, cluster resolution, locations."""

from __future__ import annotations

import json
import os
from pathlib import Path

from engine.check import check_file
from engine.config import ClusterOverrides, load
from engine.positions import Range

ROOT = Path(__file__).resolve().parents[3]
LLAMA = ROOT / "examples" / "llama3-70b"
DSV3 = ROOT / "examples" / "deepseek-v3"


def codes(loaded) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.code for d in loaded.diagnostics]


def test_bare_train_yaml_states_strategy_once_world_is_known() -> None:
    loaded = load(str(LLAMA / "train.yaml"))
    cfg = loaded.config
    assert cfg is not None and cfg.kind == "train"
    assert cfg.model is not None and (cfg.model.num_layers, cfg.model.hidden, cfg.model.kv_heads) == (80, 8192, 8)
    assert cfg.model.seq_len == 8192
    assert cfg.cluster is None and cfg.stated is None
    assert "HP302" in codes(loaded)
    assert all(d.state == "absent" for n, d in cfg.dimensions.items() if n != "etp")
    assert cfg.dimensions["etp"].summary() == "etp: fixed 1 (default)"  # never a search dimension

    cfg = load(str(LLAMA / "train.yaml"), overrides=ClusterOverrides(devices=1024, device_type="H100")).config
    assert cfg is not None and cfg.cluster is not None and cfg.cluster.world_size == 1024
    s = cfg.stated
    assert s is not None
    assert (s.dp, s.dp_shard, s.tp, s.pp, s.vpp, s.micro_batch_num) == (32, 32, 8, 4, 5, 16)
    assert s.pipeline_schedule == "interleaved" and s.recompute.mode == "full" and s.sequence_parallel
    assert cfg.locations["parallelism.tp"].value == Range.of(16, 11, 16, 12)
    assert cfg.locations["accelerator.tp_size"] == cfg.locations["parallelism.tp"]


def test_search_config_over_train_yaml() -> None:
    path = str(LLAMA / "search.yaml")
    loaded = check_file(path)
    assert [d for d in loaded.diagnostics if d.is_error] == []
    cfg = loaded.config
    assert cfg is not None and cfg.kind == "search"
    assert cfg.train_yaml == str(LLAMA / "train.yaml")
    assert loaded.files == (path, str(LLAMA / "train.yaml"))
    assert cfg.cluster is not None and cfg.cluster.device.name == "H100" and cfg.cluster.world_size == 1024
    assert cfg.dimensions["tp"].state == "list" and cfg.dimensions["tp"].values == (1, 2, 4, 8)
    assert cfg.dimensions["dp"].state == "auto"
    assert cfg.dimensions["ep"].summary() == "ep: fixed 1 (declared)"
    assert cfg.dimensions["etp"].summary() == "etp: fixed 1 (default)"
    assert cfg.global_batch_size == 512 and cfg.memory_limit_gb == 76 and cfg.recompute == "auto"
    assert cfg.budget_gib == 76
    # values from the train.yaml point into the train.yaml
    assert cfg.locations["model.hidden_size"].file == str(LLAMA / "train.yaml")
    assert cfg.locations["parallelism.tp"].file == path
    assert cfg.stated is None  # tp, pp are searched


def test_absent_dimension_inherits_train_yaml_value(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        "model:\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n"
        "accelerator:\n  tp_size: 4\n  pp_size: 2\n  cp_size: 1\n"
        "training:\n  global_batch_size: 64\n"
        "dataset: {data_transform: {max_seq_len: 4096}}\n"
    )
    s = tmp_path / "sub" / "search.yaml"
    s.parent.mkdir()
    s.write_text("train_yaml: ../t.yaml\ncluster: {num_nodes: 2, device_type: A100}\n"
                 "parallelism:\n  pp: auto\nmodel:\n  num_hidden_layers: 16\n")
    loaded = check_file(str(s))
    cfg = loaded.config
    assert cfg is not None
    tp = cfg.dimensions["tp"]
    assert (tp.state, tp.values, tp.origin) == ("fixed", (4,), "train.yaml")
    assert tp.location is not None and tp.location.file == str(tmp_path / "t.yaml")
    assert tp.location.value == Range.of(3, 11, 3, 12)
    assert cfg.dimensions["pp"].state == "auto"  # auto removes the inherited value
    assert cfg.model is not None and cfg.model.num_layers == 16 and cfg.model.hidden == 4096  # key by key
    assert cfg.locations["model.num_hidden_layers"].file == str(s)
    assert cfg.global_batch_size == 64
    assert cfg.dimensions["tp"].summary() == "tp: fixed 4 (train.yaml)"


def test_all_fixed_search_config_states_strategy(tmp_path: Path) -> None:
    s = tmp_path / "s.yaml"
    s.write_text(
        "model: {num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 32000,"
        " max_position_embeddings: 2048, hidden_act: gelu}\n"
        "cluster: {num_nodes: 4, cards_per_node: 8, device_type: a100}\n"
        "parallelism: {tp: 4, pp: 2, cp: 1, fsdp: 2}\n"
        "constraint: {global_batch_size: 64}\n"
        "recompute: selective\n"
    )
    cfg = check_file(str(s)).config
    assert cfg is not None and cfg.stated is not None
    st = cfg.stated
    assert (st.dp, st.tp, st.pp, st.dp_shard, st.micro_batch_num) == (4, 4, 2, 2, 16)
    assert st.recompute.mode == "selective"
    assert cfg.model is not None and cfg.model.gated_mlp is False and cfg.model.seq_len == 2048


def test_cluster_resolution_order(tmp_path: Path) -> None:
    t = tmp_path / "t.yaml"
    t.write_text("model: {pretrained_model_name_or_path: meta-llama/Llama-3.1-8B}\n"
                 "context: {device_num: 16, max_device_memory: 58GB}\n")
    cfg = load(str(t)).config
    assert cfg is not None and cfg.cluster is not None
    assert cfg.cluster.world_size == 16 and cfg.cluster.device.name == "A2"  # HyperParallel's default device
    assert cfg.memory_limit_gb == 58
    # editor settings only fill gaps: the file's device_num wins
    cfg = load(str(t), overrides=ClusterOverrides(devices=64, device_type="H100")).config
    assert cfg is not None and cfg.cluster is not None
    assert cfg.cluster.world_size == 16 and cfg.cluster.device.name == "H100"
    # command-line flags win over the file
    cfg = load(str(t), overrides=ClusterOverrides(devices=64, device_type="H100", explicit=True)).config
    assert cfg is not None and cfg.cluster is not None and cfg.cluster.world_size == 64
    assert (cfg.cluster.num_nodes, cfg.cluster.cards_per_node) == (8, 8)
    # a search config's cluster wins over context
    s = tmp_path / "s.yaml"
    s.write_text("train_yaml: t.yaml\ncluster: {num_nodes: 3, cards_per_node: 4, device_type: H200,"
                 " device_memory_gb: 120}\n")
    cfg = load(str(s)).config
    assert cfg is not None and cfg.cluster is not None
    assert (cfg.cluster.world_size, cfg.cluster.memory_gib, cfg.cluster.device.name) == (12, 120, "H200")


def test_legacy_schema(tmp_path: Path) -> None:
    t = tmp_path / "legacy.yaml"
    t.write_text(
        'model:\n  name: "test-dense"\n  config_overrides: {num_hidden_layers: 32, hidden_size: 4096,'
        " num_attention_heads: 32, vocab_size: 128256}\n"
        "train:\n  global_batch_size: 128\n  micro_batch_size: 1\n"
        "  accelerator: {dp_shard: 1, dp_replicate: 2, tp_degree: 4, pipeline_parallel_degree: 2}\n"
        '  gradient_checkpointing: {activation_checkpoint: "selective"}\n'
        "data:\n  max_seq_len: 8192\n"
    )
    loaded = check_file(str(t), overrides=ClusterOverrides(devices=16, device_type="A2"))
    assert [d.code for d in loaded.diagnostics if d.is_error] == []
    cfg = loaded.config
    assert cfg is not None and cfg.model is not None and cfg.model.seq_len == 8192
    s = cfg.stated
    assert s is not None and (s.dp, s.dp_shard, s.tp, s.pp, s.micro_batch_num) == (2, 1, 4, 2, 64)
    assert s.recompute.mode == "selective"
    assert cfg.locations["parallelism.tp"].value == Range.of(6, 57, 6, 58)


def test_local_config_json_with_hf_aliases(tmp_path: Path) -> None:
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "model_type": "deepseek_v3", "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
        "num_key_value_heads": 8, "vocab_size": 1000, "intermediate_size": 2048, "n_routed_experts": 16,
        "n_shared_experts": 1, "moe_intermediate_size": 256, "num_nextn_predict_layers": 1,
        "num_experts_per_tok": 2, "first_k_dense_replace": 1, "max_position_embeddings": 4096,
    }))
    t = tmp_path / "train.yaml"
    t.write_text("model:\n  pretrained_model_name_or_path: ./ckpt\ndataset: {data_transform: {max_seq_len: 1024}}\n")
    loaded = load(str(t))
    m = loaded.config.model if loaded.config else None
    assert m is not None
    assert (m.num_experts, m.num_shared_experts, m.mtp_depth, m.moe_ffn, m.first_k_dense) == (16, 1, 1, 256, 1)
    assert m.seq_len == 1024


def test_catalog_ids_case_and_org() -> None:
    from engine.catalog.models import lookup

    assert lookup("meta-llama/Llama-3.1-70B") is lookup("llama-3.1-70b") is lookup("META-LLAMA/LLAMA-3.1-70B-INSTRUCT")
    mixtral = lookup("mistralai/Mixtral-8x7B-v0.1")
    assert mixtral is not None and mixtral.fields["num_experts"] == 8
    assert lookup("acme/unknown") is None


def test_run_options(tmp_path: Path) -> None:
    t = tmp_path / "t.yaml"
    t.write_text(
        "model: {pretrained_model_name_or_path: Qwen/Qwen3-8B, torch_dtype: float32}\n"
        "accelerator: {context_parallel_algo: ulysses_cp, optimizer_weight_shard_size: 4, cp_size: 2}\n"
        "fsdp_config: {reshard_after_forward: false}\n"
        "activation_checkpoint: {mode: selective, selective_policy: attention, layers: {'0-3': full}}\n"
        "dataset: {data_transform: {max_seq_len: 32768}}\n"
        "context: {device_num: 32}\n"
    )
    cfg = load(str(t), overrides=ClusterOverrides(device_type="H100")).config
    assert cfg is not None
    r = cfg.run
    assert (r.cp_algo, r.selective_policy, r.reshard_after_forward, r.param_bytes) == ("ulysses", "attention", False, 4)
    assert cfg.stated is not None and cfg.stated.optimizer_shard == 4 and cfg.stated.cp == 2
    assert cfg.stated.recompute.layers == ((0, 3, "full"),)
    assert cfg.stated.dp_shard == cfg.stated.dp * 2  # an FSDP trainer shards over dp·cp when unstated


def test_missing_sequence_length_warns_and_uses_model_limit(tmp_path: Path) -> None:
    t = tmp_path / "t.yaml"
    t.write_text("model: {pretrained_model_name_or_path: meta-llama/Llama-3.1-8B}\n")
    loaded = load(str(t))
    assert "HP207" in codes(loaded)
    assert loaded.config is not None and loaded.config.model is not None
    assert loaded.config.model.seq_len == 131072


def test_problems_in_the_train_yaml_carry_its_path(tmp_path: Path) -> None:
    t = tmp_path / "t.yaml"
    t.write_text("model: {pretrained_model_name_or_path: meta-llama/Llama-3.1-8B}\naccelerator:\n  tp_size: '4'\n")
    s = tmp_path / "s.yaml"
    s.write_text("train_yaml: ./t.yaml\ncluster: {num_nodes: 1, device_type: H100}\n")
    loaded = check_file(str(s))
    bad = [d for d in loaded.diagnostics if d.code == "HP103"]
    assert len(bad) == 1 and bad[0].file == str(t) and bad[0].range == Range.of(2, 11, 2, 14)
    assert bad[0].data == {"replace_value": 4}


def test_examples_check_clean() -> None:
    for ex in (LLAMA, DSV3):
        for name in ("train.yaml", "search.yaml"):
            loaded = check_file(str(ex / name))
            assert [d.message for d in loaded.diagnostics if d.is_error or d.effective_severity == "warning"] == []
            assert loaded.config is not None and loaded.config.model is not None
    cfg = check_file(str(DSV3 / "search.yaml")).config
    assert cfg is not None and cfg.model is not None and cfg.model.is_moe and cfg.model.is_mla
    assert cfg.cluster is not None and cfg.cluster.world_size == 2048 and cfg.cluster.device.name == "H800"
    assert os.path.basename(cfg.train_yaml or "") == "train.yaml"


def test_search_config_with_an_auto_dimension_states_nothing(tmp_path: Path) -> None:
    s = tmp_path / "s.yaml"
    s.write_text(
        "model: {num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 32000,"
        " max_position_embeddings: 2048}\n"
        "cluster: {num_nodes: 4, cards_per_node: 8, device_type: a100}\n"
        "parallelism: {tp: 4, pp: 2, cp: 1, fsdp: auto}\n"
        "constraint: {global_batch_size: 64}\n"
    )
    cfg = check_file(str(s)).config
    assert cfg is not None and cfg.stated is None
    s.write_text(s.read_text().replace("fsdp: auto", "fsdp: [2]"))
    cfg = check_file(str(s)).config
    assert cfg is not None and cfg.stated is not None and cfg.stated.dp_shard == 2 and cfg.stated.dp == 4


def test_search_config_reads_its_train_yaml_from_the_editor_overlay(tmp_path: Path) -> None:
    """`texts` (path -> unsaved buffer) wins over the disk for the referenced train.yaml: the inherited tp,
    its location and the findings in it follow the buffer; without the overlay the disk counts."""
    disk = ("model:\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n"
            "accelerator:\n  tp_size: 4\n  pp_size: 2\n  cp_size: 1\n"
            "training:\n  global_batch_size: 64\n")
    t = tmp_path / "t.yaml"
    t.write_text(disk)
    s = tmp_path / "sub" / "search.yaml"
    s.parent.mkdir()
    s.write_text("train_yaml: ../t.yaml\ncluster: {num_nodes: 2, device_type: A100}\nparallelism:\n  pp: auto\n")

    def tp(loaded) -> tuple[str, tuple[int, ...], str]:  # type: ignore[no-untyped-def]
        cfg = loaded.config
        assert cfg is not None
        dim = cfg.dimensions["tp"]
        return dim.state, dim.values, dim.origin

    assert tp(check_file(str(s))) == ("fixed", (4,), "train.yaml")
    buffer = "# unsaved\n" + disk.replace("tp_size: 4", "tp_size: 2")
    loaded = check_file(str(s), texts={str(t): buffer})
    assert tp(loaded) == ("fixed", (2,), "train.yaml")
    cfg = loaded.config
    assert cfg is not None and cfg.train_yaml == str(t)
    assert loaded.files == (str(s), str(t))  # still a dependency of the search config (the server's map)
    loc = cfg.dimensions["tp"].location
    assert loc is not None and loc.file == str(t) and loc.value == Range.of(4, 11, 4, 12)  # the buffer's line
    # A key spelt differently (not normalised) names the same file; an unrelated key changes nothing.
    assert tp(check_file(str(s), texts={str(tmp_path / "sub" / ".." / "t.yaml"): buffer}))[1] == (2,)
    assert tp(check_file(str(s), texts={str(tmp_path / "other.yaml"): buffer}))[1] == (4,)
    # A finding in the buffer (tp 3 does not divide the heads) is reported in the train.yaml, not on disk.
    bad = check_file(str(s), texts={str(t): disk.replace("tp_size: 4", "tp_size: 3")})
    assert any(d.file == str(t) and d.is_error for d in bad.diagnostics), [d.code for d in bad.diagnostics]
    assert not any(d.is_error for d in check_file(str(s)).diagnostics)
    # A train.yaml that exists only as a buffer (never saved) is read too, not "not found" (HP009).
    new = check_file(str(s), text=s.read_text().replace("../t.yaml", "../new.yaml"),
                     texts={str(tmp_path / "new.yaml"): buffer})
    assert "HP009" not in codes(new) and tp(new)[1] == (2,)
    # The checked file itself comes from the overlay when no `text` is given (the server's worker).
    assert tp(check_file(str(t), texts={str(t): buffer})) == ("absent", (), "default")
    own = check_file(str(t), texts={str(t): buffer}).config
    assert own is not None and own.locations["parallelism.tp"].value == Range.of(4, 11, 4, 12)
