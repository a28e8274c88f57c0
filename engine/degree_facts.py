"""The facts about parallel degrees that two stages state, each judged here once.

The reader states them on the file (HP4xx, `engine.validate`: on the value to change, with the values that
would do) and the cost model states them on the strategy it is asked to price (HP5xx,
`engine.cost.strategy_rules.check_strategy`: the gate before a number). Both call the predicate of the fact
here and word the `Breach` it returns; neither compares degrees itself, so a rule changes in one place and
the two codes of a fact (engine.facts.FACTS) always agree on it. Where the two stages ask about different
things the argument says so (the widths tp must divide, the chunks a context-parallel rank holds), never a
second copy of the arithmetic (docs/decisions.md D-021). Sources: docs/formats.md §2 rules; [HP] §3.2 checks
3-7, 11, 13, 14 and §5.6.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine import facts as keys
from engine.specs import ModelSpec


@dataclass(frozen=True, slots=True)
class Breach:
    """One fact a degree breaks: its key (engine.facts), the degree's value and what it was held against
    (`bound`, counted by `label`). `want` is the value the rule would accept where there is exactly one
    (the dp that makes the world size), else 0."""

    fact: str
    value: int
    bound: int
    label: str = ""
    want: int = 0


def tp_width(tp: int, widths: Sequence[tuple[str, int]]) -> Breach | None:
    """The first width (label, size) tensor parallelism does not divide: the reader passes every width it
    splits (hidden, heads, key/value heads, feed-forward), the cost model the head counts it prices by."""
    if tp <= 1:
        return None
    for label, n in widths:
        if n > 0 and n % tp:
            return Breach(keys.TP_HEADS, tp, n, label)
    return None


def cp_sequence(cp: int, seq_len: int, chunks_per_rank: int) -> Breach | None:
    """The sequence does not split into cp ranks of `chunks_per_rank` chunks: the reader asks for the
    load-balanced split (2 chunks per rank, Megatron's causal balancing), the cost model for any split (1)."""
    if cp <= 1 or seq_len % (chunks_per_rank * cp) == 0:
        return None
    return Breach(keys.CP_SEQUENCE, cp, seq_len, want=chunks_per_rank * cp)


def ep_experts(model: ModelSpec, ep: int) -> Breach | None:
    """Expert parallelism on a model without routed experts (EP_DENSE), or not dividing them (EP_EXPERTS)."""
    if ep <= 1:
        return None
    if not model.is_moe:
        return Breach(keys.EP_DENSE, ep, 0)
    if model.num_experts % ep:
        return Breach(keys.EP_EXPERTS, ep, model.num_experts)
    return None


def ep_ranks(ep: int, etp: int, borrowed: int) -> Breach | None:
    """ep·etp does not divide the ranks expert parallelism borrows (dp·cp·tp): `bound` is that product."""
    if ep <= 1 or borrowed % (ep * etp) == 0:
        return None
    return Breach(keys.EP_RANKS, ep, borrowed, want=ep * etp)


def pp_layers(pp: int, chunks_per_stage: int, slots: int) -> Breach | None:
    """More pipeline chunks (pp × chunks per stage) than layers to put in them (`slots`: the layers the
    caller splits, with the embedding and loss when the layout counts them)."""
    if pp * max(chunks_per_stage, 1) <= slots:
        return None
    return Breach(keys.PP_LAYERS, pp, slots, want=pp * max(chunks_per_stage, 1))


def world_size(world: int, tp: int, pp: int, cp: int, dp: int | None) -> Breach | None:
    """dp·tp·pp·cp does not make the world size: `want` is the dp that would (0 when tp·pp·cp does not divide
    the world, so no dp does); `dp` None: only whether some dp can."""
    model_parallel = tp * pp * cp
    if world % model_parallel:
        return Breach(keys.WORLD_SIZE, dp or 0, world)
    want = world // model_parallel
    if dp is not None and dp != want:
        return Breach(keys.WORLD_SIZE, dp, world, want=want)
    return None


def _shard(fact: str, size: int, domain: int) -> Breach | None:
    """A shard size (FSDP_SHARD, OPTIMIZER_SHARD) that does not divide the data-parallel domain dp·cp."""
    if size > 0 and domain % size:
        return Breach(fact, size, domain)
    return None


def fsdp_shard(size: int, domain: int) -> Breach | None:
    return _shard(keys.FSDP_SHARD, size, domain)


def optimizer_shard(size: int, domain: int) -> Breach | None:
    return _shard(keys.OPTIMIZER_SHARD, size, domain)


def micro_batches(micro_batch_num: int, pp: int) -> Breach | None:
    """Fewer micro-batches per step than pipeline stages: the pipeline never fills."""
    if pp > 1 and micro_batch_num < pp:
        return Breach(keys.MICRO_BATCHES, micro_batch_num, pp)
    return None
