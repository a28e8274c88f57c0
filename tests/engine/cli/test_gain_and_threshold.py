"""Gains (D-013): HP611 and `hp-plan apply` state the gain in tokens/s (batch sizes differing said so),
apply does not rewrite below the 1.10× threshold unless --force, CP only where it pays, near-ties marked."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from engine.check import check_file
from engine.cli.apply import emit, plan
from engine.search import compare_stated, search, stated_estimate
from engine.search.gain import gain
from tests.support.cli import copy_example, hp_plan
from tests.support.configs import llama8b_model

LLAMA8B_SEARCH = llama8b_model() + """\
cluster: {num_nodes: 1, cards_per_node: 8, device_type: H100}
parallelism: {dp: auto, fsdp: auto, tp: auto, pp: auto, cp: auto, ep: 1, vpp: auto, micro_batch_size: auto,
              micro_batch_num: auto}
constraint: {global_batch_size: 64, memory_limit_gb: 76}
recompute: auto
"""


@pytest.fixture
def llama(tmp_path: Path) -> Path:
    return copy_example("llama3-70b", tmp_path / "l")


def test_llama8b_one_node_8k_gets_no_cp_and_marks_equivalents(tmp_path: Path) -> None:
    """Reproduced: the search chose cp 4 for Llama-3.1-8B on one 8×H100 node at 8K (CP priced at zero)."""
    f = tmp_path / "search.yaml"
    f.write_text(LLAMA8B_SEARCH)
    p = hp_plan("search", str(f), "--json", "--top", "5")
    doc = json.loads(p.stdout)
    assert doc["best"]["strategy"]["cp"] == 1
    band = doc["top"][0]["error_band"]["order"]  # the fastest plan's own band (engine.cost.band)
    assert doc["equivalence_band"] == pytest.approx(band) and 0.01 < band < 0.2
    assert len(doc["equivalent"]) == len(doc["top"]) and doc["equivalent"][0] is True
    for e in doc["top"]:
        if e["strategy"]["cp"] > 1:
            assert e["time_breakdown_s"]["cp_comm"] > 0
    text = hp_plan("search", str(f), "--top", "5").stdout
    assert "equivalent" in text and f"within {band:.0%} of the fastest" in text
    assert re.search(r"\d\.\d{3} ± \d+%", text)  # each row's step with its own band


def test_hp611_gain_is_the_tokens_per_second_ratio_and_says_the_batches_differ(llama: Path) -> None:
    s = llama / "search.yaml"
    s.write_text(s.read_text().replace("global_batch_size: 512", "global_batch_size: 1024"))
    loaded = check_file(str(s))
    assert loaded.config is not None
    res = search(loaded.config, top=1)
    stated = stated_estimate(loaded.config)
    assert res.best is not None and stated is not None
    assert stated.strategy.global_batch_size == 512 and res.best.strategy.global_batch_size == 1024
    hp611 = [d for d in compare_stated(loaded.config, res).diagnostics if d.code == "HP611"]
    assert hp611
    ratio = res.best.tokens_per_s / stated.tokens_per_s
    assert hp611[0].data["speedup"] == pytest.approx(ratio, rel=1e-12)
    assert ratio != pytest.approx(stated.step_time_s / res.best.step_time_s, rel=0.05)  # step ratio would lie
    assert "global batch sizes differ" in hp611[0].message and f"{ratio:.2f}×" in hp611[0].message


def _write_plan(train: Path, best) -> None:  # type: ignore[no-untyped-def]
    p = plan(str(train), best)
    assert p.error is None, p.error
    assert emit(p, output=str(train), in_place=False, dry_run=False, as_json=False, best=None, file=str(train),
                diagnostics=[], out=io.StringIO(), err=io.StringIO()) == 0


def test_apply_does_not_rewrite_below_the_threshold_unless_forced(llama: Path) -> None:
    s = llama / "search.yaml"
    loaded = check_file(str(s))
    assert loaded.config is not None
    res = search(loaded.config, top=10)
    assert res.best is not None
    close = [e for e in res.top[1:] if not gain(e, res.best).worth_it and e.strategy != res.best.strategy]
    assert close, "the example has near-ties"
    _write_plan(llama / "train.yaml", close[0])
    before = (llama / "train.yaml").read_text()
    p = hp_plan("apply", str(s), "--in-place")
    assert p.returncode == 0, p.stderr
    assert "stated " in p.stderr and "→ best " in p.stderr and "× the tokens/s" in p.stderr
    threshold = gain(close[0], res.best).threshold
    assert 1.0 < threshold < 1.5  # 1 + the two plans' error band (engine.cost.band.pair_spread)
    assert f"below the {threshold:.2f}× threshold" in p.stderr and "--force" in p.stderr
    assert (llama / "train.yaml").read_text() == before
    j = json.loads(hp_plan("apply", str(s), "--json").stdout)
    assert j["written"] is None and j["gain"] < j["threshold"] == pytest.approx(threshold)
    p = hp_plan("apply", str(s), "--in-place", "--force")
    assert p.returncode == 0, p.stderr
    assert (llama / "train.yaml").read_text() != before


def test_apply_prints_stated_to_best_with_the_gain(llama: Path) -> None:
    """The example states tp 8 · pp 4 with full recompute: far below the best; apply says by how much."""
    p = hp_plan("apply", str(llama / "search.yaml"), "--dry-run")
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stderr.splitlines() if "→ best" in x)
    assert "stated dp " in line and "tokens/s" in line
    assert p.stdout.startswith("---")  # the diff: above the threshold, apply rewrites
