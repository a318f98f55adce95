"""Arguments that describe a workload and a job, shared by `compare`, `plan`, `explain` and
`scale`.

Each ``add_*`` function adds one group of options; :func:`request_from_args` turns the parsed
namespace into the planning request (:func:`gpucost.planning.request.build_request`, which the
Python API and the TUI call too), so the commands agree on names, defaults and units.
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
    from gpucost.planning.request import LocalMachineArgs, Request


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
    # the workload's host CPU: its image and wheels are built for one (planning.request's
    # CPU_ARCH_CHOICES, spelled out: --help imports no numpy)
    p.add_argument("--cpu-arch", choices=("x86-64", "arm64", "any"),
                   help="host CPU the job runs on (default: the profile's, else x86-64; "
                   "arm64: Grace GH200/GB200 and Graviton hosts; any: both)")


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


def local_from_args(args: argparse.Namespace) -> LocalMachineArgs | bool:
    """``--include-local`` and the machine it describes (False without it)."""
    from gpucost.planning.request import LocalMachineArgs

    if not args.include_local:
        return False
    return LocalMachineArgs(gpu=args.local_gpu, gpu_count=args.local_gpus,
                            power_w=args.local_power_w, electricity_usd_kwh=args.electricity_kwh,
                            amortisation_usd_hr=args.amortisation_hr)


def request_from_args(args: argparse.Namespace, **overrides: Any) -> Request:
    """The planning request the parsed options describe (options a command lacks keep their
    defaults; ``overrides`` win)."""
    from gpucost.planning.request import build_request

    def opt(name: str, default: Any = None) -> Any:
        return getattr(args, name, default)

    values: dict[str, Any] = dict(
        epochs=opt("epochs"),
        dataset_size=opt("dataset_size"),
        samples=opt("samples"),
        steps=opt("steps"),
        gpu=opt("gpu"),
        provider=opt("provider"),
        region=opt("region"),
        market=opt("market", "any"),
        max_price_hr=opt("max_price_hr"),
        min_gpu_memory_gb=opt("min_gpu_memory"),
        gpu_count=opt("gpu_count"),
        max_nodes=opt("max_nodes", 1),
        cpu_arch=opt("cpu_arch"),
        deadline_hours=opt("deadline_hours"),
        budget_usd=opt("budget"),
        data_gb=opt("data_gb", 0.0),
        checkpoint_gb=opt("checkpoint_gb", 0.0),
        results_gb=opt("results_gb", 0.0),
        setup_minutes=opt("setup_min", 10.0),
        interruption_rate_per_hr=opt("interruption_rate"),
        p_no_capacity=opt("p_no_capacity", 0.0),
        max_wait_capacity_hours=opt("max_wait_hours", 2.0),
        prices=opt("prices"),
        include_local=local_from_args(args) if opt("include_local") else False,
        sort=opt("sort", "cost"),
    )
    if opt("stale_days") is not None:
        values["stale_days"] = args.stale_days
    values.update(overrides)
    return build_request(opt("profile"), **values)
