"""`gpucost explain`: every $/job term of one plan, with its units, its arithmetic and the date of
the prices behind it. Reads a plan file, or plans on the spot from the same options as
`gpucost plan`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpucost.cli import add_command
from gpucost.cli.plan import add_job_arguments, build_advice, chosen_plan
from gpucost.envelope import add_format_argument, print_document
from gpucost.format import hours, usd
from gpucost.planfile import Plan, load_plan


def register(sub: Any) -> None:
    p = add_command(
        sub, "explain",
        description="Explain a plan file (`gpucost explain plan.toml`), or the plan `gpucost "
        "plan` would pick for the same options (`gpucost explain --profile P --gpu G ...`).",
    )
    p.add_argument("plan_file", nargs="?", metavar="PLAN_TOML", help="a plan file")
    add_job_arguments(p)
    add_format_argument(p, ("text", "json"))
    p.set_defaults(handler=run)


def _usd(x: float) -> str:
    return usd(x, exact=True)


def _dur(value: float) -> str:
    return hours(value, exact=True)


def explain_lines(plan: Plan) -> list[str]:
    """The explanation of one plan, line by line."""
    o, j, w, e, d = plan.offer, plan.job, plan.workload, plan.estimate, plan.disk
    nodes = o.nodes
    group_hr = o.price_hr * nodes
    compute_h = e.compute_usd / group_hr if group_hr > 0 else 0.0
    setup_h = e.setup_usd / group_hr if group_hr > 0 else 0.0
    samples = plan.total_samples or 0.0
    lines = [
        f"plan {j.name!r}: {nodes} x {o.provider} {o.instance_type}"
        + (f" ({o.region})" if o.region else "")
        + f", {o.gpu_count:g}x {o.gpu} per node, {o.market}",
        f"prices: {o.price_source or 'unknown source'} dated {o.price_date or 'unknown'}; "
        f"${o.price_hr:.4f}/h per node, ${group_hr:.4f}/h for the group",
        f"workload: {samples:,.0f} {w.sample_unit} at {w.throughput:,.1f} {w.sample_unit}/s "
        f"({w.throughput_source or 'source not given'})",
        "",
        f"{'term':<14}{'USD':>12}  how",
    ]

    def term(name: str, amount: float, how: str) -> None:
        lines.append(f"{name:<14}{_usd(amount):>12}  {how}")

    term(
        "compute",
        e.compute_usd,
        f"{nodes} node(s) x ${o.price_hr:.4f}/h x {_dur(compute_h)} of compute "
        f"({samples:,.0f} / {w.throughput:,.1f} per s)",
    )
    term(
        "setup",
        e.setup_usd,
        f"{nodes} node(s) x ${o.price_hr:.4f}/h x {_dur(setup_h)} (provisioning, image, "
        f"{j.data_gb:g} GB data download)",
    )
    term(
        "storage",
        e.storage_usd,
        f"{nodes} x {d.size_gb:g} GB allocated x ${d.storage_gb_month:g}/GB-month / "
        f"{d.month_hours:g} h x {_dur(e.hours)}",
    )
    out_gb = j.checkpoint_gb + j.results_gb
    term(
        "egress",
        e.egress_usd,
        f"{out_gb:g} GB out (final checkpoint {j.checkpoint_gb:g} GB + results "
        f"{j.results_gb:g} GB)" + (f" at ${e.egress_usd / out_gb:.4g}/GB" if out_gb else ""),
    )
    in_gb = j.data_gb * nodes
    term(
        "ingress",
        e.ingress_usd,
        f"{in_gb:g} GB in ({j.data_gb:g} GB x {nodes} node(s))"
        + (", again after each interruption" if plan.spot.interruption_rate_per_hr else "")
        + (" - free on this provider" if e.ingress_usd == 0 else ""),
    )
    ck = plan.checkpoint
    if ck.interval_minutes:
        how = (
            f"a {j.checkpoint_gb:g} GB checkpoint every {ck.interval_minutes:.1f} min of "
            f"work (Young/Daly) to {ck.target}"
        )
    elif ck.enabled and ck.every_epochs:
        each = "every epoch" if ck.every_epochs == 1 else f"every {ck.every_epochs:g} epochs"
        how = f"a checkpoint {each} to {ck.target}"
    else:
        how = "no periodic checkpoints" + ("" if not ck.enabled else f" (to {ck.target})")
    term("checkpoints", e.checkpoint_usd, how)
    rate = plan.spot.interruption_rate_per_hr
    term(
        "spot rework",
        e.spot_rework_usd,
        f"expected lost work and restarts at {rate:.4g} interruptions/h per node"
        + (f" ({plan.spot.rate_source})" if plan.spot.rate_source else "")
        if rate > 0
        else "not interruptible: none",
    )
    lines.append(f"{'total':<14}{_usd(e.cost_usd):>12}  expected, over {_dur(e.hours)} wall clock")
    lines += [
        "",
        f"safety: the executor stops at {plan.safety.timeout_hours:g} h or at the "
        f"{plan.budget_cap_text()}; throughput checked on arrival within "
        f"{plan.safety.verify_margin_pct:g} % ({plan.safety.verify_action})",
    ]
    if o.market == "spot":
        lines.append(
            f"spot: wait up to {plan.spot.max_wait_capacity_hours:g} h for capacity, "
            f"then {plan.spot.fallback}"
            + (
                f" at ${o.on_demand_price_hr:.4f}/h per node"
                if o.on_demand_price_hr is not None
                else ""
            )
        )
    idle = plan.idle
    be = f"; break-even {idle.breakeven_hours:g} h idle" if idle.breakeven_hours is not None else ""
    lines.append(f"after the job: {idle.policy}{be}")
    if plan.assumptions.notes:
        lines += ["", "assumptions:"] + [f"  - {n}" for n in plan.assumptions.notes]
    return lines


def run(args: argparse.Namespace) -> int:
    if args.plan_file:
        plan = load_plan(args.plan_file)
    else:
        advice = build_advice(args)
        plan = chosen_plan(args, advice)
    if args.format == "json":
        # the plan file's own document (every term, unit and price date) and the lines above
        print_document("explain", {"plan": plan.to_dict(), "lines": explain_lines(plan)})
        return 0
    sys.stdout.write("\n".join(explain_lines(plan)) + "\n")
    return 0
