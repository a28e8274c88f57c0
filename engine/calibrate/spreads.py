"""The prior spread of each part's ratio per stack (framework, device type): how far the parts rule
(engine.calibrate.parts) lets one part of the priced step move for a given misfit. One table, one home: a
relative-error band per framework, device class and plan features can replace `part_spread` here without
touching the fit.

Derivation (docs/calibration.md, "Part spreads"). A part's ratio is shared by every plan of the stack, so its
spread is the part of the model's misfit that plans of the stack share. On the stacks the model was fitted on
that was measured over every pair (a, t) of published runs of a stack: the shared variance is the mean of
r_a·r_t (r the log misfit of the step), and it is ≤ 0 on all four (megatron / A100 −4e-5 over 31 runs,
megatron / H100 −2.1e-3 over 10, mindspeed / A2 −4e-5 over 3, torchtitan / H100-96G −1.0e-3 over 2;
`benchmarks/calibration.py` prints it): the fitted constants absorbed what the runs shared, and what is left of
each run is its own (prior.plan_spread, prior.own_spread). So on a fitted stack every part's spread is the
floor SHARED_FLOOR (no measured spread: an anchor there moves no other plan's parts unless the stack-wide
bias hypothesis, prior.STACK_BIAS_SD and prior.bias_prior, wins). On a device or framework the model was not
fitted on, nothing absorbed the error: a part's spread is what the model misses on one plan there, σ_g of the
framework (or the pooled 3.1%) for compute, pipeline and optimizer, κ = 0.196 (prior.COMM_SPREAD, the spread
per unit share of exposed communication) for communication.
"""

from __future__ import annotations

import math

from engine.ratios import prior
from engine.specs import PRICED_PARTS, group_of_part

# The ratio groups whose time is communication (their error scales with κ); the others are compute-like.
COMM_GROUPS = frozenset({"tp_comm", "cp_comm", "ep_comm", "dp_comm"})


# The floor: no measured shared spread; zero in effect (a part moves by under 1e-4 of a misfit), not exactly
# zero so the prior stays invertible.
SHARED_FLOOR = 1e-6
# Measured shared variance (mean of r_a·r_t over the pairs of published runs of the stack), as
# benchmarks/calibration.py prints it: all ≤ 0, so the floor holds on every fitted stack.
SHARED_VARIANCE: dict[tuple[str, str], float] = {
    ("megatron", "A100"): -4.2e-5, ("megatron", "H100"): -2.1e-3, ("mindspeed", "A2"): -4.2e-5,
    ("torchtitan", "H100-96G"): -9.9e-4,
}


def part_spread(part: str, framework: str, device_type: str) -> float:
    """The prior spread (log units) of one priced part's (engine.specs.PRICED_PARTS) or ratio group's
    stack-wide ratio on this stack."""
    if (framework, device_type) in prior.FITTED_STACKS:
        return max(SHARED_FLOOR, math.sqrt(max(SHARED_VARIANCE.get((framework, device_type), 0.0), 0.0)))
    return prior.COMM_SPREAD if group_of_part(part) in COMM_GROUPS else prior.plan_spread(framework, device_type)


def host_spread(framework: str, device_type: str) -> float:
    """The prior spread (seconds per step, at the runs' mean launch units) of the host part's size fitted from
    step times (engine.calibrate.parts; a profile measures it instead); 0: the step times do not fit it. Off
    the fitted stacks: τ0 (prior.OVERHEAD_S), the per-step overhead the model does not price, fitted with σ_g
    and κ. On a fitted stack the model's shared misfit was measured at nothing (SHARED_VARIANCE, as for the
    parts): τ0 there is each plan's own (prior.own_spread), none of it carries to another plan, so nothing of a
    run's misfit is read as host time (a profile still measures it). Fitting it there with spread τ0 made
    megatron / H100's one-anchor median 5.89% -> 5.91% and torchtitan / H100-96G's 3.15% -> 3.28% (one run and
    n−1; benchmarks/calibration.py, docs/calibration.md "Host overhead")."""
    return 0.0 if (framework, device_type) in prior.FITTED_STACKS else prior.OVERHEAD_S


def part_spreads(framework: str, device_type: str) -> dict[str, float]:
    """Every priced part's prior spread on this stack."""
    return {p: part_spread(p, framework, device_type) for p in PRICED_PARTS}
