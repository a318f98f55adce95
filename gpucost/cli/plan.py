"""`gpucost plan`: recommend the cheapest plan meeting the deadline and the fastest within budget,
say why, and write the chosen one as a plan file for the executor and the pre-flight check."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from gpucost._io import atomic_write_text
from gpucost.cli import add_command
from gpucost.cli.jobargs import add_economics, add_prices, add_profile_and_job, request_from_args
from gpucost.cli.numbers import count, number, positive
from gpucost.cli.outputs import check_export_output, check_plan_output
from gpucost.envelope import add_format_argument, print_document
from gpucost.executor.skypilot_task import task_yaml as export_skypilot
from gpucost.format import usd
from gpucost.limits import MAX_BUDGET_USD, MAX_DEADLINE_HOURS, MAX_GPU_MEMORY_GB, MAX_NODES
from gpucost.model.economics import outlives_instance
from gpucost.planfile import save_plan
from gpucost.planning.advice import Advice, Choice, advise
from gpucost.planning.planbuild import plan_file


def add_job_arguments(p: argparse.ArgumentParser, *, pick: bool = True) -> None:
    """Profile, job size, constraints and job economics: shared by `plan`, `explain` and
    `probe` (which picks no plan: ``pick=False`` leaves --pick out)."""
    add_profile_and_job(p)
    c = p.add_argument_group("constraints")
    c.add_argument("--deadline-hours", type=positive(MAX_DEADLINE_HOURS), metavar="H",
                   help="finish within H hours")
    c.add_argument("--budget", type=positive(MAX_BUDGET_USD), metavar="USD",
                   help="spend at most this much")
    c.add_argument("--spot", action="store_true", help="allow spot/interruptible capacity")
    c.add_argument("--max-nodes", type=count(1, MAX_NODES), default=1,
                   help=f"consider 1..N nodes (default 1, at most {MAX_NODES:,})")
    c.add_argument("--min-gpu-memory", type=positive(MAX_GPU_MEMORY_GB), metavar="GB",
                   help="min memory per GPU, GB")
    c.add_argument("--region", action="append", help="region name or prefix (repeatable)")
    c.add_argument("--gpu", action="append", help="GPU name (repeatable)")
    c.add_argument("--provider", action="append", help="provider (repeatable)")
    e = p.add_argument_group("job economics")
    add_economics(e)
    e.add_argument(
        "--max-wait-hours",
        type=number(0, MAX_DEADLINE_HOURS),
        default=2.0,
        help="longest wait for spot capacity before falling back to on-demand (default 2)",
    )
    e.add_argument(
        "--p-no-capacity",
        type=number(0, 1),
        default=0.0,
        metavar="P",
        help="probability spot capacity is still gone after the longest wait, per "
        "interruption (0..1, default 0); prices the fallback to on-demand",
    )
    e.add_argument(
        "--return-hours",
        type=number(0, MAX_DEADLINE_HOURS),
        metavar="H",
        help="when you expect to come back after the job (for stop vs destroy)",
    )
    e.add_argument(
        "--p-no-gpus",
        type=number(0, 1),
        default=0.0,
        metavar="P",
        help="probability a stopped machine's GPUs are gone on restart (0..1)",
    )
    add_prices(e)
    w = p.add_argument_group("the plan")
    if pick:
        w.add_argument(
            "--pick",
            choices=("cheapest", "fastest"),
            default="cheapest",
            help="which recommendation becomes the plan (default cheapest)",
        )
    w.add_argument(
        "--command",
        default="python train.py",
        help='what the executor runs (default "python train.py")',
    )
    w.add_argument("--name", help="run name (default: the profile's name)")
    w.add_argument(
        "--checkpoint-target",
        default="local:checkpoints",
        help="local:<dir> or s3://bucket/prefix (default local:checkpoints); a spot plan "
        "resumes only from s3:// (a reclaimed instance takes its disk along), and is priced "
        "as restarting from zero without one",
    )


def register(sub: Any) -> None:
    p = add_command(
        sub, "plan",
        description="Enumerate offers x markets x node counts under your constraints, keep the "
        "Pareto front of (expected hours, expected cost), and recommend the cheapest plan that "
        "meets the deadline and the fastest within budget, with reasons. -o writes the chosen "
        "plan (--pick) as a plan file; `gpucost explain plan.toml` shows its every term.",
    )
    add_job_arguments(p)
    p.add_argument("--output", "-o", metavar="PLAN_TOML", help="write the plan file here")
    p.add_argument("--force", action="store_true",
                   help="let -o (and --export) replace an existing file that is not a gpucost "
                   "plan (a SkyPilot task gpucost wrote)")
    add_format_argument(p, ("text", "json"))
    p.add_argument(
        "--export",
        choices=("skypilot",),
        help="also write the plan as a SkyPilot task YAML (next to -o as NAME.sky.yaml, "
        "or to --export-out, or to stdout)",
    )
    p.add_argument("--export-out", metavar="FILE", help="where --export writes")
    p.set_defaults(handler=run)


def build_advice(args: argparse.Namespace) -> Advice:
    """The advice for the arguments (the plan and explain commands share it)."""
    request = request_from_args(args, market="any" if args.spot else "on-demand")
    # Spot runs resume only from checkpoints the plan keeps in an object store: priced so.
    economics = dataclasses.replace(
        request.economics, object_store_checkpoints=outlives_instance(args.checkpoint_target))
    return advise(dataclasses.replace(request, economics=economics))


def chosen_plan(args: argparse.Namespace, advice: Advice) -> Any:
    """The plan for ``--pick``; PolicyViolation (exit 1) saying what to relax if none fits
    (--return-hours is checked by its parser)."""
    return plan_file(advice, args.pick, profile_ref=args.profile, command=args.command,
                     name=args.name, expected_return_hours=args.return_hours,
                     p_no_gpus=args.p_no_gpus, checkpoint_target=args.checkpoint_target)


def _choice_text(title: str, choice: Choice) -> list[str]:
    row = choice.row
    lines = [
        f"{title}: {row.label()}",
        f"  {usd(row.cost_usd, exact=True)} expected, "
        f"{row.total_hours:.1f} h (price date {row.price_date})",
    ]
    lines += [f"  - {r}" for r in choice.reasons]
    return lines


def _export_target(args: argparse.Namespace) -> str | None:
    """Where --export writes: --export-out, else next to -o as NAME.sky.yaml, else stdout."""
    if args.export_out is not None:
        return str(args.export_out)
    if not args.output:
        return None
    out = Path(args.output)
    return str(out.with_name(out.stem + ".sky.yaml"))


def _export_skypilot(plan: Any, args: argparse.Namespace) -> None:
    target = _export_target(args)
    text = export_skypilot(plan, args.output)
    if target is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(target, text)
        print(f"wrote SkyPilot task {target}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if args.output:
        check_plan_output(args.output, force=args.force)
    if args.export == "skypilot" and (target := _export_target(args)) is not None:
        check_export_output(target, force=args.force)
    advice = build_advice(args)
    plan = chosen_plan(args, advice)
    assert advice.cheapest is not None and advice.fastest is not None
    if args.output:
        save_plan(plan, args.output)
    if args.export == "skypilot":
        _export_skypilot(plan, args)
        if not (args.output or args.export_out):
            return 0
    plans = advice.ranking.plans
    front = [plans.row(int(i)) for i in advice.pareto]
    if args.format == "json":
        doc = {
            "constraints": advice.describe(),
            "cheapest": {"row": advice.cheapest.index, "reasons": advice.cheapest.reasons},
            "fastest": {"row": advice.fastest.index, "reasons": advice.fastest.reasons},
            "pareto_front": [
                {"provider": r.provider, "instance_type": r.instance_type, "nodes": r.nodes,
                 "market": r.market, "total_hours": r.total_hours, "cost_usd": r.cost_usd}
                for r in front
            ],
            "unfit_total": len(advice.ranking.unfit),
            "pick": args.pick,
            "plan": plan.to_dict(),
            "written_to": args.output,
        }
        print_document("plan-advice", doc)
        return 0
    lines = [
        f"constraints: {advice.describe()}",
        f"job: {advice.ranking.job.description}; {int(advice.feasible.sum()):,} of "
        f"{len(advice.ranking):,} plans meet the constraints",
        "",
    ]
    lines += _choice_text("cheapest meeting the deadline", advice.cheapest)
    if advice.fastest.index != advice.cheapest.index:
        lines += ["", *_choice_text("fastest within budget", advice.fastest)]
    lines += ["", "Pareto front (no plan is both faster and cheaper):"]
    for r in front[:10]:
        lines.append(
            f"  {r.total_hours:8.1f} h  {usd(r.cost_usd, exact=True):>11}  "
            f"{r.nodes} x {r.provider} {r.instance_type} ({r.market})"
        )
    if advice.ranking.notes:  # what the ranking dropped, folded or defaulted, as in compare
        lines += ["", *(f"note: {n}" for n in advice.ranking.notes)]
    if len(advice.ranking.unfit):
        lines += ["", f"{len(advice.ranking.unfit):,} plans left out: the per-device batch fits "
                  "their GPU no way (`gpucost compare --show-unfit` lists them)"]
    lines += ["", f"the {args.pick} plan's limits: {plan.budget_cap_text()}; timeout "
              f"{plan.safety.timeout_hours:g} h"]
    if args.output:
        lines += [
            "",
            f"wrote {args.output} ({args.pick} plan); see every term with "
            f"`gpucost explain {args.output}`",
        ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
