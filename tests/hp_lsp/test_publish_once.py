"""What the server publishes: each finding once (an exact duplicate from any path is dropped) and each fact
once across the fast check, the stated plan's price and the search (engine.facts)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.config.types import ClusterOverrides
from engine.diagnostics import Severity
from hp_lsp.analysis import analyse
from hp_lsp.features.diagnostics import collect
from tests.support.lsp_services import LLAMA, state_for

CLUSTER = ClusterOverrides(num_nodes=128, cards_per_node=8, devices=1024, device_type="H100")


def test_a_duplicated_search_finding_is_published_once(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "train.yaml").write_text((LLAMA / "train.yaml").read_text())
    (folder / "search.yaml").write_text((LLAMA / "search.yaml").read_text())
    _, st = state_for(folder / "train.yaml", space=folder / "search.yaml")
    assert st.search is not None and st.search.diagnostics
    # The same advice twice in a search result (as two code paths producing it would) is shown once.
    st.search = replace(st.search, diagnostics=st.search.diagnostics * 2)
    out = collect(st)
    keys = [(d.code, d.range, d.message) for d in out]
    assert len(keys) == len(set(keys)) and keys


def test_few_micro_batches_once_as_an_error(tmp_path: Path) -> None:
    text = (LLAMA / "train.yaml").read_text().replace("global_batch_size: 512 ", "global_batch_size: 64  ")
    a = analyse(str(tmp_path / "train.yaml"), text, 1, overrides=CLUSTER, max_file_size_kb=1024)
    found = [d for d in a.diagnostics if d.code in ("HP415", "HP506")]
    assert [(d.code, d.effective_severity) for d in found] == [("HP415", Severity.ERROR)]
