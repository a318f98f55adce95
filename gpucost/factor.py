"""A column as codes: its distinct values once, and per row the index of its value.

A ranking sorts its text columns to group rows (zones of one region, plans of one
configuration, rows of one provider); each sort of 100,000 strings costs several milliseconds,
so each column is factorised once and its codes serve every grouping. Object arrays built from
a factor hold one ``str`` per distinct value: gathering plans from them touches a few objects'
reference counts, not one object per row (five times faster on 150,000 plans).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Codes = npt.NDArray[np.int64]

# Packed codes stay below this, so that the next radix's product cannot overflow an int64.
_PACKED_LIMIT = 1 << 62


@dataclass(frozen=True, slots=True)
class Factor:
    """A column as its sorted distinct values and, per row, the index of its value."""

    values: np.ndarray
    codes: Codes

    @classmethod
    def of(cls, column: np.ndarray) -> Factor:
        """The factor of ``column`` (a float column's NaN cells are one value)."""
        values, codes = np.unique(column, return_inverse=True)
        return cls(values, codes.reshape(-1).astype(np.int64, copy=False))

    @property
    def radix(self) -> int:
        """How many codes there are: one above the largest."""
        return len(self.values)

    def take(self, rows: npt.NDArray[np.int64] | npt.NDArray[np.bool_]) -> Factor:
        """The factor of the column's ``rows`` (its values stay, used or not)."""
        return Factor(self.values, self.codes[rows])

    def equals(self, value: object) -> npt.NDArray[np.bool_]:
        """Per row, whether its value is ``value``: one comparison per distinct value."""
        hit: npt.NDArray[np.bool_] = (self.values == value)[self.codes]
        return hit

    def objects(self) -> npt.NDArray[np.object_]:
        """The column as an object array in which equal cells are one ``str`` object."""
        shared: npt.NDArray[np.object_] = self.values.astype(object)[self.codes]
        return shared


def packed_codes(factors: Sequence[Factor], rows: int) -> Codes:
    """One int per row, equal exactly where the rows agree in every factor, ordered as the
    factors' values are (lexicographically): each factor's code is a digit below its radix.
    Not dense: re-numbered (one sort of ints) only when the digits would overflow an int64."""
    code = np.zeros(rows, dtype=np.int64)
    size = 1
    for factor in factors:
        if size * factor.radix >= _PACKED_LIMIT:
            distinct, code = np.unique(code, return_inverse=True)
            code, size = code.reshape(-1).astype(np.int64, copy=False), len(distinct)
        code = code * factor.radix + factor.codes
        size *= factor.radix
    return code
