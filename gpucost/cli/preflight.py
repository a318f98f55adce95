"""`gpucost preflight`: check a plan before a GPU is billing, with CI-friendly exit codes."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from typing import Any

from gpucost._io import atomic_write_text
from gpucost.cli import add_command
from gpucost.cli.outputs import check_output_file
from gpucost.errors import InputError
from gpucost.preflight.report import append_step_summary, render, render_table
from gpucost.preflight.run import run_preflight

_FORMATS = ("table", "json", "markdown", "github", "junit")


def register(sub: Any) -> None:
    p = add_command(
        sub, "preflight",
        description="Check a plan before a GPU is billing: budget and deadline, price age, "
        "memory fit, disk size, timeout, spot checkpointing, the CUDA architectures of the torch "
        "build, the __main__ guard of the entry script, the data-loader verdict, the dataset's "
        "region. Exit codes: 0 all passed, 1 a policy or error-level check failed, 2 usage or "
        "input error, 3 stale prices or internal error. The report is written before the exit.",
    )
    p.add_argument("plan", help="plan file (TOML), as written by `gpucost plan`")
    p.add_argument("--policy", metavar="FILE", help="policy TOML: max_job_usd, max_hourly_usd, "
                   "max_increase_pct, max_price_age_days, [skip] check = reason")
    p.add_argument("--baseline", metavar="FILE", help="JSON report of an earlier run: report "
                   "the change in estimated $/job")
    p.add_argument("--format", choices=_FORMATS, default="table",
                   help="output format (default: table); github also appends the markdown "
                   "report to $GITHUB_STEP_SUMMARY when set")
    p.add_argument("--json", dest="format", action="store_const", const="json",
                   help="same as --format json")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report here instead of "
                   "stdout (atomically)")
    p.add_argument("--today", metavar="YYYY-MM-DD", help="judge price age as of this date "
                   "(default: today, UTC)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.output:  # before the checks run: a report that cannot be written is a usage error
        check_output_file(args.output, what="preflight report", example="preflight.md")
    today = None
    if args.today is not None:
        try:
            today = dt.date.fromisoformat(args.today)
        except ValueError:
            raise InputError(f"--today {args.today!r} is not a date",
                             hint="write it as YYYY-MM-DD") from None
    report = run_preflight(args.plan, policy_path=args.policy, baseline_path=args.baseline,
                           today=today)
    if args.output:
        atomic_write_text(args.output, render(report, args.format))
        print(f"gpucost preflight: {report.status} (exit {report.exit_code}); report in "
              f"{args.output}", file=sys.stderr)
    elif args.format == "table":
        sys.stdout.write(render_table(report, width=None, color=sys.stdout.isatty()))
    else:
        sys.stdout.write(render(report, args.format))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if args.format == "github" and summary:
        append_step_summary(report, summary)
    return report.exit_code
