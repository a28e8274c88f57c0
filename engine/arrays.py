"""numpy helpers the cost model and the search share.

`distinct`: the sorted distinct values of an integer array, np.unique's plain form without its masked-array check.
Why: from numpy 2.3 a plain np.unique asks numpy.ma whether its input is masked, and the first such call imports
numpy.ma, about 8 ms of a one-shot `hp-plan search` (`benchmarks/cli_speed.py`). The forms that return indices
do not ask, and the engine's own arrays are never masked.
"""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D array (np.unique(values))."""
    s = np.sort(np.asarray(values).reshape(-1))
    if s.size < 2:
        return s
    return s[np.concatenate(([True], s[1:] != s[:-1]))]
