"""Where a plan's time and memory go (docs/formats.md §7): `explain_config`, the per-stage rows and the pipeline
timeline built from the cost model's own pricing, its text and SVG pictures, `compare` and `export`.

* ``explain_config(config, *, best=False) -> (Explained | None, diagnostics)``: the stated plan, or for a
  search config with searched dimensions (or best=True) the best the search finds.
* ``explain_estimate(config, estimate) -> Explained``: a plan already priced.
* ``bound_of(config, estimate) -> Bound``: what bounds it and the tightest stage's headroom (no timeline).
"""

from engine.explain.build import Bound, bound_of, explain_estimate
from engine.explain.plan import explain_config, pick_plan
from engine.explain.types import KINDS, Explained, Interval, StageRow

__all__ = [
    "KINDS", "Bound", "Explained", "Interval", "StageRow", "bound_of", "explain_config", "explain_estimate",
    "pick_plan",
]
