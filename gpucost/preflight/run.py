"""Run the pre-flight checks on a plan file and collect a report.

Problems with the inputs themselves (a plan file that does not load, a bad policy or baseline)
become results too, with exit code 2, so the report is written whatever goes wrong.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path
from typing import Any

from gpucost._io import parse_json, parse_toml, read_text
from gpucost.errors import InputError, PlanFileError, PolicyError
from gpucost.limits import MAX_RUN_FILE_BYTES
from gpucost.planfile import parse_plan, read_plan_text
from gpucost.preflight.checks import CHECK_IDS, CheckResult, Context, run_checks
from gpucost.preflight.policy import Policy, load_policy
from gpucost.preflight.report import REPORT_SCHEMA, PreflightReport


def _input_problem(check_id: str, title: str, err: InputError, file: str | None) -> CheckResult:
    return CheckResult(check_id, title, "fail", "error", err.message, err.hint or "",
                       exit_code=2, file=file)


def load_baseline(path: str | os.PathLike[str]) -> float:
    """Estimated USD for the job from a previous ``gpucost preflight --format json`` report."""
    p = Path(path)
    hint = "give the JSON report of an earlier run: gpucost preflight plan.toml --format json " \
           "--output old.json"
    text = read_text(p, what="baseline file", error=InputError, max_bytes=MAX_RUN_FILE_BYTES,
                     missing_hint=hint)
    doc = parse_json(text, origin=f"baseline file {p}", error=InputError)
    if not isinstance(doc, dict) or doc.get("schema") != REPORT_SCHEMA:
        raise InputError(f"baseline file {p} is not a gpucost preflight report", hint=hint)
    estimate = doc.get("estimate")
    cost = estimate.get("cost_usd") if isinstance(estimate, dict) else None
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
        raise InputError(f"baseline file {p} has no estimate.cost_usd (its plan did not load)",
                         hint="use a baseline report from a plan that loaded")
    return float(cost)


def _missing_timeout(text: str) -> bool:
    try:
        doc = parse_toml(text, origin="plan", error=PlanFileError)
    except PlanFileError:
        return False
    safety = doc.get("safety")
    return isinstance(safety, dict) and "timeout_hours" not in safety


def run_preflight(plan_path: str | os.PathLike[str], *,
                  policy_path: str | os.PathLike[str] | None = None,
                  baseline_path: str | os.PathLike[str] | None = None,
                  today: dt.date | None = None,
                  now: dt.datetime | None = None) -> PreflightReport:
    now = now or dt.datetime.now(dt.UTC)
    today = today or now.date()
    shown = str(plan_path)
    problems: list[CheckResult] = []
    policy = Policy()
    if policy_path is not None:
        try:
            policy = load_policy(policy_path, CHECK_IDS)
        except PolicyError as err:
            problems.append(_input_problem("policy-file", "Policy file", err, str(policy_path)))
    baseline: float | None = None
    if baseline_path is not None:
        try:
            baseline = load_baseline(baseline_path)
        except InputError as err:
            problems.append(_input_problem("baseline", "Baseline", err, str(baseline_path)))
    base: dict[str, Any] = {"plan_path": shown, "policy": policy.source, "today": today,
                            "generated_at": now, "baseline_path":
                            None if baseline_path is None else str(baseline_path)}
    path = Path(plan_path)
    try:
        text = read_plan_text(path)
    except PlanFileError as problem:
        return PreflightReport(**base, plan=None,
                               results=(*problems, _input_problem("plan-file", "Plan file",
                                                                  problem, shown)))
    try:
        plan = parse_plan(text, origin=shown)
    except PlanFileError as err:
        if _missing_timeout(text):
            # The one safety limit that must never be silently absent: say so in its own words.
            result = CheckResult("timeout", "Timeout", "fail", "error",
                                 f"{shown}: [safety] timeout_hours is missing: nothing would "
                                 "stop a hung run from billing forever",
                                 "add timeout_hours under [safety], about 1.5x [estimate] hours",
                                 exit_code=2, file=shown)
        else:
            result = _input_problem("plan-file", "Plan file", err, shown)
        return PreflightReport(**base, plan=None, results=(*problems, result))
    if problems:
        return PreflightReport(**base, plan=plan, results=tuple(problems))
    ctx = Context(plan=plan, plan_path=path, plan_text=text, policy=policy, today=today,
                  display_path=shown, baseline_cost_usd=baseline)
    return PreflightReport(**base, plan=plan, results=tuple(run_checks(ctx)),
                           baseline_cost_usd=baseline)
