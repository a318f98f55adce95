"""Arguments that describe a workload and a job, shared by `compare`, `plan` and `explain`.

Each ``add_*`` function adds one group of options; each ``*_from_args`` builds the object the
Python API takes from the parsed namespace, so the commands agree on names, defaults and units.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from gpucost.cli.numbers import count, number, positive
from gpucost.limits import (
    MAX_DATA_GB,
    MAX_ELECTRICITY_USD_KWH,
    MAX_EPOCHS,
    MAX_GPUS_PER_NODE,
    MAX_INTERRUPTIONS_PER_HR,
    MAX_JOB_SAMPLES,
    MAX_LOCAL_POWER_W,
    MAX_PRICE_HR_USD,
)

if TYPE_CHECKING:
    from gpucost.model.economics import JobParams
    from gpucost.pricing.snapshot import Snapshot
    from gpucost.profile import Profile
    from gpucost.ranking import Job


def add_profile_and_job(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile", "-p", help="profile JSON file or example name (default: resnet50-v100-amp)"
    )
    job = p.add_argument_group("job size (one of; default: the profile's typical job)")
    job.add_argument("--epochs", type=positive(MAX_EPOCHS), help="epochs (with --dataset-size)")
    job.add_argument("--dataset-size", type=positive(MAX_JOB_SAMPLES), help="samples per epoch")
    job.add_argument("--samples", type=positive(MAX_JOB_SAMPLES), help="total samples")
    job.add_argument("--steps", type=positive(MAX_JOB_SAMPLES),
                     help="optimizer steps of the profile's global batch")


def add_economics(e: Any) -> None:
    """Data, checkpoints, setup, interruptions and your own machine (an argument group)."""
    e.add_argument(
        "--data-gb",
        type=number(0, MAX_DATA_GB),
        default=0.0,
        help="dataset downloaded onto each node and kept on disk, GB",
    )
    e.add_argument(
        "--checkpoint-gb",
        type=number(0, MAX_DATA_GB),
        default=0.0,
        help="one checkpoint, GB (0: no checkpoints, an interruption restarts the job)",
    )
    e.add_argument(
        "--results-gb",
        type=number(0, MAX_DATA_GB),
        default=0.0,
        help="results copied off at the end, GB",
    )
    e.add_argument(
        "--setup-min",
        type=float,
        help="provisioning + image pull before the data download, minutes (default: per "
        "provider and instance family from a sourced table, 4-12 min)",
    )
    e.add_argument(
        "--interruption-rate",
        type=number(0, MAX_INTERRUPTIONS_PER_HR),
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
        type=number(0, MAX_ELECTRICITY_USD_KWH),
        default=0.20,
        metavar="USD",
        help="your electricity price, USD/kWh (default 0.20)",
    )
    e.add_argument(
        "--local-gpu",
        metavar="NAME",
        help="plan for a machine you own rather than this one: its GPU (catalog name, or CPU)",
    )
    e.add_argument(
        "--local-gpus",
        type=count(1, MAX_GPUS_PER_NODE),
        default=1,
        metavar="N",
        help="GPUs in it (default 1)",
    )
    e.add_argument(
        "--local-power-w",
        type=positive(MAX_LOCAL_POWER_W),
        metavar="W",
        help="your machine's draw under training load (default: NVML power limit or TDP)",
    )
    e.add_argument(
        "--amortisation-hr",
        type=number(0, MAX_PRICE_HR_USD),
        default=0.0,
        metavar="USD",
        help="your hardware's cost per hour of use (default 0)",
    )


def add_prices(group: Any) -> None:
    group.add_argument(
        "--prices",
        action="append",
        metavar="PATH",
        help="price snapshot file or folder (repeatable; default: newest per source)",
    )


def job_from_args(profile: Profile, args: argparse.Namespace) -> Job:
    from gpucost.ranking import Job

    return Job.from_args(
        profile,
        epochs=args.epochs,
        dataset_size=args.dataset_size,
        samples=args.samples,
        steps=args.steps,
    )


def job_params_from_args(args: argparse.Namespace, **extra: Any) -> JobParams:
    from gpucost.model.economics import JobParams

    return JobParams(
        data_gb=args.data_gb,
        checkpoint_gb=args.checkpoint_gb,
        results_gb=args.results_gb,
        setup_minutes=args.setup_min,
        interruption_rate_per_hr=args.interruption_rate,
        **extra,
    )


def snapshots_from_args(args: argparse.Namespace) -> list[Snapshot]:
    """The price snapshots asked for, plus this (or a described) machine with --include-local."""
    from gpucost.pricing.snapshot import load_snapshots

    snapshots = load_snapshots(args.prices)
    if args.include_local:
        from gpucost.local import local_snapshot, machine

        local = local_snapshot(
            machine(args.local_gpu, args.local_gpus, power_w=args.local_power_w),
            electricity_usd_kwh=args.electricity_kwh,
            amortisation_usd_hr=args.amortisation_hr,
        )
        snapshots = [*snapshots, local]
    return snapshots
