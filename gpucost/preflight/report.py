"""The pre-flight report and its formats: a table for people, versioned JSON for machines,
markdown for a PR comment, GitHub annotations (plus the job summary), JUnit XML for other CI.

Exit code of a report: 2 when an input was bad, else 3 when prices are stale or a check broke,
else 1 when an error-level check or a policy threshold failed, else 0. Input comes first
because nothing else can be trusted without it; stale prices before budgets because every
dollar figure rests on them.
"""

from __future__ import annotations

import datetime as dt
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucost._io import atomic_write_text
from gpucost.envelope import dumps, envelope
from gpucost.format import hours as fmt_hours
from gpucost.format import usd_text as fmt_usd

if TYPE_CHECKING:
    from gpucost.planfile import Plan
    from gpucost.preflight.checks import CheckResult

REPORT_SCHEMA = "gpucost-preflight"  # the envelope's schema for kind "preflight"
REPORT_SCHEMA_VERSION = 1
FORMATS = ("table", "json", "markdown", "github", "junit")
_EXIT_PRIORITY = (2, 3, 1)
_STATUS = {0: "passed", 1: "failed", 2: "input-error", 3: "stale-or-internal-error"}
_MARK = {"error": "❌", "warning": "⚠️", "pass": "✅", "skip": "⏭️"}
_WORD = {"error": "FAIL", "warning": "WARN", "pass": "ok", "skip": "skip"}


def _kind(r: CheckResult) -> str:
    """error | warning | pass | skip: what a result amounts to."""
    return r.severity if r.status == "fail" else r.status


@dataclass(frozen=True)
class PreflightReport:
    plan_path: str  # as given on the command line
    policy: str  # the policy file, or "defaults"
    today: dt.date
    generated_at: dt.datetime
    baseline_path: str | None
    plan: Plan | None  # None when the plan file did not load
    results: tuple[CheckResult, ...]
    baseline_cost_usd: float | None = None

    @property
    def exit_code(self) -> int:
        codes = {r.exit_code for r in self.results}
        return next((c for c in _EXIT_PRIORITY if c in codes), 0)

    @property
    def status(self) -> str:
        return _STATUS[self.exit_code]

    def counts(self) -> dict[str, int]:
        kinds = [_kind(r) for r in self.results]
        return {"passed": kinds.count("pass"), "errors": kinds.count("error"),
                "warnings": kinds.count("warning"), "skipped": kinds.count("skip")}

    def ordered(self) -> list[CheckResult]:
        """Errors first, then warnings, passes, skips; check order within each."""
        rank = {"error": 0, "warning": 1, "pass": 2, "skip": 3}
        return sorted(self.results, key=lambda r: rank[_kind(r)])

    def estimate(self) -> dict[str, float] | None:
        if self.plan is None:
            return None
        est, offer = self.plan.estimate, self.plan.offer
        return {"cost_usd": est.cost_usd, "hours": est.hours,
                "hourly_usd": offer.price_hr * offer.nodes}

    def baseline(self) -> dict[str, Any] | None:
        if self.baseline_cost_usd is None or self.plan is None:
            return None
        old, new = self.baseline_cost_usd, self.plan.estimate.cost_usd
        return {"path": self.baseline_path, "cost_usd": old, "change_usd": new - old,
                "change_pct": None if old <= 0 else (new - old) / old * 100}

    def plan_summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {"path": self.plan_path}
        if self.plan is not None:
            job, offer = self.plan.job, self.plan.offer
            summary.update(name=job.name, provider=offer.provider, region=offer.region,
                           instance_type=offer.instance_type, gpu=offer.gpu,
                           gpu_count=offer.gpu_count, nodes=offer.nodes, market=offer.market,
                           price_date=offer.price_date or None)
        return summary

    def to_dict(self) -> dict[str, Any]:
        return envelope("preflight", {
            "today": self.today.isoformat(),
            "plan": self.plan_summary(),
            "estimate": self.estimate(),
            "baseline": self.baseline(),
            "policy": self.policy,
            "summary": {"status": self.status, "exit_code": self.exit_code, **self.counts()},
            "checks": [r.to_dict() for r in self.results],
        }, schema_version=REPORT_SCHEMA_VERSION, generated_at=self.generated_at)


def _headline(report: PreflightReport) -> str:
    n = report.counts()
    return (f"{report.status} (exit {report.exit_code}): {n['passed']} passed, {n['errors']} "
            f"failed, {n['warnings']} warning(s), {n['skipped']} skipped")


def _plan_line(report: PreflightReport) -> str:
    plan = report.plan
    if plan is None:
        return f"plan {report.plan_path}: not loaded"
    job, offer, est = plan.job, plan.offer, plan.estimate
    where = f"{offer.provider} {offer.instance_type}" + (f" in {offer.region}"
                                                         if offer.region else "")
    line = (f"plan {report.plan_path}: {job.name!r} on {where} ({offer.gpu_count:g}x {offer.gpu}"
            f" x {offer.nodes} node(s), {offer.market}): estimated {fmt_usd(est.cost_usd)}, "
            f"{fmt_hours(est.hours)}")
    if offer.price_date:
        line += f", prices of {offer.price_date}"
    base = report.baseline()
    if base is not None:
        pct = base["change_pct"]
        line += (f"; baseline {fmt_usd(base['cost_usd'])}"
                 + ("" if pct is None else f" ({pct:+.1f} %)"))
    return line


