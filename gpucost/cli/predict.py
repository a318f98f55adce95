"""`gpucost predict`: a profile's step time and throughput on another GPU and node count."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from gpucost.catalog import variant_note
from gpucost.cli import add_command
from gpucost.cli.numbers import count, positive
from gpucost.envelope import add_format_argument, print_document
from gpucost.errors import InputError
from gpucost.limits import (
    MAX_GPUS_PER_NODE,
    MAX_GRAD_ACCUM,
    MAX_NETWORK_GBPS,
    MAX_NODES,
    MAX_TCP_STREAMS,
)
from gpucost.measurements import source_for
from gpucost.model.fabrics import TRANSPORTS, default_transport
from gpucost.model.perf import Prediction, measured_step_time_cv, predict
from gpucost.model.translate import workload_signature
from gpucost.profile import resolve_profile
from gpucost.terminal import printable


def add_group_arguments(p: argparse.ArgumentParser, *,
                        per_node_help: str = "GPUs per node (default 1)") -> None:
    """Arguments shared with `gpucost scale`: the profile and the group's hardware."""
    p.add_argument("--profile", "-p",
                   help="profile JSON file or example name (default: resnet50-v100-amp)")
    p.add_argument("--gpu", "-g", action="append",
                   help="target GPU, any common spelling (default: the profile's); repeat it for "
                   "a mixed node, one --gpu per GPU in each node (the slowest sets the pace)")
    p.add_argument("--gpus-per-node", "-k", type=count(1, MAX_GPUS_PER_NODE), default=None,
                   metavar="K",
                   help=per_node_help)
    p.add_argument("--network-gbps", type=positive(MAX_NETWORK_GBPS), metavar="GBIT",
                   help="each node's network, Gbit/s (default: the offer's, else 50)")
    p.add_argument("--transport", choices=TRANSPORTS,
                   help="how gradients cross that network: rdma (InfiniBand, EFA, RoCE) or tcp "
                   "sockets (default: the offer's published fabric, tcp where none is "
                   "published or there is no offer)")
    p.add_argument("--link", choices=("nvlink", "pcie", "socket"),
                   help="GPU-to-GPU link inside a node (default: the catalog's for the GPU); "
                   "socket: one container per GPU that NCCL takes for a host of its own "
                   "(Kubernetes pods without a shared NCCL_HOSTID), whose GPUs exchange "
                   "gradients over TCP through the host")


def group_gpus(args: argparse.Namespace) -> tuple[str | None, int, list[str] | None]:
    """(GPU, GPUs per node, the members of one node if mixed) from ``--gpu`` and ``-k``.

    One ``--gpu``: every GPU is that one. Several: they are one node's GPUs, in order (``-k``,
    if given, must count them); every node holds the same mix.
    """
    names: list[str] = args.gpu or []
    if len(names) <= 1:
        return (names[0] if names else None), args.gpus_per_node or 1, None
    if args.gpus_per_node is not None and args.gpus_per_node != len(names):
        raise InputError(
            f"{len(names)} --gpu options name a node of {len(names)} GPUs, but "
            f"--gpus-per-node is {args.gpus_per_node}",
            hint="give one --gpu per GPU of a node, or one --gpu with -k",
        )
    return None, len(names), list(names)


def register(sub: Any) -> None:
    p = add_command(
        sub, "predict",
        description="Translate a measured training step to another GPU (roofline with "
        "calibrated efficiencies) and node count (NCCL ring all-reduce, partly hidden "
        "behind backward). The per-GPU batch stays the profile's unless --batch moves it.",
    )
    add_group_arguments(p)
    p.add_argument("--nodes", "-n", type=count(1, MAX_NODES), default=1,
                   help="nodes (default 1)")
    p.add_argument("--grad-accum", type=count(1, MAX_GRAD_ACCUM), default=1, metavar="S",
                   help="micro-steps per optimizer step; gradients sync once per S (default 1)")
    p.add_argument("--batch", "-b", type=int, default=None, metavar="B",
                   help="per-GPU batch on the target (default: the profile's); what a step pays "
                   "once whatever its batch is spread over B samples")
    p.add_argument("--tcp-stream-gbps", type=positive(MAX_NETWORK_GBPS), metavar="GBIT",
                   help="the network's cap on one TCP stream between nodes (AWS: 5 outside a "
                   "cluster placement group, 10 inside; default: no cap)")
    p.add_argument("--tcp-streams", type=count(1, MAX_TCP_STREAMS), default=1, metavar="N",
                   help="TCP streams NCCL spreads each connection over (default 1, NCCL's own; "
                   "it opens 16 where it sees an AWS NIC, which a container network hides)")
    add_format_argument(p)
    p.set_defaults(handler=run)


