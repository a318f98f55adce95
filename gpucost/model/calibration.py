"""The fitted coefficients of the performance model, typed: ``calibration.json`` (written by
``scripts/fit_calibration.py``) or a mapping of the same shape (a refit, a test's hand-set
values) is parsed and checked here once, so the model reads attributes, never string keys.

Keys the model has always treated as optional (power limits, GEMM efficiencies, per-step terms,
signature scales) default to empty tables, which the model reads as "not fitted". A malformed
file is reported in one line naming the field (:class:`gpucost.errors.CalibrationFileError`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal

from gpucost.errors import CalibrationFileError

# A calibration's tables: "GPU|precision class", "device class|precision class", precision
# class, generation... -> a coefficient.
Table = Mapping[str, float]
_EMPTY: Table = MappingProxyType({})


def _empty() -> Table:
    """A table the calibration does not fit (a read-only mapping cannot be a plain default)."""
    return _EMPTY


IntraLink = Literal["nvlink", "pcie", "socket"]
InterLink = Literal["network", "tcp"]


@dataclass(frozen=True, slots=True)
class Scaling:
    """The data-parallel sync model's coefficients (``gpucost.model.scaling``): achieved shares
    of each link's bus bandwidth and its per-hop latency, fitted on NCCL anchors and the Sia
    traces."""

    overlap_gamma: float  # Pollux overlap exponent of backward and gradient sync (1: none)
    nvlink_busbw_efficiency: float
    pcie_busbw_efficiency: float
    host_busbw_factor: float  # host bridge bandwidth, a multiple of one GPU's PCIe rate
    network_busbw_efficiency: float  # RDMA networks
    nvlink_hop_latency_s: float
    pcie_hop_latency_s: float
    network_hop_latency_s: float
    tcp_busbw_efficiency: float  # socket transport networks
    tcp_hop_latency_s: float
    # What a host's kernel moves for the TCP sockets of the containers on it, GB/s of all-reduce
    # bus bandwidth in all (its k containers share it): the "socket" link, containers that NCCL
    # sees as hosts of their own exchanging gradients on one node (fitted on the Sia traces).
    socket_host_busbw_gbs: float
    # Coefficient of variation of one rank's step time, for a profile that did not measure its
    # own spread: each sync waits for the slowest of its ranks (``scaling.straggler_wait_s``;
    # fitted on Lambda's one-node runs of 2-8 NVLink GPUs with peer copies on).
    straggler_cv: float
    default_network_gbps: float  # an offer that gives no network bandwidth
    two_node_network_factor: float = 1.0

    def busbw_efficiency(self, link: IntraLink | InterLink) -> float:
        """Achieved share of ``link``'s line rate as all-reduce bus bandwidth."""
        if link == "nvlink":
            return self.nvlink_busbw_efficiency
        if link == "pcie":
            return self.pcie_busbw_efficiency
        # A socket between containers on one host runs NCCL's TCP transport.
        return (self.tcp_busbw_efficiency if link in ("tcp", "socket")
                else self.network_busbw_efficiency)

    def hop_latency_s(self, link: IntraLink | InterLink) -> float:
        """Seconds one ring step over ``link`` costs whatever its size."""
        if link == "nvlink":
            return self.nvlink_hop_latency_s
        if link == "pcie":
            return self.pcie_hop_latency_s
        return (self.tcp_hop_latency_s if link in ("tcp", "socket")
                else self.network_hop_latency_s)


@dataclass(frozen=True, slots=True)
class Family:
    """A benchmarked model family's fitted bytes and host time per flop, per precision class,
    for profiles whose name or description contains one of ``match``."""

    key: str
    match: tuple[str, ...]
    bytes_per_flop: Table
    host_s_per_flop: Table
    step_bytes_per_flop: Table = field(default_factory=_empty)
    step_host_s_per_flop: Table = field(default_factory=_empty)
    # The fitted flops per sample and the parameter count of the benchmarked model: what the
    # per-flop terms are per, so that a member of the family of another size (ResNet-18 on
    # 32x32 CIFAR images against ResNet-50 on ImageNet's 224x224) pays the family's step costs
    # in seconds and bytes, not as a share of its own, smaller, work per sample.
    flops_per_sample: Table = field(default_factory=_empty)
    params: float | None = None


