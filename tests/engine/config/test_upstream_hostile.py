"""Hostile variants of HyperParallel's own files (D-005): half-typed, wrong types, missing sections, in the shapes
of upstream's AutoModels recipes, legacy SAPP-ND demos and search examples, plus the keys this issue reads
(vision, visual_seq_len, training.micro_batch_num, model_init_dtype, loss_parallel, mixed_precision). Each goes
through `hp-plan check`, `estimate` and `search --json` (in process): one JSON document, no internal error (HP900),
no traceback, and a positioned diagnostic where the file is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

RECIPE = """\
model:
  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_config
  name: qwen3_vl
  torch_dtype: bfloat16
  config_overrides: {num_hidden_layers: 8, hidden_size: 1024, num_attention_heads: 8, vocab_size: 32000VISION}
training: TRAINING
accelerator: ACCELERATOR
fsdp_config: FSDP
activation_checkpoint: {mode: full}
dataset: {data_transform: {max_seq_len: 2048}}
context: CONTEXT
"""
GOOD = {"VISION": "", "TRAINING": "{global_batch_size: 16, micro_batch_size: 1}",
        "ACCELERATOR": "{tp_size: 1, pp_size: 1}", "FSDP": "{dp_shard_size: 8}", "CONTEXT": "{device_num: 8}"}


def recipe(**subs: str) -> str:
    text = RECIPE
    for k, v in {**GOOD, **subs}.items():
        text = text.replace(k, v)
    return text


SEARCH = """\
model: {name: m, num_hidden_layers: 8, hidden_size: 1024, num_attention_heads: 8, vocab_size: 32000,
        max_position_embeddings: 2048}
cluster: CLUSTER
parallelism: PARALLELISM
constraint: {global_batch_size: 16}
"""

VARIANTS: dict[str, dict[str, str]] = {
    # 1. typed halfway through a flow mapping: a YAML error, positioned
    "half_typed_flow": {"train.yaml": recipe(ACCELERATOR="{tp_size: 1, pp_si")},
    # 2. sections of the wrong kind: a scalar training, a list fsdp_config
    "wrong_section_kinds": {"train.yaml": recipe(TRAINING="5", FSDP="[dp_shard_size, 8]")},
    # 3. model facts of the wrong types
    "wrong_model_types": {"train.yaml": recipe().replace("num_hidden_layers: 8", "num_hidden_layers: forty").replace(
        "hidden_size: 1024", "hidden_size: 1024.5")},
    # 4. a vision tower that is a list, a visual sequence that is a string
    "vision_list": {"train.yaml": recipe(VISION=", vision: [27, 1152]", CONTEXT="{device_num: 8, visual_seq_len: "
                                                                               "'576'}")},
    # 5. a vision tower of negative, null and boolean fields
    "vision_bad_fields": {"train.yaml": recipe(VISION=", vision: {depth: -3, hidden_size: null, num_heads: true, "
                                                      "spatial_merge_size: 0}")},
    # 6. a visual sequence of 0 and a huge tower
    "vision_zero_and_huge": {"train.yaml": recipe(VISION=", vision: {depth: 100000, hidden_size: 1234567, num_heads: "
                                                         "3}", CONTEXT="{device_num: 8, visual_seq_len: 0}")},
    # 7. the trainer's keys of this issue, wrong: micro_batch_num 0, a float batch, a list dtype, a maybe
    "trainer_keys_wrong": {"train.yaml": recipe(TRAINING="{global_batch_size: 1e3, micro_batch_size: 1, "
                                                         "micro_batch_num: 0}",
                                                ACCELERATOR="{tp_size: 2, loss_parallel: maybe}")
                           + "model_init_dtype: [float32]\nmixed_precision: {enabled: yes please}\n"},
    # 8. a legacy demo with a null accelerator and a mixed-precision policy of wrong types
    "legacy_wrong_types": {"train.yaml": "model: {name: q, config_overrides: {num_hidden_layers: 8, hidden_size: 1024, "
                           "num_attention_heads: 8, vocab_size: 32000, compute_dtype: 16}}\ndata: {max_seq_len: 2048}\n"
                           "train: {global_batch_size: 16, micro_batch_num: -4, accelerator: null, mixed_precision: "
                           "{enabled: 'yes', param_dtype: 16}, optimizer: {max_grad_norm: [1]}}\n"},
    # 9. a search config whose list and cluster are of the wrong kinds, a vision tower without its keys
    "search_wrong_kinds": {"search.yaml": SEARCH.replace("CLUSTER", "A2").replace(
        "PARALLELISM", "{tp: [1, two, null], pp: {a: 1}}").replace("max_position_embeddings: 2048}",
                                                                     "max_position_embeddings: 2048, vision: {}, "
                                                                     "visual_seq_len: -1}")},
    # 10. a search config over a train.yaml that is missing every section but a bare model
    "train_yaml_missing_sections": {
        "train.yaml": "model: {}\ncontext: {visual_seq_len: 576, device_num: '8'}\n",
        "search.yaml": "train_yaml: ./train.yaml\ncluster: {num_nodes: 1}\nparallelism: {tp: [1, 2]}\n"},
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    rc = main([*argv, "--json"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err, out.err
    return rc, json.loads(out.out)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_hostile_upstream_variant_never_crashes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  name: str) -> None:
    files = VARIANTS[name]
    for fname, text in files.items():
        (tmp_path / fname).write_text(text)
    target = str(tmp_path / ("search.yaml" if "search.yaml" in files else "train.yaml"))
    for command in ("check", "estimate", "search"):
        rc, doc = run(capsys, command, target, "--devices", "8", "--device-type", "H100")
        got = [d["code"] for d in doc.get("diagnostics", [])] + [
            d["code"] for e in ([doc["best"]] if doc.get("best") else []) for d in e.get("diagnostics", [])]
        assert "HP900" not in got, (command, doc)
        assert rc in (0, 1), (command, rc, doc)
        if command == "check":
            # every variant is wrong somewhere, and says where
            errors = [d for d in doc["diagnostics"] if d["severity"] in ("error", "warning")]
            assert errors, doc
            assert all("range" in d for d in errors)