def prediction_dict(pred: Prediction, transport: str) -> dict[str, Any]:
    mem = pred.memory
    band = pred.band
    return {
        "profile": pred.profile.name,
        "source_gpu": pred.profile.gpu,
        "gpu": pred.gpu,
        "member_gpus": list(pred.member_gpus),
        "gpus_per_node": pred.gpus_per_node,
        "nodes": pred.nodes,
        "precision": pred.profile.precision,
        "batch_size_per_gpu": pred.batch_size,
        "grad_accum_steps": pred.grad_accum_steps,
        "batch_reduced_from": pred.batch_reduced_from,
        "keeps_global_batch": pred.keeps_global_batch,
        "sample_unit": pred.profile.sample_unit,
        "step_time_s": pred.step_time_s,
        "throughput": pred.throughput,
        "throughput_band": {"low": pred.throughput * band.low,
                            "high": pred.throughput * band.high, "basis": band.key},
        "single_gpu_throughput": pred.single_gpu_throughput,
        "efficiency": pred.efficiency,
        "breakdown_s": pred.breakdown.as_dict(),
        "allreduce_s": pred.allreduce_s,
        "straggler_wait_s": pred.straggler_wait_s,
        "step_time_cv": pred.step_time_cv,
        "gradient_bytes": pred.profile.gradient_bytes,
        "intra_node_link": pred.intra_node_link,
        "intra_busbw_gbs": pred.intra_busbw_gbs,
        "inter_busbw_gbs": pred.inter_busbw_gbs,
        "inter_node_transport": transport,
        "memory": {
            "fits": mem.fits,
            "peak_gb": mem.peak_gb,
            "usable_gb": mem.usable_gb,
            "basis": mem.basis,
            "micro_batch": mem.micro_batch,
            "grad_accum_steps": mem.grad_accum_steps,
            "advice": mem.advice,
        },
    }


@dataclass(frozen=True, slots=True)
class StepLine:
    """One optimizer step as ``fixed_s + per_sample_s x samples``: what it pays whatever its
    batch (launches, optimizer, gradient sync) and what each of a GPU's samples adds, as the
    model has it between the predicted batch and twice that batch."""

    fixed_s: float
    per_sample_s: float
    samples: int  # per GPU per optimizer step (micro-batch x accumulation steps)


def step_in_batch(pred: Prediction, doubled: Prediction) -> StepLine:
    """The line through ``pred`` and ``doubled`` (the same group at twice the micro-batch)."""
    samples = pred.batch_size * pred.grad_accum_steps
    per_sample = max(doubled.step_time_s - pred.step_time_s, 0.0) / samples
    return StepLine(fixed_s=pred.step_time_s - per_sample * samples, per_sample_s=per_sample,
                    samples=samples)


