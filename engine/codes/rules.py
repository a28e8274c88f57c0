"""HP4xx: cross-field rules on degrees, batch and memory."""

ROWS: list[tuple[str, str, str]] = [
    ("HP401", "error", "global batch not divisible by micro_batch_num"),
    ("HP402", "error", "global batch not reachable by the batch rule (dp × micro_batch_size)"),
    ("HP403", "error", "a model width is not divisible by tp (or etp)"),
    ("HP404", "error", "sequence length not divisible by 2 × cp (or Ulysses heads by tp × cp)"),
    ("HP405", "error", "experts not divisible by ep"),
    ("HP406", "error", "fixed degree not in its own candidate list"),
    ("HP407", "error", "pp exceeds the layers (per virtual chunk)"),
    ("HP408", "error", "minimum product of degrees exceeds the devices"),
    ("HP409", "warning", "memory limit above device memory"),
    ("HP410", "warning", "expert parallelism on a dense model"),
    ("HP411", "information", "context parallelism that does not pay (priced against the plan without it)"),
    ("HP412", "error", "degrees cannot make the world size"),
    ("HP413", "error", "FSDP shard size does not divide dp × cp"),
    ("HP414", "error", "optimizer shard size does not divide dp × cp"),
    ("HP415", "error", "fewer micro-batches than pipeline stages"),
    ("HP416", "warning", "virtual pipeline (vpp) inconsistent with pp or the layers"),
    ("HP417", "error", "ep exceeds the data- and tensor-parallel ranks it borrows"),
    ("HP418", "warning", "sequence parallelism with context parallelism"),
    ("HP419", "error", "manual stage partition inconsistent with pp or the layers"),
    ("HP420", "error", "layer offset range invalid"),
    ("HP421", "error", "per-layer setting names a layer the model does not have"),
    ("HP422", "error", "stated pipeline layout (offsets, first/last-stage layers, embedding/loss in the split) does "
     "not fit pp·vpp or the layers"),
    ("HP423", "error", "a combination the trainer refuses (compile with pipeline parallelism; fp32 main "
     "parameters without float32 gradient reduction)"),
    ("HP430", "warning", "a what-if's larger device memory is capped by constraint.memory_limit_gb"),
    ("HP431", "error", "offload without a per-layer recompute choice, or over no host link"),
]
