"""One report per fact: merging the findings of the reader, the cost model and the search.

Three stages look at the same config and some of their rules state the same fact in their own words: the
reader's cross-field rules (`engine.check.check_file`, HP4xx), the cost model's validation of the stated
strategy (`engine.cost.estimate_config`, HP5xx) and the search's refusals and advice (`engine.search`,
HP6xx). `hp-plan estimate`, `hp-plan search` and the language server each show two or three of these
together; without a merge a user reads "fewer micro-batches than pipeline stages" twice, once as a warning and
once as an error.

Each fact the reader and the cost model share is judged once, by its predicate in
`engine.degree_facts`; the two stages word the same verdict in their own code (the reader on the value to
change, the cost model on the strategy it refuses to price), and every finding of such a code carries the
fact's key. `merge(*batches)` is the one place that decides which wording a user reads. Each fact has an owner: the first code of its group in
`FACTS` (the reader's code where it has one, since it lands on the value to change and carries the quick-fix
data; HP610 over HP520, since it also names the plan that fits and the editor offers to apply it). When a
batch holds the owner and another code of the same fact, only the owner's findings stay, at the strictest
severity any of them had, so one output never shows the same fact at two severities. The same code repeated
(one finding per offending list value) is several findings and stays. Exact duplicates (same code, file,
range and message) are dropped whatever their code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from engine.diagnostics import Diagnostic, Severity

# Fact keys. A code that states one fact is keyed by its code; the emitter of a code that states several
# (KEYED below) names the fact it found (`Diagnostic.fact`, `engine.cost.strategy_rules.Problem.fact`, from the
# `engine.degree_facts.Breach` that judged it), so rewording a message never changes what is merged.
MICRO_BATCHES = "micro-batches below pipeline stages"
BATCH_UNREACHABLE = "global batch unreachable"
TP_HEADS = "tp does not divide the heads"
CP_SEQUENCE = "sequence not divisible by cp"
EP_EXPERTS = "experts not divisible by ep"
EP_RANKS = "ep borrows more ranks than exist"
PP_LAYERS = "pp above the layers"
WORLD_SIZE = "degrees do not make the world size"
FSDP_SHARD = "fsdp shard does not divide dp·cp"
OPTIMIZER_SHARD = "optimizer shard does not divide dp·cp"
EP_DENSE = "expert parallelism on a dense model"
OVER_BUDGET = "stated strategy over the budget"

# fact -> codes stating it, owner first.
FACTS: dict[str, tuple[str, ...]] = {
    MICRO_BATCHES: ("HP415", "HP506"),
    BATCH_UNREACHABLE: ("HP402", "HP600"),
    TP_HEADS: ("HP403", "HP503"),
    CP_SEQUENCE: ("HP404", "HP509"),
    EP_EXPERTS: ("HP405", "HP504"),
    EP_RANKS: ("HP417", "HP504"),
    PP_LAYERS: ("HP407", "HP505"),
    WORLD_SIZE: ("HP412", "HP502"),
    FSDP_SHARD: ("HP413", "HP508"),
    OPTIMIZER_SHARD: ("HP414", "HP508"),
    EP_DENSE: ("HP410", "HP510"),
    OVER_BUDGET: ("HP610", "HP520"),
}
# Codes that state several facts (or, HP510, one fact among other findings): only a finding whose emitter
# names its fact takes part in the merge.
KEYED = frozenset({"HP504", "HP508", "HP510"})

_RANK: dict[tuple[str, str], int] = {(fact, code): i for fact, codes in FACTS.items() for i, code in enumerate(codes)}
_SOLE: dict[str, str] = {code: fact for fact, codes in FACTS.items() for code in codes if code not in KEYED}


def fact_of(d: Diagnostic) -> str | None:
    """The fact a finding states, when another stage may state it too: the key its emitter gave, else the one
    fact its code states."""
    fact = d.fact or (None if d.code in KEYED else _SOLE.get(d.code))
    return fact if fact is not None and (fact, d.code) in _RANK else None


def _hit(d: Diagnostic) -> tuple[str, int] | None:
    fact = fact_of(d)
    return (fact, _RANK[(fact, d.code)]) if fact is not None else None


def unique(*batches: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The findings of every batch, in order, without exact duplicates (same code, file, range and message)."""
    seen: set[tuple[str, str | None, object, str]] = set()
    items: list[Diagnostic] = []
    for batch in batches:
        for d in batch:
            key = (d.code, d.file, d.range, d.message)
            if key not in seen:
                seen.add(key)
                items.append(d)
    return items


def merge(*batches: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """The findings of every batch, in order, each fact once (see the module docstring)."""
    items = unique(*batches)
    owner: dict[str, int] = {}  # fact -> rank of the best-ranked code present
    strictest: dict[str, Severity] = {}
    for d in items:
        hit = _hit(d)
        if hit is None:
            continue
        fact, rank = hit
        owner[fact] = min(rank, owner.get(fact, rank))
        sev = d.effective_severity
        if fact not in strictest or sev.rank > strictest[fact].rank:
            strictest[fact] = sev
    out: list[Diagnostic] = []
    for d in items:
        hit = _hit(d)
        if hit is None:
            out.append(d)
            continue
        fact, rank = hit
        if rank != owner[fact]:
            continue
        if strictest[fact].rank > d.effective_severity.rank:
            d = replace(d, severity=strictest[fact])
        out.append(d)
    return tuple(out)
