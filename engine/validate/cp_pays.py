"""HP411 judged by pricing: does the stated plan's context parallelism pay?

Why priced: a static "CP is for long sequences" warning is false both ways (it fired at 32K-128K where CP
is the textbook choice, and after `hp-plan apply` on a plan the search wrote). The stated plan is priced
against its twins without CP, the CP ranks folded into data parallelism (micro-batches divided to keep the
global batch) or into tensor parallelism (when it stays inside a node and divides the heads). CP is needed
to fit when no twin fits the budget, and pays when it beats the fastest fitting twin by more than the
cost model's error band, by the search's own ranking (engine.cost.equivalence); otherwise HP411 says
what the twin does instead, with the numbers. No stated plan (a search config's lists): nothing to judge, no HP411.
"""

from __future__ import annotations

import math
from dataclasses import replace

from engine.results import Estimate
from engine.specs import Strategy
from engine.validate.context import Ctx


def twins(s: Strategy, heads: int, kv_heads: int, cards_per_node: int) -> list[Strategy]:
    """The stated strategy without CP: cp ranks as data parallelism (same global batch), or as tensor
    parallelism inside a node."""
    c = s.cp
    out: list[Strategy] = []
    if s.micro_batch_num % c == 0:
        out.append(replace(s, cp=1, dp=s.dp * c, micro_batch_num=s.micro_batch_num // c))
    elif s.micro_batch_size % c == 0:
        out.append(replace(s, cp=1, dp=s.dp * c, micro_batch_size=s.micro_batch_size // c))
    t = s.tp * c
    if t <= cards_per_node and heads % t == 0 and (kv_heads <= 0 or kv_heads % t == 0):
        shard = math.gcd(s.dp_shard, s.dp) or 1
        out.append(replace(s, cp=1, tp=t, dp_shard=shard, sequence_parallel=True))
    return out


def judge(stated: Estimate, others: list[Estimate]) -> str | None:
    """HP411's message, or None when CP is needed to fit or the search's own ranking
    (engine.cost.equivalence.rank_equivalent: step time, and inside the error band simplicity and headroom)
    puts the stated plan ahead of every fitting twin, as it does for a plan the search wrote."""
    from engine.cost.equivalence import rank_equivalent, tie_band

    fitting = [e for e in others if e.fits]
    if not stated.fits or not fitting:
        return None
    ranked = rank_equivalent([stated, *fitting])
    first = ranked.estimates[0]
    if first is stated:
        return None
    how = ("faster" if first.tokens_per_s > stated.tokens_per_s  # else the stated plan is the faster one
           else f"within the {tie_band(stated, first, ranked.band):.0%} error band, and simpler")
    return (f"context parallelism (cp {stated.strategy.cp}) does not pay here: without it, "
            f"{first.strategy.short()} fits at {first.peak_memory_gib:.1f} GiB and trains "
            f"{first.tokens_per_s:,.0f} tokens/s against {stated.tokens_per_s:,.0f} with cp "
            f"({how}); CP is worth it where a plan needs it to fit or runs clearly faster with it")


def check(ctx: Ctx) -> None:
    """Emit HP411 at the stated cp when pricing says it does not pay (module docstring)."""
    cfg = ctx.config
    s, m, cl = cfg.stated, cfg.model, cfg.cluster
    if s is None or m is None or cl is None or s.cp <= 1:
        return
    from engine.cost import estimate
    budget = cfg.budget_gib if cfg.budget_gib is not None else math.inf
    stated = estimate(m, cl, cfg.run, s, budget)
    others = [estimate(m, cl, cfg.run, t, budget) for t in twins(s, m.heads, m.kv_heads_eff, cl.cards_per_node)]
    message = judge(stated, others)
    if message is None:
        return
    ctx.at("HP411", message, ("parallelism.cp", "accelerator.cp_size", "accelerator"))
