"""`gpucost probe`: measure the close candidates for a job before committing to a long run.

    gpucost probe --epochs 10 --command "python train.py" [--top 3] [--dry-run]
    gpucost probe --plan a.toml --plan b.toml --plan c.toml --minutes 3 --probe-budget-usd 2

The logic is :mod:`gpucost.executor.probe`; this module parses and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpucost.cli import add_command
from gpucost.cli.numbers import count, positive
from gpucost.cli.plan import add_job_arguments, build_advice
from gpucost.envelope import add_format_argument, print_document
from gpucost.errors import InputError, PolicyViolation
from gpucost.executor.probe import (
    DEFAULT_BUDGET_USD,
    DEFAULT_MINUTES,
    DEFAULT_REPORTS,
    DEFAULT_TOP,
    Candidate,
    Outcome,
    Probe,
    Result,
    candidates_from_advice,
    candidates_from_files,
    engine_of,
    plan_probes,
)
from gpucost.executor.probe import run as run_probes
from gpucost.format import usd
from gpucost.limits import MAX_BUDGET_USD, MAX_DEADLINE_HOURS


def register(sub: Any) -> None:
    p = add_command(
        sub, "probe",
        description="When the cheapest plans' cost bands overlap, their order is within the "
        "prediction's error. probe runs the job's command on each (the plans the options "
        "below rank, or the plan files given with --plan) through the plan's own engine, until "
        "the job has made --reports throughput reports (gpucost.report) or --minutes of job "
        "time have passed; it records each median throughput in measurements.json, re-ranks "
        "the candidates by the $/job measured, and says what the probes cost against the "
        "difference they settled. Each probe is a run like any other (`gpucost ps`, `down`, "
        "`cleanup`), named RUN = probe-N-JOB-...; its plan is GPUCOST_HOME/probes/RUN.toml.",
    )
    add_job_arguments(p, pick=False)
    g = p.add_argument_group("the probes")
    g.add_argument("--plan", action="append", type=Path, metavar="PLAN_TOML",
                   help="probe this plan file (repeatable) instead of ranking the options above")
    g.add_argument("--top", type=count(1, 20), default=DEFAULT_TOP, metavar="K",
                   help=f"probe at most K plans: the cheapest and the next whose cost band "
                   f"overlaps its band, one per GPU and group size (default {DEFAULT_TOP})")
    g.add_argument("--reports", type=count(1, 1000), default=DEFAULT_REPORTS, metavar="N",
                   help="end a probe at the job's N-th throughput report, gpucost.report("
                   f"throughput=...), the median of which is kept (default {DEFAULT_REPORTS}; "
                   "--steps is the job's size here)")
    g.add_argument("--minutes", type=positive(MAX_DEADLINE_HOURS * 60), default=DEFAULT_MINUTES,
                   metavar="T", help="or after T minutes of job time, whichever comes first "
                   f"(default {DEFAULT_MINUTES:g})")
    g.add_argument("--probe-budget-usd", type=positive(MAX_BUDGET_USD),
                   default=DEFAULT_BUDGET_USD, metavar="USD",
                   help="refuse probes whose expected cost (at most: setup + T at the plan's "
                   f"price) takes the probes past USD (default {DEFAULT_BUDGET_USD:g})")
    g.add_argument("--dry-run", action="store_true",
                   help="print the probes and their expected cost; run nothing")
    add_format_argument(p, ("text", "json"))
    p.set_defaults(handler=run)


def _err(message: str) -> None:
    print(f"gpucost: {message}", file=sys.stderr, flush=True)


def _candidates(args: argparse.Namespace) -> tuple[list[Candidate], Any]:
    """The candidates and the request they were ranked from (None for plan files)."""
    if args.plan:
        return candidates_from_files(args.plan), None

    advice = build_advice(args)
    if not advice.ok:
        raise PolicyViolation(f"no plan meets the constraints ({advice.describe()})",
                              hint="; ".join(advice.relax) or "relax the constraints")
    if args.return_hours is not None and not args.return_hours >= 0:
        raise InputError(f"--return-hours must be >= 0, got {args.return_hours}")
    found = candidates_from_advice(
        advice, args.top, Path.cwd(), profile_ref=args.profile or advice.ranking.profile.name,
        command=args.command, name=args.name, expected_return_hours=args.return_hours,
        p_no_gpus=args.p_no_gpus, checkpoint_target=args.checkpoint_target)
    return found, advice.request


def run(args: argparse.Namespace) -> int:
    candidates, request = _candidates(args)
    probes = plan_probes(candidates, reports=args.reports, minutes=args.minutes,
                         budget_usd=args.probe_budget_usd)
    if args.dry_run:
        if args.format == "json":
            print_document("probe", _document(args, probes, None))
        else:
            sys.stdout.write("\n".join(_plan_lines(args, probes)) + "\n")
        return 0
    if all(p.refused for p in probes):
        raise PolicyViolation(f"no probe fits the probe budget of {args.probe_budget_usd:g} USD: "
                              f"{probes[0].refused}", hint="raise --probe-budget-usd, or "
                              "shorten --minutes; `--dry-run` shows each probe's cost")
    if args.format == "text":
        sys.stdout.write("\n".join(_plan_lines(args, probes)) + "\n")
        sys.stdout.flush()
    result = run_probes(probes, reports=args.reports, minutes=args.minutes, request=request,
                        echo=_err)
    if args.format == "json":
        print_document("probe", _document(args, probes, result))
    else:
        sys.stdout.write("\n".join(_result_lines(result)) + "\n")
    return result.exit_code


def _usd(x: float) -> str:
    return usd(x, exact=True)


def _plan_lines(args: argparse.Namespace, probes: list[Probe]) -> list[str]:
    ready = [p for p in probes if p.refused is None]
    lines = [f"{len(ready)} of {len(probes)} candidate(s) to probe, each until "
             f"{args.reports} throughput reports or {args.minutes:g} min of job time, under a "
             f"probe budget of {_usd(args.probe_budget_usd)}:"]
    for k, p in enumerate(probes, 1):
        c = p.candidate
        band = ("" if c.cost_low_usd is None or c.cost_high_usd is None else
                f" (band {_usd(c.cost_low_usd)}-{_usd(c.cost_high_usd)})")
        lines.append(f"  {k}. {c.label}: predicted {_usd(c.cost_usd)}/job{band}")
        if p.refused is not None:
            lines.append(f"     refused: {p.refused}")
        else:
            lines.append(f"     probe: at most {_usd(p.cost_usd)} ({p.setup_hours * 60:.0f} min "
                         f"setup + {args.minutes:g} min at {_usd(p.plan.offer.price_hr)}/h "
                         f"x {p.plan.offer.nodes}), through {engine_of(p.plan)}")
    lines.append(f"expected probe cost, at most: {_usd(sum(p.cost_usd for p in ready))}")
    return lines


def _outcome_line(k: int, o: Outcome) -> str:
    head = f"  {k}. {o.run_id} {o.state}, {_usd(o.spent_usd)} spent"
    if o.throughput is None:
        return f"{head}: nothing measured ({o.note})"
    planned = o.probe.candidate.plan.workload.throughput
    text = (f"{head}: median {o.throughput:,.1f} samples/s of {len(o.throughputs)} report(s) "
            f"vs {planned:,.1f} predicted ({(o.throughput / planned - 1) * 100:+.0f}%)")
    if o.measurement is not None:
        text += f"; measurement {o.measurement.id}"
    elif o.note:
        text += f"; {o.note}"
    return text


def _result_lines(result: Result) -> list[str]:
    index = {id(p): k for k, p in enumerate(result.probes, 1)}
    lines = ["probes:"]
    lines += [_outcome_line(index[id(o.probe)], o) for o in result.outcomes]
    lines += ["", "re-ranked with the measurements:"]
    for k, r in enumerate(result.ranked, 1):
        how = (f"measured at {r.throughput:,.1f} samples/s" if r.measured and r.throughput
               else "predicted, not measured")
        lines.append(f"  {k}. {_usd(r.cost_usd)}/job {r.candidate.label} ({how}; predicted "
                     f"{_usd(r.candidate.cost_usd)})")
    spent = f"the probes cost {_usd(result.spent_usd)}"
    settled, saved = result.settled_usd, result.saved_usd
    if settled is None:
        lines += ["", f"{spent}; fewer than two candidates were measured, so no difference "
                  "between them is settled"]
    else:
        lines += ["", f"{spent}; they settled a difference of {_usd(settled)}/job between the "
                  "first two measured"
                  + ("" if not saved else f", and picking by measurement saves {_usd(saved)}/job "
                     "over the plan predicted cheapest")]
    if result.cheapest_now is not None:
        row = result.cheapest_now
        lines.append(f"the request ranked again with the measurements: cheapest now "
                     f"{row.label()} at {_usd(row.cost_usd)}/job")
    return lines


def _probe_record(k: int, p: Probe) -> dict[str, Any]:
    c = p.candidate
    return {"candidate": k, "label": c.label, "source": c.source,
            "predicted_cost_usd": c.cost_usd, "cost_low_usd": c.cost_low_usd,
            "cost_high_usd": c.cost_high_usd, "provider": p.plan.offer.provider,
            "engine": engine_of(p.plan),
            "probe_cost_usd": p.cost_usd, "probe_hours": p.hours, "setup_hours": p.setup_hours,
            "refused": p.refused}


def _document(args: argparse.Namespace, probes: list[Probe],
              result: Result | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "dry_run": result is None, "reports": args.reports, "minutes": args.minutes,
        "probe_budget_usd": args.probe_budget_usd,
        "expected_cost_usd": sum(p.cost_usd for p in probes if p.refused is None),
        "probes": [_probe_record(k, p) for k, p in enumerate(probes, 1)],
    }
    if result is None:
        return doc
    index = {id(p): k for k, p in enumerate(probes, 1)}
    doc.update(
        outcomes=[{"candidate": index[id(o.probe)], "run_id": o.run_id, "state": o.state,
                   "throughput": o.throughput, "reports": list(o.throughputs),
                   "measurement_id": o.measurement.id if o.measurement else None,
                   "spent_usd": o.spent_usd, "measured_cost_usd": o.job_cost_usd,
                   "note": o.note or None} for o in result.outcomes],
        ranked=[{"candidate": index[id(next(p for p in probes if p.candidate is r.candidate))],
                 "label": r.candidate.label, "cost_usd": r.cost_usd, "measured": r.measured,
                 "throughput": r.throughput} for r in result.ranked],
        spent_usd=result.spent_usd, settled_usd=result.settled_usd,
        saved_usd=result.saved_usd,
        cheapest_now=None if result.cheapest_now is None else {
            "label": result.cheapest_now.label(), "cost_usd": result.cheapest_now.cost_usd},
    )
    return doc
