"""The fast analysis of one document version (hp_lsp.analysis): what it reads, and under which limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.document import Document, Reads
from hp_lsp.analysis import analyse
from tests.support.lsp_services import EXAMPLES


def test_a_linked_train_yaml_over_the_size_setting_is_not_parsed_for_the_stated_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check refused a 4.4 MB linked train.yaml at the link (HP009), then read it again as the file stating
    the plan under the CLI's 10 MiB limit and parsed it whole: ~1 s per edit of the search config, and a
    garbage-collection pause of seconds every few edits from the millions of nodes it left behind."""
    search = (EXAMPLES / "llama3-70b" / "search.yaml").read_text()
    train = (EXAMPLES / "llama3-70b" / "train.yaml").read_text()
    (tmp_path / "train.yaml").write_text(train + "data_files:\n" + "  - {path: /d/x.jsonl, weight: 1}\n" * 50_000)
    (tmp_path / "search.yaml").write_text(search)
    parsed: list[str | None] = []
    real = Reads.parse

    def spy(self: Reads, text: str, path: str | None, max_bytes: int) -> Document:
        parsed.append(path)
        return real(self, text, path, max_bytes)

    monkeypatch.setattr(Reads, "parse", spy)
    a = analyse(str(tmp_path / "search.yaml"), search, 1, overrides=None, max_file_size_kb=1024)
    assert "HP009" in {d.code for d in a.diagnostics}
    assert parsed and not any(p and p.endswith("train.yaml") for p in parsed), parsed
    assert a.stated_source is None
