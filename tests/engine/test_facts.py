"""engine.facts.merge: each fact once across the reader (HP4xx), the cost model (HP5xx) and the search
(HP6xx), owned by one code at the strictest severity; exact duplicates dropped; repeated codes kept."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.config.types import ClusterOverrides
from engine.cost import estimate_config
from engine.diagnostics import CODES, Diagnostic, Severity
from engine.facts import EP_EXPERTS, EP_RANKS, FACTS, FSDP_SHARD, KEYED, OPTIMIZER_SHARD, fact_of, merge
from engine.positions import Range

ROOT = Path(__file__).resolve().parents[2]


def _d(code: str, message: str = "m", line: int = 0, severity: Severity | None = None,
       fact: str = "") -> Diagnostic:
    return Diagnostic(code, message, Range.of(line, 0, line, 1), "p", severity=severity, fact=fact)


def test_every_fact_names_documented_codes() -> None:
    for codes in FACTS.values():
        assert len(codes) >= 2
        assert all(c in CODES for c in codes), codes


def test_owner_kept_at_the_strictest_severity() -> None:
    reader = _d("HP415", severity=Severity.WARNING)
    cost = _d("HP506", "2 micro-batches for 4 pipeline stages", line=3)
    out = merge([reader], [cost])
    assert [d.code for d in out] == ["HP415"] and out[0].effective_severity is Severity.ERROR
    # Whichever batch comes first, the owner stays.
    assert [d.code for d in merge([cost], [reader])] == ["HP415"]


def test_search_advice_owns_the_over_budget_fact() -> None:
    out = merge([_d("HP520", "needs 90 GiB")], [_d("HP610", "The stated strategy ...", line=2)])
    assert [d.code for d in out] == ["HP610"] and out[0].is_error


def test_codes_covering_several_facts_are_told_apart_by_their_key() -> None:
    fsdp = _d("HP508", "fsdp 3 does not divide dp·cp = 8", fact=FSDP_SHARD)
    opt = _d("HP508", "optimizer shard 3 does not divide dp·cp = 8", fact=OPTIMIZER_SHARD)
    assert fact_of(fsdp) != fact_of(opt)
    assert [d.message for d in merge([_d("HP414")], [fsdp, opt])] == ["m", fsdp.message]
    assert fact_of(_d("HP504", "ep 3 does not divide the 256 experts", fact=EP_EXPERTS)) == fact_of(_d("HP405"))
    assert fact_of(_d("HP504", "anything", fact=EP_RANKS)) == fact_of(_d("HP417"))
    # Without a key such a code states no shared fact (HP510 "sequence_parallel has no effect with tp 1").
    assert fact_of(_d("HP510", "ep 8 has no effect: dense has no routed experts")) is None


def test_the_merge_never_reads_the_message() -> None:
    """Reworded messages merge as before: the cost model's finding carries its fact's key."""
    for message in ("ep 3 does not divide the 256 experts", "the experts borrow", "", "HP405"):
        cost = _d("HP504", message, line=2, fact=EP_EXPERTS)
        assert [d.code for d in merge([_d("HP405")], [cost])] == ["HP405"]
        assert [d.code for d in merge([_d("HP417")], [cost])] == ["HP417", "HP504"]


def test_the_cost_model_keys_every_finding_of_a_keyed_code() -> None:
    """Each HP504/HP508/HP510 the cost model raises for a fact another stage states carries that fact's key."""
    from engine.cost.strategy_rules import check_strategy
    from engine.specs import Strategy

    config = check_file(str(ROOT / "examples" / "deepseek-v3" / "train.yaml")).config
    assert config is not None and config.model is not None and config.model.num_experts % 7
    s = Strategy(dp=8, ep=7, dp_shard=3, optimizer_shard=5)
    keyed = {(p.code, p.fact) for p in check_strategy(config.model, None, s) if p.code in KEYED}
    assert {("HP504", EP_EXPERTS), ("HP508", FSDP_SHARD), ("HP508", OPTIMIZER_SHARD)} <= keyed, keyed


def test_exact_duplicates_go_repeated_codes_stay() -> None:
    a = _d("HP611", "faster", line=4)
    assert merge([a, a], [a]) == (a,)
    one, two = _d("HP401", "x", line=1), _d("HP401", "y", line=2)
    assert merge([one, two]) == (one, two)
    assert merge([_d("HP001")]) == (_d("HP001"),)


