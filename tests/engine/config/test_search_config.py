"""The search config's degree declarations (engine/config/search_config.py read_decl): a candidate list is
bounded (engine.integers.MAX_CANDIDATES), so a pasted or generated list costs one diagnostic at the list,
never one per item (a 300,000-item `tp:` list made --json need gigabytes)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.check import check_file
from engine.integers import MAX_CANDIDATES
from tests.support.cli import ROOT, hp_plan_bounded

PLAN = (ROOT / "examples" / "explain" / "1f1b.yaml").read_text()


def with_tp_list(folder: Path, n: int) -> Path:
    path = folder / "plan.yaml"
    path.write_text(PLAN.replace("  tp: 2\n", "  tp: [" + ", ".join(str(i) for i in range(1, n + 1)) + "]\n"))
    return path


def test_a_huge_candidate_list_is_one_diagnostic_at_the_list_in_bounded_time_and_memory(tmp_path: Path) -> None:
    path = with_tp_list(tmp_path, 300_000)
    try:
        r = hp_plan_bounded("check", str(path), "--json", timeout=40)
    except subprocess.TimeoutExpired:
        pytest.fail("check of a 300,000-item tp list ran past 40 s")
    diags = json.loads(r.stdout)["diagnostics"]
    assert r.returncode == 1 and [d["code"] for d in diags if d["severity"] == "error"] == ["HP110"], diags[:5]
    (hit,) = [d for d in diags if d["code"] == "HP110"]
    assert hit["path"] == "parallelism.tp" and "300,000 candidates" in hit["message"]
    line = path.read_text().splitlines()[hit["range"]["start"]["line"]]
    assert line[hit["range"]["start"]["character"]:].startswith("[1, 2, 3")


def test_a_list_of_the_largest_length_is_still_read_item_by_item(tmp_path: Path) -> None:
    loaded = check_file(str(with_tp_list(tmp_path, MAX_CANDIDATES)))
    codes = [d.code for d in loaded.diagnostics]
    assert "HP110" not in codes and "HP403" in codes  # tp 3 does not divide the heads: each item still judged


def test_a_global_batch_of_zero_says_it_is_read_otherwise_than_upstream(tmp_path: Path) -> None:
    """`constraint.global_batch_size: 0` is "unset" to HyperParallel's search, which then does not take the
    train.yaml's batch ([HP] Corrections 5); hp-plan searches at the train.yaml's and said nothing (HP114, where the
    0 is written). Absent, the two agree and nothing is said."""
    llama = ROOT / "examples" / "llama3-70b"
    (tmp_path / "train.yaml").write_text((llama / "train.yaml").read_text())
    text = (llama / "search.yaml").read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("global_batch_size:"))
    (tmp_path / "search.yaml").write_text(text.replace(line, line.split(":")[0] + ": 0"))
    loaded = check_file(str(tmp_path / "search.yaml"))
    (d,) = [d for d in loaded.diagnostics if d.code == "HP114"]
    assert "512" in d.message and d.path == "constraint.global_batch_size" and d.range.start.line > 0
    assert loaded.config is not None and loaded.config.global_batch_size == 512
    assert d.data == {"replace_value": 512}  # the quick fix states the batch searched at
    (tmp_path / "search.yaml").write_text(text.replace(line + "\n", ""))
    assert not [d for d in check_file(str(tmp_path / "search.yaml")).diagnostics if d.code == "HP114"]
