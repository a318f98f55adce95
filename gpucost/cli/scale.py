"""`gpucost scale`: job time, throughput, efficiency and $/job against the node count.

The same plans as `gpucost compare` (setup, storage and transfers included, the memory rule
applied) for one offer at 1..N nodes, or for a mixed node at --price-hr. Which offer, and the
knee, are :mod:`gpucost.planning.scaling`'s: this module parses the arguments and prints.
"""

from __future__ import annotations

import argparse
import io
from dataclasses import replace
from typing import Any

from gpucost._io import atomic_write_bytes
from gpucost._optional import require
from gpucost.catalog import variant_note
from gpucost.cli import add_command
from gpucost.cli.jobargs import add_economics, add_prices, request_from_args
from gpucost.cli.numbers import count, positive
from gpucost.cli.outputs import check_output_file
from gpucost.cli.predict import add_group_arguments, group_gpus
from gpucost.envelope import add_format_argument, print_document
from gpucost.errors import InputError
from gpucost.format import hours, usd
from gpucost.limits import MAX_EPOCHS, MAX_JOB_SAMPLES, MAX_NODES, MAX_PRICE_HR_USD, node_limit
from gpucost.model.translate import gpu_spec
from gpucost.planning.plans import PlanRow
from gpucost.planning.request import Request
from gpucost.planning.scaling import (
    KNEE_TIME_CUT,
    PRICE_GIVEN,
    BatchPoint,
    OfferCurve,
    Scaling,
    batch_efficiency,
    cheapest_offer_curve,
    curve_note,
    mixed_node_curve,
    slowest_member,
)
from gpucost.profile import resolve_profile

BAR_WIDTH = 40  # characters of the terminal bar chart


