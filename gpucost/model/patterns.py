"""Matching instance types against the fnmatch patterns of the sourced tables, column-wise."""

from __future__ import annotations

import fnmatch

import numpy as np
import numpy.typing as npt


def pattern_mask(values: npt.NDArray[np.str_], pattern: str) -> npt.NDArray[np.bool_]:
    """Which ``values`` match the fnmatch ``pattern`` (case-sensitive)."""
    wild = pattern.rstrip("*")
    if pattern.endswith("*") and not any(ch in wild for ch in "*?["):
        return np.char.startswith(values, wild)  # the common "p4*" case, vectorised
    uniq, inverse = np.unique(values, return_inverse=True)
    hit = np.array([fnmatch.fnmatchcase(str(u), pattern) for u in uniq], dtype=bool)
    return hit[inverse]
