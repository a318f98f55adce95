"""`gpucost gpus [NAME] [--format table|json]`: the GPU catalog, with units and sources."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpucost.catalog import CatalogEntry, all_entries, get_entry
from gpucost.cli import add_command
from gpucost.envelope import add_format_argument, print_document
from gpucost.format import text_table

# (header, attribute of GpuSpec); headers carry the unit
_TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "name"),
    ("vendor", "vendor"),
    ("arch", "arch"),
    ("form", "form_factor"),
    ("mem GB", "memory_gb"),
    ("mem GB/s", "mem_bw_gbs"),
    ("fp32 TF", "fp32_tflops"),
    ("tf32 TF", "tf32_tflops"),
    ("fp16 TF", "fp16_tflops"),
    ("bf16 TF", "bf16_tflops"),
    ("CC", "compute_capability"),
    ("NVLink GB/s", "nvlink_gbs"),
    ("PCIe GB/s", "pcie_gbs"),
    ("TDP W", "tdp_w"),
    ("conf", "confidence"),
    ("source", "source"),
)
_TEXT_COLUMNS = frozenset({"name", "vendor", "arch", "form_factor", "compute_capability",
                           "confidence", "source"})

_NOTE = ("TF = dense TFLOPS (no sparsity); fp16/bf16 are tensor rates with fp32 accumulate "
         "(what mixed-precision training gets); NVLink = bidirectional total per GPU; "
         "PCIe = per direction; '-' = no such unit.")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        sub, "gpus",
        description="List every GPU gpucost knows, or show one. NAME may be any common "
                    "spelling (NVML, cloud catalog, instance-type style): 'a100-80gb', "
                    "'NVIDIA GeForce RTX 4090', 'H100 80GB HBM3'.")
    parser.add_argument("name", nargs="?", metavar="NAME", help="show this GPU only")
    add_format_argument(parser)
    parser.set_defaults(handler=run)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _record(entry: CatalogEntry) -> dict[str, Any]:
    spec = entry.spec
    record: dict[str, Any] = {attr: getattr(spec, attr) for _, attr in _TABLE_COLUMNS}
    record["aliases"] = list(spec.aliases)
    record["segment"] = entry.segment
    record["fp16_acc16_tflops"] = entry.fp16_acc16_tflops
    record["mamf_bf16_tflops"] = entry.mamf_bf16_tflops
    return record


def format_table(catalog: tuple[CatalogEntry, ...]) -> str:
    """Aligned plain-text table: numbers right-aligned, text left-aligned, units in headers."""
    rows = [[_cell(getattr(e.spec, attr)) for _, attr in _TABLE_COLUMNS] for e in catalog]
    headers = [header for header, _ in _TABLE_COLUMNS]
    right = {i for i, (_, attr) in enumerate(_TABLE_COLUMNS) if attr not in _TEXT_COLUMNS}
    body = text_table(headers, rows, right=right, rule=True)
    return "\n".join([body, "", f"{len(catalog)} GPUs. {_NOTE}"]) + "\n"


def format_one(entry: CatalogEntry, asked: str) -> str:
    """Key/value listing of one GPU, with the spelling that was asked for when it differs."""
    spec = entry.spec
    lines = [spec.name]
    if asked != spec.name:
        lines[0] += f"  (resolved from {asked!r})"
    fields: list[tuple[str, object]] = [
        ("vendor", spec.vendor), ("architecture", spec.arch), ("form factor", spec.form_factor),
        ("segment", entry.segment), ("memory", f"{spec.memory_gb:g} GB"),
        ("memory bandwidth", f"{spec.mem_bw_gbs:g} GB/s"),
        ("fp32 (non-tensor)", f"{spec.fp32_tflops:g} TFLOPS"),
    ]
    for label, value in (("tf32 tensor", spec.tf32_tflops),
                         ("fp16 tensor, fp32 acc.", spec.fp16_tflops),
                         ("bf16 tensor, fp32 acc.", spec.bf16_tflops),
                         ("fp16 tensor, fp16 acc.", entry.fp16_acc16_tflops),
                         ("bf16 matmul, measured", entry.mamf_bf16_tflops)):
        fields.append((label, "-" if value is None else f"{value:g} TFLOPS"))
    fields += [
        ("compute capability", spec.compute_capability or "-"),
        ("NVLink (bidir. total)", f"{spec.nvlink_gbs:g} GB/s" if spec.nvlink_gbs else "none"),
        ("host link (per dir.)", f"{spec.pcie_gbs:g} GB/s"),
        ("TDP", f"{spec.tdp_w:g} W"),
        ("aliases", ", ".join(spec.aliases) or "-"),
        ("source", spec.source),
        ("confidence", spec.confidence),
    ]
    width = max(len(label) for label, _ in fields)
    lines += [f"  {label.ljust(width)}  {value}" for label, value in fields]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.name is not None:
        entry = get_entry(args.name)
        if args.format == "json":
            print_document("gpu", {"gpu": _record(entry)})
        else:
            sys.stdout.write(format_one(entry, args.name))
        return 0
    catalog = all_entries()
    if args.format == "json":
        print_document("gpus", {"gpus": [_record(e) for e in catalog]})
    else:
        sys.stdout.write(format_table(catalog))
    return 0