def render_table(pred: Prediction, transport: str, line: StepLine | None = None) -> str:
    prof = pred.profile
    # the profile's own text, as a file or a job wrote it: one line, no control characters
    name, unit = printable(prof.name, keep=""), printable(prof.sample_unit, keep="")
    b = pred.breakdown
    gpus = " + ".join(pred.member_gpus) if len(pred.member_gpus) > 1 else pred.gpu
    group = f"{pred.nodes} x {pred.gpus_per_node} {gpus}" if pred.nodes > 1 else (
        f"{pred.gpus_per_node} x {gpus}")
    accum = f" x {pred.grad_accum_steps} accumulation steps" if pred.grad_accum_steps > 1 else ""
    if pred.batch_size != prof.batch_size:
        accum = f" at batch {pred.batch_size}/GPU" + accum
    band = pred.band
    # a profile fitted from several measured GPUs is a prediction for its gpu, not a measurement
    origin = "fitted for" if prof.band_gpu else "measured on"
    lines = [
        f"{name}: {origin} {prof.device_count} x {prof.gpu}, {prof.precision}, "
        f"batch {prof.batch_size}/GPU -> {group}{accum}",
        f"  step time     {pred.step_time_s * 1e3:,.1f} ms  (compute {b.compute_s * 1e3:,.1f}, "
        f"communication {b.communication_s * 1e3:,.1f}, data {b.data_s * 1e3:,.1f}, "
        f"host {b.host_s * 1e3:,.1f} ms)",
        f"  throughput    {pred.throughput:,.0f} {unit}/s  (one GPU "
        f"{pred.single_gpu_throughput:,.0f} {unit}/s; scaling efficiency "
        f"{100 * pred.efficiency:.0f} %)",
    ]
    if band.low < band.high:
        lines.append(f"  error band    {pred.throughput * band.low:,.0f}-"
                     f"{pred.throughput * band.high:,.0f} {unit}/s for 8 in 10 held-out "
                     f"predictions ({band.key})")
    if line is not None:
        step = ("a step whatever its batch" if pred.grad_accum_steps == 1 else
                f"a step of {pred.grad_accum_steps} micro-steps whatever their batch")
        lines.append(f"  in the batch  {line.fixed_s * 1e3:,.1f} ms {step} + "
                     f"{line.per_sample_s * 1e3:,.3g} ms x {line.samples:,} {unit} per GPU")
    if pred.batch_note:
        lines.append(f"  batch         {pred.batch_note}")
    if pred.gpu_count > 1:
        lines.append(
            f"  all-reduce    {prof.gradient_bytes / 1e6:,.0f} MB/step, "
            f"{pred.allreduce_s * 1e3:,.1f} ms before overlap ({pred.intra_node_link} "
            f"{pred.intra_busbw_gbs:,.1f} GB/s bus"
            + (f", network {pred.inter_busbw_gbs:,.2f} GB/s over {transport}" if pred.nodes > 1
               else "") + ")")
        spread = ("the profile's p10-p90" if measured_step_time_cv(prof) is not None
                  else "calibrated")
        lines.append(f"  slowest GPU   {pred.straggler_wait_s * 1e3:,.1f} ms a step waiting for "
                     f"the slowest of {pred.gpu_count} (steps vary "
                     f"{100 * pred.step_time_cv:.1f} %, {spread})")
    lines.append(f"  memory        {pred.memory.advice}")
    sig = workload_signature(prof)
    if sig is not None and sig.description:
        # which built-in architecture the bytes, launches and activations come from: a name
        # matched to the wrong one shows here
        lines.append(f"  workload      {sig.name}: {sig.description}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    profile = resolve_profile(args.profile)
    gpu, per_node, mixed = group_gpus(args)
    members = None if mixed is None else mixed * max(args.nodes, 1)
    # the workload's own stored measurements on the target (a mixed node: its first GPU's)
    source = source_for(profile, gpu if mixed is None else mixed[0])
    # no offer publishes this group's fabric: the transport `scale` and `compare` assume for an
    # unpublished one, unless --transport names it
    transport = args.transport or default_transport()
    group: dict[str, Any] = {
        "gpu": gpu, "gpus_per_node": per_node, "nodes": args.nodes,
        "inter_node_gbps": args.network_gbps, "intra_node_link": args.link,
        "inter_node_transport": transport, "member_gpus": members,
        "tcp_stream_gbps": args.tcp_stream_gbps, "tcp_streams": args.tcp_streams}
    pred = predict(source.profile, grad_accum_steps=args.grad_accum, batch_size=args.batch,
                   **group)
    line = step_in_batch(pred, predict(source.profile, grad_accum_steps=pred.grad_accum_steps,
                                       batch_size=2 * pred.batch_size, fit_batch="keep",
                                       **group))

    # a family name ("A100") means several variants: say which one this prediction is for
    notes = [n for n in dict.fromkeys(variant_note(g) for g in args.gpu or []) if n]
    if args.format == "json":
        print_document("predict", {
            **prediction_dict(pred, transport),
            # the cap on one TCP stream between nodes the answer assumed (null: none)
            "tcp_stream_gbps": args.tcp_stream_gbps, "tcp_streams": args.tcp_streams,
            "step_in_batch": {"fixed_s": line.fixed_s, "per_sample_s": line.per_sample_s,
                              "samples_per_gpu": line.samples},
            "measurements": {"method": source.method,
                             "used": [m.describe() for m in source.used]},
            "notes": notes})
    else:
        # the table names a stream cap where it binds the network's figure
        how = (transport if args.tcp_stream_gbps is None else
               f"{transport}, {args.tcp_streams} x {args.tcp_stream_gbps:g} Gbit/s stream"
               + ("s" if args.tcp_streams > 1 else ""))
        print(render_table(pred, how, line))
        used = "; ".join(m.describe() for m in source.used) or "none stored for this workload"
        print(f"  measurements  {source.method}: {used}")
        for note in notes:
            print(f"  note          {note}")
    return 0
