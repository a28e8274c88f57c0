"""Keep the C heap's freed blocks mapped in a process that prices block after block: the language server's search
worker (hp_lsp.worker), and benchmarks/search_speed.py's cases, which measure that worker's steady state.

Why: glibc's malloc gives a request of M_MMAP_THRESHOLD bytes or more a mapping of its own (128 KiB at start,
raised to the largest such block freed so far) and hands the top of its heap back to the system once more than
M_TRIM_THRESHOLD (twice that) lies free there. The cost model prices candidates in blocks whose (rows × stages)
arrays run from tens of KiB to a few MiB, allocated and freed block after block, so where they happen to land
decides whether every block faults its pages in again. The same code, twenty searches in one process
(benchmarks/search_speed.py cases): Llama 3.1 70B 50 or 18,000 minor faults, DeepSeek-V3 on 2,048 H800 160 or
65,000, 2.6 ms of a 22 ms search and 5 ms of a 55 ms one in the kernel, as the heap's layout fell. Setting both
thresholds (which also stops glibc moving them) keeps the freed blocks for the next block: no faults, the same
peak RSS. Not worth it for a one-shot `hp-plan` command: importing ctypes costs about what one search saves.
"""

from __future__ import annotations

import os

# glibc's mallopt parameters (malloc.h) and the values set: blocks up to 32 MiB (the largest mmap threshold glibc
# takes on a 64-bit system) come from the heap, and up to 128 MiB of free heap top stays mapped.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 128 << 20


def keep_freed_heap() -> bool:
    """Set both thresholds where the C library is glibc. False where it is not (macOS, musl, Windows: nothing is
    done) or where glibc refuses a value."""
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return False
    if not glibc:
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD,
                                                                                     TRIM_THRESHOLD_BYTES))
