"""The search space as a plain loop over every combination under the rules engine.search.space documents: the
reference the vectorised enumeration (engine.search.space) and the search are held to."""

from __future__ import annotations

from itertools import product

from engine.search.space import MBS_AUTO_MAX, VPP_AUTO_MAX, cp_auto_max, divisors
from engine.specs import ClusterSpec, ModelSpec


def loop_space(model: ModelSpec, cl: ClusterSpec, g: int, restrict: dict) -> set[tuple[int, ...]]:
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
                        for sp in dom("sequence_parallel", [0, 1] if tp > 1 else [0]):
                            if sp and cp > 1:
                                continue
                            out.add((tp, pp, cp, dp, mbs, mbn, fsdp, 1, ep, vpp, sp))
    return out
