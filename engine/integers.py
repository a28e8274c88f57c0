"""Integer helpers shared by the reader's rules (engine.validate) and the search (engine.search).

Kept out of both packages so the reader does not import the search (and numpy) to list a divisor."""

from __future__ import annotations

# Trial division lists the divisors of n in sqrt(n) steps: 4,096 here. No real device count, degree, model
# width or layer count comes near; a typo does (`device_num: 10000000000000001` took 12 s, one digit more
# two minutes), so suggestions stop here and the search refuses a larger cluster (engine.search.MAX_DEVICES).
TRIAL_DIVISION_MAX = 2**24


def divisors(n: int) -> list[int]:
    """The positive divisors of n, ascending ([] for n < 1). Exact integer arithmetic: no float square root,
    so a degree beyond 2**53 loses no divisor. Trial division up to sqrt(n): callers bound n first."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i != n // i:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def listed_divisors(n: int) -> list[int]:
    """The divisors of n to suggest in a message: all of them up to TRIAL_DIVISION_MAX, none beyond."""
    return divisors(n) if n <= TRIAL_DIVISION_MAX else []
