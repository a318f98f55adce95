"""The GPU catalog: specs of every accelerator gpucost prices, and name resolution.

>>> get_gpu("NVIDIA A100-SXM4-80GB").mem_bw_gbs
2039.0
>>> resolve_gpu_name("a100")  # a bare family name means its most common cloud variant
'A100 SXM4 40GB'
"""

from __future__ import annotations

from gpucost.catalog.names import (
    FAMILY_DEFAULTS,
    is_gpu_name,
    match_gpu_names,
    match_note,
    resolve_gpu_name,
    suggest,
    try_resolve_gpu_name,
    variant_note,
)
from gpucost.catalog.spec import PRECISIONS, GpuSpec, Precision
from gpucost.catalog.table import CatalogEntry, entries, entries_by_name

__all__ = [
    "FAMILY_DEFAULTS",
    "PRECISIONS",
    "CatalogEntry",
    "GpuSpec",
    "Precision",
    "all_entries",
    "all_gpus",
    "get_entry",
    "get_gpu",
    "is_gpu_name",
    "match_gpu_names",
    "match_note",
    "resolve_gpu_name",
    "suggest",
    "try_resolve_gpu_name",
    "variant_note",
]


def all_gpus() -> tuple[GpuSpec, ...]:
    """Every GPU in the catalog, in catalog order (oldest architectures first)."""
    return tuple(entry.spec for entry in entries())


def all_entries() -> tuple[CatalogEntry, ...]:
    """Every catalog row with its display-only facts (segment, fp16-accumulate rate)."""
    return entries()


def get_entry(name: str, *, memory_gb: float | None = None) -> CatalogEntry:
    return entries_by_name()[resolve_gpu_name(name, memory_gb=memory_gb)]


def get_gpu(name: str, *, memory_gb: float | None = None) -> GpuSpec:
    """The spec for any spelling of a GPU name; raises UnknownGpuError with suggestions."""
    return get_entry(name, memory_gb=memory_gb).spec
