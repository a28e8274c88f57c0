"""engine.arrays.distinct: np.unique's plain form, without the first call importing numpy.ma."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.arrays import distinct

ROOT = Path(__file__).resolve().parents[2]


@given(st.lists(st.integers(-(2**40), 2**40), max_size=60))
def test_distinct_is_np_unique(values: list[int]) -> None:
    a = np.asarray(values, dtype=np.int64)
    assert distinct(a).tolist() == np.unique(a).tolist()


def test_a_search_leaves_numpy_ma_unloaded() -> None:
    """The engine's search (as `hp-plan search` runs it) never makes numpy import numpy.ma (about 8 ms of start-up)."""
    code = ("import sys\nfrom engine.check import check_file\nfrom engine.search import search\n"
            "search(check_file('examples/llama3-70b/search.yaml').config)\nprint('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
