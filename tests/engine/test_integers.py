"""engine.integers: the divisor helper shared by the reader's rules and the search."""

from __future__ import annotations

import time
from pathlib import Path

from engine.check import check_file
from engine.integers import (
    TRIAL_DIVISION_MAX,
    divisors,
    divisors_among,
    largest_divisor_at_most,
    listed_divisors,
    shown_int,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama3-70b" / "train.yaml"


def test_divisors_match_brute_force() -> None:
    for n in range(0, 400):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


def test_listed_divisors_stop_at_the_trial_division_bound() -> None:
    assert listed_divisors(TRIAL_DIVISION_MAX) == divisors(TRIAL_DIVISION_MAX)
    assert listed_divisors(TRIAL_DIVISION_MAX + 1) == []


def test_an_absurd_device_count_is_diagnosed_without_listing_its_divisors() -> None:
    # 10**15 + 8 is a multiple of 8 but not of tp·pp = 32: HP412 as for any world size, with no suggestions (listing
    # the divisors of this n by trial division took 12 s).
    text = EXAMPLE.read_text(encoding="utf-8") + "\ncontext:\n  device_num: 1000000000000008\n"
    found = [d for d in check_file(str(EXAMPLE), text=text).diagnostics if d.code == "HP412"]
    assert found and all(d.data.get("valid") == [] for d in found)
    small = EXAMPLE.read_text(encoding="utf-8") + "\ncontext:\n  device_num: 1000\n"
    hinted = [d for d in check_file(str(EXAMPLE), text=small).diagnostics if d.code == "HP412"]
    assert any(d.data.get("valid") for d in hinted)


def test_largest_divisor_at_most_is_exact_within_the_bound_and_valid_beyond() -> None:
    for n in range(1, 200):
        for k in range(1, n + 2):
            assert largest_divisor_at_most(n, k) == max(d for d in divisors(n) if d <= k)
    t0 = time.perf_counter()
    for n, k in ((10**11, 7), (2**64 + 1, 10**9), (10**400, 3)):
        d = largest_divisor_at_most(n, k)
        assert n % d == 0 and 1 <= d <= k
    assert time.perf_counter() - t0 < 0.1  # gcd, not trial division up to n


def test_divisors_among_costs_one_remainder_per_candidate() -> None:
    assert divisors_among(10**18, [1, 2, 3, 5, 7, 8]) == [1, 2, 5, 8]


def test_shown_int_names_huge_numbers_by_their_exact_length() -> None:
    assert shown_int(18446744073709551616) == "18446744073709551616"
    assert shown_int(10**400 - 1) == "a 400-digit number" and shown_int(10**400) == "a 401-digit number"
    assert shown_int(-(10**30)) == "a negative 31-digit number"
    assert shown_int(10**5000) == "a 5001-digit number"  # beyond Python's int-to-text limit


def test_a_device_count_beyond_2_53_is_out_of_range_at_the_value() -> None:
    text = EXAMPLE.read_text(encoding="utf-8") + "\ncontext:\n  device_num: 10000000000000008\n"
    found = [d for d in check_file(str(EXAMPLE), text=text).diagnostics if d.code == "HP110"]
    assert [d.path for d in found] == ["context.device_num"] and "at most 9,007,199,254,740,992" in found[0].message
