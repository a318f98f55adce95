"""`gpucost breakeven`: stop or destroy a rented machine between runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpucost.envelope import add_format_argument

# Per-provider defaults for --provider: (USD per GB-month of disk, hours per month, USD per GB
# in). Public list prices: AWS gp3 $0.08, GCP pd-balanced $0.10, Azure Premium SSD ~$0.12
# (P-tiers vary), Vast.ai disk typically $0.10-0.20 in 30-day months, RunPod volume $0.10
# (running) / $0.20 (stopped), Lambda persistent storage $0.20. Ingress is free on clouds;
# Vast hosts charge their stated inbound $/GB (commonly ~$0.003).
PROVIDER_DEFAULTS: dict[str, tuple[float, float, float]] = {
    "aws": (0.08, 730.0, 0.0),
    "gcp": (0.10, 730.0, 0.0),
    "azure": (0.12, 730.0, 0.0),
    "lambda": (0.20, 730.0, 0.0),
    "runpod": (0.20, 730.0, 0.0),
    "vast": (0.20, 720.0, 0.003),
}


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
        type=float,
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
    p.add_argument("--disk-gb", type=float, required=True, help="allocated disk, GB")
    p.add_argument(
        "--provider",
        help="take --gb-month, --month-hours and --ingress-per-gb defaults from this "
        f"provider's list prices ({', '.join(sorted(PROVIDER_DEFAULTS))})",
    )
    p.add_argument("--gb-month", type=float, metavar="USD", help="disk price, USD per GB-month")
    p.add_argument(
        "--month-hours",
        type=float,
        help="hours per billing month: 730 (clouds) or 720 (30-day marketplaces)",
    )
    p.add_argument(
        "--setup-min",
        type=float,
        default=15.0,
        help="minutes from creating a machine to training on it (default 15)",
    )
    p.add_argument(
        "--ingress-gb",
        type=float,
        default=0.0,
        help="GB pulled in again after a rebuild (data, image, checkpoints)",
    )
    p.add_argument("--ingress-per-gb", type=float, metavar="USD", help="inbound USD per GB")
    p.add_argument(
        "--p-no-gpus",
        type=float,
        default=0.0,
        metavar="P",
        help="probability the GPUs are gone when you restart a stopped machine (0..1, default 0)",
    )
    p.add_argument(
        "--lost-gpu-cost",
        type=float,
        metavar="USD",
        help="what it costs when they are gone (default: a rebuild elsewhere)",
    )
    p.add_argument(
        "--idle-hours", type=float, help="your expected idle gap, for a stop/destroy verdict"
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


def run(args: argparse.Namespace) -> int:
    from gpucost.errors import InputError
    from gpucost.model.economics import MONTH_HOURS_CLOUD, breakeven

    provider = (args.provider or "").lower()
    gb_month, month_hours, ingress_per_gb = PROVIDER_DEFAULTS.get(
        provider, (None, MONTH_HOURS_CLOUD, 0.0)
    )
    running = args.running_hr
    if args.offer:
        row = _offer_row(args.offer, provider, args.prices)
        running = row["price_hr"] if running is None else running
        if row["storage_gb_month"] == row["storage_gb_month"]:  # not NaN
            gb_month = row["storage_gb_month"]
        month_hours, ingress_per_gb = row["month_hours"], row["ingress_gb"]
    if running is None:
        raise InputError(
            "the running price is missing", hint="give --running-hr USD or --offer INSTANCE_TYPE"
        )
    if args.gb_month is not None:
        gb_month = args.gb_month
    if gb_month is None:
        raise InputError(
            "the disk price is missing",
            hint="give --gb-month USD (per GB-month) or --provider NAME",
        )
    if args.month_hours is not None:
        month_hours = args.month_hours
    if args.ingress_per_gb is not None:
        ingress_per_gb = args.ingress_per_gb
    if args.idle_hours is not None and not args.idle_hours >= 0:
        raise InputError(f"--idle-hours must be >= 0, got {args.idle_hours}")
    b = breakeven(
        running,
        args.disk_gb,
        gb_month,
        month_hours=month_hours,
        setup_minutes=args.setup_min,
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
        print_document("breakeven", doc)
        return 0
    be = b.breakeven_hours
    lines = [
        f"running:    ${b.running_usd_hr:.4f}/h",
        f"stopped:    ${b.stopped_usd_hr:.4f}/h  = {b.disk_gb:g} GB x ${b.storage_usd_gb_month:g}"
        f"/GB-month / {b.month_hours:g} h per month (disk is billed by allocated size)",
        "destroyed:  $0.0000/h",
        f"rebuild:    ${b.rebuild_usd:.2f}  = {b.setup_hours * 60:g} min setup x "
        f"${b.running_usd_hr:.4f}/h (${b.setup_usd:.2f}) + {b.ingress_gb:g} GB in x "
        f"${b.ingress_usd_gb:g}/GB (${b.ingress_usd:.2f})",
    ]
    if b.p_no_gpus > 0:
        lines.append(
            f"GPU risk:   {b.p_no_gpus:.0%} x ${b.lost_gpus_usd:.2f} = "
            f"${b.expected_loss_usd:.2f} expected, paid by stopping"
        )
    lines.append(
        "break-even: " + ("never (stopping is free)" if be == float("inf") else f"{be:.1f} h idle")
    )
    lines.append(f"advice:     {b.advice(args.idle_hours)}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
