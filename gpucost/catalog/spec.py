"""The record the GPU catalog holds for one accelerator."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

Precision = Literal["fp32", "tf32", "fp16", "bf16", "amp"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "tf32", "fp16", "bf16", "amp")
# The precisions that are the model itself in half precision (model.half(), apex's O2, a
# bf16 model): its weights, gradients and kept activations take 2 bytes an element. "amp"
# autocasts over fp32 weights, whose gradients stay fp32.
HALF_MODEL_PRECISIONS: tuple[Precision, ...] = ("fp16", "bf16")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """Facts about one accelerator. Units are in the field names; TFLOPS are dense (no sparsity).

    ``fp16_tflops``/``bf16_tflops`` are tensor-core rates with fp32 accumulate, the rate mixed
    precision training gets (GeForce cards run these at half their fp16-accumulate rate).
    ``None`` means the GPU has no such unit (a V100 has no bf16, a T4 no tf32).
    """

    name: str  # canonical, e.g. "A100 SXM4 80GB"
    vendor: str  # "NVIDIA" | "AMD"
    arch: str  # "Ampere", "Hopper", ...
    form_factor: str  # "SXM4", "PCIe", ...
    memory_gb: float  # as marketed: GiB (2^30 bytes), DRAM's binary sizes
    mem_bw_gbs: float  # GB/s
    fp32_tflops: float  # non-tensor fp32
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    compute_capability: str | None  # "8.0"; None for non-NVIDIA
    nvlink_gbs: float  # total bidirectional NVLink GB/s per GPU; 0 if none
    pcie_gbs: float  # GB/s per direction of the host link
    tdp_w: float
    source: str
    confidence: str = "high"  # "high" | "medium" | "low"
    aliases: tuple[str, ...] = field(default=())
    # Streaming multiprocessors (NVIDIA) or compute units (AMD): how many GEMM output tiles run
    # at once, so how far a small matrix multiply falls short of the peak (wave quantisation).
    sm_count: int | None = None
    # The best fp32 matrix multiply measured on its CUDA cores (TFLOPS; None where none is
    # published): what GEMMs on them reach where the listed rate counts FP32 lanes they cannot
    # all keep busy (Ampere/Ada's second datapath shares issue with INT32) or clocks the board's
    # power cannot hold (a 70 W T4 or L4 reaches about half).
    fp32_matmul_tflops: float | None = None

    def tflops(self, precision: Precision) -> float:
        """Peak dense TFLOPS for the math a training step at ``precision`` runs on.

        Falls back to the next slower unit when a precision has none (bf16 on a V100 runs
        emulated at fp32 speed; tf32 on a pre-Ampere card is plain fp32).
        """
        if precision == "fp32":
            return self.fp32_tflops
        if precision == "tf32":
            return self.tf32_tflops or self.fp32_tflops
        if precision in ("fp16", "amp"):
            return self.fp16_tflops or self.fp32_tflops
        return self.bf16_tflops or self.fp32_tflops

    def share(self, gpu_count: float) -> GpuSpec:
        """What one process sees on ``gpu_count`` of this GPU: a fraction of one (AWS g6f's
        eighth of an L4) holds that share of its memory; one GPU or more, each GPU whole."""
        if gpu_count >= 1.0:
            return self
        return replace(self, memory_gb=self.memory_gb * gpu_count)

    @property
    def compute_capability_tuple(self) -> tuple[int, int] | None:
        if not self.compute_capability:
            return None
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)
