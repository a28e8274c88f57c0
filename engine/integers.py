"""Integer helpers shared by the reader's rules (engine.validate) and the search (engine.search).

Kept out of both packages so the reader does not import the search (and numpy) to list a divisor."""

from __future__ import annotations


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
