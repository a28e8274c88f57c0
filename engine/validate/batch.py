"""The global-batch rule: global_batch_size = dp × micro_batch_size × micro_batch_num (docs/formats.md §1;
[HP] §3.2 checks 2a/2b and §5.7), and micro_batch_num ≥ pp for a pipeline."""

from __future__ import annotations

from engine import degree_facts
from engine.validate.context import Ctx, nearest


def check(ctx: Ctx) -> None:
    cfg = ctx.config
    g = cfg.global_batch_size
    if g is None or g <= 0:
        return
    gbs_keys = ("constraint.global_batch_size",)
    f = ctx.fixed
    # 2a: gbs divisible by each declared micro_batch_num
    for d in ctx.declared.get("micro_batch_num", []):
        if g % d.value:
            valid = [m for m in range(1, min(g, 4096) + 1) if g % m == 0]
            ctx.emit("HP401", f"global_batch_size ({g}) must be divisible by micro_batch_num ({d.value}), remainder "
                     f"is {g % d.value}", d.location, d.path,
                     data={"nearest_valid": nearest(d.value, valid), "valid": valid[:32]})
    mbs = f["micro_batch_size"].value if "micro_batch_size" in f else 1
    mbs_list = ctx.declared.get("micro_batch_size", [])
    if len(mbs_list) > 1:
        return  # several micro-batch sizes: the search picks one that fits
    # 2b: gbs divisible by each declared dp (times the micro-batch size)
    for d in ctx.declared.get("dp", []):
        e = d.value * mbs
        if g % e:
            ctx.emit("HP402", f"global_batch_size ({g}) must be divisible by dp × micro_batch_size ({d.value}×{mbs}"
                     f"={e}), remainder is {g % e}", d.location, d.path)
    if "dp" in f and "micro_batch_num" in f:
        _stated_count(ctx, g, f["dp"].value, mbs)
    if "dp" in ctx.declared or ctx.world is None:
        return
    if cfg.kind == "search" and not all(k in f for k in ("tp", "pp", "cp")):
        return
    tp, pp, cp = (f[k].value if k in f else 1 for k in ("tp", "pp", "cp"))
    if ctx.world % (tp * pp * cp):
        return  # HP412 already says the degrees cannot make the world size
    dp = ctx.world // (tp * pp * cp)
    e = dp * mbs
    if g % e:
        low = (g // e) * e
        valid = [v for v in (low, low + e) if v > 0]
        msg = (f"the batch rule global_batch_size = dp × micro_batch_size × micro_batch_num cannot make {g}: "
               f"dp = {ctx.world}/(tp·pp·cp) = {dp} and micro_batch_size {mbs} need a multiple of {e}")
        ctx.at("HP402", msg, gbs_keys, data={"nearest_valid": nearest(g, valid), "valid": valid})
        mb = f.get("micro_batch_size")
        if mb is not None and mb.value > 1:
            ctx.emit("HP402", msg, mb.location, mb.path)
        return
    mbn = g // e
    if "micro_batch_num" in f:
        _stated_count(ctx, g, dp, mbs)
    pp_decl = f.get("pp")
    if pp_decl is not None and degree_facts.micro_batches(mbn, pp) is not None:
        ctx.emit("HP415", f"only {mbn} micro-batch{'es' if mbn != 1 else ''} per step (global_batch_size {g} / "
                 f"(dp {dp} × micro_batch_size {mbs})) for {pp} pipeline stages: most stages idle; raise the "
                 "global batch or lower pp", pp_decl.location, pp_decl.path)


def _stated_count(ctx: Ctx, g: int, dp: int, mbs: int) -> None:
    """A stated micro_batch_num (legacy train.micro_batch_num, accelerator.pp_micro_batch_num, a fixed
    parallelism.micro_batch_num) must close the batch rule; HyperParallel's writer refuses otherwise ([HP] §4.4)."""
    d = ctx.fixed["micro_batch_num"]
    if g % (dp * mbs) or dp * mbs * d.value == g:
        return  # the rule cannot hold for any count (HP402 says so), or it holds
    want = g // (dp * mbs)
    ctx.emit("HP402", f"global_batch_size {g} != micro_batch_num {d.value} × micro_batch_size {mbs} × dp {dp}: "
             f"the batch rule needs micro_batch_num {want}", d.location, d.path,
             data={"nearest_valid": want, "valid": [want]})
