"""`hp-plan apply`: the plumbing with a given strategy, and end to end in a subprocess on the examples."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from engine.check import check_file
from engine.cli.apply import emit, plan, unified_diff
from engine.config.types import ClusterOverrides
from engine.cost.estimate import estimate
from engine.edit import strategy_edits
from engine.edit.text import LineIndex
from engine.results import Estimate
from engine.specs import RecomputePlan, Strategy
from tests.support.cli import EXAMPLES, ROOT, copy_example, hp_plan

from .fixtures import CRLF, LEGACY


@pytest.fixture
def deepseek(tmp_path: Path) -> Path:
    return copy_example("deepseek-v3", tmp_path / "ds")


def _priced(path: Path, s: Strategy) -> Estimate:
    """`s` priced on the model and cluster the file at `path` states, at s's device count: the plan apply writes."""
    loaded = check_file(str(path), overrides=ClusterOverrides(devices=s.world_size, explicit=True))
    assert loaded.config is not None
    c = loaded.config
    return estimate(c.model, c.cluster, c.run, s, budget_gib=80.0)


def _stated(path: Path, world: int) -> Strategy | None:
    loaded = check_file(str(path), overrides=ClusterOverrides(devices=world, explicit=True))
    return loaded.config.stated if loaded.config else None


# ---------------------------------------------------------------------------------------------- plumbing


def test_plan_writes_a_given_strategy_that_the_reader_reads_back(tmp_path: Path) -> None:
    train = tmp_path / "train.yaml"
    shutil.copy(EXAMPLES / "llama3-70b" / "train.yaml", train)
    s = Strategy(dp=16, dp_shard=32, tp=8, pp=4, cp=2, vpp=4, pipeline_schedule="interleaved",
                 micro_batch_size=1, micro_batch_num=32, sequence_parallel=True,
                 recompute=RecomputePlan("selective", ((0, 9, "full"),)))
    p = plan(str(train), _priced(train, s))
    assert p.error is None, p.error
    out = tmp_path / "out.yaml"
    code = emit(p, output=str(out), in_place=False, dry_run=False, as_json=False, best=None, file=str(train),
                diagnostics=[], out=io.StringIO(), err=io.StringIO())
    assert code == 0
    assert _stated(out, s.world_size) == s
    assert train.read_text() == (EXAMPLES / "llama3-70b" / "train.yaml").read_text()  # untouched


def test_plan_refusal_writes_nothing(tmp_path: Path) -> None:
    legacy = tmp_path / "legacy.yaml"
    legacy.write_text(LEGACY)
    s = Strategy(dp=2, dp_shard=2, tp=4, pp=2, micro_batch_num=64, recompute=RecomputePlan("off", ((0, 3, "full"),)))
    p = plan(str(legacy), _priced(legacy, s))
    assert p.error and "legacy" in p.error
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "out.yaml"
    assert emit(p, output=str(target), in_place=False, dry_run=False, as_json=False, best=None,
                file=str(legacy), diagnostics=[], out=out, err=err) == 1
    assert not target.exists() and "nothing written" in err.getvalue() and out.getvalue() == ""
    assert legacy.read_text() == LEGACY


def test_crlf_survives_the_write(tmp_path: Path) -> None:
    train = tmp_path / "train.yaml"
    train.write_bytes(CRLF.encode())
    s = Strategy(dp=8, dp_shard=8, tp=4, pp=2, cp=2, micro_batch_num=8, sequence_parallel=True,
                 recompute=RecomputePlan("selective"))
    p = plan(str(train), _priced(train, s))
    assert p.error is None, p.error
    assert emit(p, output=None, in_place=True, dry_run=False, as_json=False, best=None, file=str(train),
                diagnostics=[], out=io.StringIO(), err=io.StringIO()) == 0
    raw = train.read_bytes().decode()
    assert raw.count("\r\n") == raw.count("\n") and "  pp_size: 2\r\n" in raw


def test_unified_diff_marks_a_missing_final_newline() -> None:
    d = unified_diff("t.yaml", "a: 1", "a: 2")
    assert d.startswith("--- a/t.yaml\n+++ b/t.yaml\n") and "\\ No newline at end of file" in d