def test_estimate_and_check_report_few_micro_batches_once(tmp_path: Path) -> None:
    """The real pipeline: a train.yaml with 2 micro-batches for 4 stages. check_file says HP415, the cost model
    HP506; merged, the user reads it once, as an error in both `hp-plan check` and the estimate."""
    text = (ROOT / "examples" / "llama3-70b" / "train.yaml").read_text()
    text = text.replace("global_batch_size: 512 ", "global_batch_size: 64  ")
    train = tmp_path / "train.yaml"
    train.write_text(text)
    ov = ClusterOverrides(num_nodes=128, cards_per_node=8, devices=1024, device_type="H100")
    loaded = check_file(str(train), overrides=ov)
    assert loaded.config is not None and loaded.config.stated is not None
    _, est_diags = estimate_config(loaded.config)
    codes = {d.code for d in loaded.diagnostics} | {d.code for d in est_diags}
    assert {"HP415", "HP506"} <= codes  # both stages find it ...
    merged = [d for d in merge(loaded.diagnostics, est_diags) if d.code in ("HP415", "HP506")]
    assert [(d.code, d.effective_severity) for d in merged] == [("HP415", Severity.ERROR)]  # ... once shown
    assert next(d for d in loaded.diagnostics if d.code == "HP415").is_error


def test_hp_plan_search_reports_an_unreachable_batch_once(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """dp fixed at 32 and a global batch of 500: the check's HP402 and the search's HP600 state one fact."""
    from engine.cli import main

    (tmp_path / "train.yaml").write_text((ROOT / "examples" / "llama3-70b" / "train.yaml").read_text())
    search_text = (ROOT / "examples" / "llama3-70b" / "search.yaml").read_text()
    (tmp_path / "search.yaml").write_text(
        search_text.replace("global_batch_size: 512", "global_batch_size: 500").replace("  dp: auto", "  dp: 32"))
    assert main(["search", str(tmp_path / "search.yaml")]) == 1
    out = capsys.readouterr().out
    assert "HP402" in out and "HP600" not in out


def test_each_fact_two_stages_state_is_judged_in_one_place() -> None:
    """The reader (engine/validate) and the cost model's gate (engine/cost/strategy_rules.py) both call each
    predicate of engine.degree_facts, and that module returns every fact they share: a rule changed there
    changes both codes of its fact."""
    import ast

    from engine import degree_facts

    source = (ROOT / "engine" / "degree_facts.py").read_text()
    predicates = {n.name for n in ast.parse(source).body
                  if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}

    def called(paths: list[Path]) -> set[str]:
        return {n.func.attr for p in paths for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name) and n.func.value.id in ("degree_facts", "facts")}

    reader = called(sorted((ROOT / "engine" / "validate").glob("*.py")))
    gate = called([ROOT / "engine" / "cost" / "strategy_rules.py"])
    assert predicates <= reader and predicates <= gate, (predicates - reader, predicates - gate)
    judged = {getattr(degree_facts.keys, n.attr) for n in ast.walk(ast.parse(source))
              if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "keys"}
    shared = {fact for fact, codes in FACTS.items() if codes[0].startswith("HP4") and codes[1].startswith("HP5")}
    assert judged == shared


def test_the_user_reads_a_shared_fact_once_in_the_reader_s_words(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """ep 2 on 3 borrowed ranks: `hp-plan check` and the estimate the server shows say HP417 on ep, once; the
    cost model's HP504 for the same breach (the same predicate, engine.degree_facts) is merged away by key."""
    from engine.cli import main

    train = tmp_path / "train.yaml"
    train.write_text("model: {pretrained_model_name_or_path: mistralai/Mixtral-8x7B-v0.1}\n"
                     "accelerator: {tp_size: 1, pp_size: 4, ep_size: 2}\ncontext: {device_num: 12}\n"
                     "training: {global_batch_size: 48}\ndataset: {data_transform: {max_seq_len: 4096}}\n")
    assert main(["check", str(train), "--device-type", "H100"]) == 1
    out = capsys.readouterr().out
    assert out.count("HP417") == 1 and "HP504" not in out
    loaded = check_file(str(train), overrides=ClusterOverrides(device_type="H100"))
    assert loaded.config is not None
    _, est_diags = estimate_config(loaded.config)
    assert [(d.code, d.fact) for d in est_diags if d.code == "HP504"] == [("HP504", EP_RANKS)]
    merged = [d.code for d in merge(loaded.diagnostics, est_diags) if d.code in ("HP417", "HP504")]
    assert merged == ["HP417"]
