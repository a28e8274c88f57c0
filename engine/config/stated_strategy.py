"""The one strategy the files state, derived from their degrees: dp from the world size, the FSDP shard a file
leaves unsaid, the micro-batch count from the batch rule (docs/formats.md §1-§2, [HP] §2.2-§2.3), and the
optimizer its stack runs by default. None while a degree is missing or still searched, or when the numbers
cannot make a strategy: the validators say why. engine.config.resolve reads the degrees from the files and
calls this; engine.search.stated prices what it returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from engine.catalog.frameworks import framework_of
from engine.config.reader import Val
from engine.config.types import Dimension
from engine.specs import ClusterSpec, ModelSpec, RecomputePlan, RunOptions, Strategy


def stack_optimizer(stated: Strategy | None, run: RunOptions, shard_stated: bool,
                    fsdp_stated: bool = True) -> Strategy | None:
    """The stated plan as its stack runs what the files leave unsaid. Megatron-LM's and MindSpeed's recipes run
    `--use-distributed-optimizer` (ZeRO-1 over dp·cp, StackSpace.distributed_optimizer) and no FSDP unless asked
    (MindSpeed's FSDP2 route needs its fsdp2_config): a plan that states no FSDP is priced without it (not as
    HyperParallel's default ZeRO-3 over dp·cp), and one that states no shard with its distributed optimizer,
    not with replicated optimizer states."""
    if stated is None or not framework_of(run).space.distributed_optimizer:
        return stated
    if not fsdp_stated:
        stated = replace(stated, dp_shard=1)
    if shard_stated or stated.dp_shard > 1:
        return stated
    return replace(stated, optimizer_shard=stated.dp * stated.cp)


def search_stated(dims: Mapping[str, Dimension], cluster: ClusterSpec | None, gbs: Val | None,
                   plan: RecomputePlan, schedule: str, optimizer_shard: int, model: ModelSpec | None
                   ) -> Strategy | None:
    """The one strategy a search config states, or None while any dimension is still searched. "Stated" means
    nothing is left to search: dp and micro_batch_num may still follow from the world size and the batch rule,
    and dimensions nobody mentions take their defaults."""
    still_searched = [d for d, dim in dims.items() if d not in ("dp", "micro_batch_num") and (
        dim.state == "auto" or (dim.state == "list" and len(dim.values) > 1))]
    still_searched += [d for d in ("dp", "micro_batch_num") if dims[d].state == "list" and len(dims[d].values) > 1]
    if still_searched:
        return None
    fixed = {d: dim.values[0] for d, dim in dims.items() if dim.state in ("fixed", "list") and len(dim.values) == 1}
    is_moe = model is not None and model.is_moe
    return strategy_of(
        fixed,
        world=cluster.world_size if cluster is not None else None,
        gbs=int(gbs.value) if gbs is not None else None,
        full_shard_default=False,
        plan=plan,
        schedule=schedule,
        optimizer_shard=optimizer_shard,
        model=model,
        require=("tp", "pp", "cp", "ep") if is_moe else ("tp", "pp", "cp"),
    )


def strategy_of(
    vals: dict[str, int],
    *,
    world: int | None,
    gbs: int | None,
    full_shard_default: bool,
    plan: RecomputePlan,
    schedule: str,
    optimizer_shard: int,
    model: ModelSpec | None,
    require: tuple[str, ...],
) -> Strategy | None:
    """The strategy a file states, or None when a degree is missing or the numbers cannot make one (the
    validators say why)."""
    if any(d not in vals for d in require):
        return None
    tp, pp, cp = vals.get("tp", 1), vals.get("pp", 1), vals.get("cp", 1)
    if min(tp, pp, cp) < 1:
        return None
    if "dp" in vals:
        dp = vals["dp"]
        if world is not None and dp * tp * pp * cp != world:
            return None
    elif world is not None and world % (tp * pp * cp) == 0:
        dp = world // (tp * pp * cp)
    else:
        return None
    if dp < 1:
        return None
    shard = vals.get("fsdp")
    if shard is None or shard == -1:
        shard = dp * cp if (shard == -1 or full_shard_default) else 1
    if (dp * cp) % shard:
        return None
    mbs = vals.get("micro_batch_size", 1)
    if "micro_batch_num" in vals:
        mbn = vals["micro_batch_num"]
        if gbs is not None and dp * mbs * mbn != gbs:
            return None
    elif gbs is not None:
        if gbs % (dp * mbs):
            return None
        mbn = gbs // (dp * mbs)
    else:
        mbn = 1
    ep = vals.get("ep", 1) if model is None or model.is_moe else 1
    return Strategy(
        dp=dp, dp_shard=shard, tp=tp, pp=pp, cp=cp, ep=ep, etp=vals.get("etp", 1) or tp, vpp=vals.get("vpp", 1),
        micro_batch_size=mbs, micro_batch_num=mbn, sequence_parallel=bool(vals.get("sequence_parallel", 0)),
        recompute=plan, pipeline_schedule=schedule, optimizer_shard=optimizer_shard,  # type: ignore[arg-type]
    )
