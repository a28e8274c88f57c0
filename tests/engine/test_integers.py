"""engine.integers: the divisor helper shared by the reader's rules and the search."""

from __future__ import annotations

from pathlib import Path

from engine.check import check_file
from engine.integers import TRIAL_DIVISION_MAX, divisors, listed_divisors

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama3-70b" / "train.yaml"


def test_divisors_match_brute_force() -> None:
    for n in range(0, 400):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


def test_listed_divisors_stop_at_the_trial_division_bound() -> None:
    assert listed_divisors(TRIAL_DIVISION_MAX) == divisors(TRIAL_DIVISION_MAX)
    assert listed_divisors(TRIAL_DIVISION_MAX + 1) == []


def test_an_absurd_device_count_is_diagnosed_without_listing_its_divisors() -> None:
    # 10**16 + 8 is a multiple of 8 but not of tp·pp = 32: HP412 as for any world size, with no suggestions (listing
    # the divisors of this n by trial division took 12 s).
    text = EXAMPLE.read_text(encoding="utf-8") + "\ncontext:\n  device_num: 10000000000000008\n"
    found = [d for d in check_file(str(EXAMPLE), text=text).diagnostics if d.code == "HP412"]
    assert found and all(d.data.get("valid") == [] for d in found)
    small = EXAMPLE.read_text(encoding="utf-8") + "\ncontext:\n  device_num: 1000\n"
    hinted = [d for d in check_file(str(EXAMPLE), text=small).diagnostics if d.code == "HP412"]
    assert any(d.data.get("valid") for d in hinted)