def render_json(report: PreflightReport) -> str:
    return dumps(report.to_dict())


def render_table(report: PreflightReport, *, width: int | None = 110,
                 color: bool = False) -> str:
    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system="auto" if color else None,
                      force_terminal=color, highlight=False, emoji=False)
    console.print(f"gpucost preflight: {_plan_line(report)}", markup=False)
    table = Table(show_lines=False, expand=False)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("result")
    style = {"error": "bold red", "warning": "yellow", "pass": "green", "skip": "dim"}
    for r in report.ordered():
        kind = _kind(r)
        cell = _escape_markup(r.message)
        if r.status == "fail" and r.fix:
            cell += f"\n[bold]fix:[/] {_escape_markup(r.fix)}"
        table.add_row(f"[{style[kind]}]{_WORD[kind]}[/]", r.id, cell)
    console.print(table)
    console.print(_headline(report), markup=False)
    return buffer.getvalue()


def _escape_markup(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _md_cell(text: str) -> str:
    # Any line break (\r, \u2028 ...) would end the table row.
    return " ".join(text.splitlines()).replace("|", "\\|")


def render_markdown(report: PreflightReport) -> str:
    mark = "✅" if report.exit_code == 0 else "❌"
    lines = [f"## {mark} gpucost preflight: {report.status}", "",
             _md_cell(_plan_line(report)).replace(f"plan {report.plan_path}",
                                                  f"Plan `{report.plan_path}`", 1), "",
             "| | Check | Result | Fix |", "|---|---|---|---|"]
    for r in report.ordered():
        kind = _kind(r)
        fix = r.fix if r.status == "fail" else ""
        lines.append(f"| {_MARK[kind]} | `{r.id}` | {_md_cell(r.message)} | {_md_cell(fix)} |")
    lines += ["", f"**{_headline(report)}**", ""]
    return "\n".join(lines)


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: PreflightReport) -> str:
    """Workflow commands: one annotation per failed check, then a one-line summary."""
    lines = []
    for r in report.ordered():
        if r.status != "fail":
            continue
        level = "error" if r.severity == "error" or r.exit_code else "warning"
        props = [f"file={_gh_prop(r.file or report.plan_path)}"]
        if r.line is not None:
            props.append(f"line={r.line}")
        props.append(f"title={_gh_prop(f'gpucost preflight: {r.id}')}")
        body = r.message + (f". Fix: {r.fix}" if r.fix else "")
        body = " ".join(body.splitlines())  # one annotation per line, whatever the text
        lines.append(f"::{level} {','.join(props)}::{_gh_data(body)}")
    lines.append(f"gpucost preflight: {_headline(report)}")
    return "\n".join(lines) + "\n"


def append_step_summary(report: PreflightReport, path: str | os.PathLike[str]) -> None:
    """Add the markdown report to GitHub's job summary file (kept: earlier steps wrote it)."""
    target = Path(path)
    before = target.read_text(encoding="utf-8") if target.exists() else ""
    atomic_write_text(target, before + render_markdown(report))


def render_junit(report: PreflightReport) -> str:
    import xml.etree.ElementTree as ET

    n = report.counts()
    failures = sum(1 for r in report.results if r.status == "fail" and r.exit_code == 1)
    errors = sum(1 for r in report.results if r.status == "fail" and r.exit_code in (2, 3))
    attrs = {"name": f"gpucost preflight {report.plan_path}", "tests": str(len(report.results)),
             "failures": str(failures), "errors": str(errors), "skipped": str(n["skipped"]),
             "timestamp": report.generated_at.strftime("%Y-%m-%dT%H:%M:%S")}
    root = ET.Element("testsuites", {k: attrs[k] for k in ("name", "tests", "failures",
                                                           "errors", "skipped")})
    suite = ET.SubElement(root, "testsuite", attrs)
    for r in report.results:
        case = ET.SubElement(suite, "testcase", {"classname": "gpucost.preflight",
                                                 "name": r.id, "time": "0"})
        if r.status == "skip":
            ET.SubElement(case, "skipped", {"message": r.message})
        elif r.status == "fail" and r.exit_code:
            tag = "failure" if r.exit_code == 1 else "error"
            element = ET.SubElement(case, tag, {"type": r.severity, "message": r.message})
            element.text = f"Fix: {r.fix}" if r.fix else None
        elif r.status == "fail":  # a warning that fails nothing
            out = ET.SubElement(case, "system-out")
            out.text = f"warning: {r.message}" + (f"\nFix: {r.fix}" if r.fix else "")
    ET.indent(root)
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            + ET.tostring(root, encoding="unicode") + "\n")


def render(report: PreflightReport, fmt: str) -> str:
    """The report in one of FORMATS, as text."""
    if fmt == "table":
        return render_table(report)
    if fmt == "json":
        return render_json(report)
    if fmt == "markdown":
        return render_markdown(report)
    if fmt == "github":
        return render_github(report)
    if fmt == "junit":
        return render_junit(report)
    raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
