"""Numbers a typo makes huge cost a diagnostic at the value, never a hang, a memory blow-up or an internal
error (engine.integers): each run through `hp-plan` in a subprocess under a time and an address-space limit
(tests/support/cli.hp_plan_bounded), so a regression fails as a timeout or a MemoryError, not a slow suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import ROOT, hp_plan_bounded

PLAN = ROOT / "examples" / "explain" / "1f1b.yaml"
DEEPSEEK = ROOT / "examples" / "deepseek-v3"


def plan(tmp_path: Path, *subs: tuple[str, str], name: str = "t.yaml") -> Path:
    text = PLAN.read_text()
    for old, new in subs:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def _clean(r: object) -> str:
    out = r.stdout + r.stderr  # type: ignore[attr-defined]
    assert "HP900" not in out and "Traceback" not in out and "MemoryError" not in out, out[-2000:]
    assert r.returncode in (0, 1), out[-2000:]  # type: ignore[attr-defined]
    return out


def test_huge_heads_with_kv_heads_that_do_not_divide_them_is_a_diagnostic_at_the_value(tmp_path: Path) -> None:
    """1e11 heads: the HP202 suggestion listed every divisor up to the head count (minutes)."""
    f = plan(tmp_path, ("num_attention_heads: 32", "num_attention_heads: 100000000000"),
             ("num_key_value_heads: 8", "num_key_value_heads: 7"))
    r = hp_plan_bounded("check", str(f), timeout=20)
    out = _clean(r)
    assert r.returncode == 1
    assert "t.yaml:7:24: error HP110: num_attention_heads must be at most 16,777,216" in out


@pytest.mark.parametrize("command", ["check", "estimate", "explain"])
def test_heads_and_kv_at_the_bound_with_a_tp_that_divides_neither_stay_quick(tmp_path: Path, command: str) -> None:
    """heads = kv at the largest value priced, tp 3: the HP503 list of valid tp (all common divisors) is
    built from the gcd's divisors, not by counting up to the kv heads."""
    f = plan(tmp_path, ("num_attention_heads: 32", "num_attention_heads: 16777216"),
             ("num_key_value_heads: 8", "num_key_value_heads: 16777216"), ("  tp: 2", "  tp: 3"))
    _clean(hp_plan_bounded(command, str(f), timeout=20))


def test_2_64_layers_and_400_digits_are_hp110_at_the_value(tmp_path: Path) -> None:
    f = plan(tmp_path, ("num_hidden_layers: 32", "num_hidden_layers: 18446744073709551616"),
             ("hidden_size: 4096", "hidden_size: " + "9" * 400))
    for command in ("check", "estimate", "explain", "search"):
        out = _clean(hp_plan_bounded(command, str(f), timeout=30))
        assert "t.yaml:4:22: error HP110: num_hidden_layers must be at most 16,777,216" in out, out
        assert "t.yaml:5:16: error HP110: hidden_size must be at most 16,777,216 (the largest model fact hp-plan " \
               "prices), got a 400-digit number" in out, out
        assert "HP201" not in out  # the value is refused where it stands, not reported missing


def test_a_400_digit_degree_or_batch_is_hp110(tmp_path: Path) -> None:
    f = plan(tmp_path, ("global_batch_size: 16", "global_batch_size: " + "7" * 400))
    out = _clean(hp_plan_bounded("estimate", str(f), timeout=20))
    assert "error HP110: constraint.global_batch_size must be at most 9,007,199,254,740,992" in out


def _deepseek_with_experts(tmp_path: Path, experts: str) -> Path:
    train = (DEEPSEEK / "train.yaml").read_text().replace(
        "  torch_dtype: bfloat16\n", f"  torch_dtype: bfloat16\n  config_overrides:\n    num_experts: {experts}\n")
    (tmp_path / "train.yaml").write_text(train)
    search = (DEEPSEEK / "search.yaml").read_text().replace("ep: [8, 16, 32, 64]", "ep: auto")
    (tmp_path / "search.yaml").write_text(search)
    return tmp_path / "search.yaml"


@pytest.mark.parametrize("command", [["search"], ["explain", "--best"], ["compare", "--best"],
                                     ["export", "--best", "--to", "megatron"]])
def test_10_18_experts_never_reach_the_search(tmp_path: Path, command: list[str]) -> None:
    """~1e18 experts passed check, then the search listed the divisors of the expert count (hours)."""
    f = _deepseek_with_experts(tmp_path, "1000000000000000000")
    out = _clean(hp_plan_bounded(command[0], str(f), *command[1:], timeout=30))
    assert "train.yaml:9:18: error HP110: num_experts must be at most 16,777,216" in out, out


def test_experts_at_the_bound_search_in_bounded_time(tmp_path: Path) -> None:
    f = _deepseek_with_experts(tmp_path, "16777216")
    _clean(hp_plan_bounded("search", str(f), "--top", "1", timeout=120))


def test_a_global_batch_of_2_30_explains_in_bounded_memory(tmp_path: Path) -> None:
    """2**30 sequences with micro_batch_num derived: 5e8 micro-batches per stage took 8 GB of timeline."""
    f = plan(tmp_path, ("global_batch_size: 16", "global_batch_size: 1073741824"), ("  micro_batch_num: 8\n", ""))
    r = hp_plan_bounded("explain", str(f), "--json", timeout=30)
    _clean(r)
    doc = json.loads(r.stdout)
    assert doc["strategy"]["micro_batch_num"] == 536870912
    notes = [d["message"] for d in doc["diagnostics"] if d["code"] == "HP750"]
    assert any("as 1,024 boxes per stage and chunk" in n for n in notes), notes
    assert len(doc["timeline"]) < 50_000
    lanes_end = {iv["stage"]: iv["end_s"] for iv in doc["timeline"]}
    assert all(end == pytest.approx(doc["step_time_s"]) for end in lanes_end.values())  # still the whole step
    svg = tmp_path / "t.svg"
    _clean(hp_plan_bounded("explain", str(f), "--svg", str(svg), timeout=30))
    assert svg.stat().st_size < 20_000_000


def test_explain_width_is_bounded(tmp_path: Path) -> None:
    r = hp_plan_bounded("explain", str(PLAN), "--width", "10000000", timeout=20)
    assert r.returncode == 2 and "expected at most 2000 columns, got 10000000" in r.stderr
    r = hp_plan_bounded("explain", str(PLAN), "--width", "2000", timeout=20)
    assert r.returncode == 0 and max(len(line) for line in r.stdout.splitlines()) >= 2000


@pytest.mark.parametrize("flag, value", [("--devices", "18446744073709551616"), ("--memory-gb", "inf"),
                                         ("--memory-gb", "nan"), ("--nodes", "9" * 400)])
def test_hostile_flags_are_usage_errors(flag: str, value: str) -> None:
    r = hp_plan_bounded("estimate", str(PLAN), flag, value, timeout=20)
    assert r.returncode == 2 and "Traceback" not in r.stderr and f"argument {flag}" in r.stderr, r.stderr


@pytest.mark.parametrize("command", ["search", "compare"])
def test_a_2_64_degree_is_hp110_for_the_search_too(tmp_path: Path, command: str) -> None:
    """A degree of a search config (here vpp) beyond 2**53 overflowed the search's int64 columns (HP900)."""
    f = plan(tmp_path, ("  vpp: 1", "  vpp: 18446744073709551616"))
    out = _clean(hp_plan_bounded(command, str(f), *(["--best"] if command == "compare" else []), timeout=30))
    assert "t.yaml:23:8: error HP110: parallelism.vpp must be at most 9,007,199,254,740,992" in out, out