@dataclass(frozen=True, slots=True)
class SignatureScale:
    """Global scales on a signature's counted bytes and kernel launches, for workloads no
    family matches (per precision class)."""

    bytes: float
    step_bytes: float
    host_s_per_launch: float


@dataclass(frozen=True, slots=True)
class Calibration:
    """Every coefficient the model reads; see ``gpucost.model.translate`` for what each does."""

    launch_floor_s: float
    compute_efficiency_gpu: Table
    compute_efficiency_class: Table
    compute_efficiency_default: Table
    memory_efficiency_gpu: Table
    memory_efficiency_class: Table
    memory_efficiency_default: float
    families: tuple[Family, ...]
    default_bytes_per_flop: Table
    default_host_s_per_flop: Table
    scaling: Scaling
    compute_efficiency_default_cuda_core: float | None = None
    power_flops_per_joule: Table = field(default_factory=_empty)
    gemm_efficiency_gpu: Table = field(default_factory=_empty)
    gemm_efficiency_class: Table = field(default_factory=_empty)
    gemm_efficiency_default: Table = field(default_factory=_empty)
    class_efficiency: Table = field(default_factory=_empty)
    signature_scale: Mapping[str, SignatureScale] = field(default_factory=dict)
    default_host_s_per_sample: Table = field(default_factory=_empty)
    default_step_bytes_per_flop: Table = field(default_factory=_empty)
    default_step_host_s_per_flop: Table = field(default_factory=_empty)
    # What share of its listed FP32 rate a best-case matmul reaches on the GPUs the fit saw
    # running on CUDA cores (their efficiencies are relative to that): a GPU whose measured
    # matmul falls further short is held to its measurement (``translate.class_peak_tflops``).
    fp32_matmul_reached: float | None = None
    # Where the fit came from (data hashes, in-sample errors): recorded, never read by the model.
    provenance: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: Mapping[str, Any], source: str = "calibration") -> Calibration:
        """Check ``data`` (the JSON's shape) and build the typed calibration; one line naming
        the field (``source``: the file or what handed the mapping in) when it is malformed."""
        return _Parser(source).calibration(data)


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, what: str) -> CalibrationFileError:
        return CalibrationFileError(f"{self.source}: {where} {what}; refit it with "
                                    "scripts/fit_calibration.py")

    def section(self, data: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in data:
            raise self.fail(f"{where}{key}", "is missing")
        return data[key]

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value >= 0.0):
            raise self.fail(where, f"must be a finite number >= 0, got {value!r}")
        return float(value)

    def table(self, value: Any, where: str) -> Table:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"must be an object of numbers, got {type(value).__name__}")
        return MappingProxyType({str(k): self.number(v, f"{where}.{k}")
                                 for k, v in value.items()})

    def optional_table(self, data: Mapping[str, Any], key: str, where: str = "") -> Table:
        return self.table(data[key], f"{where}{key}") if key in data else _EMPTY

    def scaling(self, value: Any) -> Scaling:
        if not isinstance(value, Mapping):
            raise self.fail("scaling", f"must be an object, got {type(value).__name__}")
        self.known_keys(value, Scaling, "scaling.")
        numbers = {f.name: self.number(self.section(value, f.name, "scaling."),
                                       f"scaling.{f.name}")
                   for f in fields(Scaling) if f.name in value or f.default is MISSING}
        return Scaling(**numbers)

    def family(self, value: Any, where: str) -> Family:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"must be an object, got {type(value).__name__}")
        match = value.get("match")
        if not isinstance(match, list | tuple) or not all(isinstance(m, str) for m in match):
            raise self.fail(f"{where}.match", f"must be a list of strings, got {match!r}")
        return Family(
            key=str(value.get("key", "")), match=tuple(match),
            bytes_per_flop=self.table(self.section(value, "bytes_per_flop", f"{where}."),
                                      f"{where}.bytes_per_flop"),
            host_s_per_flop=self.table(self.section(value, "host_s_per_flop", f"{where}."),
                                       f"{where}.host_s_per_flop"),
            step_bytes_per_flop=self.optional_table(value, "step_bytes_per_flop", f"{where}."),
            step_host_s_per_flop=self.optional_table(value, "step_host_s_per_flop", f"{where}."),
            flops_per_sample=self.optional_table(value, "flops_per_sample", f"{where}."),
            params=(None if value.get("params") is None
                    else self.number(value["params"], f"{where}.params")))

    def signature_scales(self, data: Mapping[str, Any]) -> Mapping[str, SignatureScale]:
        value = data.get("signature_scale", {})
        if not isinstance(value, Mapping):
            raise self.fail("signature_scale", f"must be an object, got {type(value).__name__}")
        scales: dict[str, SignatureScale] = {}
        for pclass, scale in value.items():
            where = f"signature_scale.{pclass}"
            if not isinstance(scale, Mapping):
                raise self.fail(where, f"must be an object, got {type(scale).__name__}")
            scales[str(pclass)] = SignatureScale(**{
                name: self.number(self.section(scale, name, f"{where}."), f"{where}.{name}")
                for name in (f.name for f in fields(SignatureScale))})
        return MappingProxyType(scales)

    def known_keys(self, data: Mapping[str, Any], cls: type, where: str) -> None:
        """A misspelt key would otherwise be dropped silently and its default used."""
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise self.fail(f"{where}{key}", "is not a calibration field")

    def calibration(self, data: Mapping[str, Any]) -> Calibration:
        if not isinstance(data, Mapping):
            raise self.fail("the calibration", f"must be an object, got {type(data).__name__}")
        self.known_keys(data, Calibration, "")
        families = self.section(data, "families", "")
        if not isinstance(families, list | tuple):
            raise self.fail("families", f"must be a list, got {type(families).__name__}")
        cuda_core = data.get("compute_efficiency_default_cuda_core")
        provenance = data.get("provenance", {})
        if not isinstance(provenance, Mapping):
            raise self.fail("provenance", f"must be an object, got {type(provenance).__name__}")

        def required_table(key: str) -> Table:
            return self.table(self.section(data, key, ""), key)

        def required_number(key: str) -> float:
            return self.number(self.section(data, key, ""), key)

        return Calibration(
            launch_floor_s=required_number("launch_floor_s"),
            compute_efficiency_gpu=required_table("compute_efficiency_gpu"),
            compute_efficiency_class=required_table("compute_efficiency_class"),
            compute_efficiency_default=required_table("compute_efficiency_default"),
            memory_efficiency_gpu=required_table("memory_efficiency_gpu"),
            memory_efficiency_class=required_table("memory_efficiency_class"),
            memory_efficiency_default=required_number("memory_efficiency_default"),
            families=tuple(self.family(f, f"families[{i}]") for i, f in enumerate(families)),
            default_bytes_per_flop=required_table("default_bytes_per_flop"),
            default_host_s_per_flop=required_table("default_host_s_per_flop"),
            scaling=self.scaling(self.section(data, "scaling", "")),
            compute_efficiency_default_cuda_core=(
                None if cuda_core is None
                else self.number(cuda_core, "compute_efficiency_default_cuda_core")),
            power_flops_per_joule=self.optional_table(data, "power_flops_per_joule"),
            gemm_efficiency_gpu=self.optional_table(data, "gemm_efficiency_gpu"),
            gemm_efficiency_class=self.optional_table(data, "gemm_efficiency_class"),
            gemm_efficiency_default=self.optional_table(data, "gemm_efficiency_default"),
            class_efficiency=self.optional_table(data, "class_efficiency"),
            signature_scale=self.signature_scales(data),
            fp32_matmul_reached=(None if data.get("fp32_matmul_reached") is None else
                                 self.number(data["fp32_matmul_reached"], "fp32_matmul_reached")),
            default_host_s_per_sample=self.optional_table(data, "default_host_s_per_sample"),
            default_step_bytes_per_flop=self.optional_table(data, "default_step_bytes_per_flop"),
            default_step_host_s_per_flop=self.optional_table(data,
                                                             "default_step_host_s_per_flop"),
            provenance=MappingProxyType(dict(provenance)))
