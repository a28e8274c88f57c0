"""The layout passes: the pipeline layouts the search prices beside the run's own split, and the plans each serves.

A stack can be told a layout the files do not state: Megatron-Core counts the embedding and the loss as layers of
the split (`account_for_*_in_pipeline_split`), MindSpeed-LLM pads the layer count with no-op layers
(`--noop-layers`, MS-NOOP). Each such layout changes which plans exist and what they cost, so the search prices it
in a pass of its own, restricted to the pipeline degrees (and virtual stages) where it changes the split or makes
one possible, and ranks every pass's plans together (engine.search._pick_layout).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.catalog.frameworks import framework_of
from engine.config.stated_layout import noop_fills, noop_pad
from engine.config.types import Config
from engine.cost.layout import default_chunks, layout_or_default
from engine.integers import divisors
from engine.search.space import VPP_AUTO_MAX, pads_interleaved, pads_with_noop_layers, restrictions
from engine.specs import PipelineLayout

ACCOUNTED = PipelineLayout(embedding_in_split=True, loss_in_split=True)


@dataclass(frozen=True)
class LayoutPass:
    """One layout priced in a pass of its own, over the pipeline degrees `pp` and, where the layout serves only
    some virtual-stage counts, those (`vpp`; empty: the run's own list)."""

    layout: PipelineLayout
    pp: tuple[int, ...]
    vpp: tuple[int, ...] = field(default=())

    def restriction(self) -> dict[str, tuple[int, ...]]:
        """The dimensions this pass narrows, as the search's restrictions name them."""
        return {"pp": self.pp, **({"vpp": self.vpp} if self.vpp else {})}


def layout_passes(config: Config) -> list[LayoutPass]:
    """Every layout the search prices beside the run's own split: the embedding and loss counted in the split
    (accounting_pps), the no-op layers that let DualPipeV cut, an interleaved split fill equal chunks or a plain
    split balance its last stage (noop_passes)."""
    pps = accounting_pps(config)
    return [*([LayoutPass(ACCOUNTED, pps)] if pps else []), *noop_passes(config)]


def pp_values(config: Config) -> tuple[int, ...]:
    """The pp values a layout pass may serve: the declared list, else every divisor of the device count."""
    assert config.cluster is not None
    return restrictions(config).get("pp") or tuple(divisors(config.cluster.world_size))


def accounting_pps(config: Config) -> tuple[int, ...]:
    """The pp values worth a second pass with the embedding and loss in the split: none unless the files state
    no layout and the framework offers the accounting; then each pp > 1 with a vpp the space may hold that
    splits differently under it than evenly (pp 2 of an even layer count does not) or exists only under it
    (more chunks than layers: an embedding-only and a loss-only chunk)."""
    if config.run.pipeline_layout.stated or not framework_of(config.run).chooses_accounting:
        return ()
    if config.model is None or config.cluster is None:
        return ()
    m = config.model
    vpps = restrictions(config).get("vpp") or tuple(range(1, VPP_AUTO_MAX + 1))
    out = []
    for p in pp_values(config):
        for v in vpps:
            if p < 2 or p * v > m.num_layers + 2:
                continue
            chunks, applied = layout_or_default(m.num_layers, m.mtp_depth, p, v, ACCOUNTED)
            if applied and (p * v > m.num_layers or (chunks != default_chunks(m.num_layers, p, v)).any()):
                out.append(p)
                break
    return tuple(out)


def noop_passes(config: Config) -> list[LayoutPass]:
    """The no-op layers the search pads the layer count with where the stack pads and the files state no layout
    (space.pads_with_noop_layers: MindSpeed-LLM's `--noop-layers`, MS-NOOP): the fewest at the end of the count, as
    MindSpeed-LLM's DeepSeek-V3 scripts place them (61 layers + "61,62,63").

    - Under DualPipeV, where the layers do not cut into 2·pp stages, one pass per padding: folded into the V, the
      padded last stage sits on rank 0 beside the embedding and the output layer ([MS-DUALPIPEV]). More padding
      than layers is no plan.
    - Otherwise, on a stack that interleaves only equal chunks (space.pads_interleaved: MindSpeed-LLM's
      `--num-layer-list` refuses virtual stages, MS-NUMLAYERLIST), where the layers do not fill pp·vpp equal
      chunks and every chunk keeps a real layer (noop_fills): at vpp > 1 the only split the stack runs, at vpp 1
      a balance its uneven split does not give (the padding comes off the last stage, which holds the output
      layer and the loss). One pass per (padding, vpp values), so each pass's pp × vpp holds only the pairs
      that padding serves; the plain pass leaves the vpp > 1 ones to them (space._level_vpp)."""
    if not pads_with_noop_layers(config) or config.model is None or config.cluster is None:
        return []
    L = config.model.num_layers
    pps = sorted(p for p in set(pp_values(config)) if p >= 2)
    if config.pipeline_schedule == "dualpipev":
        by_pad: dict[tuple[int, ...], list[int]] = {}
        for p in pps:
            pad = noop_pad(L, 2 * p)
            if pad and len(pad) <= L:
                by_pad.setdefault(pad, []).append(p)
        return [LayoutPass(PipelineLayout(noop_layers=pad), tuple(ps)) for pad, ps in by_pad.items()]
    if not pads_interleaved(config):
        return []
    vpps = restrictions(config).get("vpp") or range(1, VPP_AUTO_MAX + 1)
    served: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
    for p in pps:
        by_pad_v: dict[tuple[int, ...], list[int]] = {}
        for v in vpps:
            if noop_fills(L, p * v):
                by_pad_v.setdefault(noop_pad(L, p * v), []).append(v)
        for pad, vs in by_pad_v.items():
            served.setdefault((pad, tuple(vs)), []).append(p)
    return [LayoutPass(PipelineLayout(noop_layers=pad), tuple(ps), vs) for (pad, vs), ps in served.items()]
