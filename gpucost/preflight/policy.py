"""The pre-flight policy: a team's thresholds, kept next to its code.

    schema = "gpucost-preflight-policy"     # optional
    schema_version = 1                      # optional
    max_job_usd = 500.0          # estimated USD for the whole job
    max_hourly_usd = 40.0        # USD per hour for the whole run (all nodes)
    max_increase_pct = 20.0      # over the --baseline estimate
    max_price_age_days = 30      # price data older than this is stale (exit 3)
    fail_on_warnings = false     # true: a warning fails the build too (exit 1)

    [skip]                       # checks not to run, each WITH the reason (shown in the report)
    dataset-region = "the data is replicated to every region we use"

A skip without a reason is an input error: a silenced check must say why.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from gpucost._io import parse_toml, read_text
from gpucost.errors import PolicyError as PolicyError  # re-exported: its old home
from gpucost.limits import MAX_POLICY_BYTES

POLICY_SCHEMA = "gpucost-preflight-policy"
DEFAULT_MAX_PRICE_AGE_DAYS = 30.0

_NUMBERS = ("max_job_usd", "max_hourly_usd", "max_increase_pct", "max_price_age_days")
_KEYS = frozenset({"schema", "schema_version", *_NUMBERS, "fail_on_warnings", "skip"})


@dataclass(frozen=True)
class Policy:
    max_job_usd: float | None = None
    max_hourly_usd: float | None = None
    max_increase_pct: float | None = None
    max_price_age_days: float = DEFAULT_MAX_PRICE_AGE_DAYS
    fail_on_warnings: bool = False
    skip: dict[str, str] = field(default_factory=dict)  # check id -> reason
    source: str = "defaults"


def load_policy(path: str | os.PathLike[str], known_checks: tuple[str, ...]) -> Policy:
    text = read_text(path, what="policy file", error=PolicyError, max_bytes=MAX_POLICY_BYTES,
                     missing_hint="see examples/policy.toml for one to start from")
    raw = parse_toml(text, origin=f"policy file {path}", error=PolicyError)
    return policy_from_dict(raw, known_checks, origin=str(path))


def policy_from_dict(raw: dict[str, Any], known_checks: tuple[str, ...], *,
                     origin: str = "policy") -> Policy:
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise PolicyError(f"{origin}: unknown key(s) {', '.join(map(repr, unknown))}",
                          hint="known: " + ", ".join(sorted(_KEYS)))
    if raw.get("schema", POLICY_SCHEMA) != POLICY_SCHEMA:
        raise PolicyError(f"{origin}: schema is {raw['schema']!r}, expected {POLICY_SCHEMA!r}")
    if raw.get("schema_version", 1) != 1:
        raise PolicyError(f"{origin}: schema_version {raw['schema_version']!r} is not 1",
                          hint="upgrade gpucost, or write schema_version = 1")
    numbers: dict[str, float] = {}
    for key in _NUMBERS:
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value < 0:
            raise PolicyError(f"{origin}: {key} must be a number >= 0, got {value!r}")
        numbers[key] = float(value)
    fail_on_warnings = raw.get("fail_on_warnings", False)
    if not isinstance(fail_on_warnings, bool):
        raise PolicyError(f"{origin}: fail_on_warnings must be true or false")
    return Policy(
        max_job_usd=numbers.get("max_job_usd"),
        max_hourly_usd=numbers.get("max_hourly_usd"),
        max_increase_pct=numbers.get("max_increase_pct"),
        max_price_age_days=numbers.get("max_price_age_days", DEFAULT_MAX_PRICE_AGE_DAYS),
        fail_on_warnings=fail_on_warnings,
        skip=_skips(raw.get("skip", {}), known_checks, origin),
        source=origin,
    )


def _skips(raw: Any, known_checks: tuple[str, ...], origin: str) -> dict[str, str]:
    example = 'add [skip] with one line per check: main-guard = "launched by torchrun only"'
    if isinstance(raw, list):
        raise PolicyError(f"{origin}: skip lists checks without reasons "
                          f"({', '.join(map(str, raw))})", hint=example)
    if not isinstance(raw, dict):
        raise PolicyError(f"{origin}: skip must be a table of check id = reason", hint=example)
    skips: dict[str, str] = {}
    for check, reason in raw.items():
        if check not in known_checks:
            raise PolicyError(f"{origin}: [skip] names unknown check {check!r}",
                              hint="checks: " + ", ".join(known_checks))
        if not isinstance(reason, str) or not reason.strip():
            raise PolicyError(f"{origin}: [skip] {check} has no reason",
                              hint=f'write {check} = "why this check does not apply"')
        skips[check] = reason.strip()
    return skips
