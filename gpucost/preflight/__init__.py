"""Pre-flight checks for CI: catch the expensive mistakes before a GPU is billing.

>>> from gpucost.preflight import run_preflight
>>> report = run_preflight("plan.toml", policy_path="policy.toml")  # doctest: +SKIP
>>> report.exit_code, [r.id for r in report.results if r.status == "fail"]  # doctest: +SKIP
"""

from __future__ import annotations

from gpucost.errors import PolicyError
from gpucost.preflight.checks import CHECK_IDS, CHECKS, CheckResult
from gpucost.preflight.policy import Policy, load_policy
from gpucost.preflight.report import FORMATS, PreflightReport, render
from gpucost.preflight.run import load_baseline, run_preflight

__all__ = [
    "CHECKS",
    "CHECK_IDS",
    "FORMATS",
    "CheckResult",
    "Policy",
    "PolicyError",
    "PreflightReport",
    "load_baseline",
    "load_policy",
    "render",
    "run_preflight",
]
