"""A budget from the editor settings or a flag (no key in the file): HP602 names where it came from and sits on
the file's stated strategy instead of the top of the file."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.config.types import ClusterOverrides
from engine.search import search

ROOT = Path(__file__).resolve().parents[3]


def test_hp602_with_a_settings_budget(tmp_path: Path) -> None:
    train = tmp_path / "train.yaml"
    text = (ROOT / "examples" / "llama3-70b" / "train.yaml").read_text()
    train.write_text(text)
    ov = ClusterOverrides(num_nodes=2, cards_per_node=8, devices=16, device_type="H100", memory_gb=1,
                          memory_source="setting hpLsp.memoryLimitGb")
    cfg = check_file(str(train), overrides=ov).config
    assert cfg is not None and cfg.budget_source == "setting hpLsp.memoryLimitGb"
    result = search(cfg, top=1)
    d = next(d for d in result.diagnostics if d.code == "HP602")
    assert "(from setting hpLsp.memoryLimitGb)" in d.message
    line = next(n for n, t in enumerate(text.splitlines()) if t.strip().startswith("tp_size:"))
    assert d.range.start.line == line and d.path == "accelerator.tp_size"
