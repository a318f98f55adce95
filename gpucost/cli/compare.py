"""`gpucost compare`: rank offers for a profile and a job by expected $/job."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpucost import providers
from gpucost.cli import add_command
from gpucost.cli.jobargs import add_economics, add_prices, add_profile_and_job, request_from_args
from gpucost.cli.numbers import count, number, positive
from gpucost.cli.render import print_ranking, write_csv
from gpucost.envelope import add_format_argument, dumps
from gpucost.errors import InputError, NoOffersError
from gpucost.limits import (
    MAX_GPU_MEMORY_GB,
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    MAX_PRICE_HR_USD,
    MAX_STALE_DAYS,
)
from gpucost.planning.ranking import rank


def register(sub: Any) -> None:
    p = add_command(
        sub, "compare",
        description="Rank every matching offer by expected dollars for the whole job (or by "
        "time). With no arguments: the embedded ResNet-50 example profile and its default job "
        "on the embedded price snapshot.",
    )
    add_profile_and_job(p)
    f = p.add_argument_group("filters")
    f.add_argument("--gpu", action="append", help="GPU name, any common spelling (repeatable)")
    f.add_argument(
        "--provider", action="append", help="provider, e.g. aws, gcp, lambda (repeatable)"
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
    f.add_argument("--max-price-hr", type=positive(MAX_PRICE_HR_USD), help="max $/h per node")
    f.add_argument("--min-gpu-memory", type=positive(MAX_GPU_MEMORY_GB), metavar="GB",
                   help="min memory per GPU, GB")
    f.add_argument("--gpu-count", type=positive(MAX_GPUS_PER_NODE), action="append",
                   help="GPUs per node (repeatable)")
    f.add_argument(
        "--max-nodes",
        type=count(1, MAX_NODES),
        default=1,
        help=f"consider 1..N nodes (default 1; at most {MAX_NODES:,}; every count to 32, then "
        "about 9 %% apart; one node on "
        f"{', '.join(p for p, n in sorted(providers.node_limits().items()) if n == 1)})",
    )
    add_economics(p.add_argument_group("job economics (setup, storage, transfers, spot rework)"))
    o = p.add_argument_group("output")
    o.add_argument("--sort", choices=("cost", "time"), default="cost")
    o.add_argument("--limit", "-n", type=int, default=15,
                   help="rows to show (default 15; 0 = all, with --format json or csv)")
    add_format_argument(o, ("table", "json", "csv"))
    o.add_argument(
        "--show-unfit",
        action="store_true",
        help="also list the plans left out because the per-device batch fits their GPU no way",
    )
    add_prices(o)
    o.add_argument(
        "--stale-days",
        type=number(0, MAX_STALE_DAYS),
        default=30.0,
        help="flag price data older than this many days (default 30)",
    )
    p.set_defaults(handler=run, market="any")


def run(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise InputError(f"--limit must be 0 or more, got {args.limit}")
    # A table of every plan is drawn cell by cell (10,000 plans: 7 s; a large snapshot's: minutes)
    # and no one reads it; json and csv write every plan in a fraction of that.
    if args.limit == 0 and args.format == "table":
        raise InputError("--limit must be >= 1 for a table; 0 (every plan) is for --format json "
                         "or csv", hint="give --limit N, or add --format csv")
    ranking = rank(request_from_args(args))
    if not len(ranking) and not args.show_unfit:
        raise NoOffersError(
            f"none of the {len(ranking.unfit):,} matching plans fits the GPU memory: "
            f"{ranking.unfit.memory_note[0]}",
            hint="--show-unfit lists them; use a smaller batch, or allow bigger GPUs",
        )
    total, unfit = len(ranking), len(ranking.unfit)
    shown = ranking.head(args.limit) if args.limit else ranking
    if args.format == "json":
        doc = shown.to_dict(show_unfit=args.show_unfit)
        doc["plans_total"] = total
        doc["unfit_total"] = unfit
        sys.stdout.write(dumps(doc))
    elif args.format == "csv":
        write_csv(shown.plans, sys.stdout)
        if args.show_unfit:
            write_csv(shown.unfit, sys.stdout, header=False)
    else:
        print_ranking(shown, total, show_unfit=args.show_unfit)
    return 0
