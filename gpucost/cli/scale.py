"""`gpucost scale`: job time, throughput, efficiency and $/job against the node count.

The knee is the first node count from which doubling the nodes cuts the job's time by less than
KNEE_TIME_CUT (25 %): the hourly bill doubles, so $/job rises by more than half while the job
finishes only a little sooner.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucost.cli.numbers import count, positive
from gpucost.cli.predict import add_group_arguments
from gpucost.envelope import add_format_argument, print_document
from gpucost.limits import MAX_EPOCHS, MAX_JOB_SAMPLES, MAX_NODES, MAX_PRICE_HR_USD

if TYPE_CHECKING:
    from gpucost.model.fabrics import Fabric
    from gpucost.model.perf import Prediction
    from gpucost.profile import Profile

KNEE_TIME_CUT = 0.25  # doubling the nodes must cut the job's time by at least this fraction
BAR_WIDTH = 40  # characters of the terminal bar chart


def register(sub: Any) -> None:
    p = sub.add_parser(
        "scale",
        help="scaling curve: time, throughput, efficiency and $/job per node count, with knee",
        description="Predict the job on 1..N nodes and mark the knee: the node count from "
        f"which doubling the nodes cuts the job's time by less than {KNEE_TIME_CUT:.0%} "
        "(and so raises $/job by more than half). Prices come from the cheapest on-demand "
        "offer for the GPU in the price snapshots, or --price-hr.",
    )
    add_group_arguments(p)
    p.add_argument("--max-nodes", "-N", type=count(1, MAX_NODES), default=8,
                   help=f"largest node count (default 8, at most {MAX_NODES:,})")
    p.add_argument("--price-hr", type=positive(MAX_PRICE_HR_USD), metavar="USD",
                   help="$/h per node (default: cheapest on-demand offer in the snapshots)")
    job = p.add_mutually_exclusive_group()
    job.add_argument("--samples", type=positive(MAX_JOB_SAMPLES),
                     help="samples in the job (default: the profile's dataset_size x epochs)")
    job.add_argument("--epochs", type=positive(MAX_EPOCHS),
                     help="epochs of the profile's dataset_size")
    p.add_argument("--setup-min", type=float, metavar="MIN",
                   help="provisioning + image minutes before training, on every node count "
                   "(default: the offer's provider and instance family, from a sourced table)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the curve into a PNG file")
    add_format_argument(p)
    p.set_defaults(handler=run)


@dataclass(frozen=True, slots=True)
class Point:
    nodes: int
    prediction: Prediction
    job_hours: float
    job_usd: float | None


@dataclass(frozen=True, slots=True)
class Offer:
    price_hr: float  # USD per node-hour
    gpus_per_node: int
    network_gbps: float | None
    link: str | None
    label: str  # where the price comes from
    fabric: Fabric  # what its nodes talk over
    provider: str
    instance_type: str


def find_offer(gpu: str, gpus_per_node: int | None) -> Offer | None:
    """Cheapest on-demand offer for ``gpu`` (with ``gpus_per_node`` GPUs, else the most GPUs)."""
    import numpy as np

    from gpucost.errors import SnapshotError
    from gpucost.model.fabrics import fabric_for
    from gpucost.pricing.snapshot import load_offers

    try:
        offers = load_offers()
    except SnapshotError:
        return None
    mask = (offers["gpu"] == gpu) & (offers["price_hr"] > 0)
    if gpus_per_node is None:
        if not mask.any():
            return None
        gpus_per_node = int(np.max(offers["gpu_count"][mask]))
    mask &= offers["gpu_count"] == gpus_per_node
    if not mask.any():
        return None
    i = int(np.flatnonzero(mask)[np.argmin(offers["price_hr"][mask])])
    net = float(offers["network_gbps"][i])
    fabric = fabric_for(str(offers["provider"][i]), str(offers["instance_type"][i]), net)
    return Offer(
        price_hr=float(offers["price_hr"][i]),
        gpus_per_node=gpus_per_node,
        network_gbps=fabric.gbps,
        link=str(offers["intra_node_link"][i]) or None,
        label=f"{offers['provider'][i]} {offers['instance_type'][i]} ({offers['region'][i]}), "
              f"prices of {str(offers['fetched_at'][i])[:10]}; between nodes: {fabric.describe()}",
        fabric=fabric,
        provider=str(offers["provider"][i]),
        instance_type=str(offers["instance_type"][i]),
    )


def job_samples(profile: Profile, samples: float | None, epochs: float | None) -> float | None:
    from gpucost.errors import InputError

    if samples is not None:
        if not samples > 0:
            raise InputError(f"--samples must be positive, got {samples}")
        return samples
    if epochs is not None:
        if profile.dataset_size is None:
            raise InputError(f"profile {profile.name!r} has no dataset_size for --epochs",
                             hint="pass --samples instead")
        return epochs * profile.dataset_size
    if profile.dataset_size is not None and profile.epochs is not None:
        return profile.dataset_size * profile.epochs
    return None


def find_knee(points: list[Point], hours_at: dict[int, float]) -> int | None:
    """First node count n from which doubling to 2n cuts the job time by < KNEE_TIME_CUT
    (None: every count up to the largest still scales)."""
    for pt in points:
        if hours_at[2 * pt.nodes] > (1.0 - KNEE_TIME_CUT) * pt.job_hours:
            return pt.nodes
    return None


def curve(profile: Profile, args: argparse.Namespace, offer: Offer | None,
          samples: float, setup_hours: float = 0.0) -> tuple[list[Point], int | None]:
    """Job hours (setup included: every node count waits for its machines) and $/job per
    node count, with the knee."""
    from gpucost.model.perf import predict

    k = args.gpus_per_node or (offer.gpus_per_node if offer else 1)
    net = args.network_gbps if args.network_gbps is not None else (
        offer.network_gbps if offer else None)
    # the offer's fabric transport, unless --network-gbps describes another network
    transport = offer.fabric.transport if offer and args.network_gbps is None else None
    link = args.link or (offer.link if offer else None)
    price = args.price_hr if args.price_hr is not None else (offer.price_hr if offer else None)
    hours: dict[int, float] = {}
    points = []
    # Doubling the largest count must be known to judge the knee, so predict up to 2N.
    for n in range(1, 2 * args.max_nodes + 1):
        pred = predict(profile, gpu=args.gpu, gpus_per_node=k, nodes=n, inter_node_gbps=net,
                       intra_node_link=link, grad_accum_steps=args.grad_accum,
                       inter_node_transport=transport)
        h = setup_hours + samples / pred.throughput / 3600.0
        hours[n] = h
        if n <= args.max_nodes:
            points.append(Point(n, pred, h, None if price is None else n * price * h))
    return points, find_knee(points, hours)


def render(points: list[Point], knee: int | None, offer: Offer | None, args: argparse.Namespace,
           samples: float, per_million: bool) -> str:
    first = points[0].prediction
    unit = first.profile.sample_unit
    job = "per 1M samples" if per_million else f"{samples:,.0f} {unit}"
    price = (f"${args.price_hr:.2f}/h per node (--price-hr)" if args.price_hr is not None
             else f"${offer.price_hr:.2f}/h per node: {offer.label}" if offer
             else "no price: pass --price-hr")
    lines = [f"{first.profile.name} on {first.gpus_per_node} x {first.gpu} per node; "
             f"job {job}; {price}",
             f"{'nodes':>5} {'time':>9} {unit + '/s':>14} {'eff':>5} {'$/job':>10}  throughput"]
    top = max(p.prediction.throughput for p in points)
    for p in points:
        bar = "#" * max(1, round(BAR_WIDTH * p.prediction.throughput / top))
        usd = "-" if p.job_usd is None else f"${p.job_usd:,.2f}"
        mark = "  <- knee" if p.nodes == knee else ""
        lines.append(f"{p.nodes:>5} {_hours(p.job_hours):>9} {p.prediction.throughput:>14,.0f} "
                     f"{100 * p.prediction.efficiency:>4.0f}% {usd:>10}  {bar}{mark}")
    memory = first.memory
    if not memory.fits:
        lines.append(f"memory: {memory.advice}")
    if knee is None:
        lines.append(f"no knee up to {points[-1].nodes} nodes: doubling the nodes still cuts the "
                     f"time by at least {KNEE_TIME_CUT:.0%}")
    else:
        lines.append(f"knee: {knee} node(s) - from there, doubling the nodes cuts the time by "
                     f"less than {KNEE_TIME_CUT:.0%} while $/job rises by more than half")
    return "\n".join(lines)


def _hours(h: float) -> str:
    if h < 1:
        return f"{h * 60:.1f} min"
    return f"{h:.2f} h" if h < 48 else f"{h / 24:.1f} d"


def plot(points: list[Point], knee: int | None, path: str, title: str) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpucost._io import atomic_write_bytes

    nodes = [p.nodes for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ax.plot(nodes, [p.job_hours for p in points], "o-", color="tab:blue", label="job time")
    ax.set_xlabel("nodes")
    ax.set_ylabel("job time (h)", color="tab:blue")
    ax.set_ylim(0, 1.1 * points[0].job_hours)
    if knee is not None:
        ax.axvline(knee, color="grey", linestyle="--")
        ax.text(knee, 1.05 * points[0].job_hours, f" knee: {knee} node(s)", color="grey")
    costs = [p.job_usd for p in points if p.job_usd is not None]
    if len(costs) == len(points):
        ax2 = ax.twinx()
        ax2.plot(nodes, costs, "s-", color="tab:red", label="$/job")
        ax2.set_ylabel("$ per job", color="tab:red")
        ax2.set_ylim(0, 1.15 * max(costs))
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def run(args: argparse.Namespace) -> int:
    from gpucost.errors import InputError
    from gpucost.model.setup_times import setup_time
    from gpucost.model.translate import gpu_spec
    from gpucost.profile import resolve_profile

    if args.max_nodes < 1:
        raise InputError(f"--max-nodes must be at least 1, got {args.max_nodes}")
    if args.price_hr is not None and not args.price_hr > 0:
        raise InputError(f"--price-hr must be positive, got {args.price_hr}")
    if args.plot:
        from gpucost.cli.outputs import check_output_file

        check_output_file(args.plot, what="--plot", example="scaling.png", suffix=".png")
    profile = resolve_profile(args.profile)
    if args.gpu is None and profile.gpu == "CPU":
        raise InputError("this profile was measured on the CPU: pass --gpu")
    gpu = gpu_spec(args.gpu or profile.gpu).name
    args.gpu = gpu
    offer = None if args.price_hr is not None and args.gpus_per_node else find_offer(
        gpu, args.gpus_per_node)
    samples = job_samples(profile, args.samples, args.epochs)
    per_million = samples is None
    setup = setup_time(offer.provider if offer else "", offer.instance_type if offer else "",
                       override=args.setup_min)
    # "per 1M samples" is a rate, not a job: no machine is set up for it
    setup_hours = 0.0 if per_million else setup.hours
    points, knee = curve(profile, args, offer, 1e6 if samples is None else samples, setup_hours)
    if args.plot:
        plot(points, knee, args.plot, f"{profile.name} on {points[0].prediction.gpus_per_node} x "
             f"{gpu} per node")
    if args.format == "json":
        print_document("scale", {
            "profile": profile.name, "gpu": gpu,
            "gpus_per_node": points[0].prediction.gpus_per_node,
            "samples": 1e6 if samples is None else samples,
            "price_hr": args.price_hr if args.price_hr is not None else (
                offer.price_hr if offer else None),
            "price_source": "--price-hr" if args.price_hr is not None else (
                offer.label if offer else None),
            "setup_minutes": setup_hours * 60.0,
            "setup_source": None if per_million else setup.source,
            "knee_nodes": knee,
            "knee_rule": f"doubling the nodes cuts job time by < {KNEE_TIME_CUT:.0%}",
            "points": [{"nodes": p.nodes, "job_hours": p.job_hours, "job_usd": p.job_usd,
                        "throughput": p.prediction.throughput,
                        "efficiency": p.prediction.efficiency,
                        "step_time_s": p.prediction.step_time_s} for p in points],
        })
    else:
        print(render(points, knee, offer, args, 1e6 if samples is None else samples, per_million))
        if not per_million:
            print(f"time and $/job include {setup.minutes:g} min of setup: {setup.source}")
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0
