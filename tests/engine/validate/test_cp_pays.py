"""HP411 judged by pricing (D-014): it fires where the plan without CP is as fast or faster, not at
long sequences where CP is what fits, and never on a plan the search itself wrote."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import hp_plan

TRAIN = """\
model:
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
training:
  global_batch_size: {gbs}
  micro_batch_size: 1
accelerator:
  tp_size: 1
  pp_size: 1
  cp_size: 2
fsdp_config:
  dp_shard_size: 8
dataset:
  data_transform:
    max_seq_len: {seq}
"""

SEARCH = """\
train_yaml: ./train.yaml
cluster: {num_nodes: 1, cards_per_node: 8, device_type: H100}
parallelism: {dp: auto, fsdp: auto, tp: auto, pp: auto, cp: auto, ep: 1, vpp: auto, micro_batch_size: auto,
              micro_batch_num: auto}
constraint: {memory_limit_gb: 76}
recompute: auto
"""


def check(path: Path) -> str:
    return hp_plan("check", str(path), "--devices", "8", "--device-type", "H100").stdout


def test_hp411_fires_at_8k_with_the_numbers(tmp_path: Path) -> None:
    """Reproduced: cp 2 for Llama-3.1-8B at 8K on one 8×H100 node; the plan without CP is faster."""
    t = tmp_path / "train.yaml"
    t.write_text(TRAIN.format(gbs=64, seq=8192))
    out = check(t)
    assert "HP411" in out and "does not pay" in out and "tokens/s" in out and "dp 8" in out


def test_hp411_silent_at_128k_where_cp_is_needed(tmp_path: Path) -> None:
    t = tmp_path / "train.yaml"
    t.write_text(TRAIN.format(gbs=8, seq=131072))
    assert "HP411" not in check(t)


def test_hp411_silent_on_the_plan_the_search_wrote(tmp_path: Path) -> None:
    t = tmp_path / "train.yaml"
    t.write_text(TRAIN.format(gbs=8, seq=131072))
    s = tmp_path / "search.yaml"
    s.write_text(SEARCH)
    p = hp_plan("apply", str(s), "--in-place", "--force")
    assert p.returncode == 0, p.stderr
    text = t.read_text()
    assert "cp_size: 1" not in text  # the search kept CP at 128K
    assert "HP411" not in check(t)
