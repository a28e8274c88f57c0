"""Validation rules over a resolved config, one module per family, each adding positioned Diagnostics:

* keys: unknown keys with a "did you mean";
* degrees: degrees against the model and the cluster (tp/cp/ep divisibility, pp vs layers, world size,
  FSDP and optimizer shards, ep/cp on dense models);
* batch: the global-batch rule;
* budget: the memory budget against the device;
* pipeline: manual stage partitions, layer offsets and per-layer recompute ranges against the layers;
* trainer: what the AutoModels trainer itself refuses (its strict sections, its cross-field rules);
* unpriced: keys HyperParallel reads that this planner does not price (HP112, information).

Reading and type problems (HP0xx-HP3xx) come from engine.config while it reads.
"""

from __future__ import annotations

from engine.config.resolve import Resolved
from engine.diagnostics import Diagnostic
from engine.validate import batch, budget, degrees, keys, pipeline, trainer, unpriced
from engine.validate.context import build_ctx


def validate(resolved: Resolved) -> list[Diagnostic]:
    ctx = build_ctx(resolved)
    if ctx is None:
        return []
    for family in (keys, trainer, degrees, batch, budget, pipeline, unpriced):
        family.check(ctx)
    return ctx.diags
