"""A multimodal model's vision tower (D-005): read where HyperParallel reads it (a search config's model.vision
and visual_seq_len, a train.yaml's config_overrides.vision and context.visual_seq_len, a config.json's
vision_config), and priced the way its search prices sibling towers: the language model's degrees, every tower
layer on stage 0, its memory and time inside the breakdown and said apart in `vision_tower`. Through
`hp-plan estimate --json` and `hp-plan search --json` (the interface a user touches) and check_file. Fixtures
are written here in the shape of upstream's AutoModels recipes and search examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.check import check_file
from tests.support.cli import hp_plan

TOWER = """\
    vision:
      depth: 27
      hidden_size: 1152
      num_heads: 16
      intermediate_size: 4304
      out_hidden_size: 4096
      hidden_act: gelu_pytorch_tanh
      spatial_merge_size: 2
      num_position_embeddings: 2304
"""

# An AutoModels recipe from config (train_qwen3_5_moe.yaml's shape) of a Qwen3-VL-8B-sized model.
TRAIN = """\
model:
  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_config
  name: qwen3_vl
  torch_dtype: bfloat16
  config_overrides:
    num_hidden_layers: 36
    hidden_size: 4096
    num_attention_heads: 32
    num_key_value_heads: 8
    head_dim: 128
    intermediate_size: 12288
    vocab_size: 151936
TOWER\
training: {global_batch_size: 32, micro_batch_size: 1}
accelerator: {tp_size: 2, pp_size: PP, cp_size: 1, ep_size: 1}
fsdp_config: {dp_shard_size: 2}
activation_checkpoint: {mode: full}
dataset: {data_transform: {max_seq_len: 4096}}
context: {device_num: 8CONTEXT}
"""

SEARCH = """\
model:
  name: qwen3-vl-8b
  num_hidden_layers: 36
  hidden_size: 4096
  num_attention_heads: 32
  num_key_value_heads: 8
  head_dim: 128
  intermediate_size: 12288
  vocab_size: 151936
  max_position_embeddings: 4096
TOWER\
cluster: {num_nodes: 1, cards_per_node: 8, device_type: H100}
parallelism: {tp: [1, 2, 4], pp: [1, 2]}
constraint: {global_batch_size: 64}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def train(tmp_path: Path, name: str = "train.yaml", *, tower: str = TOWER, pp: int = 2, context: str = "") -> str:
    text = TRAIN.replace("TOWER", tower).replace("PP", str(pp)).replace("CONTEXT", context)
    return write(tmp_path, name, text)


def cli(*args: str) -> tuple[int, dict]:
    r = hp_plan(*args, "--json")
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)


def codes(doc: dict) -> list[str]:
    return [d["code"] for d in doc["diagnostics"]]


def test_a_train_yaml_tower_is_priced_on_stage_0_only(tmp_path: Path) -> None:
    rc, vl = cli("estimate", train(tmp_path, context=", visual_seq_len: 1024"), "--device-type", "H100")
    rc0, text = cli("estimate", train(tmp_path, "text.yaml", tower=""), "--device-type", "H100")
    assert (rc, rc0) == (0, 0)
    assert "HP112" not in codes(vl) and "HP212" not in codes(vl) and "HP213" not in codes(vl)
    tower = vl["vision_tower"]
    assert "vision_tower" not in text
    assert (tower["layers"], tower["visual_seq_len"], tower["stage"]) == (27, 1024, 0)
    # Stage 0 carries the tower; stage 1 holds exactly what it held without one.
    d0 = vl["stage_memory_gib"][0] - text["stage_memory_gib"][0]
    assert d0 == pytest.approx(tower["memory_gib"], rel=1e-9) and d0 > 1.0
    assert vl["stage_memory_gib"][1] == pytest.approx(text["stage_memory_gib"][1], rel=1e-12)
    # Its time is in the step (the breakdown still adds up to it) and in the model FLOPs.
    assert vl["step_time_s"] > text["step_time_s"]
    assert sum(vl["time_breakdown_s"].values()) == pytest.approx(vl["step_time_s"], rel=1e-9)
    assert 0 < tower["time_s"] < vl["step_time_s"]
    _rc, ex = cli("explain", train(tmp_path, context=", visual_seq_len: 1024"), "--device-type", "H100")
    assert ex["vision_tower"] == tower


def test_the_tower_weights_shard_with_the_language_models_degrees(tmp_path: Path) -> None:
    def tower_gib(tp: int) -> float:
        text = TRAIN.replace("TOWER", TOWER).replace("PP", "1").replace("CONTEXT", "").replace(
            "tp_size: 2", f"tp_size: {tp}")
        _rc, doc = cli("estimate", write(tmp_path, f"tp{tp}.yaml", text), "--device-type", "H100")
        return float(doc["vision_tower"]["memory_gib"])

    # The merger stays whole (replicated over tp); the tower's layers halve with tp.
    assert tower_gib(1) > tower_gib(2) > tower_gib(1) / 2


def test_visual_seq_len_follows_upstreams_order(tmp_path: Path) -> None:
    derived = check_file(train(tmp_path, "a.yaml")).config  # 2304 positions, merge 2 -> 576
    stated = check_file(train(tmp_path, "b.yaml", context=", visual_seq_len: 1024")).config
    bare = TOWER.replace("      spatial_merge_size: 2\n", "").replace("      num_position_embeddings: 2304\n", "")
    loaded = check_file(train(tmp_path, "c.yaml", tower=bare))
    assert derived is not None and derived.model is not None and derived.model.vision is not None
    assert derived.model.vision.seq_len == 576 and derived.model.vision.num_layers == 27
    assert stated is not None and stated.model is not None and stated.model.vision is not None
    assert stated.model.vision.seq_len == 1024
    hp213 = [d for d in loaded.diagnostics if d.code == "HP213"]
    assert len(hp213) == 1 and hp213[0].path == "model.config_overrides.vision"
    assert loaded.config is not None and loaded.config.model is not None
    assert loaded.config.model.vision is not None and loaded.config.model.vision.seq_len == 1024


