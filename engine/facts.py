"""One report per fact: merging the findings of the reader, the cost model and the search.

Three stages look at the same config and some of their rules state the same fact in their own words: the
reader's cross-field rules (`engine.check.check_file`, HP4xx), the cost model's validation of the stated
strategy (`engine.cost.estimate_config`, HP5xx) and the search's refusals and advice (`engine.search`,
HP6xx). `hp-plan estimate`, `hp-plan search` and the language server each show two or three of these
together; without a merge a user reads "fewer micro-batches than pipeline stages" twice, once as a warning and
once as an error.

`merge(*batches)` is the one place that decides. Each fact has an owner: the first code of its group in
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

# fact -> codes stating it, owner first. A code that covers several facts (HP504, HP508, HP510) is told apart
# by `_SPLIT` below.
FACTS: dict[str, tuple[str, ...]] = {
    "micro-batches below pipeline stages": ("HP415", "HP506"),
    "global batch unreachable": ("HP402", "HP600"),
    "tp does not divide the heads": ("HP403", "HP503"),
    "sequence not divisible by cp": ("HP404", "HP509"),
    "experts not divisible by ep": ("HP405", "HP504:experts"),
    "ep borrows more ranks than exist": ("HP417", "HP504:ranks"),
    "pp above the layers": ("HP407", "HP505"),
    "degrees do not make the world size": ("HP412", "HP502"),
    "fsdp shard does not divide dp·cp": ("HP413", "HP508:fsdp"),
    "optimizer shard does not divide dp·cp": ("HP414", "HP508:optimizer"),
    "expert parallelism on a dense model": ("HP410", "HP510:ep"),
    "stated strategy over the budget": ("HP610", "HP520"),
}

_SEVERITY_RANK = {Severity.HINT: 0, Severity.INFORMATION: 1, Severity.WARNING: 2, Severity.ERROR: 3}


def _variant(d: Diagnostic) -> str:
    """The code, with the fact it states for codes that cover several (by the engine's own message)."""
    m = d.message
    if d.code == "HP504":
        return "HP504:experts" if "experts" in m and "borrows" not in m else "HP504:ranks"
    if d.code == "HP508":
        return "HP508:optimizer" if m.startswith("optimizer") else "HP508:fsdp"
    if d.code == "HP510":
        return "HP510:ep" if "routed experts" in m else "HP510"
    return d.code


_FACT_OF: dict[str, tuple[str, int]] = {code: (fact, i) for fact, codes in FACTS.items()
                                         for i, code in enumerate(codes)}


def fact_of(d: Diagnostic) -> str | None:
    """The fact a finding states, when another stage may state it too."""
    hit = _FACT_OF.get(_variant(d))
    return hit[0] if hit else None


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
        hit = _FACT_OF.get(_variant(d))
        if hit is None:
            continue
        fact, rank = hit
        owner[fact] = min(rank, owner.get(fact, rank))
        sev = d.effective_severity
        if fact not in strictest or _SEVERITY_RANK[sev] > _SEVERITY_RANK[strictest[fact]]:
            strictest[fact] = sev
    out: list[Diagnostic] = []
    for d in items:
        hit = _FACT_OF.get(_variant(d))
        if hit is None:
            out.append(d)
            continue
        fact, rank = hit
        if rank != owner[fact]:
            continue
        if _SEVERITY_RANK[strictest[fact]] > _SEVERITY_RANK[d.effective_severity]:
            d = replace(d, severity=strictest[fact])
        out.append(d)
    return tuple(out)
