"""estimate_config (HP5xx validation, positioned) and `hp-plan estimate` (text, JSON, exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.check import check_file
from engine.cli import main
from engine.cost import check_strategy, estimate_config
from engine.results import MEMORY_TERMS, TIME_TERMS
from engine.specs import RecomputePlan, Strategy
from tests.engine.cost.shapes import DSV3, LLAMA70B, cluster

ROOT = Path(__file__).resolve().parents[3]

SEARCH = """\
model: {{name: gpt-22b, num_hidden_layers: 48, hidden_size: 6144, intermediate_size: 24576,
        num_attention_heads: 64, num_key_value_heads: 64, vocab_size: 51200,
        max_position_embeddings: 2048, compute_dtype: float16, tie_word_embeddings: true,
        use_flash_attention: false, hidden_act: gelu}}
cluster: {{num_nodes: 1, cards_per_node: 8, device_type: A100, device_memory_gb: 80}}
parallelism:
  dp: 1
  fsdp: 1
  tp: {tp}
  pp: 1
  cp: 1
  ep: 1
  vpp: 1
  micro_batch_size: 4
  micro_batch_num: 1
  sequence_parallel: {sp}
constraint: {{global_batch_size: 4, memory_limit_gb: {mem}}}
recompute: {rc}
selective_policy: attention
pp_config: {{pipeline_schedule: 1F1B, pp_interleave_num: 1}}
"""


def write(tmp_path: Path, **kw: object) -> Path:
    args = {"tp": 8, "sp": "true", "mem": 80, "rc": "selective", **kw}
    p = tmp_path / "search.yaml"
    p.write_text(SEARCH.format(**args))
    return p


def test_prices_the_stated_strategy(tmp_path: Path) -> None:
    loaded = check_file(str(write(tmp_path)))
    assert loaded.config is not None
    est, diags = estimate_config(loaded.config)
    assert est is not None and est.fits and not [d for d in diags if d.is_error]
    assert est.strategy.tp == 8 and est.strategy.recompute.mode == "selective"
    assert 0.5 < est.step_time_s < 3.0 and 0 < est.mfu < 1


def test_over_budget_is_hp520_at_the_memory_limit(tmp_path: Path) -> None:
    loaded = check_file(str(write(tmp_path, mem=20)))
    assert loaded.config is not None
    est, diags = estimate_config(loaded.config)
    assert est is not None and not est.fits
    d = next(d for d in diags if d.code == "HP520")
    assert d.path == "constraint.memory_limit_gb" and d.range.start.line == 16 and d.range.start.character == 52
    assert d.data["budget_gib"] == 20


def test_check_strategy_codes() -> None:
    cl = cluster(8)
    assert {p.code for p in check_strategy(LLAMA70B, cl, Strategy(dp=2, tp=16, pp=2, micro_batch_num=2))} == {"HP503"}
    assert {p.code for p in check_strategy(LLAMA70B, cl, Strategy(dp=4, tp=8, pp=1))} == {"HP502"}
    assert {p.code for p in check_strategy(LLAMA70B, cl, Strategy(dp=1, tp=8, pp=8, micro_batch_num=4))} == {"HP506"}
    assert "HP505" in {p.code for p in check_strategy(LLAMA70B, cluster(16), Strategy(
        dp=1, tp=1, pp=64, vpp=2, pipeline_schedule="interleaved", micro_batch_num=128))}
    assert {p.code for p in check_strategy(LLAMA70B, cl, Strategy(dp=8, tp=8, dp_shard=3))} == {"HP508"}
    assert {p.code for p in check_strategy(DSV3, cluster(32), Strategy(dp=32, tp=8, ep=3))} == {"HP504"}
    assert {p.code for p in check_strategy(LLAMA70B, cl, Strategy(dp=8, tp=8, ep=2))} == {"HP510"}
    ok = Strategy(dp=2, tp=8, pp=4, micro_batch_num=8, recompute=RecomputePlan("full"))
    assert check_strategy(LLAMA70B, cl, ok) == []


def test_invalid_degree_gets_diagnostics_not_a_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, tp=3)
    rc = main(["estimate", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert "step_time_s" not in doc
    codes = {d["code"] for d in doc["diagnostics"]}
    assert codes & {"HP503", "HP502"} or any(c.startswith("HP4") for c in codes)


def test_cli_json_keys_follow_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["estimate", str(write(tmp_path)), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    for key in ("strategy", "fits", "budget_gib", "peak_memory_gib", "stage_memory_gib", "memory_breakdown_gib",
                "step_time_s", "tokens_per_s", "tokens_per_s_per_device", "mfu", "time_breakdown_s", "diagnostics"):
        assert key in doc, key
    assert list(doc["memory_breakdown_gib"]) == list(MEMORY_TERMS)
    assert list(doc["time_breakdown_s"]) == list(TIME_TERMS)
    assert doc["strategy"]["recompute"] == "selective"


def test_cli_text_and_exit_code_when_it_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["estimate", str(write(tmp_path, mem=20))])
    out = capsys.readouterr().out
    assert rc == 1
    assert "DOES NOT FIT" in out and "HP520" in out and "parameters" in out and "compute" in out


def test_every_calibration_case_file_prices() -> None:
    cases = sorted((ROOT / "benchmarks" / "cases").glob("*.yaml"))
    assert len(cases) == 40
    for p in cases[::7]:  # a sample keeps the suite fast; benchmarks/accuracy.py prices all
        loaded = check_file(str(p))
        assert loaded.config is not None, p
        est, diags = estimate_config(loaded.config)
        assert est is not None, (p, [d.message for d in diags])


def test_over_a_settings_budget_hp520_sits_on_a_stated_key_and_names_the_setting(tmp_path: Path) -> None:
    """A lone train.yaml writes no budget: HP520 goes on its stated tp (a key it has) and says the budget
    came from the editor setting, instead of pointing at constraint.memory_limit_gb at line 0."""
    from engine.config.types import ClusterOverrides

    train = tmp_path / "train.yaml"
    train.write_text((ROOT / "examples" / "llama3-70b" / "train.yaml").read_text())
    ov = ClusterOverrides(num_nodes=128, cards_per_node=8, devices=1024, device_type="H100", memory_gb=5,
                          memory_source="setting hpLsp.memoryLimitGb")
    loaded = check_file(str(train), overrides=ov)
    assert loaded.config is not None and loaded.config.budget_source == "setting hpLsp.memoryLimitGb"
    _, diags = estimate_config(loaded.config)
    d = next(d for d in diags if d.code == "HP520")
    assert d.path in ("accelerator.tp_size", "parallelism.tp")  # the written key or its canonical alias
    line = next(n for n, t in enumerate(train.read_text().splitlines()) if t.strip().startswith("tp_size:"))
    assert d.range.start.line == line and d.range.start.character > 0
    assert "setting hpLsp.memoryLimitGb" in d.message and d.data["budget_source"] == "setting hpLsp.memoryLimitGb"


def test_cli_text_says_marginal_for_a_peak_over_the_budget_inside_its_band(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A peak just over the budget but within the estimate's band: the JSON keeps `fits` true (verdict marginal,
    docs/formats.md §3), and the text says it is over the budget and may fit, never a bare "fits"."""
    loaded = check_file(str(write(tmp_path)))
    assert loaded.config is not None
    est, _ = estimate_config(loaded.config)
    assert est is not None
    rc = main(["estimate", str(write(tmp_path, mem=round(0.97 * est.peak_memory_gib, 1)))])
    out = capsys.readouterr().out
    assert rc == 0
    assert "budget: MARGINAL (over the budget, within the estimate's band: it may fit)" in out
    assert "budget: fits" not in out
