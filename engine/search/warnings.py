"""Warnings about the best plan itself: a search that finds only a communication-bound plan says so.

Why: a best plan at MFU 3.4 % (698 s per step) came out with no word (D-014). Below LOW_MFU the search
names the term that dominates the step, from the plan's own time breakdown, so the user knows whether the
cluster, the batch or the model is the problem.
"""

from __future__ import annotations

from engine.diagnostics import Diagnostic
from engine.positions import DOCUMENT_START, Range
from engine.results import Estimate

# Below this MFU the best plan is called out. Published large runs train at 35-55 % MFU ([CAL]
# runs; [MODELS]); 10 % is the line, far below any run a team would keep.
LOW_MFU = 0.10
COMM_TERMS = ("tp_comm", "cp_comm", "ep_comm", "dp_comm", "pp_bubble", "pp_p2p")
WHAT = {"tp_comm": "tensor-parallel collectives", "cp_comm": "context-parallel KV exchange",
        "ep_comm": "expert all-to-alls", "dp_comm": "data-parallel / FSDP traffic",
        "pp_bubble": "the pipeline bubble", "pp_p2p": "pipeline sends"}


def low_mfu(best: Estimate, rng: Range = DOCUMENT_START, path: str = "", file: str | None = None) -> Diagnostic | None:
    """HP620 when `best` runs below LOW_MFU: the largest non-compute term and its share of the step."""
    if best.mfu >= LOW_MFU or best.step_time_s <= 0:
        return None
    terms = best.time_breakdown_s
    worst = max(COMM_TERMS, key=lambda k: terms.get(k, 0.0))
    share = terms.get(worst, 0.0) / best.step_time_s
    if terms.get(worst, 0.0) > terms.get("compute", 0.0):
        why = (f"it is communication-bound: {worst} ({WHAT[worst]}) takes {terms[worst]:.3g} s, {share:.0%} of "
               f"the step, against {terms.get('compute', 0.0):.3g} s of compute")
    else:
        why = (f"its compute runs far below peak (small GEMMs for this device), and {worst} ({WHAT[worst]}) "
               f"adds {terms.get(worst, 0.0):.3g} s")
    return Diagnostic("HP620", f"The best plan found runs at MFU {best.mfu:.1%} ({best.step_time_s:.3g} s per step): "
                      f"{why}. A smaller cluster, a larger global batch or a faster interconnect would use the "
                      "devices better.", rng, path, file=file,
                      data={"mfu": best.mfu, "term": worst, "term_s": terms.get(worst, 0.0)})
