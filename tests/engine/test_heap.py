"""engine.heap: the search worker's process keeps the C heap's freed blocks (glibc), and does nothing elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from engine import heap

GLIBC = sys.platform.startswith("linux") and bool(getattr(os, "confstr", lambda _n: None)("CS_GNU_LIBC_VERSION"))

# A fresh process frees and allocates a 4 MiB block (a large pricing block's arrays) forty times and counts the
# minor faults after the first: kept, the block's pages stay mapped; handed back, each round faults them in again.
ROUNDS = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from engine.heap import keep_freed_heap
    kept = keep_freed_heap() if sys.argv[1] == "keep" else False
    np.ones(1 << 19).sum()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(40):
        np.ones(1 << 19).sum()
    print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    kept, faults = out.stdout.split()
    return kept, int(faults)


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt: elsewhere keep_freed_heap does nothing")
def test_freed_blocks_stay_mapped_under_glibc() -> None:
    kept, faults = _faults("keep")
    assert kept == "True" and faults < 40  # not one 1,024-page block a round


def test_nothing_is_done_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_such_name(_name: str) -> str:
        raise ValueError("unrecognized configuration name")

    monkeypatch.setattr(heap.os, "confstr", no_such_name)
    assert heap.keep_freed_heap() is False
    monkeypatch.setattr(heap.os, "confstr", lambda _name: None)
    assert heap.keep_freed_heap() is False
