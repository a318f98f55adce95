"""Import the public SkyPilot price catalogs into gpucost snapshots, one per cloud.

Input: a folder in either layout of ``skypilot-org/skypilot-catalog`` ``catalogs/v8``:

* upstream: ``<cloud>/vms.csv`` (a clone of the repository's ``catalogs/v8`` folder);
* flat extracts: ``<cloud>_vms_gpu.csv`` (+ ``gcp_vms_host.csv``), as in ``../shared/data``.

Output: ``Snapshot("skypilot-<cloud>")`` with provider ``<cloud>``. Columns are read by header
name (their order differs per cloud). What else differs per cloud (SXM instance families,
stated network bandwidth, GPU names in instance types, host rows priced apart) is the cloud's
``SkyPilot`` declaration in ``gpucost.providers``; this module names no cloud. Every source
row is either kept or counted under a skip reason in the snapshot's provenance, so
``rows_read == rows_kept + sum(rows_skipped)``.

Rules, each a fact about the catalog rather than a guess:

* A cloud may price a GPU machine as two rows in the same zone: the host VM (vCPU + RAM, no
  accelerator) and the attached GPUs (no instance type). An offer is their sum; the cloud's
  declaration names the hosts an accelerator row attaches to (GCP's: ``providers/gcp.py``).
* The GPU model comes from the accelerator name plus what the instance says about form factor
  (SXM/PCIe/NVL) and memory, then the GPU catalog's canonical name. Memory per GPU comes from
  the GPU catalog where the cloud's declaration says SkyPilot's states it in wrong units; a
  fractional GPU (AWS g6f, count 0 with a partition size) gets that fraction of it.
* A100/H100/V100 with no form-factor hint count as PCIe: the cheaper board, so a plan never
  counts on NVLink it may not get.
* An empty or zero SpotPrice means no spot offer (NaN); a row without an on-demand price is
  skipped (a snapshot offer needs one).
* Inferentia, Trainium, Gaudi, FPGAs and TPUs are accelerators but not GPUs: skipped.
"""

from __future__ import annotations

import ast
import csv
import datetime as dt
import hashlib
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucost import providers
from gpucost._io import parse_json, parse_toml, read_text
from gpucost.catalog import get_gpu, try_resolve_gpu_name
from gpucost.catalog.spec import GpuSpec
from gpucost.errors import InputError, SnapshotError
from gpucost.limits import MAX_CATALOG_BYTES, MAX_GPUS_PER_NODE, MAX_PRICE_HR_USD
from gpucost.pricing.rates import month_hours_for, offer_rates, rates_for
from gpucost.pricing.snapshot import Offers, Snapshot, parse_timestamp
from gpucost.providers import SkyPilot

IMPORTER_VERSION = "1"
REPOSITORY = "skypilot-org/skypilot-catalog"
CATALOG_ROOT = "catalogs/v8"
SOURCE_PREFIX = "skypilot-"

_FLAT_NAME = re.compile(r"^(?P<cloud>[a-z0-9]+)_vms(?:_(?P<part>gpu|host))?\.csv$")
MAX_PROVENANCE_BYTES = 1 << 20  # a --provenance file: a date and a few commits
_NOT_GPU = re.compile(r"inferentia|trainium|gaudi|virtex|fpga|habana", re.IGNORECASE)
_ROUND_USD = 8  # decimals kept on a sum of two catalog prices (the inputs have at most 6)

@dataclass
class _Tally:
    """Row accounting for one cloud, written into the snapshot's provenance."""

    rows_read: int = 0
    rows_kept: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_names: dict[str, Counter[str]] = field(default_factory=dict)
    gpu_names: dict[str, set[str]] = field(default_factory=dict)  # source name -> catalog names

    def skip(self, reason: str, name: str = "") -> None:
        self.skipped[reason] += 1
        if name:
            self.skipped_names.setdefault(reason, Counter())[name] += 1


@dataclass(frozen=True)
class _SourceFile:
    path: Path
    relpath: str  # relative to the imported folder
    upstream_path: str  # path inside the repository, e.g. catalogs/v8/aws/vms.csv