def register(sub: Any) -> None:
    p = add_command(
        sub, "scale",
        description="Predict the job on 1..N nodes of one offer and mark the knee: the node "
        f"count from which doubling the nodes cuts the job's time (setup included) by less than "
        f"{KNEE_TIME_CUT:.0%} (and so raises $/job by more than half). The offer is the "
        "cheapest on-demand one for the GPU in the price snapshots; --price-hr and --link "
        "override its terms, --network-gbps and --transport the network between its nodes (not "
        "its setup or transfers). $/job is compare's: setup, storage and transfers "
        "included. A repeated --gpu names one node's GPUs: the slowest member sets the pace and "
        "the smallest memory the batch. An offer has one GPU type, so a mixed node is priced "
        "only at --price-hr (the node's $/h).",
    )
    add_group_arguments(p, per_node_help="GPUs per node (default 1; where no offer has one "
                        "GPU per node, the fewest an offer has, and a note says so)")
    p.add_argument("--max-nodes", "-N", type=count(1, MAX_NODES // 2), default=8,
                   help=f"largest node count (default 8, at most {MAX_NODES // 2:,}: the knee "
                   "needs twice that)")
    p.add_argument("--price-hr", type=positive(MAX_PRICE_HR_USD), metavar="USD",
                   help="$/h per node (default: cheapest on-demand offer in the snapshots; a mixed "
                   "node needs it)")
    job = p.add_mutually_exclusive_group()
    job.add_argument("--samples", type=positive(MAX_JOB_SAMPLES),
                     help="samples in the job (default: the profile's dataset_size x epochs, "
                     "else 1M)")
    job.add_argument("--epochs", type=positive(MAX_EPOCHS),
                     help="epochs of the profile's dataset_size")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the curve into a PNG file")
    p.add_argument("--batch", type=count(1, 1 << 20), action="append", metavar="B",
                   help="also show scaling efficiency at this per-GPU batch (repeat: --batch 16 "
                   "--batch 64); a small batch leaves less compute to hide the gradient sync")
    add_format_argument(p)
    econ = p.add_argument_group("job economics (as in compare)")
    add_economics(econ)
    add_prices(econ)
    p.set_defaults(handler=run)


def _job_args(profile: Any, args: argparse.Namespace) -> dict[str, Any]:
    if args.samples is not None:
        return {"samples": args.samples}
    if args.epochs is not None:
        if profile.dataset_size is None:
            raise InputError(f"profile {profile.name!r} has no dataset_size for --epochs",
                             hint="pass --samples instead")
        return {"epochs": args.epochs, "dataset_size": profile.dataset_size}
    if profile.dataset_size is not None and profile.epochs is not None:
        return {}
    return {"samples": 1e6}


def build_curve(args: argparse.Namespace) -> OfferCurve:
    """The offer's curve (:mod:`gpucost.planning.scaling`) for the arguments, with notes on
    what was left out or defaulted."""
    if args.max_nodes < 1:
        raise InputError(f"--max-nodes must be at least 1, got {args.max_nodes}")
    if args.price_hr is not None and not args.price_hr > 0:
        raise InputError(f"--price-hr must be positive, got {args.price_hr}")
    if args.plot:
        check_output_file(args.plot, what="--plot", example="scaling.png", suffix=".png")
    profile = resolve_profile(args.profile)
    gpu, per_node, mixed = group_gpus(args)
    if mixed is not None:
        if args.price_hr is None:
            raise InputError(
                "scale prices a mixed node only from --price-hr: an offer has one GPU type, "
                "so no offer in the snapshots holds a mixed node",
                hint="pass --price-hr USD, the mixed node's $/h",
            )
        node = [gpu_spec(g).name for g in mixed]
        request = request_from_args(
            args, gpu=slowest_member(profile, node), gpu_count=[float(len(node))],
            market="on-demand", max_nodes=2 * args.max_nodes, provider=None, region=None,
            cpu_arch="any", inter_node_gbps=args.network_gbps,
            inter_node_transport=args.transport, **_job_args(profile, args))
        return mixed_node_curve(request, node, max_nodes=args.max_nodes,
                                price_hr=args.price_hr, link=args.link)
    if gpu is None and profile.gpu == "CPU":
        raise InputError("this profile was measured on the CPU: pass --gpu")
    variant = ""
    if gpu is not None:
        variant = variant_note(gpu)
    gpu = gpu_spec(gpu or profile.gpu).name
    # the GPU named decides the host (a GH200 is a Grace host): any CPU architecture
    request = request_from_args(args, gpu=gpu, gpu_count=None, market="on-demand",
                                max_nodes=2 * args.max_nodes, provider=None, region=None,
                                cpu_arch="any", **_job_args(profile, args))
    curve = cheapest_offer_curve(
        request, gpu, max_nodes=args.max_nodes,
        gpus_per_node=None if args.gpus_per_node is None else per_node,
        price_hr=args.price_hr, link=args.link)
    return replace(curve, notes=tuple(n for n in (variant, *curve.notes) if n))


def _node_label(request: Request, row: PlanRow) -> str:
    """``8 x L4``, or a mixed node's GPUs: ``A100 SXM4 80GB + T4``."""
    if request.node_gpus:
        return " + ".join(request.node_gpus)
    return f"{row.gpu_count:g} x {row.gpu}"


def render(curve: OfferCurve) -> str:
    request, scaling, label = curve.request, curve.scaling, curve.price_source
    profile = request.profile
    first = scaling.points[0].row
    unit = profile.sample_unit
    price = (f"{usd(first.price_hr, exact=True)}/h per node ({label})" if label == PRICE_GIVEN
             else f"{usd(first.price_hr, exact=True)}/h per node: {label}")
    between = f"; between nodes: {scaling.fabric}" if scaling.fabric else ""
    lines = [f"{profile.name} on {_node_label(request, first)} per node; "
             f"job {request.job.description}; {price}{between}",
             f"{'nodes':>5} {'time':>9} {unit + '/s':>14} {'eff':>5} {'$/job':>10}  throughput"]
    top = max(p.throughput for p in scaling.points)
    for p in scaling.points:
        bar = "#" * max(1, round(BAR_WIDTH * p.throughput / top))
        mark = "  <- knee" if p.nodes == scaling.knee else ""
        lines.append(f"{p.nodes:>5} {hours(p.hours, exact=True):>9} {p.throughput:>14,.0f} "
                     f"{100 * p.efficiency:>4.0f}% {usd(p.cost_usd, exact=True):>10}  {bar}{mark}")
    memory = sorted({p.row.memory_note for p in scaling.points if p.row.memory_note})
    lines += [f"memory: {n}" for n in memory]
    hint = "; another provider's curve: --price-hr USD with its price"
    lines.append(curve_note(scaling) + (hint if node_limit(first.provider) == 1 else ""))
    lines += [f"note: {n}" for n in curve.notes]
    lines.append(f"time and $/job include {hours(first.setup_hours, exact=True)} of setup per "
                 f"start, as in `gpucost compare`: {first.setup_source}")
    return "\n".join(lines)


def plot(scaling: Scaling, path: str, title: str) -> None:
    matplotlib = require("matplotlib", needed_for="scale --plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    points = scaling.points
    knee = scaling.knee
    nodes = [p.nodes for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ax.plot(nodes, [p.hours for p in points], "o-", color="tab:blue", label="job time")
    ax.set_xlabel("nodes")
    ax.set_ylabel("job time (h)", color="tab:blue")
    ax.set_ylim(0, 1.1 * points[0].hours)
    if knee is not None:
        ax.axvline(knee, color="grey", linestyle="--")
        ax.text(knee, 1.05 * points[0].hours, f" knee: {knee} node(s)", color="grey")
    costs = [p.cost_usd for p in points]
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


def _batch_points(args: argparse.Namespace, request: Request, scaling: Scaling
                  ) -> tuple[BatchPoint, ...]:
    """Efficiency at each --batch over the curve's node counts (one GPU type per node)."""
    if not args.batch:
        return ()
    if request.node_gpus:
        raise InputError("--batch takes a node of one GPU type",
                         hint="drop --batch, or name one --gpu")
    nodes = tuple(p.nodes for p in scaling.points)
    return batch_efficiency(request.profile, scaling.points[0].row, nodes,
                            tuple(dict.fromkeys(args.batch)), network_gbps=args.network_gbps,
                            transport=args.transport)


def render_batches(points: tuple[BatchPoint, ...]) -> str:
    nodes = sorted({p.nodes for p in points})
    lines = ["scaling efficiency by per-GPU batch (the same model; no memory re-plan):",
             f"{'batch':>7} " + " ".join(f"{str(n) + ' n':>6}" for n in nodes)]
    for batch in dict.fromkeys(p.batch for p in points):
        row = {p.nodes: p.efficiency for p in points if p.batch == batch}
        lines.append(f"{batch:>7} " + " ".join(f"{100 * row[n]:>5.0f}%" for n in nodes))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    curve = build_curve(args)
    request, scaling = curve.request, curve.scaling
    batches = _batch_points(args, request, scaling)
    first = scaling.points[0].row
    if args.plot:
        plot(scaling, args.plot,
             f"{request.profile.name} on {_node_label(request, first)} per node")
    if args.format == "json":
        print_document("scale", {
            "profile": request.profile.name, "gpu": first.gpu,
            "gpus_per_node": int(first.gpu_count),
            "member_gpus": list(request.node_gpus) or [first.gpu] * int(first.gpu_count),
            "samples": request.job.samples,
            "price_hr": first.price_hr,
            "price_source": curve.price_source,
            "setup_minutes": first.setup_minutes if first.provider != "local" else 0.0,
            "setup_source": first.setup_source,
            "knee_nodes": scaling.knee,
            "notes": list(curve.notes),
            "knee_rule": f"doubling the nodes cuts job time (setup included) by < "
                         f"{KNEE_TIME_CUT:.0%}",
            "points": [{"nodes": p.nodes, "job_hours": p.hours, "compute_hours": p.compute_hours,
                        "setup_hours": p.row.setup_hours, "job_usd": p.cost_usd,
                        "throughput": p.throughput, "efficiency": p.efficiency,
                        "step_time_s": p.row.gpu_count * p.nodes * p.row.micro_batch
                        * p.row.grad_accum_steps / p.throughput,
                        "peak_gb": p.row.record()["peak_gb"],
                        "memory_note": p.row.memory_note,
                        "inter_node_fabric": p.row.inter_node_fabric} for p in scaling.points],
            "batch_efficiency": [{"batch": p.batch, "nodes": p.nodes,
                                  "throughput": p.throughput, "efficiency": p.efficiency}
                                 for p in batches],
        })
    else:
        print(render(curve))
        if batches:
            print(render_batches(batches))
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0