# ---------------------------------------------------------------------------------------------- examples


@pytest.mark.parametrize("name", ["llama3-70b", "deepseek-v3"])
def test_examples_round_trip_byte_identical_except_changed_tokens(name: str) -> None:
    """The best strategy of each example's search, written into its train.yaml: every edit is a token on a
    line of a changed key, the "was OLD: " mark in that line's comment, or a whole inserted line; all other
    bytes are the original's."""
    from engine.search import search

    config = check_file(str(EXAMPLES / name / "search.yaml")).config
    assert config is not None
    best = search(config, top=1).best
    assert best is not None
    text = (EXAMPLES / name / "train.yaml").read_text()
    r = strategy_edits(text, best.strategy)
    assert r.ok and r.edits, r.error
    idx = LineIndex.of(text)
    lines = text.splitlines()
    leaves = {c.rsplit(".", 1)[-1] for c in r.changed}
    for e in r.edits:
        start, end = idx.offset(e.range.start), idx.offset(e.range.end)
        line = lines[e.range.start.line]
        if start == end and e.range.start.character in (0, len(line)):
            continue  # a whole inserted line
        assert e.range.start.line == e.range.end.line
        assert line.split(":")[0].strip() in leaves, (line, leaves)
        assert " " not in text[start:end].strip()
    # the unchanged remainder, byte for byte
    kept = [ln for ln in lines if ln.split(":")[0].strip() not in leaves]
    # a changed value's comment is kept, marked with the value it was written for
    new_by_key = {ln.split(":")[0]: ln for ln in r.new_text.splitlines() if ":" in ln}
    for old_line in lines:
        new_line = new_by_key.get(old_line.split(":")[0], old_line)
        if " #" in old_line and old_line.split(":")[0].strip() in leaves and old_line != new_line:
            words, old = old_line.split(" #", 1)[1].strip(), old_line.split(":")[1].split()[0]
            marked = re.search(rf"(?<![\w.]){re.escape(old)}(?![\w.])", words)
            want = f"was {old}: {words}" if marked else words
            assert new_line.split(" #", 1)[1].strip() == want, (old_line, new_line)
    new_lines = r.new_text.splitlines()
    assert all(ln in new_lines for ln in kept)
    world = best.strategy.world_size
    tmp = EXAMPLES / name / "train.yaml"
    loaded = check_file(str(tmp), text=r.new_text, overrides=ClusterOverrides(devices=world, explicit=True))
    assert loaded.config is not None and loaded.config.stated == best.strategy


def test_apply_dry_run_prints_a_diff_and_writes_nothing(deepseek: Path) -> None:
    before = (deepseek / "train.yaml").read_bytes()
    p = hp_plan("apply", "search.yaml", "--dry-run", cwd=deepseek)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("--- a/train.yaml\n+++ b/train.yaml\n@@")
    assert "-  tp_size: 2\n" in p.stdout and "dry run" in p.stderr
    assert (deepseek / "train.yaml").read_bytes() == before


def test_apply_in_place_then_again_is_a_no_op(deepseek: Path) -> None:
    p = hp_plan("apply", "search.yaml", "--in-place", cwd=deepseek)
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stderr and p.stdout == ""
    written = (deepseek / "train.yaml").read_text()
    js = json.loads(hp_plan("search", "search.yaml", "--json", cwd=deepseek).stdout)
    best = js["best"]["strategy"]
    stated = _stated(deepseek / "train.yaml", 2048)
    assert stated is not None and stated.to_json() == best
    again = hp_plan("apply", "search.yaml", "--in-place", cwd=deepseek)
    assert again.returncode == 0 and "already states" in again.stderr
    assert (deepseek / "train.yaml").read_text() == written


def test_apply_default_prints_the_file_and_json(deepseek: Path) -> None:
    p = hp_plan("apply", "search.yaml", cwd=deepseek)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith((deepseek / "train.yaml").read_text().splitlines()[0])
    assert "accelerator:" in p.stdout and "-o OUT" in p.stderr
    out = deepseek / "sub" / "resolved.yaml"
    out.parent.mkdir()
    j = hp_plan("apply", "search.yaml", "-o", str(out), "--json", cwd=deepseek)
    assert j.returncode == 0, j.stderr
    doc = json.loads(j.stdout)
    assert doc["written"] == str(out) and doc["error"] is None and doc["changed"]
    assert out.read_text() == p.stdout
    assert {"range", "newText"} <= set(doc["edits"][0])


