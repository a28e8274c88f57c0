"""HP5xx: pricing a stated strategy (hp-plan estimate)."""

ROWS: list[tuple[str, str, str]] = [
    ("HP501", "error", "no complete strategy stated: nothing to price"),
    ("HP502", "error", "parallel degrees do not multiply to the cluster's device count"),
    ("HP503", "error", "tensor parallelism does not divide the attention heads or key/value heads"),
    ("HP504", "error", "expert parallelism does not divide the experts or the devices it borrows"),
    ("HP505", "error", "more pipeline chunks than layers"),
    ("HP506", "error", "fewer micro-batches than pipeline stages"),
    ("HP507", "warning", "the stack's interleaved schedule does not group this many micro-batches (Megatron: a multiple of pp)"),
    ("HP508", "error", "FSDP or optimizer shard does not divide the data-parallel domain"),
    ("HP509", "error", "context parallelism does not divide the sequence length"),
    ("HP510", "warning", "setting has no effect for this strategy"),
    ("HP511", "error", "degree below 1"),
    ("HP512", "error", "the model or the cluster is unknown: nothing to price"),
    ("HP520", "error", "the stated strategy does not fit the memory budget"),
    ("HP521", "information", "no memory budget stated: using the device memory"),
    ("HP530", "warning", "the framework's trainer cannot run this part of the plan"),
    ("HP531", "warning", "the framework does not offer this selective-recompute policy or recompute module: its "
     "own is priced"),
    ("HP532", "warning", "FP8 asked on a device without FP8 GEMMs: priced in BF16"),
    ("HP533", "warning", "the framework does not offer this overlap (TP comm-GEMM, expert-parallel), attention swap, layer offload, pipeline layout option (per-chunk layer layout, no-op layers) or context-parallel algorithm: priced without it (as its ring, with its own split)"),
    ("HP534", "warning", "the framework does not run on this device: priced, but another stack runs it there"),
    ("HP535", "warning", "the framework's stated release is unknown, or lacks a feature the plan states: priced as "
     "that release (or the current one) runs it"),
    ("HP536", "information", "no release of the framework stated: priced as its current release, and older releases "
     "price the plan beyond its error band (each says by how much and what it lacks); in a search config that names "
     "its framework, the quick fix states the release priced"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP501": ("engine.cost.strategy_rules",),
    "HP502": ("engine.cost.strategy_rules",),
    "HP503": ("engine.cost.strategy_rules",),
    "HP504": ("engine.cost.strategy_rules",),
    "HP505": ("engine.cost.strategy_rules",),
    "HP506": ("engine.cost.strategy_rules",),
    "HP507": ("engine.cost.strategy_rules",),
    "HP508": ("engine.cost.strategy_rules",),
    "HP509": ("engine.cost.strategy_rules",),
    "HP510": ("engine.cost.strategy_rules",),
    "HP511": ("engine.cost.strategy_rules",),
    "HP512": ("engine.cost.strategy_rules",),
    "HP520": ("engine.cost.strategy_rules",),
    "HP521": ("engine.cost.strategy_rules",),
    "HP530": ("engine.cost.strategy_rules",),
    "HP531": ("engine.cost.strategy_rules",),
    "HP532": ("engine.cost.strategy_rules",),
    "HP533": ("engine.cost.strategy_rules", "engine.validate.pipeline"),
    "HP534": ("engine.cost.strategy_rules",),
    "HP535": ("engine.cost.strategy_rules",),
    "HP536": ("engine.cost.strategy_rules",),
}
