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
    p.add_argument("--profile", "-p", help="profile JSON file or example name "
                   "(default: resnet50-v100-amp)")
    job = p.add_argument_group("job size (one of; default: the profile's typical job)")
    job.add_argument("--epochs", type=float, help="epochs (with --dataset-size)")
    job.add_argument("--dataset-size", type=float, help="samples per epoch")
    job.add_argument("--samples", type=float, help="total samples")
    job.add_argument("--steps", type=float, help="optimizer steps of the profile's global batch")
    f = p.add_argument_group("filters")
    f.add_argument("--gpu", action="append", help="GPU name, any common spelling (repeatable)")
    f.add_argument("--provider", action="append", help="provider, e.g. aws, gcp, lambda, runpod "
                   "(repeatable)")
    f.add_argument("--region", action="append", help="region name or prefix (repeatable)")
    m = f.add_mutually_exclusive_group()
    m.add_argument("--spot", dest="market", action="store_const", const="spot",
                   help="spot/interruptible plans only")
    m.add_argument("--on-demand", dest="market", action="store_const", const="on-demand",
                   help="on-demand plans only")
    f.add_argument("--max-price-hr", type=float, help="max $/h per node")
    f.add_argument("--min-gpu-memory", type=float, metavar="GB", help="min memory per GPU, GB")
    f.add_argument("--gpu-count", type=float, action="append", help="GPUs per node (repeatable)")
    f.add_argument("--max-nodes", type=int, default=1, help="consider 1..N nodes (default 1)")
    o = p.add_argument_group("output")
    o.add_argument("--sort", choices=("cost", "time"), default="cost")
    o.add_argument("--limit", "-n", type=int, default=15, help="rows to show (default 15; "
                   "0 = all)")
    o.add_argument("--format", choices=("table", "json", "csv"), default="table")
    o.add_argument("--prices", action="append", metavar="PATH",
                   help="price snapshot file or folder (repeatable; default: newest per source)")
    o.add_argument("--stale-days", type=float, default=30.0,
                   help="flag price data older than this many days (default 30)")
    p.set_defaults(handler=run, market="any")


def run(args: argparse.Namespace) -> int:
    from gpucost.ranking import Job, make_filters, rank
    from gpucost.errors import InputError
    from gpucost.pricing.snapshot import load_snapshots
    from gpucost.profile import resolve_profile

    if args.limit < 0:
        raise InputError(f"--limit must be 0 or more, got {args.limit}")
    profile = resolve_profile(args.profile)
    job = Job.from_args(profile, epochs=args.epochs, dataset_size=args.dataset_size,
                        samples=args.samples, steps=args.steps)
    filters = make_filters(gpu=args.gpu, provider=args.provider, region=args.region,
                           market=args.market, max_price_hr=args.max_price_hr,
                           min_gpu_memory_gb=args.min_gpu_memory, gpu_count=args.gpu_count,
                           max_nodes=args.max_nodes)
    ranking = rank(profile, job, load_snapshots(args.prices), filters, sort=args.sort,
                   stale_days=args.stale_days)
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
