"""Each offer's inter-node fabric, from the providers' published instance specs.

``fabrics.csv`` holds one rule per provider and instance type (``fnmatch`` patterns; the first
rule that matches wins, so exact types come before a provider's ``*``): the fabric's name, its
transport and the line rate per node in Gbit/s, each with its source. The transport decides how
the sync model treats the network (:func:`gpucost.model.scaling.resolve_links`):

* ``rdma``: InfiniBand, AWS EFA, RoCE and GCP's GPUDirect-TCPX/O, where NCCL's network plugin
  moves gradients without host copies; bus bandwidth and latency from the NCCL inter-node anchors.
* ``tcp``: NCCL's socket transport over plain Ethernet; bus bandwidth and latency from published
  nccl-tests runs over TCP with 8 GPUs per node (scripts/fit_calibration.py, TCP anchors).

A rule without a bandwidth takes the offer's own ``network_gbps`` (AWS states it per instance;
Vast states the host's internet link), else the calibrated default. Marketplaces publish no
fabric: "unknown", assumed TCP at that bandwidth, and the description says so. EFA counts as
RDMA when the instance is launched with its EFA interface and aws-ofi-nccl, as AWS's deep
learning images ship it.

A network the user names (``--network-gbps``, ``--transport``) replaces the line rate and
transport of every offer's fabric and keeps its name; the description says what was set. A
transport not named stays the fabric's (RDMA only where the provider publishes it), and
:func:`default_transport` is what a bare group without an offer (`gpucost predict`) assumes.
"""

from __future__ import annotations

import csv
import fnmatch
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpucost.errors import FabricFileError as FabricFileError  # re-exported: its old home
from gpucost.errors import InputError
from gpucost.factor import Factor
from gpucost.model.translate import calibration

CSV_PATH = Path(__file__).with_name("fabrics.csv")
TRANSPORTS = ("rdma", "tcp")
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class FabricRule:
    provider: str
    instance_type: str  # fnmatch pattern
    fabric: str
    transport: str | None  # None: not published
    gbps: float | None  # None: the offer's network_gbps, else the default
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class Fabric:
    """The inter-node fabric one offer's nodes talk over."""

    name: str  # "EFA v2", "InfiniBand NDR", "Ethernet (ENA)", "unknown"
    transport: str  # "rdma" | "tcp"; an unpublished fabric is assumed "tcp"
    gbps: float  # line rate per node, Gbit/s
    assumed: str  # "" when published; otherwise what was assumed and why
    source: str

    def describe(self) -> str:
        text = f"{self.name} {self.gbps:g} Gbit/s ({self.transport})"
        return f"{text}; assumed: {self.assumed}" if self.assumed else text


@dataclass(frozen=True, slots=True)
class Fabrics:
    """:class:`Fabric` fields as columns aligned with an offers table."""

    gbps: np.ndarray  # float, Gbit/s per node
    transport: np.ndarray  # str, "rdma" | "tcp"
    description: np.ndarray  # str, Fabric.describe()


def _parse(row: dict[str, str], line: int) -> FabricRule:
    try:
        transport = row["transport"].strip() or None
        gbps_text = row["gbps"].strip()
        rule = FabricRule(
            provider=row["provider"].strip(), instance_type=row["instance_type"].strip(),
            fabric=row["fabric"].strip(), transport=transport,
            gbps=float(gbps_text) if gbps_text else None, source=row["source"].strip(),
            confidence=row["confidence"].strip())
    except (KeyError, AttributeError, ValueError) as err:
        raise FabricFileError(f"{CSV_PATH.name} line {line}: {err}") from err
    if transport is not None and transport not in TRANSPORTS:
        raise FabricFileError(f"{CSV_PATH.name} line {line}: transport {transport!r}")
    if rule.gbps is not None and not (math.isfinite(rule.gbps) and rule.gbps > 0):
        raise FabricFileError(f"{CSV_PATH.name} line {line}: gbps {rule.gbps!r}")
    if not (rule.provider and rule.instance_type and rule.fabric and rule.source):
        raise FabricFileError(f"{CSV_PATH.name} line {line}: empty provider, type, fabric or "
                              "source")
    return rule


def read_rules(path: Path = CSV_PATH) -> tuple[FabricRule, ...]:
    with path.open(newline="", encoding="utf-8") as handle:
        return tuple(_parse(row, line) for line, row in enumerate(csv.DictReader(handle), 2))


@functools.cache
def rules() -> tuple[FabricRule, ...]:
    """The shipped rules, in file order (loaded once)."""
    return read_rules()


def default_transport() -> str:
    """The transport of a group no offer describes: TCP sockets, the transport of a fabric
    that is not published (RDMA only where a provider publishes it)."""
    return "tcp"


def check_transport(transport: str | None) -> str | None:
    """``transport`` if it is one of :data:`TRANSPORTS` (or None); a usage error otherwise."""
    if transport is not None and transport not in TRANSPORTS:
        raise InputError(f"transport must be rdma or tcp, got {transport!r}",
                         hint="rdma: InfiniBand, EFA or RoCE; tcp: plain Ethernet")
    return transport


