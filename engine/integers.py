"""Integer helpers and bounds shared by the reader's rules (engine.validate, engine.config) and the search.

Kept out of both packages so the reader does not import the search (and numpy) to list a divisor.

Every loop or list sized by a number a user wrote has an explicit bound here, so a typo (`1e11` heads, a
400-digit width, 2**64 layers) costs a diagnostic at the value, never a hang, a memory blow-up or an overflow
inside the pricing."""

from __future__ import annotations

from collections.abc import Iterable
from math import gcd

# Trial division lists the divisors of n in sqrt(n) steps: 4,096 here. No real device count, degree, model
# width or layer count comes near; a typo does (`device_num: 10000000000000001` took 12 s, one digit more
# two minutes), so suggestions stop here and the search refuses a larger cluster (engine.search.MAX_DEVICES).
TRIAL_DIVISION_MAX = 2**24

# The largest integer any config value may state: beyond 2**53 a float (the prices' arithmetic, JSON's
# numbers) no longer holds every integer exactly, and numpy's int64 columns overflow soon after. A larger
# value is refused at the value (HP110) by the one integer reader (engine.config.reader.Source.int_).
MAX_CONFIG_INT = 2**53

# The largest model fact (a layer, head, expert or width count) the engine prices. It is TRIAL_DIVISION_MAX,
# so every divisor list a model rule or the search builds from a fact is bounded by construction; released
# models state facts far below it (docs/formats.md §2 lists the largest), and a larger one is a typo.
MAX_MODEL_FACT = TRIAL_DIVISION_MAX

# The most candidates one degree's list may name. A degree's useful candidates are divisors of the device count
# (at most a few hundred for any real cluster) or small batch counts; a longer list is generated or pasted by
# mistake, and each of its items would cost a diagnostic of its own (a 900,000-item `tp:` list took 20 s and,
# with --json, more than 3 GB). A longer list is refused whole at the list (HP110, engine.config.search_config).
MAX_CANDIDATES = 1024

# A number of more digits than this is named by its length in a message, not printed whole.
_SHOWN_DIGITS = 24


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


def divisors_among(n: int, candidates: Iterable[int]) -> list[int]:
    """The divisors of n among `candidates` (in their order): bounded by the candidates, not by n, so a huge n
    (a typo) costs one remainder per candidate."""
    return [c for c in candidates if c > 0 and n % c == 0]


def largest_divisor_at_most(n: int, k: int) -> int:
    """The largest divisor of n that is <= k (n, k >= 1). Exact from the divisor list while n is within
    TRIAL_DIVISION_MAX; beyond it gcd(n, k), which divides n and is <= k, so the answer is always valid and
    found in logarithmic time."""
    listed = listed_divisors(n)
    if listed:
        return max((d for d in listed if d <= k), default=1)
    return gcd(n, k)


def shown_int(n: int) -> str:
    """An integer as a message shows it: whole up to 24 digits, else by its length (`a 400-digit number`),
    so a hostile value cannot make a diagnostic long (nor reach Python's limit on int-to-text conversion)."""
    if abs(n) < 10**_SHOWN_DIGITS:
        return str(n)
    digits = int(abs(n).bit_length() * 0.30103) + 1  # log10(2): the length, or one more
    if abs(n) < 10 ** (digits - 1):
        digits -= 1
    return f"a {'negative ' if n < 0 else ''}{digits}-digit number"
