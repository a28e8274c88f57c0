"""Time to train: how long a plan takes for a token budget (`--tokens N` on estimate, search, explain and
compare). Wall-clock days = tokens / (tokens/s) / 86 400; device-hours = wall-clock hours × devices. The
steady-state step time is all the model knows: warm-up, checkpointing, evaluation and failures are not in
it, so a real run takes longer (said in the text output)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from engine.results import Estimate

SECONDS_PER_DAY = 86_400.0
SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
# A token budget below one token is no budget; above 10^18 (ten thousand times the largest published pre-training
# runs, tens of trillions of tokens) it is a typo, and its step and day counts would print hundreds of digits.
MIN_TOKENS, MAX_TOKENS = 1.0, 1e18
NOT_INCLUDED = "steady-state steps only: warm-up, checkpoints, evaluation and restarts are not included"


@dataclass(frozen=True, slots=True)
class TimeToTrain:
    """A token budget on one plan: optimizer steps, wall-clock seconds and days, device-hours."""

    tokens: float
    steps: int
    seconds: float
    devices: int

    @property
    def days(self) -> float:
        return self.seconds / SECONDS_PER_DAY

    @property
    def device_hours(self) -> float:
        return self.seconds / 3600.0 * self.devices

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "steps": self.steps, "seconds": self.seconds, "days": self.days,
                "device_hours": self.device_hours, "devices": self.devices}

    def line(self) -> str:
        return (f"{self.tokens:.3g} tokens: {self.steps:,} steps, {self.days:,.1f} days wall-clock, "
                f"{self.device_hours:,.0f} device-hours on {self.devices:,} devices ({NOT_INCLUDED})")


def parse_tokens(text: str) -> float:
    """`15e12`, `15T`, `1.5e13`, `300B`, `2_000_000` -> a positive finite number of tokens (ValueError else)."""
    m = re.fullmatch(r"\s*([0-9][0-9_]*\.?[0-9_]*(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBgGtTpP]?)\s*", text)
    if not m:
        raise ValueError(f"expected a token count such as 15e12 or 15T, got {text!r}")
    value = float(m.group(1).replace("_", "")) * SUFFIX[m.group(2).lower()]
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"expected a positive token count, got {text!r}")
    if not MIN_TOKENS <= value <= MAX_TOKENS:
        raise ValueError(f"expected a token count from {MIN_TOKENS:g} to {MAX_TOKENS:g}, got {text!r}")
    return value


def time_to_train(est: Estimate, tokens: float, seq_len: int) -> TimeToTrain:
    """The plan's time for `tokens`: whole optimizer steps (rounded up, as a run cannot stop inside one) at the
    steady-state step time, so the steps and the seconds say one thing (half a token had read as one step of
    microseconds)."""
    s = est.strategy
    per_step = s.global_batch_size * seq_len
    if per_step > 0:
        steps = math.ceil(tokens / per_step)
        seconds = steps * est.step_time_s
    else:
        steps, seconds = 0, tokens / est.tokens_per_s if est.tokens_per_s > 0 else math.inf
    return TimeToTrain(tokens=tokens, steps=steps, seconds=seconds, devices=s.world_size)
