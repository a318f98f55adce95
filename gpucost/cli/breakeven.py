"""`gpucost breakeven`: stop or destroy a rented machine between runs. The defaults taken from
an offer or a provider are :mod:`gpucost.planning.breakeven`'s: this module parses and prints."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from gpucost.cli import add_command
from gpucost.cli.numbers import number
from gpucost.envelope import add_format_argument, print_document
from gpucost.format import usd
from gpucost.limits import (
    MAX_BUDGET_USD,
    MAX_DATA_GB,
    MAX_DEADLINE_HOURS,
    MAX_PRICE_HR_USD,
    MAX_STORAGE_USD_GB_MONTH,
    MAX_TRANSFER_USD_GB,
)
from gpucost.planning.breakeven import (
    GivenFigures,
    breakeven_defaults,
    machine_breakeven,
    offer_terms,
)
from gpucost.pricing.snapshot import load_snapshots, merge_offers


def register(sub: Any) -> None:
    p = add_command(
        sub, "breakeven",
        description="A stopped machine still bills its disk by allocated size; a destroyed one "
        "must be rebuilt (setup time at the running rate + data pulled in again). Prints the "
        "stopped $/h, the rebuild cost, the break-even idle time and a recommendation. "
        "Example (a measured 8x RTX 4090): --running-hr 3.4828 --disk-gb 250 --gb-month 0.20 "
        "--month-hours 720 --setup-min 15 --ingress-gb 43 --ingress-per-gb 0.003",
    )
    p.add_argument(
        "--running-hr",
        type=number(0, MAX_PRICE_HR_USD),
        metavar="USD",
        help="running price of the machine, USD/h (or take it from --offer)",
    )
    p.add_argument(
        "--offer",
        metavar="INSTANCE_TYPE",
        help="take the running $/h, disk $/GB-month, month length and inbound $/GB from this "
        "instance type in the price snapshots (the cheapest match; narrow with --provider)",
    )
    p.add_argument(
        "--prices",
        action="append",
        metavar="PATH",
        help="price snapshot file or folder for --offer (default: newest per source)",
    )
    p.add_argument(
        "--disk-gb", type=number(0, MAX_DATA_GB), required=True, help="allocated disk, GB"
    )
    p.add_argument(
        "--provider",
        help="take --gb-month, --month-hours, --ingress-per-gb and --setup-min defaults from "
        "this provider's list prices and setup time (`gpucost prices show --rates`)",
    )
    p.add_argument(
        "--gb-month",
        type=number(0, MAX_STORAGE_USD_GB_MONTH),
        metavar="USD",
        help="disk price, USD per GB-month",
    )
    p.add_argument(
        "--month-hours",
        type=number(24 * 28, 24 * 31),  # a month, in hours
        help="hours per billing month: 730 (clouds) or 720 (30-day marketplaces)",
    )
    p.add_argument(
        "--setup-min",
        type=float,
        help="minutes from creating a machine to training on it (default: the provider's and "
        "instance family's setup time from a sourced table)",
    )
    p.add_argument(
        "--ingress-gb",
        type=number(0, MAX_DATA_GB),
        default=0.0,
        help="GB pulled in again after a rebuild (data, image, checkpoints)",
    )
    p.add_argument(
        "--ingress-per-gb",
        type=number(0, MAX_TRANSFER_USD_GB),
        metavar="USD",
        help="inbound USD per GB",
    )
    p.add_argument(
        "--p-no-gpus",
        type=number(0, 1),
        default=0.0,
        metavar="P",
        help="probability the GPUs are gone when you restart a stopped machine (0..1, default 0)",
    )
    p.add_argument(
        "--lost-gpu-cost",
        type=number(0, MAX_BUDGET_USD),
        metavar="USD",
        help="what it costs when they are gone (default: a rebuild elsewhere)",
    )
    p.add_argument(
        "--idle-hours",
        type=number(0, MAX_DEADLINE_HOURS),
        help="your expected idle gap, for a stop/destroy verdict",
    )
    add_format_argument(p, ("text", "json"))
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    provider = (args.provider or "").lower()
    offer = (offer_terms(merge_offers(load_snapshots(args.prices)), args.offer, provider)
             if args.offer else None)
    given = GivenFigures(running_hr=args.running_hr, gb_month=args.gb_month,
                         month_hours=args.month_hours, ingress_per_gb=args.ingress_per_gb,
                         setup_min=args.setup_min)
    b, assumptions = machine_breakeven(
        breakeven_defaults(provider, offer),
        given,
        disk_gb=args.disk_gb,
        ingress_gb=args.ingress_gb,
        p_no_gpus=args.p_no_gpus,
        lost_gpus_usd=args.lost_gpu_cost,
    )
    if args.format == "json":

        doc = dataclasses.asdict(b)
        if args.idle_hours is not None:
            doc["idle_hours"] = args.idle_hours
            doc["policy"] = b.policy(args.idle_hours)
        doc["advice"] = b.advice(args.idle_hours)
        doc["assumptions"] = list(assumptions)
        print_document("breakeven", doc)
        return 0

    be = b.breakeven_hours
    lines = [
        f"running:    ${b.running_usd_hr:.4f}/h",
        f"stopped:    ${b.stopped_usd_hr:.4f}/h  = {b.disk_gb:g} GB x ${b.storage_usd_gb_month:g}"
        f"/GB-month / {b.month_hours:g} h per month (disk is billed by allocated size)",
        "destroyed:  $0.0000/h",
        f"rebuild:    {usd(b.rebuild_usd, exact=True)}  = {b.setup_hours * 60:g} min setup x "
        f"${b.running_usd_hr:.4f}/h ({usd(b.setup_usd, exact=True)}) + {b.ingress_gb:g} GB in x "
        f"${b.ingress_usd_gb:g}/GB ({usd(b.ingress_usd, exact=True)})",
    ]
    if b.p_no_gpus > 0:
        lines.append(
            f"GPU risk:   {b.p_no_gpus:.0%} x {usd(b.lost_gpus_usd, exact=True)} = "
            f"{usd(b.expected_loss_usd, exact=True)} expected, paid by stopping"
        )
    lines.append(
        "break-even: " + ("never (stopping is free)" if be == float("inf") else f"{be:.1f} h idle")
    )
    lines.append(f"advice:     {b.advice(args.idle_hours)}")
    lines += [f"assumed:    {n}" for n in assumptions]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
