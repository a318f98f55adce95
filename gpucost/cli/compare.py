"""`gpucost compare`: rank offers for a profile and a job by expected $/job."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="rank offers by $/job for a profile and a job",
        description="Rank every matching offer by expected dollars for the whole job (or by "
        "time). With no arguments: the embedded ResNet-50 example profile and its default job "
        "on the embedded price snapshot.",
    )
    p.add_argument(
        "--profile", "-p", help="profile JSON file or example name (default: resnet50-v100-amp)"
    )
    job = p.add_argument_group("job size (one of; default: the profile's typical job)")
    job.add_argument("--epochs", type=float, help="epochs (with --dataset-size)")
    job.add_argument("--dataset-size", type=float, help="samples per epoch")
    job.add_argument("--samples", type=float, help="total samples")
    job.add_argument("--steps", type=float, help="optimizer steps of the profile's global batch")
    f = p.add_argument_group("filters")
    f.add_argument("--gpu", action="append", help="GPU name, any common spelling (repeatable)")
    f.add_argument(
        "--provider", action="append", help="provider, e.g. aws, gcp, lambda, runpod (repeatable)"
    )
    f.add_argument("--region", action="append", help="region name or prefix (repeatable)")
    m = f.add_mutually_exclusive_group()
    m.add_argument(
        "--spot",
        dest="market",
        action="store_const",
        const="spot",
        help="spot/interruptible plans only",
    )
    m.add_argument(
        "--on-demand",
        dest="market",
        action="store_const",
        const="on-demand",
        help="on-demand plans only",
    )
    f.add_argument("--max-price-hr", type=float, help="max $/h per node")
    f.add_argument("--min-gpu-memory", type=float, metavar="GB", help="min memory per GPU, GB")
    f.add_argument("--gpu-count", type=float, action="append", help="GPUs per node (repeatable)")
    f.add_argument("--max-nodes", type=int, default=1, help="consider 1..N nodes (default 1)")
    e = p.add_argument_group("job economics (setup, storage, transfers, spot rework)")
    e.add_argument(
        "--data-gb",
        type=float,
        default=0.0,
        help="dataset downloaded onto each node and kept on disk, GB",
    )
    e.add_argument(
        "--checkpoint-gb",
        type=float,
        default=0.0,
        help="one checkpoint, GB (0: the job cannot resume after an interruption)",
    )
    e.add_argument(
        "--results-gb", type=float, default=0.0, help="results copied off at the end, GB"
    )
    e.add_argument(
        "--setup-min",
        type=float,
        default=10.0,
        help="provisioning + image pull before the data download, minutes (default 10)",
    )
    e.add_argument(
        "--interruption-rate",
        type=float,
        metavar="PER_HOUR",
        help="override the sourced spot interruption rates, per node-hour",
    )
    e.add_argument(
        "--include-local",
        action="store_true",
        help="rank this machine too (electricity x power, see --electricity-kwh)",
    )
    e.add_argument(
        "--electricity-kwh",
        type=float,
        default=0.20,
        metavar="USD",
        help="your electricity price, USD/kWh (default 0.20)",
    )
    e.add_argument(
        "--local-gpu",
        metavar="NAME",
        help="plan for a machine you own rather than this one: its GPU (catalog name, or CPU)",
    )
    e.add_argument("--local-gpus", type=int, default=1, metavar="N", help="GPUs in it (default 1)")
    e.add_argument(
        "--local-power-w",
        type=float,
        metavar="W",
        help="your machine's draw under training load (default: NVML/TDP)",
    )
    e.add_argument(
        "--amortisation-hr",
        type=float,
        default=0.0,
        metavar="USD",
        help="your hardware's cost per hour of use (default 0)",
    )
    o = p.add_argument_group("output")
    o.add_argument("--sort", choices=("cost", "time"), default="cost")
    o.add_argument("--limit", "-n", type=int, default=15, help="rows to show (default 15; 0 = all)")
    o.add_argument("--format", choices=("table", "json", "csv"), default="table")
    o.add_argument(
        "--prices",
        action="append",
        metavar="PATH",
        help="price snapshot file or folder (repeatable; default: newest per source)",
    )
    o.add_argument(
        "--stale-days",
        type=float,
        default=30.0,
        help="flag price data older than this many days (default 30)",
    )
    p.set_defaults(handler=run, market="any")


def run(args: argparse.Namespace) -> int:
    from gpucost.errors import InputError
    from gpucost.pricing.snapshot import load_snapshots
    from gpucost.profile import resolve_profile
    from gpucost.ranking import Job, make_filters, rank

    if args.limit < 0:
        raise InputError(f"--limit must be 0 or more, got {args.limit}")
    profile = resolve_profile(args.profile)
    job = Job.from_args(
        profile,
        epochs=args.epochs,
        dataset_size=args.dataset_size,
        samples=args.samples,
        steps=args.steps,
    )
    filters = make_filters(
        gpu=args.gpu,
        provider=args.provider,
        region=args.region,
        market=args.market,
        max_price_hr=args.max_price_hr,
        min_gpu_memory_gb=args.min_gpu_memory,
        gpu_count=args.gpu_count,
        max_nodes=args.max_nodes,
    )
    from gpucost.model.economics import JobParams

    params = JobParams(
        data_gb=args.data_gb,
        checkpoint_gb=args.checkpoint_gb,
        results_gb=args.results_gb,
        setup_minutes=args.setup_min,
        interruption_rate_per_hr=args.interruption_rate,
    )
    snapshots = load_snapshots(args.prices)
    if args.include_local:
        from gpucost.local import local_snapshot, machine

        snapshots = [
            *snapshots,
            local_snapshot(
                machine(args.local_gpu, args.local_gpus, power_w=args.local_power_w),
                electricity_usd_kwh=args.electricity_kwh,
                amortisation_usd_hr=args.amortisation_hr,
            ),
        ]
    ranking = rank(
        profile,
        job,
        snapshots,
        filters,
        sort=args.sort,
        stale_days=args.stale_days,
        job_params=params,
    )
    total = len(ranking)
    shown = ranking.head(args.limit) if args.limit else ranking
    if args.format == "json":
        import json

        doc = shown.to_dict()
        doc["plans_total"] = total
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif args.format == "csv":
        from gpucost.cli.render import write_csv

        write_csv(shown, sys.stdout)
    else:
        from gpucost.cli.render import print_ranking

        print_ranking(shown, total)
    return 0
