"""Quick-fix builders: set_value, rename_key, widen_list, new_search_config_text."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.edit import new_search_config_text, rename_key, set_value, widen_list

from .fixtures import COMMENTS, CRLF, FLOW, TWO_SPACE
from .helpers import check_edits

SEARCH = """\
train_yaml: ./train.yaml   # the model and batch
cluster:
  num_nodes: 8
  device_type: 'h100'
parallelism:
  tp: [1, 2, 8]     # keep TP in a node
  pp:
    - 1
    - 4           # four stages
  cp: 2
  ep: auto
constraint: {global_batch_size: 1024}
"""


def test_set_value_replaces_the_token_keeping_quotes() -> None:
    r = set_value(SEARCH, "cluster.device_type", "H800")
    check_edits(SEARCH, r)
    assert r.new_text == SEARCH.replace("'h100'", "'H800'")
    assert len(r.edits) == 1 and r.edits[0].range.start.line == 3


def test_set_value_adds_missing_keys_in_order_and_flow_style() -> None:
    r = set_value(SEARCH, "cluster.cards_per_node", 8)
    check_edits(SEARCH, r)
    assert "  num_nodes: 8\n  cards_per_node: 8\n  device_type: 'h100'\n" in r.new_text
    r2 = set_value(SEARCH, "constraint.memory_limit_gb", 76.5)
    assert "constraint: {global_batch_size: 1024, memory_limit_gb: 76.5}\n" in r2.new_text
    r3 = set_value(SEARCH, "recompute", "per_layer")
    assert r3.new_text.endswith("constraint: {global_batch_size: 1024}\nrecompute: per_layer\n")
    r4 = set_value(SEARCH, "pp_config.pp_interleave_num", 2)
    assert r4.new_text.endswith("pp_config:\n  pp_interleave_num: 2\n")


def test_set_value_types_and_no_op() -> None:
    assert set_value(SEARCH, "parallelism.cp", 2).edits == ()
    assert yaml.safe_load(set_value(SEARCH, "parallelism.ep", [1, 8]).new_text)["parallelism"]["ep"] == [1, 8]
    assert yaml.safe_load(set_value(SEARCH, "x.y", 1e-4).new_text)["x"]["y"] == 1e-4
    assert yaml.safe_load(set_value(SEARCH, "x", "yes").new_text)["x"] == "yes"  # quoted, stays a string
    assert yaml.safe_load(set_value(SEARCH, "x", "10").new_text)["x"] == "10"
    assert set_value(SEARCH, "parallelism.cp", True).new_text.count("cp: true") == 1
    r = set_value(CRLF, "accelerator.ep_size", 8)
    check_edits(CRLF, r)
    assert "  cp_size: 2\r\n  ep_size: 8\r\n" in r.new_text
    assert not set_value(SEARCH, "parallelism.tp.x", 1).ok  # a list is not a mapping
    assert not set_value(SEARCH, "", 1).ok


def test_set_value_in_a_flow_file() -> None:
    r = set_value(FLOW, "accelerator.cp_size", 4)
    check_edits(FLOW, r)
    assert r.new_text == FLOW.replace("cp_size: 1", "cp_size: 4")


def test_rename_key() -> None:
    text = TWO_SPACE.replace("tp_size: 4", "tp_sise: 4")
    r = rename_key(text, "accelerator.tp_sise", "tp_size")
    check_edits(text, r)
    assert r.new_text == TWO_SPACE
    assert len(r.edits) == 1
    quoted = "accelerator:\n  'tp_sise': 4  # c\n"
    assert rename_key(quoted, "accelerator.tp_sise", "tp_size").new_text == "accelerator:\n  'tp_size': 4  # c\n"
    assert "duplicate" in (rename_key(TWO_SPACE, "accelerator.tp_size", "pp_size").error or "")
    assert "no key" in (rename_key(TWO_SPACE, "accelerator.nope", "x").error or "")


def test_widen_flow_list_keeps_order_and_comment() -> None:
    r = widen_list(SEARCH, "parallelism.tp", [4, 16, 2])
    check_edits(SEARCH, r)
    assert "  tp: [1, 2, 4, 8, 16]     # keep TP in a node\n" in r.new_text


def test_widen_block_list() -> None:
    r = widen_list(SEARCH, "parallelism.pp", [2, 8])
    check_edits(SEARCH, r)
    assert "  pp:\n    - 1\n    - 2\n    - 4           # four stages\n    - 8\n  cp: 2\n" in r.new_text


def test_widen_scalar_absent_and_auto() -> None:
    r = widen_list(SEARCH, "parallelism.cp", [4])
    assert "  cp: [2, 4]\n" in r.new_text
    r2 = widen_list(SEARCH, "parallelism.vpp", [1, 2])
    assert yaml.safe_load(r2.new_text)["parallelism"]["vpp"] == [1, 2]
    assert "auto" in (widen_list(SEARCH, "parallelism.ep", [2]).error or "")
    assert widen_list(SEARCH, "parallelism.tp", [1, 2]).edits == ()


def test_edits_keep_comments_everywhere() -> None:
    r = set_value(COMMENTS, "accelerator.cp_size", 2)
    check_edits(COMMENTS, r)
    assert "  pp_size: 16  # pp\n  cp_size: 2\n  ep_size: 64  # ep\n" in r.new_text


@pytest.mark.parametrize("memory", [None, 76, 70.5])
def test_new_search_config_is_valid(tmp_path: Path, memory: float | None) -> None:
    from engine.check import check_file

    example = Path(__file__).parents[3] / "examples" / "llama3-70b" / "train.yaml"
    (tmp_path / "train.yaml").write_text(example.read_text())
    text = new_search_config_text("train.yaml", 16, 8, "H100", memory)
    (tmp_path / "search.yaml").write_text(text)
    data = yaml.safe_load(text)
    assert data["train_yaml"] == "train.yaml"
    assert set(data["parallelism"].values()) == {"auto"}
    loaded = check_file(str(tmp_path / "search.yaml"))
    assert loaded.config is not None and loaded.config.kind == "search"
    assert not [d for d in loaded.diagnostics if d.is_error], loaded.diagnostics
    assert loaded.config.cluster is not None and loaded.config.cluster.world_size == 128
    assert all(loaded.config.dimensions[d].state == "auto" for d in ("tp", "pp", "cp", "vpp", "fsdp"))
    if memory:
        assert loaded.config.memory_limit_gb == memory


def test_new_search_config_quotes_odd_paths() -> None:
    text = new_search_config_text("configs/my train: v2.yaml", 1, 8, "A2")
    assert yaml.safe_load(text)["train_yaml"] == "configs/my train: v2.yaml"
