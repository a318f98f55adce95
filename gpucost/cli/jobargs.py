"""Arguments that describe a workload and a job, shared by `compare`, `plan`, `explain` and
`scale`.

Each ``add_*`` function adds one group of options; :func:`request_from_args` turns the parsed
namespace into the planning request through the one declaration of its keywords
(:class:`gpucost.planning.request.RequestArgs`, which the Python API and the TUI fill too), so
the commands agree on names, defaults and units.
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from typing import Any

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
from gpucost.planning.request import (
    CPU_ARCH_CHOICES,
    LocalMachineArgs,
    Request,
    RequestArgs,
    option_dest,
)


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
    # the workload's host CPU: its image and wheels are built for one
    p.add_argument("--cpu-arch", choices=CPU_ARCH_CHOICES,
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
    if not args.include_local:
        return False
    return LocalMachineArgs(gpu=args.local_gpu, gpu_count=args.local_gpus,
                            power_w=args.local_power_w, electricity_usd_kwh=args.electricity_kwh,
                            amortisation_usd_hr=args.amortisation_hr)


def request_args(args: argparse.Namespace) -> RequestArgs:
    """The planning request's keywords the parsed options give: each keyword read from its
    option's attribute (:func:`gpucost.planning.request.option_dest`); options a command lacks,
    or leaves unset, keep the keyword's default."""
    values: dict[str, Any] = {}
    for f in fields(RequestArgs):
        dest = option_dest(f)
        value = getattr(args, dest, None) if dest else None
        if value is not None:
            values[f.name] = value
    if values.get("include_local"):
        values["include_local"] = local_from_args(args)
    return RequestArgs(**values)


def request_from_args(args: argparse.Namespace, **overrides: Any) -> Request:
    """The planning request the parsed options describe; ``overrides`` (keywords of
    :class:`~gpucost.planning.request.RequestArgs`) win."""
    return replace(request_args(args), **overrides).build()
