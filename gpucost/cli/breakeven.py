"""`gpucost breakeven`: stop or destroy a rented machine between runs."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucost.cli.numbers import number
from gpucost.envelope import add_format_argument
from gpucost.limits import (
    MAX_BUDGET_USD,
    MAX_DATA_GB,
    MAX_DEADLINE_HOURS,
    MAX_PRICE_HR_USD,
    MAX_STORAGE_USD_GB_MONTH,
    MAX_TRANSFER_USD_GB,
)

if TYPE_CHECKING:
    from gpucost.model.setup_times import SetupTime

def register(sub: Any) -> None:
    p = sub.add_parser(
        "breakeven",
        help="stop or destroy a machine between runs: break-even idle hours",
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


def _offer_row(instance_type: str, provider: str, prices: list[str] | None) -> dict[str, Any]:
    """The cheapest on-demand offer of an instance type in the price snapshots."""
    import numpy as np

    from gpucost.errors import NoOffersError
    from gpucost.pricing.snapshot import load_snapshots, merge_offers

    offers = merge_offers(load_snapshots(prices))
    mask = offers["instance_type"] == instance_type
    if provider:
        mask &= offers["provider"] == provider
    if not mask.any():
        where = f" from {provider}" if provider else ""
        raise NoOffersError(
            f"no offer of instance type {instance_type!r}{where} in the price snapshots",
            hint="check the name with `gpucost compare --format csv`, or give --running-hr",
        )
    found = offers.select(mask)
    best = int(np.argmin(found["price_hr"]))
    return found.to_records()[best]


@dataclass(frozen=True)
class _Defaults:
    """What --offer and --provider say when the user does not: one rule for each figure."""

    provider: str
    running_hr: float | None
    gb_month: float | None
    month_hours: float
    ingress_per_gb: float
    setup: SetupTime
    gb_month_note: str | None  # said when the figure was assumed, not known
    ingress_note: str | None


def _defaults(args: argparse.Namespace) -> _Defaults:
    """Disk, month, inbound and setup figures from the offer (--offer), else the provider's
    rates (gpucost.pricing.rates, the table every snapshot is priced with), else unknown."""
    import math

    from gpucost.model.economics import DEFAULT_STORAGE_USD_GB_MONTH
    from gpucost.model.setup_times import setup_time
    from gpucost.pricing.rates import month_hours_for, rates_for

    provider = (args.provider or "").lower()
    row = _offer_row(args.offer, provider, args.prices) if args.offer else None
    if row is not None:
        provider = str(row["provider"])
    rates = rates_for(provider)
    gb_month_note = ingress_note = None
    # A stopped disk: the provider's stopped price where it differs, else the offer's.
    gb_month = rates.storage_stopped_gb_month if rates else None
    if gb_month is None and row is not None and math.isfinite(row["storage_gb_month"]):
        gb_month = float(row["storage_gb_month"])
    if gb_month is None and rates is not None:
        gb_month = rates.stopped_gb_month
    if gb_month is None and row is not None:
        gb_month = DEFAULT_STORAGE_USD_GB_MONTH  # as compare and plan price this offer
        gb_month_note = f"disk ${gb_month:g}/GB-month: the offer gives no disk price"
    month = month_hours_for(provider)
    if row is not None and math.isfinite(row["month_hours"]) and row["month_hours"] > 0:
        month = float(row["month_hours"])
    ingress = rates.ingress_gb if rates and rates.ingress_gb is not None else None
    if row is not None and math.isfinite(row["ingress_gb"]):
        ingress = float(row["ingress_gb"])
    if ingress is None:
        ingress = 0.0
        if provider:
            ingress_note = f"inbound data free: no inbound price for {provider}"
    return _Defaults(
        provider=provider,
        running_hr=None if row is None else float(row["price_hr"]),
        gb_month=gb_month,
        month_hours=month,
        ingress_per_gb=ingress,
        setup=setup_time(provider, "" if row is None else str(row["instance_type"])),
        gb_month_note=gb_month_note,
        ingress_note=ingress_note,
    )


def run(args: argparse.Namespace) -> int:
    from gpucost.errors import InputError
    from gpucost.model.economics import breakeven
    from gpucost.model.setup_times import check_setup_minutes

    defaults = _defaults(args)
    running = args.running_hr if args.running_hr is not None else defaults.running_hr
    if running is None:
        raise InputError(
            "the running price is missing", hint="give --running-hr USD or --offer INSTANCE_TYPE"
        )
    gb_month = args.gb_month if args.gb_month is not None else defaults.gb_month
    if gb_month is None:
        where = f"provider {defaults.provider!r} has no" if defaults.provider else "no"
        raise InputError(
            f"the disk price is missing: {where} disk price in gpucost's rates table",
            hint="give --gb-month USD (per GB-month)"
            + ("" if defaults.provider else ", --provider NAME or --offer INSTANCE_TYPE"),
        )
    month_hours = args.month_hours if args.month_hours is not None else defaults.month_hours
    ingress_per_gb = (
        args.ingress_per_gb if args.ingress_per_gb is not None else defaults.ingress_per_gb
    )
    if args.setup_min is not None:
        check_setup_minutes(args.setup_min)
        setup_min, setup_note = args.setup_min, None
    else:
        setup_min, setup_note = defaults.setup.minutes, f"setup {defaults.setup.source}"
    assumptions = [
        note
        for note, given in (
            (defaults.gb_month_note, args.gb_month),
            (defaults.ingress_note, args.ingress_per_gb),
            (setup_note, args.setup_min),
        )
        if note and given is None
    ]
    b = breakeven(
        running,
        args.disk_gb,
        gb_month,
        month_hours=month_hours,
        setup_minutes=setup_min,
        ingress_gb=args.ingress_gb,
        ingress_usd_gb=ingress_per_gb,
        p_no_gpus=args.p_no_gpus,
        lost_gpus_usd=args.lost_gpu_cost,
    )
    if args.format == "json":
        import dataclasses

        from gpucost.envelope import print_document

        doc = dataclasses.asdict(b)
        if args.idle_hours is not None:
            doc["idle_hours"] = args.idle_hours
            doc["policy"] = b.policy(args.idle_hours)
        doc["advice"] = b.advice(args.idle_hours)
        doc["assumptions"] = assumptions
        print_document("breakeven", doc)
        return 0
    from gpucost.format import usd

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
