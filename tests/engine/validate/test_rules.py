"""Cross-field rules: each lands on the offending token (list items included) with quick-fix data."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.config import ClusterOverrides
from engine.positions import Range

MODEL = ("model: {num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, num_key_value_heads: 8,"
         " intermediate_size: 14336, vocab_size: 128256, max_position_embeddings: 8192}\n")
CLUSTER = "cluster: {num_nodes: 4, cards_per_node: 8, device_type: H100}\n"


def run(tmp_path: Path, body: str, name: str = "s.yaml", overrides: ClusterOverrides | None = None):  # type: ignore[no-untyped-def]
    p = tmp_path / name
    p.write_text(body)
    return check_file(str(p), overrides=overrides).diagnostics


def train_h100(tmp_path: Path, body: str):  # type: ignore[no-untyped-def]
    """A train.yaml of `body` and a 4096-token dataset, on H100s (--device-type H100)."""
    return run(tmp_path, body + "dataset: {data_transform: {max_seq_len: 4096}}\n", name="t.yaml",
               overrides=ClusterOverrides(device_type="H100"))


def only(diags, code):  # type: ignore[no-untyped-def]
    found = [d for d in diags if d.code == code]
    assert found, f"{code} not in {[(d.code, d.message) for d in diags]}"
    return found


def test_tp_list_item_that_does_not_divide_heads(tmp_path: Path) -> None:
    diags = run(tmp_path, MODEL + CLUSTER + "parallelism:\n  tp: [1, 2, 3, 8]\n")
    (d,) = only(diags, "HP403")
    assert d.range == Range.of(3, 13, 3, 14)  # the `3`
    assert d.path == "parallelism.tp"
    assert d.data["nearest_valid"] == 2 and d.data["valid"][:4] == [1, 2, 4, 8]


def test_kv_heads_bound_tp(tmp_path: Path) -> None:
    diags = run(tmp_path, MODEL + "cluster: {num_nodes: 4, cards_per_node: 8, device_type: H100}\n"
                "parallelism: {tp: 16}\n")
    (d,) = only(diags, "HP403")
    assert "num_key_value_heads (8)" in d.message


def test_gbs_and_micro_batch_num(tmp_path: Path) -> None:
    diags = run(tmp_path, MODEL + CLUSTER + "parallelism:\n  micro_batch_num: [4, 7]\n  dp: [4, 6]\n"
                "constraint: {global_batch_size: 64}\n")
    (d,) = only(diags, "HP401")
    assert d.range == Range.of(3, 23, 3, 24) and "remainder is 1" in d.message
    (d,) = only(diags, "HP402")
    assert d.range == Range.of(4, 10, 4, 11)


def test_world_size_errors_on_each_degree_key(tmp_path: Path) -> None:
    diags = train_h100(tmp_path, "model: {pretrained_model_name_or_path: meta-llama/Llama-3.1-8B}\n"
                       "accelerator:\n  tp_size: 8\n  pp_size: 4\ncontext: {device_num: 80}\n")
    found = only(diags, "HP412")
    assert [d.range.start.line for d in found] == [2, 3]
    assert found[0].data["valid"] == [1, 2, 4, 5, 10, 20]  # tp values that make 80 with pp 4


def test_fsdp_shard_must_divide_dp_cp(tmp_path: Path) -> None:
    diags = train_h100(tmp_path, "model: {pretrained_model_name_or_path: meta-llama/Llama-3.1-8B}\n"
                       "accelerator: {tp_size: 8}\nfsdp_config:\n  dp_shard_size: 3\ncontext: {device_num: 64}\n")
    (d,) = only(diags, "HP413")
    assert d.range == Range.of(3, 17, 3, 18) and d.data["valid"] == [1, 2, 4, 8]


def test_memory_limit_above_device(tmp_path: Path) -> None:
    (d,) = only(run(tmp_path, MODEL + CLUSTER + "constraint:\n  memory_limit_gb: 100\n"), "HP409")
    assert d.effective_severity == "warning" and d.range == Range.of(3, 19, 3, 22)


def test_a_budget_above_an_assumed_device_is_the_runs_not_a_warning(tmp_path: Path) -> None:
    """No device type and no device memory stated: the device is HP303's guess (A2, 64 GB), so a stated 96 GB
    budget is neither warned about nor capped, as HyperParallel's budget is the minimum of the stated figures
    ([HP] §4.2, §5.9); naming a device brings HP409 and the cap back."""
    from engine.check import check_file

    body = MODEL + "cluster: {num_nodes: 1, cards_per_node: 8}\nconstraint:\n  memory_limit_gb: 96\n"
    diags = run(tmp_path, body)
    assert "HP303" in [d.code for d in diags] and "HP409" not in [d.code for d in diags]
    loaded = check_file(str(tmp_path / "s.yaml"))
    assert loaded.config is not None and loaded.config.budget_gib == 96
    named = run(tmp_path, body.replace("cards_per_node: 8}", "cards_per_node: 8, device_type: A2}"), name="n.yaml")
    only(named, "HP409")
    assert check_file(str(tmp_path / "n.yaml")).config.budget_gib == 64  # type: ignore[union-attr]


def test_unknown_search_key_did_you_mean(tmp_path: Path) -> None:
    (d,) = only(run(tmp_path, MODEL + CLUSTER + "parallelism:\n  fsdpp: 4\n"), "HP101")
    assert d.range == Range.of(3, 2, 3, 7) and d.data["replace_key"] == "fsdp"
    (d,) = only(run(tmp_path, MODEL + CLUSTER + "parallelism:\n  tensor: 4\n"), "HP101")
    assert "known keys: cp, dp" in d.message
    (d,) = only(run(tmp_path, MODEL + "clustr: {num_nodes: 1}\n"), "HP101")
    assert d.data["replace_key"] == "cluster"


def test_train_yaml_open_sections_only_flag_near_misses(tmp_path: Path) -> None:
    diags = run(tmp_path, "model: {pretrained_model_name_or_path: meta-llama/Llama-3.1-8B}\n"
                "accelerator: {loss_parallel: false, my_custom_flag: 1, pp_sizee: 2}\n"
                "optimizer: {lr: 0.1}\n", name="t.yaml")
    found = only(diags, "HP101")
    assert [d.data["replace_key"] for d in found] == ["pp_size"]


def test_string_value_for_choice(tmp_path: Path) -> None:
    (d,) = only(run(tmp_path, MODEL + CLUSTER + "recompute: selectve\n"), "HP106")
    assert d.data["replace_value"] == "selective"


def test_pp_list_item_above_layers(tmp_path: Path) -> None:
    (d,) = only(run(tmp_path, MODEL + CLUSTER + "parallelism:\n  pp: [2, 64]\n"), "HP407")
    assert d.range == Range.of(3, 10, 3, 12)


def test_expert_width_missing(tmp_path: Path) -> None:
    diags = run(tmp_path, "model: {num_hidden_layers: 4, hidden_size: 512, num_attention_heads: 8, vocab_size: 100,"
                " num_experts: 8, num_experts_per_tok: 2}\n" + CLUSTER)
    (d,) = only(diags, "HP203")
    assert d.range.start.line == 0


def test_ep_exceeds_borrowable_ranks(tmp_path: Path) -> None:
    diags = train_h100(tmp_path, "model: {pretrained_model_name_or_path: mistralai/Mixtral-8x7B-v0.1}\n"
                       "accelerator: {tp_size: 1, pp_size: 4, ep_size: 8}\ncontext: {device_num: 8}\n")
    (d,) = only(diags, "HP417")
    assert d.path == "accelerator.ep_size"


def test_ep_that_does_not_divide_the_borrowed_ranks(tmp_path: Path) -> None:
    """ep 2 fits in dp × tp × cp = 3 ranks but does not divide them: the reader says so on ep (the cost model's
    gate judges the same fact with the same rule, engine.degree_facts.ep_ranks)."""
    diags = train_h100(tmp_path, "model: {pretrained_model_name_or_path: mistralai/Mixtral-8x7B-v0.1}\n"
                       "accelerator: {tp_size: 1, pp_size: 4, ep_size: 2}\ncontext: {device_num: 12}\n")
    (d,) = only(diags, "HP417")
    assert d.path == "accelerator.ep_size" and d.message.startswith("ep (2) must divide dp × tp × cp = 3")


def test_pipeline_layout_rules(tmp_path: Path) -> None:
    diags = run(tmp_path, "model: {num_hidden_layers: 8, hidden_size: 512, num_attention_heads: 8, vocab_size: 1000,"
                " max_position_embeddings: 4096}\n" + CLUSTER + "parallelism: {pp: 2}\npp_config:\n"
                "  stage_partition_mode: manual\n  stage_partition: [[0, 1, 2], [3, 4, 5, 9], [6]]\n"
                "  layer_offset_range: [3, -2]\n  layer_recompute_layers: [1, 8]\n")
    msgs = [d.message for d in only(diags, "HP419")]
    assert msgs == ["stage_partition has 3 stages, but pp_degree is 2: give one entry per pipeline stage",
                    "stage_partition does not cover layers: [7]",
                    "stage_partition references non-existent layers: [9] (valid: 0-7)"]
    (d,) = only(diags, "HP420")
    assert d.range == Range.of(6, 22, 6, 29)
    (d,) = only(diags, "HP421")
    assert "[8]" in d.message


def test_recompute_layer_range_past_the_model(tmp_path: Path) -> None:
    diags = run(tmp_path, "model: {pretrained_model_name_or_path: meta-llama/Llama-2-7b-hf}\n"
                "activation_checkpoint:\n  mode: selective\n  layers: {\"0-9\": full, \"30-40\": off}\n", name="t.yaml")
    (d,) = only(diags, "HP421")
    assert d.range == Range.of(3, 24, 3, 31) and d.path == "activation_checkpoint.layers.30-40"


def test_a_layout_option_the_stack_cannot_take_is_said_on_a_lone_train_yaml(tmp_path: Path) -> None:
    """HP533 at the key, from `check` of a train.yaml alone (no cluster, nothing priced): HyperParallel takes
    neither Megatron-Core's per-chunk layer layout nor MindSpeed-LLM's no-op layers; the stacks that do hear
    nothing."""
    body = (MODEL + "training: {global_batch_size: 64, micro_batch_size: 1}\n"
            "accelerator:\n  pp_size: 2\n  pipeline_model_parallel_layout: \"E(t)*16|(t)*16L\"\n"
            "dataset: {data_transform: {max_seq_len: 4096}}\n")
    (d,) = only(run(tmp_path, body, name="t.yaml"), "HP533")
    assert d.path == "accelerator.pipeline_model_parallel_layout" and d.range.start.line == 4
    assert "hyperparallel has no per-chunk layer layout" in d.message and "offered by megatron" in d.message
    megatron = run(tmp_path, body, name="t.yaml", overrides=ClusterOverrides(framework="megatron"))
    assert not [x for x in megatron if x.code == "HP533"]
    noop = body.replace("  pipeline_model_parallel_layout: \"E(t)*16|(t)*16L\"\n", "  noop_layers: \"32,33\"\n")
    (d,) = only(run(tmp_path, noop, name="t.yaml", overrides=ClusterOverrides(framework="megatron")), "HP533")
    assert d.path == "accelerator.noop_layers" and "no-op layers" in d.message and "offered by mindspeed" in d.message
    mindspeed = run(tmp_path, noop, name="t.yaml", overrides=ClusterOverrides(framework="mindspeed"))
    assert not [x for x in mindspeed if x.code == "HP533"]


def test_an_interleaved_split_that_does_not_divide_names_mindspeeds_padding(tmp_path: Path) -> None:
    """HP416 on pp × vpp chunks the layers do not fill: on MindSpeed it names the no-op layers that pad the count
    (32 + 4 over 4 × 3 chunks), and in a search config its quick fix states them; other stacks have none."""
    body = (MODEL + "cluster: {num_nodes: 2, cards_per_node: 8, device_type: A2}\n"
            "parallelism: {pp: 4, vpp: 3}\npp_config: {pipeline_schedule: interleaved}\n")
    (d,) = only(run(tmp_path, body + "estimator: {framework: mindspeed}\n"), "HP416")
    assert 'noop_layers "32,33,34,35"' in d.message and d.path == "parallelism.vpp"
    assert d.data["set_at"] == {"path": "pp_config.noop_layers", "value": "32,33,34,35"}
    (d,) = only(run(tmp_path, body + "estimator: {framework: megatron}\n"), "HP416")
    assert "noop_layers" not in d.message and "set_at" not in d.data
    padded = body.replace("pipeline_schedule: interleaved}", 'pipeline_schedule: interleaved, noop_layers: "32,33,34,35"}')
    diags = run(tmp_path, padded + "estimator: {framework: mindspeed}\n")
    assert not [x for x in diags if x.code in ("HP416", "HP422")]


def test_sp_with_cp_is_warned_only_where_the_search_refuses_it(tmp_path: Path) -> None:
    """HyperParallel's search runner refuses SP with cp > 1 among the cp values it varies ([HP] §5.6); a single
    stated cp is no candidate, so its CP checks never run (§5.13) and the trainer runs the pair (the Ulysses
    example). Megatron's recipes run them together, so a file that names Megatron gets no warning at all."""
    body = MODEL + CLUSTER + "parallelism: {tp: 2, pp: 1, cp: [1, 2, 4], sequence_parallel: true}\n"
    (d,) = only(run(tmp_path, body), "HP418")
    assert d.path == "parallelism.sequence_parallel" and "[2, 4]" in d.message
    (d,) = only(run(tmp_path, body.replace("cp: [1, 2, 4]", "cp: auto"), name="a.yaml"), "HP418")
    assert "with sequence_parallel on, cp > 1 is never tried" in d.message
    for one in ("cp: 2", "cp: [2]"):  # one value is no candidate: the search keeps it (test_refusals)
        fixed = run(tmp_path, body.replace("cp: [1, 2, 4]", one), name="f.yaml")
        assert not [x for x in fixed if x.code == "HP418"], one
    megatron = run(tmp_path, body + "estimator: {framework: megatron}\n", name="m.yaml")
    assert not [x for x in megatron if x.code == "HP418"]


