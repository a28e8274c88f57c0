"""Small configs built directly (no files), so the search tests do not depend on the readers: a plain module
the tests import (conftest.py keeps only the fixtures built from it)."""

from __future__ import annotations

from dataclasses import replace

from engine.catalog.devices import find_device
from engine.config.types import Config, Dimension, Location
from engine.positions import Range
from engine.specs import ClusterSpec, ModelSpec, RunOptions

TINY = ModelSpec(name="tiny", num_layers=8, hidden=1024, heads=16, vocab=32000, ffn=2816, kv_heads=4, seq_len=2048)
TINY_MOE = ModelSpec(name="tiny-moe", num_layers=6, hidden=1024, heads=16, vocab=32000, ffn=2816, kv_heads=4,
                     seq_len=2048, num_experts=8, experts_per_tok=2, moe_ffn=512, first_k_dense=1)


def cluster(nodes: int = 2, per_node: int = 8, memory: float | None = None) -> ClusterSpec:
    dev = find_device("H100")
    assert dev is not None
    return ClusterSpec(dev, nodes, per_node, memory if memory is not None else dev.memory_gib,
                       dev.intra_node_gb_s, dev.inter_node_gb_s)


def loc(line: int) -> Location:
    return Location("search.yaml", Range.of(line, 2, line, 6), Range.of(line, 8, line, 20))


def make(model: ModelSpec = TINY, *, nodes: int = 2, gbs: int = 64, recompute: str = "auto",
         memory_limit: float | None = None, dims: dict[str, int | tuple[int, ...]] | None = None,
         **kw: object) -> Config:
    """A search config; `dims` maps a dimension to an int (fixed) or a tuple (list), each located on its own
    line of a pretend search.yaml (parallelism.<name>)."""
    dimensions = {}
    locations = {}
    for i, (name, v) in enumerate(sorted((dims or {}).items())):
        at = loc(10 + i)
        if isinstance(v, tuple):
            dimensions[name] = Dimension(name, "list", v, "declared", at)
        else:
            dimensions[name] = Dimension(name, "fixed", (v,), "declared", at)
        locations[f"parallelism.{name}"] = at
    locations["constraint.global_batch_size"] = loc(3)
    if memory_limit is not None:
        locations["constraint.memory_limit_gb"] = loc(4)
    # The search's mechanics are tested on the Megatron stack (calibrated, and the figures these tests assert were
    # taken on it).
    cfg = Config(kind="search", path="search.yaml", model=model, cluster=cluster(nodes), dimensions=dimensions,
                 run=RunOptions(framework="megatron"),
                 global_batch_size=gbs, memory_limit_gb=memory_limit, recompute=recompute,  # type: ignore[arg-type]
                 locations=locations)
    return replace(cfg, **kw)  # type: ignore[arg-type]
