"""Error bands: how far a prediction may be off, from what the held-out bench measured.

``bench/prediction_accuracy.py --write-bands`` writes ``error_bands.json`` (dated, with the
command and the data it read): for predictions of a workload the fit never saw, the 10th and
90th percentiles of measured over predicted throughput, keyed by what separates the measurement
from the prediction: the GPUs (the same GPU, the same device class, the same vendor, another
vendor) and the batch (the same, smaller, larger than measured). Several GPUs add the spread of
their sync's prediction: in one machine over NVLink or PCIe, that of Lambda's runs of 2-8 GPUs
over the same link, each predicted from its 1-GPU run with the workload held out (``one_node``);
across nodes, or pods meeting over sockets, that of the Sia clusters held out (``multi_gpu``).
A prediction's band is its throughput times those two ratios: about eight in ten measurements
fall inside.

The measured GPU at another batch is the batch model's error alone, measured on the Sia traces
(the same job on the same GPU at up to a thousand times its batch; nothing is fitted on their
single-GPU steps): from one measured batch ("same-gpu"), whose split of the step into what it
pays once and what grows with the batch comes from the model, and from two ("same-gpu-line"),
whose split was measured. Smaller and larger batches have bands of their own because the
model's error is not symmetric in the batch.

A key the bench never saw takes the widest band of the table (no pair crossed vendors: the
table says nothing about that, so it claims nothing narrow). The same GPU at the measured batch
is the measurement itself: no band.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpucost.catalog.spec import GpuSpec
from gpucost.model.translate import device_class

BANDS_PATH = Path(__file__).with_name("error_bands.json")
SAME_GPU, SAME_CLASS, SAME_VENDOR, OTHER_VENDOR = ("same-gpu", "same-class", "same-vendor",
                                                   "other-vendor")
RELATIONS = (SAME_GPU, SAME_CLASS, SAME_VENDOR, OTHER_VENDOR)
# The measured GPU at another batch, from a profile measured at several batches.
SAME_GPU_LINE = "same-gpu-line"
BATCHES = ("same", "smaller", "larger")


def single_key(rel: str, how: str) -> str:
    """The single-GPU table's key of a relation (``RELATIONS`` or ``SAME_GPU_LINE``) and a
    batch (``BATCHES``): what the bench writes and :func:`band_for` reads."""
    return f"{rel}|{how}"


@dataclass(frozen=True, slots=True)
class Band:
    """Measured over predicted throughput: ``low`` <= 1 <= ``high`` for about 80 % of
    held-out predictions like this one (``key`` says which)."""

    low: float
    high: float
    key: str

    def overlaps(self, value: float, other_value: float, other: Band) -> bool:
        """Whether ``value`` with this band and ``other_value`` with ``other`` could swap:
        their intervals (value x [low, high]) intersect."""
        return value * self.low <= other_value * other.high and \
            other_value * other.low <= value * self.high


NO_BAND = Band(1.0, 1.0, "the measurement itself")


def relation(source: GpuSpec, target: GpuSpec) -> str:
    """What separates a measurement on ``source`` from a prediction for ``target``."""
    if source.name == target.name:
        return SAME_GPU
    if device_class(source) == device_class(target):
        return SAME_CLASS
    return SAME_VENDOR if source.vendor == target.vendor else OTHER_VENDOR


def batch_key(source_batch: float, batch: float) -> str:
    if batch == source_batch:
        return "same"
    return "smaller" if batch < source_batch else "larger"


@cache
def shipped_bands() -> Mapping[str, Any]:
    """The table of ``error_bands.json``, loaded once."""
    with BANDS_PATH.open(encoding="utf-8") as fh:  # shipped with the package, like calibration.json
        data: dict[str, Any] = json.load(fh)
    return data


def _ratio_pair(entry: Mapping[str, Any]) -> tuple[float, float]:
    return float(entry["low"]), float(entry["high"])


def band_for(source: GpuSpec | None, target: GpuSpec, source_batch: float, batch: float,
             gpu_count: int, table: Mapping[str, Any] | None = None, *,
             measured_batches: int = 1, nodes: int = 1, link: str = "") -> Band:
    """The band of a prediction for ``gpu_count`` x ``target`` at per-device ``batch`` from a
    measurement on ``source`` (None: a CPU profile, translated from counted flops: the widest
    single-GPU band) at ``source_batch`` (and ``measured_batches - 1`` other batches), the
    group on ``nodes`` nodes whose GPUs meet over ``link`` (``scaling.LINK_KINDS``)."""
    table = shipped_bands() if table is None else table
    single: Mapping[str, Any] = table["single_gpu"]
    rel = OTHER_VENDOR if source is None else relation(source, target)
    how = batch_key(source_batch, batch)
    if rel == SAME_GPU and how == "same":
        low = high = 1.0
        key = NO_BAND.key
    else:
        keys = [single_key(rel, how)]
        if rel == SAME_GPU:
            if measured_batches > 1:
                keys.insert(0, single_key(SAME_GPU_LINE, how))
            # A table without the measured GPU's rows: the same class's for that batch.
            keys.append(single_key(SAME_CLASS, how))
        found_key = next((k for k in keys if k in single), None)
        if found_key is None:
            widest = min(single.values(), key=lambda e: float(e["low"]) / float(e["high"]))
            low, high = _ratio_pair(widest)
            key = f"{rel}, batch {how}: not measured, the widest band"
        else:
            found = single[found_key]
            low, high = _ratio_pair(found)
            shown = found_key.split("|")[0]
            key = f"{shown}, batch {how} ({int(found['pairs']):,} held-out pairs)"
    if gpu_count > 1:
        machine = table.get("one_node", {}).get(link) if nodes == 1 else None
        if machine is not None:
            group_low, group_high = _ratio_pair(machine)
            key += (f"; {gpu_count} GPUs in one node over {link} "
                    f"({int(machine['pairs']):,} held-out runs)")
        else:
            group_low, group_high = _ratio_pair(table["multi_gpu"])
            key += f"; {gpu_count} GPUs (held-out clusters)"
        low, high = low * group_low, high * group_high
    return Band(low, high, key)
