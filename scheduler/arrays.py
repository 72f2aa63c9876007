"""Index arithmetic on numpy arrays shared by the engine's modules (no domain knowledge here)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


def spans(starts: IntArray, stops: IntArray) -> IntArray:
    """Every index of the ranges [starts[i], stops[i]), in order, as one array."""
    lengths = stops - starts
    firsts = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    indices: IntArray = firsts + np.arange(int(lengths.sum()), dtype=np.int64)
    return indices
