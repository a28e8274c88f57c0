"""Memory budget against the device ([HP] §3.2 check 12b)."""

from __future__ import annotations

from engine.validate.context import Ctx


def check(ctx: Ctx) -> None:
    cfg = ctx.config
    limit, cluster = cfg.memory_limit_gb, cfg.cluster
    if limit is None or cluster is None or limit <= 0 or cluster.memory_gib <= 0:
        return
    if limit > cluster.memory_gib and "constraint.memory_limit_gb" not in cfg.locations:
        return  # a limit from editor settings: capped all the same (Config.budget_gib), nothing in the file to fix
    if cfg.memory_assumed:
        return  # the device is HP303's guess: the stated budget is the run's (Config.budget_gib), not capped
    if limit > cluster.memory_gib:
        ctx.at("HP409", f"memory limit {limit:g} GB exceeds the device memory of {cluster.device.name} "
               f"({cluster.memory_gib:g} GB): the budget is capped at {cluster.memory_gib:g} GB",
               ("constraint.memory_limit_gb",),
               data={"nearest_valid": cluster.memory_gib, "valid": [cluster.memory_gib]})
    elif cfg.device_what_if and limit < cluster.memory_gib:
        ctx.at("HP430", f"the budget stays at {limit:g} GB: constraint.memory_limit_gb caps it below the "
               f"{cluster.memory_gib:g} GB that {cfg.device_what_if} gives the device; raise or remove "
               "memory_limit_gb to price the what-if with the larger memory", ("constraint.memory_limit_gb",),
               data={"memory_limit_gb": limit, "device_memory_gb": cluster.memory_gib})
