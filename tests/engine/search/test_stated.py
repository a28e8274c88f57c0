"""engine.search.stated: the train.yaml a search config states is read on the search config's cluster, and a
budget the search config imposes is a budget, not a statement of the device's memory size."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.check import check_file
from engine.search import stated_source

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llama3-70b"


@pytest.mark.parametrize("limit", [76, 94, 96])
def test_a_search_budget_never_turns_the_device_into_another_part(tmp_path: Path, limit: int) -> None:
    # 94 and 96 GB are the sizes that name the H100 NVL and the H100 96 GB when a file states a device's memory
    # (engine.catalog.devices.memory_variant); as a search config's budget on an 80 GB H100 they name nothing.
    shutil.copy(EXAMPLE / "train.yaml", tmp_path / "train.yaml")
    text = (EXAMPLE / "search.yaml").read_text().replace("device_memory_gb: 80", "device_memory_gb: 120")
    text = text.replace("memory_limit_gb: 76", f"memory_limit_gb: {limit}")
    (tmp_path / "search.yaml").write_text(text)
    config = check_file(str(tmp_path / "search.yaml")).config
    assert config is not None and config.cluster is not None
    source = stated_source(config)
    assert source is not None and source.cluster is not None
    assert source.cluster.device.name == config.cluster.device.name == "H100"
    assert source.budget_gib == pytest.approx(limit)
