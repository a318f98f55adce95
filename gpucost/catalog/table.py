"""The GPU table shipped in ``gpus.csv``: one row per accelerator, each with its source.

The file is read once with the csv module (no pandas: the CLI must start fast) and cached.
Columns beyond :class:`GpuSpec`'s fields: ``segment`` (datacenter | workstation | geforce |
titan) and ``fp16_acc16_tflops`` (tensor fp16 with fp16 accumulate, dense), which together let
tests check the GeForce rule that fp32-accumulate tensor math runs at half the fp16-accumulate
rate; ``mamf_bf16_tflops``, the maximum achievable bf16 matmul TFLOPS measured (stas00's
mamf-finder, in ml-engineering), where one is published. ``fp32_matmul_tflops``
(:class:`GpuSpec`'s) is the best fp32 ``torch.matmul`` measured on the GPU's CUDA cores, square
matrices of 1024 to 10240, the median over the rows for that GPU in
github.com/zzc0721/torch-performance-test-data ``database.md`` (commit 9d82827; desktop and
server boards only, no laptops; an RTX 2080 Ti's from a 22 GB board of the same chip).
``aliases`` is a ``;``-separated list of extra spellings. ``sm_count``: streaming
multiprocessors (NVIDIA) or compute units (AMD) from the vendor's architecture documents.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

from gpucost.catalog.spec import GpuSpec
from gpucost.errors import CatalogFileError as CatalogFileError  # re-exported: its old home

CSV_PATH = Path(__file__).with_name("gpus.csv")

SEGMENTS = ("datacenter", "workstation", "geforce", "titan")
CONFIDENCES = ("high", "medium", "low")


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A catalog row: the spec plus the facts used only to check and display it."""

    spec: GpuSpec
    segment: str
    fp16_acc16_tflops: float | None  # dense tensor fp16 with fp16 accumulate; None if no unit
    mamf_bf16_tflops: float | None = None  # measured best bf16 matmul; None if none published


def _optional_float(row: dict[str, str], column: str) -> float | None:
    text = row[column].strip()
    return float(text) if text else None


def _parse_row(row: dict[str, str], line: int) -> CatalogEntry:
    try:
        spec = GpuSpec(
            name=row["name"].strip(),
            vendor=row["vendor"].strip(),
            arch=row["arch"].strip(),
            form_factor=row["form_factor"].strip(),
            memory_gb=float(row["memory_gb"]),
            mem_bw_gbs=float(row["mem_bw_gbs"]),
            fp32_tflops=float(row["fp32_tflops"]),
            tf32_tflops=_optional_float(row, "tf32_tflops"),
            fp16_tflops=_optional_float(row, "fp16_tflops"),
            bf16_tflops=_optional_float(row, "bf16_tflops"),
            compute_capability=row["compute_capability"].strip() or None,
            nvlink_gbs=float(row["nvlink_gbs"]),
            pcie_gbs=float(row["pcie_gbs"]),
            tdp_w=float(row["tdp_w"]),
            source=row["source"].strip(),
            confidence=row["confidence"].strip(),
            aliases=tuple(a.strip() for a in row["aliases"].split(";") if a.strip()),
            sm_count=int(row["sm_count"]) if row["sm_count"].strip() else None,
            fp32_matmul_tflops=_optional_float(row, "fp32_matmul_tflops"),
        )
        segment = row["segment"].strip()
        acc16 = _optional_float(row, "fp16_acc16_tflops")
        mamf = _optional_float(row, "mamf_bf16_tflops")
    except (KeyError, TypeError, ValueError) as err:
        raise CatalogFileError(f"{CSV_PATH.name} line {line}: {err}") from err
    if segment not in SEGMENTS:
        raise CatalogFileError(f"{CSV_PATH.name} line {line}: segment {segment!r}")
    if spec.confidence not in CONFIDENCES:
        raise CatalogFileError(f"{CSV_PATH.name} line {line}: confidence {spec.confidence!r}")
    if not spec.source:
        raise CatalogFileError(f"{CSV_PATH.name} line {line}: {spec.name!r} has no source")
    return CatalogEntry(spec=spec, segment=segment, fp16_acc16_tflops=acc16, mamf_bf16_tflops=mamf)


def read_entries(path: Path = CSV_PATH) -> tuple[CatalogEntry, ...]:
    """Parse a catalog CSV (uncached; :func:`entries` is the cached shipped table)."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [_parse_row(row, line) for line, row in enumerate(csv.DictReader(handle), 2)]
    names = [entry.spec.name for entry in rows]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise CatalogFileError(f"{path.name}: duplicate names {duplicates}")
    return tuple(rows)


@functools.cache
def entries() -> tuple[CatalogEntry, ...]:
    """Every row of the shipped table, in file order (loaded once)."""
    return read_entries()


@functools.cache
def entries_by_name() -> dict[str, CatalogEntry]:
    return {entry.spec.name: entry for entry in entries()}