def default_gbps() -> float:
    return calibration().scaling.default_network_gbps


def _rule_for(provider: str, instance_type: str) -> int:
    """Index in :func:`rules` of the first rule matching, ``len(rules())`` when none does."""
    return next((i for i, r in enumerate(rules()) if r.provider == provider
                 and fnmatch.fnmatchcase(instance_type, r.instance_type)), len(rules()))


@functools.lru_cache(maxsize=4096)
def _fabric(rule_index: int, provider: str, network_gbps: float | None,
            set_gbps: float | None = None, set_transport: str | None = None) -> Fabric:
    rule = rules()[rule_index] if rule_index < len(rules()) else None
    name = rule.fabric if rule is not None else UNKNOWN
    source = rule.source if rule is not None else f"no fabric rule for provider {provider!r}"
    assumed: list[str] = []
    transport = set_transport or (rule.transport if rule is not None else None)
    if transport is None:
        transport = default_transport()
        assumed.append("no published fabric, so TCP sockets")
    gbps = rule.gbps if rule is not None and rule.gbps is not None else network_gbps
    if set_gbps is not None:
        gbps = set_gbps
    elif gbps is None:
        gbps = default_gbps()
        assumed.append(f"bandwidth not stated, so the default {gbps:g} Gbit/s")
    named = [w for w, v in (("--network-gbps", set_gbps), ("--transport", set_transport)) if v]
    if named:
        assumed.append(f"{' and '.join(named)} as given")
    return Fabric(name, transport, float(gbps), ", ".join(assumed), source)


def _stated(network_gbps: float | None) -> float | None:
    ok = network_gbps is not None and math.isfinite(network_gbps) and network_gbps > 0
    return network_gbps if ok else None


def fabric_for(provider: str, instance_type: str, network_gbps: float | None = None) -> Fabric:
    """The fabric of one offer; ``network_gbps`` is the offer's stated bandwidth (None/NaN:
    not stated)."""
    rule = _rule_for(provider, instance_type)
    return _fabric(rule, "" if rule < len(rules()) else provider, _stated(network_gbps))


def _rule_indices(provider: Factor, instance_type: np.ndarray) -> np.ndarray:
    """:func:`_rule_for` of every row, one vectorised comparison per rule."""
    table = rules()
    out = np.full(len(instance_type), len(table), dtype=np.int64)
    for k, name in enumerate(provider.values.tolist()):
        rows = np.flatnonzero(provider.codes == k)
        types = instance_type[rows]
        open_rows = np.ones(len(rows), dtype=bool)
        for i, rule in enumerate(table):
            if rule.provider != name or not open_rows.any():
                continue
            if rule.instance_type == "*":
                hit = open_rows.copy()
            elif not any(c in rule.instance_type for c in "*?["):
                hit = open_rows & (types == rule.instance_type)
            else:
                hit = open_rows & np.array([fnmatch.fnmatchcase(str(t), rule.instance_type)
                                            for t in types], dtype=bool)
            out[rows[hit]] = i
            open_rows &= ~hit
    return out


def resolve_fabrics(provider: np.ndarray | Factor, instance_type: np.ndarray,
                    network_gbps: np.ndarray, *, set_gbps: float | None = None,
                    set_transport: str | None = None) -> Fabrics:
    """:func:`fabric_for` over an offers table's columns: one comparison per rule, one
    :class:`Fabric` per distinct (rule, stated bandwidth). ``provider`` may be the column's
    factor (a ranking's, computed once). ``description`` is an object array (each distinct text
    stored once). ``set_gbps`` and ``set_transport``: the network the user named, in place of
    every fabric's line rate and transport."""
    check_transport(set_transport)
    if len(instance_type) == 0:
        return Fabrics(np.array([], dtype=float), np.array([], dtype=str),
                       np.array([], dtype=object))
    providers = provider if isinstance(provider, Factor) else Factor.of(np.asarray(provider))
    rule = _rule_indices(providers, np.asarray(instance_type))
    net = np.asarray(network_gbps, dtype=float)
    net = np.where(np.isfinite(net) & (net > 0), net, -1.0)
    # rows without a rule keep their provider (its name goes into the source text): code 0 is
    # "a rule matched", the provider's own code shifted by one otherwise
    unmatched = rule == len(rules())
    p_code = np.where(unmatched, providers.codes + 1, 0)
    net_values = Factor.of(net)
    # one integer per distinct (rule, provider, bandwidth); the radices are the exact counts
    key = (rule * (providers.radix + 1) + p_code) * net_values.radix + net_values.codes
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    found = [_fabric(int(rule[i]), str(providers.values[p_code[i] - 1]) if unmatched[i] else "",
                     None if net[i] < 0 else float(net[i]), set_gbps, set_transport)
             for i in first]
    inverse = inverse.reshape(-1)
    description = np.empty(len(found), dtype=object)
    description[:] = [f.describe() for f in found]
    return Fabrics(
        gbps=np.array([f.gbps for f in found], dtype=float)[inverse],
        transport=np.array([f.transport for f in found])[inverse],
        description=description[inverse],
    )
