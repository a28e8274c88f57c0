"""The ZeRO-1 shard size a train.yaml states (accelerator.optimizer_weight_shard_size) reaches the search
through Config.optimizer_shard, also when the searched file is a search config (no stated strategy)."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.cost import estimate_config
from engine.search import search

ROOT = Path(__file__).resolve().parents[3]
SPACE = """\
train_yaml: ./train.yaml
cluster: {num_nodes: 4, cards_per_node: 8, device_type: H100}
parallelism: {dp: auto, fsdp: 1, tp: [4, 8], pp: 1, cp: 1, ep: 1, vpp: 1, micro_batch_size: 1, micro_batch_num: auto,
              sequence_parallel: true}
constraint: {global_batch_size: 64, memory_limit_gb: 200}
recompute: full
estimator: {framework: megatron}
"""


def _write(tmp_path: Path) -> Path:
    text = (ROOT / "examples" / "llama3-70b" / "train.yaml").read_text()
    text = text.replace("  tp_size: 8\n", "  tp_size: 8\n  optimizer_weight_shard_size: 4\n")
    (tmp_path / "train.yaml").write_text(text)
    (tmp_path / "search.yaml").write_text(SPACE)
    return tmp_path


def test_search_config_takes_the_shard_from_its_train_yaml(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    loaded = check_file(str(folder / "search.yaml"))
    cfg = loaded.config
    assert cfg is not None and cfg.stated is None and cfg.optimizer_shard == 4
    result = search(cfg, top=3)
    assert result.best is not None and all(e.strategy.optimizer_shard == 4 for e in result.top)


def test_train_yaml_shard_is_priced_by_search_and_estimate_alike(tmp_path: Path) -> None:
    from engine.config.types import ClusterOverrides

    folder = _write(tmp_path)
    ov = ClusterOverrides(num_nodes=128, cards_per_node=8, devices=1024, device_type="H100")
    cfg = check_file(str(folder / "train.yaml"), overrides=ov).config
    assert cfg is not None and cfg.optimizer_shard == 4 and cfg.stated is not None
    est, _ = estimate_config(cfg)
    assert est is not None and est.strategy.optimizer_shard == 4
    result = search(cfg, top=1)
    assert result.best is not None and result.best.strategy.optimizer_shard == 4
