"""The tiny price table that the ranking, advice, economics, planning-door, setup-time and TUI
tests price their jobs on, written once.

Each offer's facts (provider, region, instance, GPU, count, memory, on-demand and spot $/h,
fabric) live in TINY_OFFERS; a test file picks the rows it ranks, in its order, and states what
its copy adds or changes (disk, egress and network rates, a spot price of its own), so that
what a test depends on is said beside the test.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot

TINY_OFFERS: dict[str, dict[str, Any]] = {
    "v100": {"provider": "aws", "region": "us-east-1", "instance_type": "p3.2xlarge",
             "gpu": "V100 SXM2 16GB", "gpu_count": 1, "gpu_memory_gb": 16, "price_hr": 3.06,
             "spot_price_hr": 0.92, "intra_node_link": "nvlink"},
    "a100": {"provider": "lambda", "region": "us-west-1", "instance_type": "gpu_1x_a100_sxm4",
             "gpu": "A100 SXM4 40GB", "gpu_count": 1, "gpu_memory_gb": 40, "price_hr": 1.29,
             "intra_node_link": "nvlink"},
    "a100_x8": {"provider": "aws", "region": "eu-west-1", "instance_type": "p4d.24xlarge",
                "gpu": "A100 SXM4 40GB", "gpu_count": 8, "gpu_memory_gb": 40, "price_hr": 32.77,
                "intra_node_link": "nvlink"},
    "h100_x8": {"provider": "lambda", "region": "us-east-1", "instance_type": "gpu_8x_h100_sxm5",
                "gpu": "H100 SXM5 80GB", "gpu_count": 8, "gpu_memory_gb": 80, "price_hr": 23.92,
                "intra_node_link": "nvlink"},
    "rtx4090": {"provider": "runpod", "region": "EU-RO-1", "instance_type": "1x_RTX4090_COMMUNITY",
                "gpu": "RTX 4090", "gpu_count": 1, "gpu_memory_gb": 24, "price_hr": 0.34,
                "spot_price_hr": 0.20, "intra_node_link": "pcie"},
    "rtx4090_x4": {"provider": "runpod", "region": "US-TX-3", "instance_type": "4x_RTX4090_SECURE",
                   "gpu": "RTX 4090", "gpu_count": 4, "gpu_memory_gb": 24, "price_hr": 2.76,
                   "intra_node_link": "pcie"},
    "rtx3080": {"provider": "runpod", "region": "EU-RO-1", "instance_type": "1x_RTX3080",
                "gpu": "RTX 3080", "gpu_count": 1, "gpu_memory_gb": 10, "price_hr": 0.17},
    # a Vast host billed on a 720-hour month, as breakeven and the setup times price it
    "vast_4090_x8": {"provider": "vast", "region": "SE", "instance_type": "vast-8x4090",
                    "gpu": "RTX 4090", "gpu_count": 8, "price_hr": 3.4828, "month_hours": 720},
}


def tiny_offers(*names: str, every: Mapping[str, Any] | None = None,
                **changes: Mapping[str, Any]) -> Offers:
    """The rows ``names`` of TINY_OFFERS in that order; ``every`` sets cells of each row and
    ``changes[name]`` cells of that row alone (``None`` leaves a cell to the column's default)."""
    unknown = (set(names) | set(changes)) - set(TINY_OFFERS)
    assert not unknown, f"no such tiny offer: {sorted(unknown)}"
    return Offers.from_records(
        [{**TINY_OFFERS[name], **(every or {}), **changes.get(name, {})} for name in names])


def write_prices(folder: Path, offers: Offers, *, source: str = "tiny",
                 fetched_at: dt.datetime | None = None) -> Path:
    """``offers`` as a snapshot file in ``folder``, fetched now unless ``fetched_at`` says when
    (the commands call prices older than a week stale)."""
    when = fetched_at or dt.datetime.now(dt.UTC)
    return write_snapshot(Snapshot(source=source, fetched_at=when, offers=offers), folder)
