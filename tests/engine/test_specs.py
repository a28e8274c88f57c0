from engine.diagnostics import CODES, Diagnostic, Severity
from engine.positions import Position, Range
from engine.specs import RecomputePlan, Strategy


def test_strategy_derives_replicas_and_batch():
    s = Strategy(dp=8, dp_shard=4, tp=4, pp=2, cp=2, micro_batch_size=2, micro_batch_num=8)
    assert s.dp_replicate == 4  # dp*cp / dp_shard
    assert s.global_batch_size == 128
    assert s.world_size == 128


def test_recompute_plan_json_and_lookup():
    plan = RecomputePlan("selective", ((0, 9, "full"), (12, 12, "off")))
    assert plan.to_json() == {"mode": "selective", "layers": {"0-9": "full", "12": "off"}}
    assert plan.mode_of(5) == "full" and plan.mode_of(10) == "selective" and plan.mode_of(12) == "off"
    assert RecomputePlan("full").to_json() == "full"


def test_diagnostic_severity_defaults_to_code_table():
    d = Diagnostic("HP001", "bad", Range(Position(1, 2), Position(1, 5)))
    assert d.effective_severity is Severity.ERROR and CODES["HP001"].title
    assert d.to_json()["range"] == {"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 5}}
