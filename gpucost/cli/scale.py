"""`gpucost scale`: job time, throughput, efficiency and $/job against the node count.

The same plans as `gpucost compare` (setup, storage and transfers included, the memory rule
applied) for one offer at 1..N nodes, or for a mixed node at --price-hr; the knee is
:mod:`gpucost.planning.scaling`'s.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from gpucost.cli.jobargs import add_economics, add_prices
from gpucost.cli.numbers import count, positive
from gpucost.cli.predict import add_group_arguments
from gpucost.envelope import add_format_argument, print_document
from gpucost.limits import MAX_EPOCHS, MAX_JOB_SAMPLES, MAX_NODES, MAX_PRICE_HR_USD, node_limit
from gpucost.planning.scaling import KNEE_TIME_CUT, BatchPoint

if TYPE_CHECKING:
    from gpucost.planning.plans import PlanRow, Plans
    from gpucost.planning.ranking import Ranking
    from gpucost.planning.request import Request
    from gpucost.planning.scaling import Scaling
    from gpucost.pricing.snapshot import Snapshot
    from gpucost.profile import Profile

BAR_WIDTH = 40  # characters of the terminal bar chart
OVERRIDE_SOURCE = "gpucost-scale-overrides"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "scale",
        help="scaling curve: time, throughput, efficiency and $/job per node count, with knee",
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
    from gpucost.errors import InputError

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


def _override_snapshot(request: Request, row: PlanRow | None, gpu: str, per_node: int,
                       args: argparse.Namespace) -> Snapshot:
    """One offer: the cheapest one found (or a bare one) with --price-hr and --link applied. A
    mixed node's bare offer is named after its slowest member (``gpu``) and holds its smallest
    member's memory. --network-gbps and --transport are the request's (every offer's fabric), so
    the offer keeps its provider's setup time, storage and transfer terms."""
    import datetime as dt

    from gpucost.catalog import get_gpu
    from gpucost.errors import InputError
    from gpucost.pricing.snapshot import Offers, Snapshot

    members = request.node_gpus or (gpu,)
    bare_name = "+".join(request.node_gpus) if request.node_gpus else f"{per_node}x-{gpu}"
    price = args.price_hr if args.price_hr is not None else (row.price_hr if row else None)
    if price is None:
        raise InputError(f"no on-demand offer for {per_node}x {gpu} in the price snapshots",
                         hint="pass --price-hr")
    # A custom offer, not the provider's: your price for a group where the offer's provider
    # launches one node.
    own = row is not None and not (
        args.price_hr is not None and node_limit(row.provider) < args.max_nodes)
    record: dict[str, Any] = {
        "provider": row.provider if row and own else "custom",
        "region": row.region if row and own else "custom",
        "instance_type": row.instance_type if row else bare_name,
        "gpu": gpu,
        "gpu_count": per_node,
        "gpu_memory_gb": min(get_gpu(g).memory_gb for g in members),
        "price_hr": price,
        "intra_node_link": args.link or "",
    }
    if row is not None:
        original = next(s for s in request.snapshots if s.source == row.source)
        mask = ((original.offers["instance_type"] == row.instance_type)
                & (original.offers["region"] == row.region))
        i = int(mask.nonzero()[0][0])
        for name in ("storage_gb_month", "egress_gb", "ingress_gb", "month_hours", "reliability",
                     "network_gbps"):
            record[name] = float(original.offers[name][i])
        if not args.link:
            record["intra_node_link"] = str(original.offers["intra_node_link"][i])
    now = request.now or dt.datetime.now(dt.UTC)
    return Snapshot(source=OVERRIDE_SOURCE, fetched_at=now, offers=Offers.from_records([record]))


def _try_rank(request: Request) -> Ranking | None:
    """The ranking, or None when no offer matches (the overrides may still price the group)."""
    from gpucost.errors import NoOffersError
    from gpucost.planning.ranking import rank

    try:
        return rank(request)
    except NoOffersError:
        return None


def _first_fit(plans: Plans, max_nodes: int = 1) -> tuple[PlanRow | None, str]:
    """The first (cheapest) plan at the fewest nodes that fit (1, unless the model's training
    state needs sharding over more GPUs than one node holds), on a provider where a group of
    ``max_nodes`` can be launched if there is one: a curve is no curve on one node. With it, a
    note when that passed over a cheaper plan ("" when not)."""
    import numpy as np

    if not plans.nodes.size:
        return None, ""
    fewest = plans.nodes == plans.nodes.min()
    scales = np.array([node_limit(str(p)) >= max_nodes for p in plans.provider], dtype=bool)
    candidates = np.flatnonzero(fewest & scales)
    first = int(np.flatnonzero(fewest)[0])
    if not candidates.size or int(candidates[0]) == first:
        return plans.row(first), ""
    row, cheaper = plans.row(int(candidates[0])), plans.row(first)
    from gpucost.format import usd

    skipped = sorted({str(p) for p in plans.provider[fewest & ~scales]})
    return row, (
        f"offers on {', '.join(skipped)} left out: gpucost launches one node only there; the "
        f"cheapest, {cheaper.label()}, is {usd(cheaper.cost_usd, exact=True)}/job at "
        f"{cheaper.nodes} node(s), where this curve starts at {usd(row.cost_usd, exact=True)} "
        f"(its curve: --price-hr {cheaper.price_hr:g})")


def _gpus_per_node(request: Request, gpu: str) -> tuple[int, str]:
    """-k when not given: 1, or the fewest whole GPUs per node of any on-demand offer for the GPU
    when none has one (with a note saying so)."""
    from dataclasses import replace

    import numpy as np

    found = _try_rank(replace(request, filters=replace(request.filters, max_nodes=1)))
    counts = found.plans.gpu_count if found is not None else np.array([])
    whole = sorted({int(c) for c in counts.tolist() if c >= 1 and float(c).is_integer()})
    if not whole or whole[0] == 1:
        return 1, ""
    return whole[0], (f"-k not given: no on-demand offer has 1 x {gpu} per node, so "
                      f"{whole[0]} per node, the fewest one has (-k K to choose)")


def build_curve(args: argparse.Namespace) -> tuple[Request, Scaling, str, list[str]]:
    """The request, the offer's curve, where its price comes from and notes on what was left
    out or defaulted."""
    from dataclasses import replace

    from gpucost.cli.jobargs import request_from_args
    from gpucost.cli.predict import group_gpus
    from gpucost.errors import InputError
    from gpucost.model.translate import gpu_spec
    from gpucost.planning.ranking import rank
    from gpucost.planning.scaling import offer_curve
    from gpucost.profile import resolve_profile

    if args.max_nodes < 1:
        raise InputError(f"--max-nodes must be at least 1, got {args.max_nodes}")
    if args.price_hr is not None and not args.price_hr > 0:
        raise InputError(f"--price-hr must be positive, got {args.price_hr}")
    if args.plot:
        from gpucost.cli.outputs import check_output_file

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
        return _mixed_curve(args, profile, [gpu_spec(g).name for g in mixed])
    if gpu is None and profile.gpu == "CPU":
        raise InputError("this profile was measured on the CPU: pass --gpu")
    notes: list[str] = []
    if gpu is not None:
        from gpucost.catalog import variant_note

        notes.append(variant_note(gpu))
    gpu = gpu_spec(gpu or profile.gpu).name
    # the GPU named decides the host (a GH200 is a Grace host): any CPU architecture
    request = request_from_args(args, gpu=gpu, gpu_count=None, market="on-demand",
                                max_nodes=2 * args.max_nodes, provider=None, region=None,
                                cpu_arch="any", **_job_args(profile, args))
    if args.gpus_per_node is None:
        per_node, note = _gpus_per_node(request, gpu)
        notes.append(note)
    request = replace(request, filters=replace(request.filters, gpu_counts=(float(per_node),)))
    ranking = _try_rank(request)
    single, skipped = _first_fit(ranking.plans, args.max_nodes) if ranking is not None else (
        None, "")
    label = (f"{single.provider} {single.instance_type} ({single.region}), prices of "
             f"{single.price_date}" if single else "")
    if args.price_hr is not None or args.link or single is None:
        request = replace(request, snapshots=(_override_snapshot(request, single, gpu, per_node,
                                                                  args),))
        ranking = rank(request)
        if args.price_hr is not None:
            label = "--price-hr"
            skipped = ""  # your price, not the cheapest offer's
        if not ranking.plans.nodes.size:
            raise InputError(f"no group of {per_node}x {gpu} fits the profile's batch",
                             hint=ranking.notes[-1] if ranking.notes else "")
        single, _ = _first_fit(ranking.plans)
    assert ranking is not None and single is not None
    notes.append(skipped)
    return (request, offer_curve(ranking.plans, single, args.max_nodes), label,
            [n for n in notes if n])


def _mixed_curve(args: argparse.Namespace, profile: Profile,
                 node: list[str]) -> tuple[Request, Scaling, str, list[str]]:
    """A mixed node at --price-hr: one bare offer named after the slowest member (the pace
    predict gives the group), ranked by the planning core with ``Request.node_gpus``."""
    from dataclasses import replace

    from gpucost.cli.jobargs import request_from_args
    from gpucost.errors import InputError
    from gpucost.model.perf import predict
    from gpucost.planning.ranking import rank
    from gpucost.planning.scaling import offer_curve

    slowest = predict(profile, gpus_per_node=len(node), member_gpus=node).gpu
    request = request_from_args(args, gpu=slowest, gpu_count=[float(len(node))],
                                market="on-demand", max_nodes=2 * args.max_nodes, provider=None,
                                region=None, cpu_arch="any", **_job_args(profile, args))
    request = replace(request, node_gpus=tuple(node))
    request = replace(request, snapshots=(_override_snapshot(request, None, slowest, len(node),
                                                              args),))
    ranking = rank(request)
    if not ranking.plans.nodes.size:
        raise InputError(f"no mixed node of {' + '.join(node)} fits the profile's batch",
                         hint=ranking.notes[-1] if ranking.notes else "")
    single, _ = _first_fit(ranking.plans)
    assert single is not None
    return request, offer_curve(ranking.plans, single, args.max_nodes), "--price-hr", []


def _node_label(request: Request, row: PlanRow) -> str:
    """``8 x L4``, or a mixed node's GPUs: ``A100 SXM4 80GB + T4``."""
    if request.node_gpus:
        return " + ".join(request.node_gpus)
    return f"{row.gpu_count:g} x {row.gpu}"


def render(request: Request, scaling: Scaling, label: str, notes: list[str]) -> str:
    from gpucost.format import hours, usd
    from gpucost.planning.scaling import curve_note

    profile = request.profile
    first = scaling.points[0].row
    unit = profile.sample_unit
    price = (f"{usd(first.price_hr, exact=True)}/h per node ({label})" if label == "--price-hr"
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
    lines += [f"note: {n}" for n in notes]
    lines.append(f"time and $/job include {hours(first.setup_hours, exact=True)} of setup per "
                 f"start, as in `gpucost compare`: {first.setup_source}")
    return "\n".join(lines)


def plot(scaling: Scaling, path: str, title: str) -> None:
    import io

    from gpucost.extras import require

    matplotlib = require("matplotlib", needed_for="scale --plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpucost._io import atomic_write_bytes

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
    from gpucost.errors import InputError
    from gpucost.planning.scaling import batch_efficiency

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
    request, scaling, label, notes = build_curve(args)
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
            "price_source": label,
            "setup_minutes": first.setup_minutes if first.provider != "local" else 0.0,
            "setup_source": first.setup_source,
            "knee_nodes": scaling.knee,
            "notes": notes,
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
        print(render(request, scaling, label, notes))
        if batches:
            print(render_batches(batches))
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0
