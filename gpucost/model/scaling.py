"""Data-parallel scaling: gradient all-reduce time and how much of it backward hides.

All-reduce is NCCL's ring. Inside one node of K GPUs, S gradient bytes per GPU take

    t = 2(K-1)/K * S / busbw_intra + 2(K-1) * alpha_intra

Across N nodes the ring is flat: it runs through all R = K*N GPUs and crosses every node's
network once each way, so each node's NIC carries the whole ring's 2(R-1)/R * S, not the
2(N-1)/N * S of a hierarchical (reduce-scatter, shard all-reduce, all-gather) scheme. The ring
moves at its slowest link while the others stream alongside:

    t = 2(R-1)/R * S / min(busbw_intra, busbw_net) + 2(K-1) * alpha_intra + 2(N-1) * alpha_net

This is how nccl-tests defines the inter-node "bus bandwidth" its anchors report (algbw x
2(R-1)/R, over all R ranks; a NIC's busbw is about its line rate, NCCL's maintainers say), so
the fitted network efficiencies mean what the formula uses. Latency counts hops per node, as
NCCL's tree algorithm does where the flat ring's 2(R-1) steps would dominate (small buckets).

busbw is NCCL's "bus bandwidth" (what nccl-tests prints), a fitted fraction of the link's line
rate (NVLink, PCIe, or the node's network; a fitted factor can slow two-node groups, as on
the Sia traces' AWS cluster, shipped as 1). Between nodes the fabric's transport
(:mod:`gpucost.model.fabrics`) picks the coefficients: RDMA fabrics (InfiniBand, EFA, RoCE) reach
most of the line rate at microsecond hop latency (the NCCL anchors); TCP sockets over Ethernet
reach less than half of it with hops of tens of microseconds (published NCCL socket runs). A
network that caps each TCP stream holds sockets to that cap times the streams NCCL opens (NCCL
splits a transfer evenly over its sockets, so it moves at the slowest socket's speed times their
number, its maintainers say: nccl-tests issue 83). AWS limits a stream between instances
outside a cluster placement group to 5 Gbit/s (EC2 user guide, "instance network bandwidth"),
and NCCL's socket transport opens one socket per connection unless it sees an AWS ENA NIC, where
it opens 16 (2 threads x 8 sockets; net_socket.cc). In a container on a bridge or overlay
network it does not see the NIC, so such a job moves at 5 Gbit/s whatever the instance's rating.
PCIe traffic between GPUs crosses the host, whose aggregate bandwidth the node's K GPUs share,
so PCIe busbw falls as K grows (as NCCL's maintainers describe for PCI systems); NVLink/NVSwitch
busbw does not. GPUs in containers that NCCL sees as hosts of their own (its host hash is the
hostname and boot id, so every Kubernetes pod is one unless NCCL_HOSTID says otherwise: NCCL
issue 1781, "Problems with using NVLink across Kubernetes Pods on a same node") use neither
NVLink nor PCIe peer copies nor shared memory between them: NCCL's network transport carries
even the hops inside a node, as TCP sockets through the host's kernel where the container has no
RDMA device. Each hop is then a copy through the host, whose kernel the node's k containers
share: the "socket" link, busbw = socket_host_busbw / k (fitted on the Sia traces, whose jobs ran
that way), at the socket transport's hop latency. The part of t that
backward does not hide follows Pollux's goodput model:
step = (work^gamma + sync^gamma)^(1/gamma), gamma >= 1 fitted (1: no overlap; large: the
longer of the two), work being what the step does on the host and the device: the sync runs on
its own stream while the host launches and the device computes, and it is against whole
measured steps that gamma is fitted. With gradient accumulation over s micro-steps only the
last one syncs.

Every sync also waits for the slowest rank. Step times vary from step to step (the batch's
content, input lengths, the host), independently on each rank, and the all-reduce cannot finish
before the last rank reaches it: a group of R ranks whose steps are normal with standard
deviation sigma pays E[max of R] - E[one] = sigma x e(R) a step, e(R) the expected maximum of R
standard normal draws (0 for one rank, 1/sqrt(pi) for two, 1.42 for eight, growing like
sqrt(2 ln R)): the fan-in tail of Dean and Barroso's "The Tail at Scale" (CACM 2013), measured for
synchronous SGD by Chen et al., "Revisiting Distributed Synchronous SGD" (2016). sigma is the
step's coefficient of variation times the step: the profile's own where its step times were
measured (p10-p90), else the calibration's, fitted on Lambda's one-node runs of 2-8 NVLink
GPUs with peer copies on (through the host the sync itself is most of what a group loses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from gpucost.catalog.spec import GpuSpec
from gpucost.errors import InputError
from gpucost.model.calibration import InterLink, IntraLink, Scaling

LINK_KINDS = ("nvlink", "pcie", "socket", "")
TRANSPORTS = ("rdma", "tcp")


@dataclass(frozen=True, slots=True)
class Links:
    """Achievable all-reduce bus bandwidths (bytes/s) and per-hop latencies (s) of a group."""

    intra_busbw_Bps: float
    inter_busbw_Bps: float
    intra_latency_s: float
    inter_latency_s: float
    intra_kind: str  # "nvlink" | "pcie" | "socket"
    # Aggregate bandwidth of the host path PCIe traffic shares inside a node (root complex, CPU
    # memory): with K GPUs each gets at most host_busbw_Bps / K. Unlimited for NVLink. Fitted as
    # a multiple of one GPU's PCIe rate, so newer platforms scale with their PCIe generation;
    # for sockets between containers, what the host's kernel moves for all of them.
    host_busbw_Bps: float = math.inf
    # Two-node groups reach 1/factor of the network bus bandwidth larger groups do (fitted per
    # cluster on the Sia traces; 1.0: no difference).
    two_node_network_factor: float = 1.0


def _uses_nvlink(spec: GpuSpec, link: str | None, gpus_per_node: int) -> bool:
    if link in ("pcie", "socket") or spec.nvlink_gbs <= 0.0:
        return False
    if spec.form_factor.startswith("PCIe"):
        # A bridge joins two cards; a ring over more crosses PCIe anyway. Rented PCIe cards
        # rarely have the bridge, so it counts only when the offer says "nvlink".
        return link == "nvlink" and gpus_per_node <= 2
    # SXM/OAM boards are NVLink/NVSwitch (or Infinity Fabric) meshes.
    return True


def resolve_links(spec: GpuSpec, scaling: Scaling, *, intra_node_gbps: float | None,
                  inter_node_gbps: float | None, intra_node_link: str | None,
                  gpus_per_node: int = 8, inter_node_transport: str | None = None,
                  tcp_stream_gbps: float | None = None, tcp_streams: int = 1) -> Links:
    """Bus bandwidths for a group of ``spec`` GPUs.

    ``intra_node_gbps`` / ``inter_node_gbps`` are line rates in Gbit/s (per GPU per direction
    inside a node; per node on the network, as the offers' ``network_gbps``); ``None`` takes the
    catalog's NVLink/PCIe figure and the calibrated default network. ``inter_node_transport``:
    "rdma" or "tcp" (an offer's, from :func:`gpucost.model.fabrics.resolve_fabrics`); ``None``
    takes the RDMA coefficients, as before fabrics were known. ``tcp_stream_gbps``: the
    network's cap on one TCP stream (``None``: none), over ``tcp_streams`` streams per
    connection (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD); TCP only.
    """
    if inter_node_transport is not None and inter_node_transport not in TRANSPORTS:
        raise InputError(f"inter_node_transport {inter_node_transport!r} is not rdma or tcp",
                         hint="pass the fabric's transport, or None")
    net: InterLink = "tcp" if inter_node_transport == "tcp" else "network"
    stream_cap_Bps = _stream_cap_Bps(net, tcp_stream_gbps, tcp_streams)
    if intra_node_link is not None and intra_node_link not in LINK_KINDS:
        raise InputError(f"intra_node_link {intra_node_link!r} is not one of nvlink, pcie, "
                         "socket or ''",
                         hint="pass the offers table's intra_node_link value, or None")
    nvlink = _uses_nvlink(spec, intra_node_link, gpus_per_node)
    kind: IntraLink = ("socket" if intra_node_link == "socket"
                       else "nvlink" if nvlink else "pcie")
    socket_host_Bps = scaling.socket_host_busbw_gbs * 1e9
    if intra_node_gbps is not None:
        if not intra_node_gbps > 0:
            raise InputError(f"intra_node_gbps must be positive Gbit/s, got {intra_node_gbps!r}")
        intra_Bps = intra_node_gbps * 1e9 / 8.0 * scaling.busbw_efficiency(kind)
    elif kind == "socket":
        # No line between two containers: one alone gets what the host's kernel moves.
        intra_Bps = socket_host_Bps
    elif nvlink:  # the catalog lists both directions together
        intra_Bps = spec.nvlink_gbs * 1e9 / 2.0 * scaling.busbw_efficiency(kind)
    else:
        intra_Bps = spec.pcie_gbs * 1e9 * scaling.busbw_efficiency(kind)
    network_gbps = scaling.default_network_gbps if inter_node_gbps is None else inter_node_gbps
    if not network_gbps > 0:
        raise InputError(f"inter_node_gbps must be positive Gbit/s, got {inter_node_gbps!r}")
    return Links(
        intra_busbw_Bps=intra_Bps,
        inter_busbw_Bps=min(network_gbps * 1e9 / 8.0 * scaling.busbw_efficiency(net),
                            stream_cap_Bps),
        intra_latency_s=scaling.hop_latency_s(kind),
        inter_latency_s=scaling.hop_latency_s(net),
        intra_kind=kind,
        host_busbw_Bps=(math.inf if nvlink else socket_host_Bps if kind == "socket"
                        else scaling.host_busbw_factor * spec.pcie_gbs * 1e9),
        two_node_network_factor=scaling.two_node_network_factor,
    )


def _stream_cap_Bps(net: InterLink, stream_gbps: float | None, streams: int) -> float:
    """What ``streams`` TCP streams of at most ``stream_gbps`` each carry, bytes/s (unlimited
    without a cap)."""
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise InputError(f"tcp_streams must be a positive integer, got {streams!r}",
                         hint="NCCL opens 1 socket per connection, 16 where it sees an AWS NIC")
    if stream_gbps is None:
        return math.inf
    if net != "tcp":
        raise InputError("a TCP stream cap was given, but the transport is not tcp",
                         hint="a stream cap applies to tcp sockets (--transport tcp); drop it "
                         "for rdma")
    if isinstance(stream_gbps, bool) or not (
            isinstance(stream_gbps, (int, float)) and 0.0 < stream_gbps < math.inf):
        raise InputError(f"tcp_stream_gbps must be positive Gbit/s, got {stream_gbps!r}",
                         hint="AWS caps a stream at 5 outside a cluster placement group")
    return streams * float(stream_gbps) * 1e9 / 8.0


def node_busbw_Bps(links: Links, gpus_per_node: int) -> float:
    """Bus bandwidth a ring gets inside one node of ``gpus_per_node`` GPUs: the link's, or
    each GPU's share of the host where all of their traffic crosses it (PCIe, sockets)."""
    return min(links.intra_busbw_Bps, links.host_busbw_Bps / max(gpus_per_node, 1))


def allreduce_time_s(nbytes: float, gpus_per_node: int, nodes: int, links: Links) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` per GPU over ``nodes`` x ``gpus_per_node``
    GPUs (0 for one GPU)."""
    k, n = gpus_per_node, nodes
    ranks = k * n
    if ranks <= 1:
        return 0.0
    busbw = node_busbw_Bps(links, k) if k > 1 else math.inf
    if n > 1:
        busbw = min(busbw, links.inter_busbw_Bps
                    / (links.two_node_network_factor if n == 2 else 1.0))
    latency = 2.0 * (k - 1) * links.intra_latency_s + 2.0 * (n - 1) * links.inter_latency_s
    return 2.0 * (ranks - 1) / ranks * nbytes / busbw + latency


@lru_cache(maxsize=256)
def expected_max_normal(ranks: int) -> float:
    """E[max of ``ranks`` independent standard normal draws] (0 for one): the integral of
    x R phi(x) Phi(x)^(R-1) by the midpoint rule over +-10 standard deviations (exact to 1e-9)."""
    if ranks <= 1:
        return 0.0
    steps, lo, hi = 4000, -10.0, 10.0
    width = (hi - lo) / steps
    total = 0.0
    for i in range(steps):
        x = lo + (i + 0.5) * width
        density = math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        below = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
        total += x * ranks * density * below ** (ranks - 1)
    return total * width


def straggler_wait_s(step_s: float, cv: float, ranks: int) -> float:
    """Seconds a sync of ``ranks`` ranks waits for the slowest, whose steps of mean ``step_s``
    vary with coefficient of variation ``cv`` independently (0 for one rank)."""
    return cv * step_s * expected_max_normal(ranks)


def overlapped_s(compute_s: float, sync_s: float, gamma: float) -> float:
    """Wall time of a backward pass of ``compute_s`` with a gradient sync of ``sync_s`` (Pollux)."""
    if sync_s <= 0.0:
        return compute_s
    if compute_s <= 0.0:
        return sync_s
    hi, lo = (compute_s, sync_s) if compute_s >= sync_s else (sync_s, compute_s)
    # Factor out the larger term so large gamma cannot overflow.
    return float(hi * (1.0 + (lo / hi) ** gamma) ** (1.0 / gamma))


def compute_given_step_s(step_s: float, sync_s: float, gamma: float,
                         wait_share: float = 0.0) -> float:
    """Inverse of :func:`overlapped_s` in ``compute_s``: the work (host and device) a measured
    step hid its sync behind. With a wait for the slowest rank of ``wait_share`` of it
    (``straggler_wait_s``'s cv x e(R)), that work alone.

    Clamped so a sync estimate larger than the measured step leaves a small positive compute.
    """
    floor = 0.05 * step_s
    if wait_share > 0.0:
        # The step grows with the work: bisect for the work that gives it.
        lo, hi = 0.0, step_s
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            step = overlapped_s(mid, sync_s, gamma) + wait_share * mid
            lo, hi = (mid, hi) if step < step_s else (lo, mid)
        return max(lo, floor)
    if sync_s <= 0.0:
        return step_s
    rest = step_s**gamma - sync_s**gamma
    if rest <= 0.0:
        return floor
    return max(float(rest ** (1.0 / gamma)), floor)