def discover(directory: str | os.PathLike[str]) -> dict[str, list[_SourceFile]]:
    """Catalog CSV files per cloud, in either layout."""
    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"{str(root)!r} is not a folder",
                         hint="give the folder that holds <cloud>/vms.csv or <cloud>_vms_gpu.csv")
    found: dict[str, list[_SourceFile]] = {}
    for path in sorted(root.iterdir()):
        match = _FLAT_NAME.match(path.name)
        if path.is_file() and match:
            cloud = match["cloud"]
            found.setdefault(cloud, []).append(
                _SourceFile(path, path.name, f"{CATALOG_ROOT}/{cloud}/vms.csv"))
        elif path.is_dir() and (path / "vms.csv").is_file():
            found.setdefault(path.name, []).append(
                _SourceFile(path / "vms.csv", f"{path.name}/vms.csv",
                            f"{CATALOG_ROOT}/{path.name}/vms.csv"))
    found.pop("common", None)
    if not found:
        raise InputError(f"no SkyPilot catalog files in {str(root)!r}",
                         hint="expected <cloud>/vms.csv (catalogs/v8 of skypilot-org/"
                              "skypilot-catalog) or <cloud>_vms_gpu.csv files")
    return found


def read_readme_provenance(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Date and per-file commits from a README.md that describes the extract, if there is one.

    Reads the title's "as of YYYY-MM-DD" and the markdown table ``| file | source path | source
    commit | ...`` ("same" repeats the row above).
    """
    readme = Path(directory) / "README.md"
    if not readme.is_file():
        return {}
    text = read_text(readme, what="catalog README", error=InputError,
                     max_bytes=MAX_CATALOG_BYTES)
    out: dict[str, Any] = {}
    date = re.search(r"as of (\d{4}-\d{2}-\d{2})", text)
    if date:
        out["fetched_at"] = date[1]
    commits: dict[str, str] = {}
    previous = ""
    for line in text.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].endswith(".csv"):
            commit = cells[2]
            if re.fullmatch(r"[0-9a-f]{40}", commit):
                previous = commit
            elif commit == "same" and previous:
                commit = previous
            else:
                continue
            commits[cells[0]] = commit
    if commits:
        out["commits"] = commits
    return out


def load_provenance_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A ``--provenance`` file (JSON or TOML): ``fetched_at``, ``commit`` or ``commits``."""
    p = Path(path)
    text = read_text(p, what="provenance file", error=InputError, max_bytes=MAX_PROVENANCE_BYTES)
    origin = f"provenance file {str(p)!r}"
    data = (parse_toml(text, origin=origin, error=InputError) if p.suffix == ".toml"
            else parse_json(text, origin=origin, error=InputError))
    if not isinstance(data, dict):
        raise InputError(f"{origin} must hold an object",
                         hint='e.g. {"fetched_at": "2026-11-30", "commit": "<40 hex digits>"}')
    for key in ("commit", "repository"):
        if key in data and not isinstance(data[key], str):
            raise InputError(f"{origin}: {key} must be a string")
    commits = data.get("commits", {})
    if not isinstance(commits, dict) or not all(isinstance(v, str) for v in commits.values()):
        raise InputError(f"{origin}: commits must map file names to commit strings")
    return data


def _parse_date(value: object, origin: str) -> dt.datetime:
    """A date or time (TOML's own, or ISO 8601 text) as UTC; the snapshot's range rule holds."""
    text = value.isoformat() if isinstance(value, dt.date) else str(value)
    return parse_timestamp(text, origin=origin)


def import_skypilot_catalog(
    directory: str | os.PathLike[str],
    *,
    provenance: Mapping[str, Any] | None = None,
    fetched_at: dt.datetime | str | None = None,
) -> list[Snapshot]:
    """One snapshot per cloud found in ``directory``.

    The prices' date comes from ``fetched_at``, else ``provenance["fetched_at"]``, else the
    folder's README ("as of YYYY-MM-DD"); a catalog without a date is refused, because a
    snapshot's age is what tells a user the prices may be stale.
    """
    root = Path(directory)
    files = discover(root)
    info = read_readme_provenance(root)
    info.update(provenance or {})
    when = fetched_at if fetched_at is not None else info.get("fetched_at")
    if when is None:
        raise InputError(f"the prices in {str(root)!r} have no date",
                         hint="pass --fetched-at YYYY-MM-DD (the catalog commit's date)")
    stamp = _parse_date(when, "catalog import")
    commits: Mapping[str, str] = info.get("commits") or {}
    default_commit = info.get("commit")
    repository = str(info.get("repository", REPOSITORY))

    snapshots = []
    for cloud, cloud_files in sorted(files.items()):
        tally = _Tally()
        host_rows: list[dict[str, str]] = []
        accel_rows: list[dict[str, str]] = []
        file_info = []
        for source in cloud_files:
            raw = _read_catalog_file(source)
            rows = _read_rows(raw, source.relpath)
            file_info.append({
                "file": source.relpath, "path": source.upstream_path,
                "commit": commits.get(source.relpath) or commits.get(source.upstream_path)
                or default_commit,
                "sha256": hashlib.sha256(raw).hexdigest(), "rows": len(rows),
            })
            for row in rows:
                if _is_host_row(row):
                    host_rows.append(row)
                else:
                    accel_rows.append(row)
        tally.rows_read = len(accel_rows)
        declared = _declared(cloud)
        if declared.host_types is not None:
            records = list(_split_records(cloud, declared, declared.host_types, accel_rows,
                                          host_rows, tally))
            host_info: dict[str, Any] = {"host_rows_read": len(host_rows)}
        else:
            records = [r for row in accel_rows if (r := _plain_record(cloud, row, tally))]
            host_info = {"rows_without_accelerator": len(host_rows)}
        unique: dict[tuple[str, ...], dict[str, Any]] = {}
        for record in records:
            unique.setdefault(_record_key(record), record)
        offers = Offers.from_records(list(unique.values()), origin=f"skypilot {cloud}")
        prov = {
            "repository": repository,
            "files": file_info,
            "importer": __name__,
            "importer_version": IMPORTER_VERSION,
            "prices_as_of": stamp.date().isoformat(),
            "rows_read": tally.rows_read,
            "rows_kept": tally.rows_kept,
            "rows_skipped": dict(sorted(tally.skipped.items())),
            "rows_skipped_by_name": {k: dict(sorted(v.items()))
                                     for k, v in sorted(tally.skipped_names.items())},
            **host_info,
            "offers": len(offers),
            "duplicate_offers_dropped": len(records) - len(unique),
            "gpu_names": {k: sorted(v) for k, v in sorted(tally.gpu_names.items())},
            "rates": _rates_provenance(cloud),
        }
        snapshots.append(Snapshot(source=f"{SOURCE_PREFIX}{cloud}", fetched_at=stamp,
                                  offers=offers, month_hours=month_hours_for(cloud),
                                  provenance=prov))
    return snapshots


def _read_catalog_file(source: _SourceFile) -> bytes:
    try:
        with source.path.open("rb") as handle:
            raw = handle.read(MAX_CATALOG_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read catalog file {str(source.path)!r}: "
                         f"{exc.strerror or exc}") from None
    if len(raw) > MAX_CATALOG_BYTES:
        raise SnapshotError(f"catalog file {str(source.path)!r} is larger than "
                            f"{MAX_CATALOG_BYTES >> 20} MiB", hint="it is not a SkyPilot catalog")
    return raw


def _rates_provenance(cloud: str) -> dict[str, Any] | None:
    """Which storage/transfer figures were applied, and where they come from."""
    rates = rates_for(cloud)
    if rates is None:
        return None
    return {"table": "gpucost.pricing.rates", "storage_kind": rates.storage_kind,
            "source": rates.source, "as_of": rates.as_of}


# Columns read as numbers, and what a value must be. Each is checked on every row where it is
# set, so the message can name the file and line; ceilings on the offers themselves (a GCP TPU
# pod row may cost $2,048/h, a GPU offer may not) are checked where a row becomes an offer.
_NUMERIC_FIELDS = ("Price", "SpotPrice", "AcceleratorCount", "vCPUs", "MemoryGiB")
_MAX_GPU_INFO_CHARS = 10_000  # a GpuInfo cell is a few hundred characters


def _read_rows(raw: bytes, origin: str) -> list[dict[str, str]]:
    """The rows of a catalog CSV, each with ``_where`` ("<file> line <n>") for messages."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{origin} is not UTF-8 text (byte {raw[exc.start]:#04x} at offset "
                            f"{exc.start})") from None
    reader = csv.DictReader(text.splitlines())
    required = {"InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region"}
    try:
        missing = required - set(reader.fieldnames or ())
        if missing:
            raise SnapshotError(f"{origin}: not a SkyPilot catalog "
                                f"(no column {', '.join(sorted(missing))})",
                                hint="expected the header of catalogs/v8/<cloud>/vms.csv")
        rows = []
        for row in reader:
            clean = {k: (v or "").strip() for k, v in row.items() if isinstance(k, str)}
            where = f"{origin} line {reader.line_num}"
            for field_name in _NUMERIC_FIELDS:
                _check_number(clean.get(field_name, ""), field_name, where)
            clean["_where"] = where
            rows.append(clean)
    except csv.Error as exc:
        raise SnapshotError(f"{origin} line {reader.line_num}: not CSV ({exc})") from None
    return rows


def _check_number(text: str, field_name: str, where: str) -> None:
    if not text:
        return  # not stated: the rules above decide what that means
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or math.copysign(1.0, value) < 0:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise SnapshotError(f"{where}: {field_name} {shown!r} is not a finite, non-negative "
                            "number", hint="the catalog file is damaged; fetch it again")


def _is_host_row(row: Mapping[str, str]) -> bool:
    return not row.get("AcceleratorName")


def _number(text: str | None) -> float:
    if not text:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _spot(text: str | None) -> float:
    value = _number(text)
    return value if value > 0 else math.nan  # empty or 0.00: no spot market


def _gpu_info(text: str) -> dict[str, Any]:
    """The GpuInfo cell (JSON or a Python literal), or {}: it only refines names and memory."""
    if not text or len(text) > _MAX_GPU_INFO_CHARS:
        return {}
    try:
        value = json.loads(text) if text.startswith('{"') else ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return {}
    return value if isinstance(value, dict) else {}


def _first_gpu(info: Mapping[str, Any]) -> dict[str, Any]:
    gpus = info.get("Gpus")
    return gpus[0] if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) else {}


def _memory_hint_gb(cloud: str, gpu: Mapping[str, Any], count: float) -> float | None:
    """Per-GPU memory stated in GpuInfo, where that cloud states it correctly."""
    mib = (gpu.get("MemoryInfo") or {}).get("SizeInMiB")
    if not isinstance(mib, int | float) or mib <= 0:
        return None
    stated = _declared(cloud).catalog_memory
    if stated == "per_gpu":
        return mib / 1024.0
    if stated == "per_instance" and count >= 1:
        return mib / 1024.0 / count
    return None


def _normalise(name: str) -> str:
    """SkyPilot's accelerator spellings -> the catalog's ("RTX6000-Ada" -> "RTX 6000 Ada")."""
    s = re.sub(r"[_\-]+", " ", name).strip()
    s = re.sub(r"^(Tesla|NVIDIA)\s+", "", s, flags=re.IGNORECASE)
    s = re.sub(r"(\d)Ada\b", r"\1 Ada", s)
    s = re.sub(r"^RTX ?PRO ?(\d)", r"RTX PRO \1", s, flags=re.IGNORECASE)
    s = re.sub(r"^RTX ?A(\d{4})", r"RTX A\1", s, flags=re.IGNORECASE)
    s = re.sub(r"^RTX ?(\d{4})", r"RTX \1", s, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", s)


def _declared(cloud: str) -> SkyPilot:
    """How the catalog of ``cloud`` reads; a cloud gpucost declares nothing about has none of
    the per-cloud rules."""
    found = providers.find(cloud)
    return found.skypilot if found is not None and found.skypilot is not None else SkyPilot(cloud)


def _is_sxm(cloud: str, instance_type: str, text: str, base: str) -> bool:
    declared = _declared(cloud)
    return ("sxm" in text or instance_type.split(".")[0] in declared.sxm_families
            or base in declared.sxm_only_models)


def gpu_candidate(cloud: str, accelerator: str, instance_type: str, info_name: str,
                  memory_hint_gb: float | None) -> str:
    """The catalog name a catalog row's GPU most likely has (before catalog resolution)."""
    text = f"{accelerator} {instance_type} {info_name}".lower()
    # Where the accelerator column drops the variant (Vast: "RTX_4070S_Ti" -> "RTX4070"), the
    # instance type keeps it.
    pattern = _declared(cloud).instance_type_gpu
    if pattern is not None and (model := pattern.fullmatch(instance_type)):
        accelerator = model[1]
    name = _normalise(accelerator)
    base = name.split(" ")[0].upper()
    if base in ("A100", "H100", "H200", "V100", "GH200"):
        sxm = _is_sxm(cloud, instance_type, text, base) or "mega" in text
        nvl = "nvl" in text
        big = memory_hint_gb or 0.0
        if base == "A100":
            size = 80 if ("80" in name or "80g" in text or big > 60) else 40
            return f"A100 {'SXM4' if sxm else 'PCIe'} {size}GB"
        if base == "H100":
            return "H100 NVL 94GB" if nvl else f"H100 {'SXM5' if sxm else 'PCIe'} 80GB"
        if base == "H200":
            return "H200 NVL 141GB" if nvl else "H200 SXM 141GB"
        if base == "GH200":
            return "GH200 144GB" if big > 100 else "GH200 96GB"
        size = 32 if ("32" in name or big > 24) else 16
        return f"V100 {'SXM2' if sxm else 'PCIe'} {size}GB"
    return name


def _resolve(candidate: str, memory_hint_gb: float | None) -> GpuSpec | None:
    """The catalog's spec for a name, or None when the catalog does not know it.

    The memory hint picks between variants of one model (RTX 4060 Ti 8 GB or 16 GB).
    """
    canonical = try_resolve_gpu_name(candidate, memory_gb=memory_hint_gb)
    return None if canonical is None else get_gpu(canonical)


def _link(spec: GpuSpec) -> str:
    form = spec.form_factor.upper()
    if form.startswith("SXM") or form in ("OAM", "SUPERCHIP"):
        return "nvlink"  # on-board GPU fabric: NVLink/NVSwitch, or AMD Infinity Fabric on OAM
    return "pcie"


def _record(cloud: str, *, region: str, zone: str, instance_type: str, accelerator: str,
            count: float, info: Mapping[str, Any], vcpus: float, ram_gb: float,
            price: float, spot: float, tally: _Tally, where: str,
            candidate: str | None = None) -> dict[str, Any] | None:
    """An offer for one machine, or None with the reason counted in ``tally``; SnapshotError
    naming ``where`` (file and line) for a price or GPU count past the stated ceilings."""
    if _NOT_GPU.search(accelerator):
        tally.skip("not a GPU", accelerator)
        return None
    if accelerator.lower().startswith("tpu"):
        tally.skip("TPU", accelerator)
        return None
    gpu = _first_gpu(info)
    if count <= 0 or math.isnan(count):
        partition = _number(str(gpu.get("GpuPartitionSize", "")))
        count = partition if partition > 0 else math.nan
    if math.isnan(count):
        tally.skip("no GPU count", accelerator)
        return None
    if math.isnan(price) or price == 0:
        tally.skip("no on-demand price", accelerator)
        return None
    for what, value, ceiling in (("Price", price, MAX_PRICE_HR_USD),
                                 ("SpotPrice", spot, MAX_PRICE_HR_USD),
                                 ("AcceleratorCount", count, MAX_GPUS_PER_NODE)):
        if value > ceiling:
            raise SnapshotError(f"{where}: {what} {value:g} for {accelerator} {instance_type} is "
                                f"above {ceiling:g}, the most gpucost accepts for one machine",
                                hint="the catalog file is damaged; fetch it again")
    memory_hint = _memory_hint_gb(cloud, gpu, count) if count >= 1 else None
    if candidate is None:
        candidate = gpu_candidate(cloud, accelerator, instance_type, str(gpu.get("Name", "")),
                                  memory_hint)
    spec = _resolve(candidate, memory_hint)
    if spec is None:
        tally.skip("GPU not in catalog", candidate)
        return None
    tally.gpu_names.setdefault(accelerator, set()).add(spec.name)
    return {
        "provider": cloud, "region": region.strip(" ,") or "unknown", "zone": zone,
        "instance_type": instance_type, "gpu": spec.name, "gpu_count": count,
        # Memory from the catalog; a fractional GPU gets its slice.
        "gpu_memory_gb": spec.memory_gb * min(count, 1.0),
        "vcpus": vcpus, "ram_gb": ram_gb, "price_hr": price, "spot_price_hr": spot,
        **offer_rates(cloud),
        "network_gbps": _declared(cloud).network_gbps.get(instance_type, math.nan),
        "intra_node_link": _link(spec),
    }


def _plain_record(cloud: str, row: Mapping[str, str], tally: _Tally) -> dict[str, Any] | None:
    # Arm hosts (AWS g5g) need aarch64 CUDA builds of torch that training images rarely ship;
    # every plan gpucost makes assumes an x86-64 host, so these are left out, counted.
    if row.get("Arch", "x86_64").strip() not in ("", "x86_64"):
        tally.skip("not an x86-64 host", row.get("InstanceType", ""))
        return None
    rec = _record(
        cloud, region=row.get("Region", ""), zone=row.get("AvailabilityZone", ""),
        instance_type=row["InstanceType"], accelerator=row["AcceleratorName"],
        count=_number(row.get("AcceleratorCount")), info=_gpu_info(row.get("GpuInfo", "")),
        vcpus=_number(row.get("vCPUs")), ram_gb=_number(row.get("MemoryGiB")),
        price=_number(row.get("Price")), spot=_spot(row.get("SpotPrice")), tally=tally,
        where=row["_where"])
    if rec is not None:
        tally.rows_kept += 1
    return rec


def _split_records(cloud: str, declared: SkyPilot,
                   host_types: Callable[[str, int], tuple[str, ...]],
                   accel_rows: Sequence[Mapping[str, str]],
                   host_rows: Sequence[Mapping[str, str]],
                   tally: _Tally) -> Iterator[dict[str, Any]]:
    """Offers of a cloud that prices the host VM apart from its GPUs: each accelerator row plus
    the host rows it attaches to in its zone."""
    # The skip reasons name the cloud as the snapshot's provenance always has ("GCP: ...").
    label = declared.label or cloud.upper()
    hosts = {(h.get("AvailabilityZone", ""), h["InstanceType"]): h for h in host_rows}
    for row in accel_rows:
        accelerator = row["AcceleratorName"]
        count = _number(row.get("AcceleratorCount"))
        zone = row.get("AvailabilityZone", "")
        if row.get("InstanceType"):  # a machine priced whole in one row
            rec = _plain_record(cloud, row, tally)
            if rec:
                yield rec
            continue
        if accelerator.lower().startswith("tpu"):
            tally.skip("TPU", accelerator)
            continue
        types = host_types(accelerator, int(count)) if count == int(count) else ()
        if not types:
            tally.skip(f"{label}: no host machine rule",
                       f"{accelerator} x{row.get('AcceleratorCount')}")
            continue
        matched = [hosts[(zone, t)] for t in types
                   if (zone, t) in hosts and not math.isnan(_number(hosts[(zone, t)].get("Price")))]
        if not matched:
            tally.skip(f"{label}: host machine not offered in the zone", f"{types[0]} {zone}")
            continue
        for host in matched:
            spot = _sum(host.get("SpotPrice"), row.get("SpotPrice"))
            rec = _record(
                cloud, region=row.get("Region", ""), zone=zone, instance_type=host["InstanceType"],
                accelerator=accelerator, count=count, info={}, vcpus=_number(host.get("vCPUs")),
                ram_gb=_number(host.get("MemoryGiB")),
                price=_sum(host.get("Price"), row.get("Price")),
                spot=spot if spot > 0 else math.nan, tally=tally, where=row["_where"],
                candidate=declared.host_gpu_names.get(accelerator, accelerator))
            if rec is None:
                break  # skipped for its GPU, which every host shares: counted once
            yield rec
        else:
            # One source row may become several offers (L4 on each g2 size): kept once.
            tally.rows_kept += 1


def _sum(a: str | None, b: str | None) -> float:
    return round(_number(a) + _number(b), _ROUND_USD)


def _record_key(record: Mapping[str, Any]) -> tuple[Any, ...]:
    # NaN != NaN would defeat deduplication; compare the text form instead.
    return tuple(repr(record[k]) for k in sorted(record))
