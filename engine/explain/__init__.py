"""Where a plan's time and memory go (FORMATS.md §7): `explain_config`, the per-stage rows and the pipeline
timeline built from the cost model's own pricing, its text and SVG pictures, `compare` and `export`.

* ``explain_config(config, *, search_fn=None) -> (Explained | None, diagnostics)``: the stated plan, or
  for a search config with searched dimensions the best the search finds.
* ``explain_estimate(config, estimate) -> Explained``: a plan already priced.
"""

from engine.explain.build import explain_estimate
from engine.explain.plan import explain_config, pick_plan
from engine.explain.types import KINDS, Explained, Interval, StageRow

__all__ = ["KINDS", "Explained", "Interval", "StageRow", "explain_config", "explain_estimate", "pick_plan"]
