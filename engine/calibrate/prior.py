"""The prior the `local` calibration rule weighs a user's runs against (docs/calibration.md, "The local rule").

A run's log-residual r(x) = log(measured / priced) on a stack is a stack bias b plus a plan-specific part g(x):
  g ~ GP(0, σ_g² · k(x, x')) with k(x, x') = exp(−|f(x) − f(x')|² / 2ℓ²) over the log2 plan features,
  b = 0 with probability 1 − p (the stack prices as the runs the model was fitted on) or b ~ N(0, σ_B²) with
  probability p (a different cluster, firmware, kernels), and the measurement adds N(0, σ_n²).
Every figure below is one of those, with where it comes from.
"""

from __future__ import annotations

import math

# σ_g per (framework, device type): the RMS log-residual of the uncalibrated model on the published runs of
# that stack and how many runs it is over, as `benchmarks/calibration.py` prints it (the [CAL] §1-§5 Megatron
# cases and the six runs of [CAL] §10; re-run it after a refit of engine.cost.constants and copy the figures
# here). A stack with fewer than three runs takes its framework's spread; a framework with none, the pooled one.
PLAN_SPREAD: dict[tuple[str, str], tuple[float, int]] = {
    ("megatron", "A100"): (0.048, 31),  # NAR21 Tables 1-2, KOR22 Table 5
    ("megatron", "H100"): (0.140, 10),  # MLM-README weak scaling M-01..M-09 and NeMo Grok-1
    ("mindspeed", "A2"): (0.222, 3),  # MindSpeed-LLM LLaMA2-7B, LLaMA2-70B, Qwen3-30B-A3B
}
PLAN_SPREAD_FRAMEWORK: dict[str, tuple[float, int]] = {
    "megatron": (0.081, 41),
    "mindspeed": (0.222, 3),
    "torchtitan": (0.039, 2),  # Llama 3.1 8B on 8 and Llama 3 70B on 256 H100-96G
}
POOLED_SPREAD = 0.095  # all 46 published runs together: the spread of a framework priced from its facts only
# A spread measured on a few runs (and in-sample: the framework constants were fitted on them) understates
# what the model misses on the next plan, so it is pooled with PRIOR_RUNS pseudo-runs at POOLED_SPREAD:
# σ_g² = (n·s² + n0·s0²) / (n + n0) (the mean of a scaled-inverse-χ² prior on σ_g² with n0 degrees of freedom).
# torchtitan's 3.9% over two runs becomes 7.3%; megatron / A100's 4.8% over 31 stays 5.0%.
PRIOR_RUNS = 2
# The stacks those runs are on (the framework constants of engine.cost were fitted on them).
FITTED_STACKS = frozenset({("megatron", "A100"), ("megatron", "H100"), ("mindspeed", "A2"),
                           ("torchtitan", "H100-96G")})

# σ_B: how far a biased stack's step times sit from the model. Before the framework models of formats.md §5
# every stack priced as the default trainer, and the same benchmark measured MindSpeed / A2 50.9% and
# torchtitan / H100 29.0% off (median |e|): log 1.509 = 0.41, log 1.29 = 0.25, RMS 0.34; 0.3 is that scale.
STACK_BIAS_SD = 0.3

# p, the prior probability that a user's stack is biased beyond the model's own spread (a stated prior, not a fit):
#   a (framework, device) the model was fitted on: most users run the published recipes on similar clusters;
#   a fitted framework on another device: no evidence either way; a framework with no published run
#   (hyperparallel): the model is priced from facts alone (formats.md §5), so a bias is expected.
BIAS_PRIOR_FITTED = 0.1
BIAS_PRIOR_OTHER_DEVICE = 0.5
BIAS_PRIOR_UNFITTED = 0.9

# σ_n: the noise of a steady-state step time. The log reader averages the steps within max(3.5 robust σ, 2%)
# of the median (docs/calibration.md, "Steady state"); a mean over tens of steps is good to ~0.5%.
MEASUREMENT_SD = 0.005

# ℓ, in log2 units of the plan features: plans one doubling apart in one feature share e^(-1/2) = 61% of their
# plan-specific misfit, three doublings apart 1%. A stated prior: what a plan shares with its neighbours is what
# the model gets wrong about the setup they share (an unstated micro-batch, a kernel). On the published runs the
# framework constants were fitted, which absorbed what neighbours shared: their residuals are no closer than
# the residuals themselves at any distance (benchmarks/calibration.py prints it), so ℓ is kept short and a run's
# misfit reaches only plans a doubling or two away.
LENGTH_SCALE = 1.0

# The local factor is clipped to the time-ratio bounds of engine.calibrate.fit ([0.1, 10]).
LOG_BOUND = math.log(10.0)


def plan_spread(framework: str, device_type: str) -> float:
    """σ_g for a stack: its own spread, else its framework's, pooled with PRIOR_RUNS pseudo-runs; else the
    pooled spread."""
    measured = PLAN_SPREAD.get((framework, device_type)) or PLAN_SPREAD_FRAMEWORK.get(framework)
    if measured is None:
        return POOLED_SPREAD
    s, n = measured
    return math.sqrt((n * s * s + PRIOR_RUNS * POOLED_SPREAD ** 2) / (n + PRIOR_RUNS))


def bias_prior(framework: str, device_type: str) -> float:
    """p for a stack: fitted on it, fitted on other devices, or never fitted."""
    if (framework, device_type) in FITTED_STACKS:
        return BIAS_PRIOR_FITTED
    return BIAS_PRIOR_OTHER_DEVICE if framework in PLAN_SPREAD_FRAMEWORK else BIAS_PRIOR_UNFITTED