def test_apply_refusals(tmp_path: Path, deepseek: Path) -> None:
    lonely = tmp_path / "search.yaml"
    lonely.write_text(
        "model: {num_hidden_layers: 8, hidden_size: 1024, num_attention_heads: 8, vocab_size: 32000,\n"
        "        max_position_embeddings: 2048}\n"
        "cluster: {num_nodes: 1, cards_per_node: 8, device_type: H100}\n"
        "constraint: {global_batch_size: 64}\n"
    )
    p = hp_plan("apply", str(lonely))
    assert p.returncode == 1 and "names no train_yaml" in p.stderr, p.stderr
    both = hp_plan("apply", "search.yaml", "-o", "x.yaml", "--in-place", cwd=deepseek)
    assert both.returncode == 2
    missing = hp_plan("apply", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and "Traceback" not in missing.stderr + missing.stdout


def test_apply_repairs_an_invalid_stated_strategy(tmp_path: Path) -> None:
    """On 64 devices the example's FSDP shard of 32 does not divide dp (an error at a strategy key): apply
    searches anyway and writes a strategy the reader accepts; errors elsewhere still block it."""
    train = tmp_path / "train.yaml"
    shutil.copy(EXAMPLES / "llama3-70b" / "train.yaml", train)
    flags = ("--devices", "64", "--device-type", "H100")
    assert any(d.code == "HP413" for d in check_file(str(train), overrides=ClusterOverrides(
        devices=64, device_type="H100", explicit=True)).diagnostics)
    p = hp_plan("apply", str(train), "--in-place", *flags)
    assert p.returncode == 0, p.stderr
    assert "fsdp_config.dp_shard_size: 32 -> " in p.stderr
    after = check_file(str(train), overrides=ClusterOverrides(devices=64, device_type="H100", explicit=True))
    assert not [d for d in after.diagnostics if d.is_error]
    broken = tmp_path / "broken.yaml"
    broken.write_text(train.read_text().replace("pretrained_model_name_or_path:", "pretrained_model_name_or_pth:"))
    q = hp_plan("apply", str(broken), "--in-place", *flags)
    assert q.returncode == 1 and "cannot repair" in q.stderr


CASES = sorted((ROOT / "benchmarks" / "cases").glob("[MNK]*.yaml"))


def test_every_calibration_case_best_writes_and_reads_back() -> None:
    """The strategies the search returns on the calibration cases (their vpp, optimizer sharding, SP,
    recompute), written into an AutoModels train.yaml: the project's reader reads each back exactly."""
    from engine.search import search

    from .fixtures import TWO_SPACE

    assert CASES
    written = 0
    for case in CASES:
        config = check_file(str(case)).config
        assert config is not None
        best = search(config, top=1).best
        if best is None:
            continue
        r = strategy_edits(TWO_SPACE, best.strategy)
        assert r.ok, (case.name, r.error)
        stated = check_file(str(EXAMPLES / "llama3-70b" / "train.yaml"), text=r.new_text, overrides=ClusterOverrides(
            devices=best.strategy.world_size, device_type="H100", explicit=True)).config
        assert stated is not None and stated.stated == best.strategy, case.name
        written += 1
    assert written >= len(CASES) - 2


def test_apply_a_per_layer_plan(tmp_path: Path) -> None:
    llama = tmp_path / "llama"
    shutil.copytree(EXAMPLES / "llama3-70b", llama)
    search_yaml = llama / "search.yaml"
    search_yaml.write_text(search_yaml.read_text().replace("recompute: auto", "recompute: per_layer"))
    p = hp_plan("apply", "search.yaml", "--json", "-o", "out.yaml", cwd=llama)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rc = doc["strategy"]["recompute"]
    out = (llama / "out.yaml").read_text()
    if isinstance(rc, dict):
        assert "  layers: {" in out
    stated = _stated(llama / "out.yaml", 1024)
    assert stated is not None and stated.to_json() == doc["strategy"]
