"""Setup time: how long a rented machine takes to become useful, per provider and family.

From asking for a machine to the first training step, before the data download (which
:func:`gpucost.model.economics.job_costs` adds from the data size and the offer's bandwidth):
capacity allocation, boot, GPU driver, image or environment. The figures come from a small
sourced table (``setup_times.csv`` beside this module), matched by provider and instance-type
pattern, first match wins, each row with its source and confidence. ``--setup-min`` (``override``
here) replaces every row but your own machine's, which needs no setup.

This is the one home of the rule: compare, plan, scale, breakeven and the TUI all ask here.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpucost.errors import InputError
from gpucost.factor import Factor
from gpucost.model.patterns import lowered, pattern_mask

TABLE_PATH = Path(__file__).with_name("setup_times.csv")
# A setup longer than a day is not a setup but a mistake in the input (minutes for hours?).
MAX_SETUP_MINUTES = 24 * 60.0
OVERRIDE_SOURCE = "--setup-min (your figure)"


@dataclass(frozen=True)
class SetupRule:
    provider: str  # or "*"
    instance: str  # fnmatch pattern on the instance type
    minutes: float
    confidence: str
    source: str


@dataclass(frozen=True)
class SetupTime:
    """One machine's setup time and where the figure comes from."""

    minutes: float
    source: str

    @property
    def hours(self) -> float:
        return self.minutes / 60.0


def check_setup_minutes(value: float, what: str = "--setup-min") -> float:
    """``value`` if it is a usable setup time in minutes, else an InputError saying why."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise InputError(f"{what} must be a number of minutes >= 0, got {value!r}")
    if value > MAX_SETUP_MINUTES:
        raise InputError(
            f"{what} is {value:g} minutes, more than a day",
            hint="give minutes, e.g. --setup-min 8; the default comes from the provider",
        )
    return float(value)


@lru_cache(maxsize=1)
def rules() -> tuple[SetupRule, ...]:
    """The setup-time table, parsed once."""
    lines = [
        ln
        for ln in TABLE_PATH.read_text(encoding="utf-8").splitlines()
        if ln and not ln.startswith("#")
    ]
    return tuple(
        SetupRule(
            row["provider"],
            row["instance"],
            check_setup_minutes(float(row["minutes"]), f"{TABLE_PATH.name} minutes"),
            row["confidence"],
            f"{float(row['minutes']):g} min ({row['confidence']} confidence): {row['source']}",
        )
        for row in csv.DictReader(lines)
    )


def setup_minutes(
    provider: npt.NDArray[np.str_] | Factor,
    instance_type: npt.NDArray[np.str_],
    *,
    override: float | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.object_]]:
    """Setup minutes and their source per row (rule by rule over whole columns); ``provider``
    may be the column's factor (a ranking's, computed once)."""
    n = len(instance_type)
    prov = lowered(provider)
    itype = np.asarray(instance_type, dtype=str)
    rule_index = np.full(n, -1, dtype=np.int64)
    table = rules()
    for k, rule in enumerate(table):
        todo = rule_index < 0
        if rule.provider != "*":
            todo &= prov.equals(rule.provider)
        if rule.instance != "*" and todo.any():
            todo[todo] = pattern_mask(itype[todo], rule.instance)
        rule_index[todo] = k
    # The table ends with a "*,*" row, so every row has a rule.
    minutes = np.array([r.minutes for r in table])[rule_index]
    source = np.array([r.source for r in table], dtype=object)[rule_index]
    if override is not None:
        check_setup_minutes(override)
        yours = ~prov.equals("local")
        minutes = np.where(yours, override, minutes)
        source = np.where(yours, OVERRIDE_SOURCE, source)
    return minutes, source


def setup_time(
    provider: str, instance_type: str = "", *, override: float | None = None
) -> SetupTime:
    """The setup time of one machine (``instance_type`` "" = the provider's default)."""
    minutes, source = setup_minutes(
        np.array([provider]), np.array([instance_type]), override=override
    )
    return SetupTime(float(minutes[0]), str(source[0]))
