"""A plan whose files state no release of its framework is priced as the current release, and where an older
release prices it beyond its error band, HP536 says by how much and what that release lacks: the model cannot
know which release will run the plan, so it does not hide the choice (engine.cost.release_spread)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from engine.catalog.frameworks import FRAMEWORKS
from engine.cost.release_spread import fact_sets, release_prices
from engine.results import ReleaseSpread
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import LLAMA8B, h100
from tests.support.cli import ROOT, hp_plan_json

RUN = ROOT / "benchmarks" / "memory_runs" / "tt-8b-8gpu-compile.yaml"
CALIBRATION_RUNS = ROOT / "benchmarks" / "calibration_runs"


def _without_release(folder: Path, version: str = "") -> Path:
    """The TT-BENCH 8B run as a file in `folder` that does not say which torchtitan ran it (or says `version`)."""
    text = RUN.read_text()
    text = re.sub(r"\n  framework_version: .*", f"\n  framework_version: '{version}'" if version else "", text)
    text = re.sub(r"\n  loss_chunks: .*", "", text)
    folder.mkdir(exist_ok=True)
    path = folder / "search.yaml"
    path.write_text(text)
    return path


def test_older_releases_group_by_the_priced_facts_they_lack_newest_first() -> None:
    rel = FRAMEWORKS["torchtitan"].releases
    assert rel is not None
    groups = fact_sets(rel)
    assert [versions for versions, _ in groups] == [("0.1", "0.2"), ("0.0",)]
    newest, oldest = (tuple(f.field for f in lacks) for _, lacks in groups)
    assert newest == ("loss_chunks",) and set(newest) < set(oldest)
    assert not any(f.startswith("space.") for f in oldest)  # what a release can run prices nothing


def test_a_stated_release_or_a_framework_without_releases_prices_nothing_more() -> None:
    s = Strategy(dp=8, tp=1, pp=1, micro_batch_size=1, micro_batch_num=1)
    none = ReleaseSpread()
    assert release_prices(LLAMA8B, h100(1), RunOptions(framework="torchtitan", framework_version="0.0"), s, 80) == none
    assert release_prices(LLAMA8B, h100(1), RunOptions(framework="hyperparallel"), s, 80) == none
    spread = release_prices(LLAMA8B, h100(1), RunOptions(framework="torchtitan"), s, 80)
    assert [p.since for p in spread.prices] == ["main", "0.1"] and not spread.refused_before
    # a release that does not run the plan as stated ends the list: every older one lacks what it lacks
    refused = release_prices(LLAMA8B, h100(1), RunOptions(framework="torchtitan"), s, 80,
                             runs=lambda run: run.framework_version != "0.0")
    assert [p.since for p in refused.prices] == ["main"] and refused.refused_before == "0.1"


def test_estimate_says_what_an_older_torchtitan_prices_the_run_at(tmp_path: Path) -> None:
    doc = hp_plan_json("estimate", str(_without_release(tmp_path)))
    (hp536,) = [d for d in doc["diagnostics"] if d["code"] == "HP536"]
    assert hp536["severity"] == "information"
    assert "before main (the chunked loss" in hp536["message"] and "framework_version" in hp536["message"]
    assert doc["other_releases"]["refused_before"] == ""
    others = {p["releases"][0]: p for p in doc["other_releases"]["prices"]}
    assert set(others) == {"0.1", "0.0"}
    # each is the price the same file gets when it states that release
    for version, price in others.items():
        stated = hp_plan_json("estimate", str(_without_release(tmp_path / version, version)))
        assert price["peak_memory_gib"] == stated["peak_memory_gib"]
        assert price["step_time_s"] == stated["step_time_s"]
        assert "other_releases" not in stated and not any(d["code"] == "HP536" for d in stated["diagnostics"])
    # the unchunked loss of the release that ran it: 40 % more peak than the current release prices
    assert others["0.0"]["peak_memory_gib"] > 1.3 * doc["peak_memory_gib"]
    written = _without_release(tmp_path / "again").read_text().splitlines()
    assert hp536["range"]["start"]["line"] == written.index("  framework: torchtitan")


def test_a_release_that_moves_nothing_beyond_the_band_is_not_a_finding() -> None:
    """A dense Megatron plan (the Megatron-LM 70B weak-scaling row): the releases' facts are MoE's, FSDP's and
    the layouts'; priced at every release, none is a finding."""
    doc = hp_plan_json("estimate", str(ROOT / "benchmarks" / "cases" / "M-05.yaml"))
    assert not any(d["code"] == "HP536" for d in doc["diagnostics"])
    assert len(doc["other_releases"]["prices"]) == 5
    assert all(abs(p["step_time_s"] / doc["step_time_s"] - 1) < 0.01 for p in doc["other_releases"]["prices"])


def test_releases_that_do_not_run_the_stated_options_are_not_priced_as_if_they_did(tmp_path: Path) -> None:
    """NeMo's DeepSeek-V3 run states `recompute_modules: [mla_up_proj]`, which Megatron-Core has from 0.12: an
    older release would price it with the attention policy (HP531 where a file states that release), which is
    not this plan. The list stops there and says so; 0.12 and 0.13 move nothing beyond the band, so no finding."""
    dsv3 = CALIBRATION_RUNS / "deepseek-v3-512xh100-nemo"
    doc = hp_plan_json("estimate", str(_unreleased(dsv3, tmp_path / "dsv3")))
    assert [p["since"] for p in doc["other_releases"]["prices"]] == ["0.14", "0.13"]
    assert doc["other_releases"]["refused_before"] == "0.12"
    assert not any(d["code"] == "HP536" for d in doc["diagnostics"])


def _unreleased(run: Path, folder: Path) -> Path:
    """A published run's folder copied with its files' release left out (the form a user's files take)."""
    shutil.copytree(run, folder)
    search = folder / "search.yaml"
    search.write_text("\n".join(line for line in search.read_text().splitlines()
                                if not line.lstrip().startswith("framework_version:")) + "\n")
    return search
