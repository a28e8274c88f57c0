"""DualPipeV: DeepSeek's bidirectional DualPipe cut in half into a V ([DUALPIPE]; MindSpeed-LLM's
`--schedules-method dualpipev`, [MS-DUALPIPEV]). docs/cost-model.md §3.3 gives the formulas.

Each of the p ranks holds two of the model's 2·p stages, stage i and stage 2p − 1 − i (a V: the micro-batch goes
down the ranks and back up), so a rank holds L/p layers as under 1F1B, and rank 0 holds the embedding and the
output layer and loss. In the steady phase a rank runs the forward of one micro-batch's stage beside the
backward of another's ("F&B"), so with the cross-micro-batch overlap on (MindSpeed `--moe-fb-overlap`, the run
option `moe_a2a_overlap`) the expert all-to-alls and the pipeline sends of one hide under the other's compute.
"""

from __future__ import annotations

import numpy as np

from engine.cost.table import SCHEDULE_CODE

DUALPIPEV = SCHEDULE_CODE["dualpipev"]


def dualpipev_rows(schedule: np.ndarray, pp: np.ndarray) -> np.ndarray:
    """(n,) bool: the rows that run DualPipeV (with pp > 1; at pp 1 there is no pipeline to schedule)."""
    return (schedule == DUALPIPEV) & (pp > 1)


def dualpipev_in_flight(rows: np.ndarray, mb: np.ndarray, mf: np.ndarray) -> np.ndarray:
    """(n, P) micro-batches whose activations each rank holds at its peak, in units of the rank's L/p layers:
    [DUALPIPE]'s "activation per device" is PP + 1 stage-micro-batches of L/PP layers each for PP = 2p stages,
    (2p + 1)/2 = p + 1/2 of the rank's layers (the V balances the ranks: one early and one late stage each);
    never more than the m micro-batches of the step."""
    if not rows.any():
        return mf
    p = (mf > 0).sum(axis=1).astype(np.float64)
    held = np.minimum(p + 0.5, mb)
    return np.where(rows[:, None] & (mf > 0), held[:, None], mf)


def last_stage(rows: np.ndarray, pp: np.ndarray, P: int) -> np.ndarray:
    """(n, P) bool: the stage that holds the output layer, the loss and any MTP layers: the last rank, except
    under DualPipeV, whose V ends on rank 0 ([DUALPIPE] dualpipev.py computes the criterion on the first rank;
    [MS-DUALPIPEV]: the output head sits on PP rank 0)."""
    stage_idx = np.arange(P)[None, :]
    return np.where(rows[:, None], stage_idx == 0, stage_idx == (pp[:, None] - 1))


def dualpipev_bubble(stage_t: np.ndarray, fwd: np.ndarray, bwd: np.ndarray, wgrad: np.ndarray) -> np.ndarray:
    """(n,) idle seconds per step of a DualPipeV pipeline, [MS-DUALPIPEV]'s (PP − 1)(F&B + B − W) − F for PP ranks,
    per stage of half a rank: F&B = half the rank's time per micro-batch (`stage_t`, both its stages, what the
    overlap leaves exposed included), B = half its backward with recompute (`bwd`), W = half its weight-gradient
    GEMMs (`wgrad`: the backward's weight half, as long as the forward's weight GEMMs), F = half its forward.
    Unequal ranks: Σ − max of the ranks' (F&B + B − W) instead of (PP − 1)×, as the 1F1B bubble takes them.
    MindSpeed keeps the cool-down's dW unsplit by default (hence − W, where DeepSeek's own schedule, splitting
    it, reads (PP/2 − 1)(F&B + B − 3W) for PP stages, [DUALPIPE])."""
    x = 0.5 * (stage_t + bwd - wgrad)
    imax = np.argmax(x, axis=1)
    rows = np.arange(x.shape[0])
    bubble = x.sum(axis=1) - x[rows, imax] - 0.5 * fwd[rows, imax]
    return np.maximum(bubble, 0.0)
