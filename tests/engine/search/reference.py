"""The search space as a plain loop over every combination under the rules engine.search.space documents: the
reference the vectorised enumeration (engine.search.space) and the search are held to."""

from __future__ import annotations

from itertools import product

from engine.catalog.frameworks import StackSpace
from engine.search.space import DEFAULT_STACK, MBS_AUTO_MAX, VPP_AUTO_MAX, cp_auto_max, divisors
from engine.specs import ClusterSpec, ModelSpec


def _stack_allows(stack: StackSpace, dp: int, cp: int, pp: int, fsdp: int, ep: int) -> bool:
    """The stack's FSDP route (engine.catalog.frameworks.StackSpace): none, or the whole dp·cp without pp/ep."""
    if fsdp == 1:
        return True
    if not stack.fsdp or (stack.fsdp == "whole" and fsdp != dp * cp):
        return False
    return (stack.fsdp_with_pp or pp == 1) and (stack.fsdp_with_ep or ep == 1)


def _sp_values(stack: StackSpace, tp: int, cp: int, restrict: dict) -> list[int]:
    if restrict.get("sequence_parallel") is not None:
        vals = list(restrict["sequence_parallel"])
    elif stack.sp_with_tp:
        vals = [int(tp > 1)]
    else:
        vals = [0, 1] if tp > 1 else [0]
    cp_varied = len(restrict.get("cp") or (0, 0)) > 1  # a single stated cp is no candidate ([HP] §5.13)
    return [sp for sp in vals if stack.sp_with_cp or not cp_varied or not (sp and cp > 1)]


def loop_space(model: ModelSpec, cl: ClusterSpec, g: int, restrict: dict,
               stack: StackSpace = DEFAULT_STACK) -> set[tuple[int, ...]]:
    n = cl.world_size
    out = set()

    def dom(name: str, default: list[int]) -> list[int]:
        return list(restrict[name]) if restrict.get(name) is not None else default

    for tp, pp, cp in product(dom("tp", divisors(n)), dom("pp", divisors(n)),
                              dom("cp", [c for c in divisors(n) if c <= cp_auto_max(model)])):
        if n % (tp * pp * cp) or tp > cl.cards_per_node or model.heads % tp or model.kv_heads_eff % tp:
            continue
        if pp > model.num_layers or (cp > 1 and model.seq_len % (2 * cp)):
            continue
        dp = n // (tp * pp * cp)
        if restrict.get("dp") is not None and dp not in restrict["dp"]:
            continue
        for mbs in dom("micro_batch_size", [m for m in divisors(g) if m <= MBS_AUTO_MAX]):
            if g % (dp * mbs):
                continue
            mbn = g // (dp * mbs)
            if pp > 1 and mbn < pp:
                continue
            if restrict.get("micro_batch_num") is not None and mbn not in restrict["micro_batch_num"]:
                continue
            for fsdp in dom("fsdp", divisors(n)):
                if (dp * cp) % fsdp:
                    continue
                for ep in dom("ep", divisors(model.num_experts) if model.is_moe else [1]):
                    if model.is_moe:
                        pool = dp * tp if dp % fsdp == 0 else dp * cp * tp
                        if model.num_experts % ep or pool % ep or model.moe_ffn % tp:
                            continue
                    elif ep != 1:
                        continue
                    per_stage = max(model.num_layers // pp, 1)
                    vpps = dom("vpp", [v for v in range(1, VPP_AUTO_MAX + 1) if v <= per_stage
                                       and per_stage % v == 0 and (pp > 1 or v == 1)])
                    for vpp in vpps:
                        if (vpp > 1 and pp == 1) or pp * vpp > model.num_layers:
                            continue
                        if vpp > 1 and not stack.interleave_runs(mbn, pp):  # the schedule's micro-batch groups
                            continue
                        if not _stack_allows(stack, dp, cp, pp, fsdp, ep):
                            continue
                        for sp in _sp_values(stack, tp, cp, restrict):
                            out.add((tp, pp, cp, dp, mbs, mbn, fsdp, 1, ep, vpp, sp))
    return out