def test_an_incomplete_tower_is_refused_at_the_key(tmp_path: Path) -> None:
    half = TOWER.replace("      num_heads: 16\n", "")
    rc, doc = cli("estimate", train(tmp_path, tower=half), "--device-type", "H100")
    hp212 = [d for d in doc["diagnostics"] if d["code"] == "HP212"]
    assert rc == 1 and len(hp212) == 1 and "num_attention_heads" in hp212[0]["message"]
    assert hp212[0]["path"] == "model.config_overrides.vision" and hp212[0]["range"]["start"]["line"] == 12
    zero = TOWER.replace("depth: 27", "depth: 0")
    rc, doc = cli("check", train(tmp_path, "z.yaml", tower=zero))
    assert rc == 1 and [d["path"] for d in doc["diagnostics"] if d["code"] == "HP212"] == [
        "model.config_overrides.vision.depth"]
    typed = TOWER.replace("depth: 27", "depth: many")
    rc, doc = cli("check", train(tmp_path, "t.yaml", tower=typed))
    assert rc == 1 and "HP212" in codes(doc)  # the bad value is its own error, and the tower then lacks depth


def test_visual_seq_len_without_a_tower_is_said_to_price_nothing(tmp_path: Path) -> None:
    loaded = check_file(train(tmp_path, tower="", context=", visual_seq_len: 576"))
    hp112 = [d for d in loaded.diagnostics if d.code == "HP112"]
    assert [d.path for d in hp112] == ["context.visual_seq_len"] and "no tower is stated" in hp112[0].message


def test_a_config_json_vision_config_states_the_tower(tmp_path: Path) -> None:
    cfg = {"model_type": "qwen3_vl", "text_config": {
        "num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936},
        "vision_config": {"depth": 27, "hidden_size": 1152, "num_heads": 16, "intermediate_size": 4304,
                          "out_hidden_size": 4096, "spatial_merge_size": 2, "num_position_embeddings": 2304}}
    (tmp_path / "vl").mkdir()
    (tmp_path / "vl" / "config.json").write_text(json.dumps(cfg))
    text = ("model: {pretrained_model_name_or_path: ./vl, torch_dtype: bfloat16}\n"
            "training: {global_batch_size: 16, micro_batch_size: 1}\n"
            "accelerator: {tp_size: 1, pp_size: 1}\nfsdp_config: {dp_shard_size: 8}\n"
            "dataset: {data_transform: {max_seq_len: 4096}}\ncontext: {device_num: 8}\n")
    loaded = check_file(write(tmp_path, "train.yaml", text))
    assert loaded.config is not None and loaded.config.model is not None
    vt = loaded.config.model.vision
    assert vt is not None and (vt.num_layers, vt.hidden, vt.heads, vt.seq_len, vt.merge) == (27, 1152, 16, 576, 2)
    assert loaded.config.model.num_layers == 36  # the language model from text_config


def test_search_prices_every_candidate_with_the_tower(tmp_path: Path) -> None:
    rc, vl = cli("search", write(tmp_path, "s.yaml", SEARCH.replace("TOWER", TOWER.replace("    ", "  "))))
    rc0, text = cli("search", write(tmp_path, "t.yaml", SEARCH.replace("TOWER", "")))
    assert (rc, rc0) == (0, 0)
    assert "HP112" not in codes(vl)
    assert all(e["vision_tower"]["visual_seq_len"] == 576 for e in vl["top"])
    assert all("vision_tower" not in e for e in text["top"])
    assert vl["best"]["step_time_s"] > text["best"]["step_time_s"]
    # A search config's own visual_seq_len wins over the derived one.
    stated = SEARCH.replace("TOWER", "  visual_seq_len: 2304\n" + TOWER.replace("    ", "  "))
    _rc, doc = cli("search", write(tmp_path, "u.yaml", stated), "--top", "1")
    assert doc["best"]["vision_tower"]["visual_seq_len"] == 2304


def test_a_search_config_inherits_the_tower_of_its_train_yaml(tmp_path: Path) -> None:
    train(tmp_path, context=", visual_seq_len: 1024", pp=1)
    search = write(tmp_path, "search.yaml", "train_yaml: ./train.yaml\nmodel: {visual_seq_len: 256}\n"
                   "cluster: {num_nodes: 1, cards_per_node: 8, device_type: H100}\nparallelism: {tp: [1, 2]}\n")
    rc, doc = cli("search", search, "--top", "1")
    assert rc == 0 and doc["best"]["vision_tower"]["layers"] == 27
    assert doc["best"]["vision_tower"]["visual_seq_len"] == 256  # the search config's own wins
    # an incomplete tower in the train.yaml is an error in that file, at its vision key
    train(tmp_path, tower=TOWER.replace("      num_heads: 16\n", ""), pp=1)
    rc, doc = cli("check", search)
    hp212 = [d for d in doc["diagnostics"] if d["code"] == "HP212"]
    assert rc == 1 and len(hp212) == 1 and hp212[0]["file"].endswith("train.yaml")
    assert hp212[0]["range"]["start"]["line"] == 12