def test_an_exponent_without_a_dot_is_text_in_yaml_and_the_message_says_how_to_write_it(tmp_path: Path) -> None:
    """PyYAML (YAML 1.1, what the trainers load with) reads `1e2` as a string: HP105 says so and shows the number
    written so YAML reads it (`1.0e+308`, not Python's `1e+308`, which is text again)."""
    (d,) = only(run(tmp_path, MODEL + CLUSTER + "constraint:\n  memory_limit_gb: 1e2\n"), "HP105")
    assert "YAML reads 1e2 as text; write it with a dot, 100.0" in d.message
    (d,) = only(run(tmp_path, MODEL + CLUSTER + "constraint:\n  memory_limit_gb: 1e308\n", name="b.yaml"), "HP105")
    assert d.message.endswith("write it with a dot, 1.0e+308")


def test_an_editor_limit_on_an_assumed_device_is_still_capped(tmp_path: Path) -> None:
    """Only a budget the files state escapes an assumed device's cap: the editor's memoryLimitGb only narrows it."""
    from engine.check import check_file

    (tmp_path / "s.yaml").write_text(MODEL + "cluster: {num_nodes: 1, cards_per_node: 8}\n")
    loaded = check_file(str(tmp_path / "s.yaml"), overrides=ClusterOverrides(memory_limit_gb=1000))
    assert loaded.config is not None and loaded.config.budget_gib == 64
