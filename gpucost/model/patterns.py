"""Matching instance types against the fnmatch patterns of the sourced tables, column-wise."""

from __future__ import annotations

import fnmatch

import numpy as np
import numpy.typing as npt

from gpucost.factor import Factor


def pattern_mask(values: npt.NDArray[np.str_], pattern: str) -> npt.NDArray[np.bool_]:
    """Which ``values`` match the fnmatch ``pattern`` (case-sensitive)."""
    wild = pattern.rstrip("*")
    if pattern.endswith("*") and not any(ch in wild for ch in "*?["):
        return np.char.startswith(values, wild)  # the common "p4*" case, vectorised
    uniq, inverse = np.unique(values, return_inverse=True)
    hit = np.array([fnmatch.fnmatchcase(str(u), pattern) for u in uniq], dtype=bool)
    return hit[inverse]


def lowered(values: npt.ArrayLike | Factor) -> Factor:
    """A text column (or its factor, which a ranking has already) with its distinct values in
    lower case: a column of plans holds a few providers, and np.char.lower costs a Python call
    per cell (27 ms per 150,000 cells). Two spellings of one name stay two values, each
    lowered: match rows with :meth:`Factor.equals`."""
    factor = values if isinstance(values, Factor) else Factor.of(np.asarray(values, dtype=str))
    return Factor(np.char.lower(factor.values.astype(str)), factor.codes)
