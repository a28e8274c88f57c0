"""How much faster a plan is than the stated one: the ratio of tokens per second, which is what a training run
buys, never of step times (a step at another global batch size holds another number of tokens: a 5.54×
shorter step was a 1.44× gain in tokens/s, D-013). Shared by HP611, `hp-plan apply` and the hover, so
every "N× faster" is one number.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.cost.band import own_difference, pair_spread
from engine.results import Estimate


@dataclass(frozen=True, slots=True)
class Gain:
    """tokens/s of the best plan over the stated one's, and the two global batch sizes (sequences)."""

    ratio: float
    stated_batch: int
    best_batch: int
    # "A plan N× faster exists" is worth a hint, and a rewrite, from this gain on: below it the two plans'
    # ordering spreads (engine.cost.band.pair_spread) make the advice noise. HP611 and `hp-plan apply` share it.
    threshold: float = 1.0

    @property
    def same_batch(self) -> bool:
        return self.stated_batch == self.best_batch

    @property
    def worth_it(self) -> bool:
        return self.ratio >= self.threshold

    def batch_note(self) -> str:
        """'' at the same global batch size, else a sentence saying the step times are not comparable."""
        if self.same_batch:
            return ""
        return (f" The global batch sizes differ (stated {self.stated_batch:,}, plan {self.best_batch:,} "
                "sequences), so the gain is in tokens/s, not in step time.")


def gain(stated: Estimate, best: Estimate) -> Gain:
    """The gain of `best` over `stated` in tokens/s (1.0 when the stated plan has no throughput)."""
    ratio = best.tokens_per_s / stated.tokens_per_s if stated.tokens_per_s > 0 else 1.0
    own = own_difference(stated.own_terms, best.own_terms)
    return Gain(ratio, stated.strategy.global_batch_size, best.strategy.global_batch_size,
                1 + pair_spread(stated.order_spread, best.order_spread, own))


def describe(stated: Estimate, best: Estimate) -> str:
    """`stated dp 8 · … 82,000 tokens/s → best dp 4 · … 118,000 tokens/s: 1.44× the tokens/s`."""
    g = gain(stated, best)
    return (f"stated {stated.strategy.short()} {stated.tokens_per_s:,.0f} tokens/s → best {best.short()} "
            f"{best.tokens_per_s:,.0f} tokens/s: {g.ratio:.2f}× the tokens/s.{g.batch_note()}")
