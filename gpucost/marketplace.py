"""The search a marketplace plan records in place of a machine (``[marketplace]`` in the plan).

On a marketplace a machine found while planning (a Vast ask id, or a catalog bucket such as
"8x-Tesla_V100-32-65536") is no launchable name: asks are rented by others within minutes and a
bucket is not a machine at all. A plan therefore records what a machine like the planned one
looks like, and SkyPilot finds one like it at launch (see ``gpucost.executor.skypilot_task``,
which says in words what of the search SkyPilot cannot ask for). This module only builds that
search; it imports no executor code, so the planning path stays light.
"""

from __future__ import annotations

import math
import re

from gpucost import providers
from gpucost.planfile import MarketplaceSection

# Marketplace prices move between planning and launch; the budget cap still bounds the spend.
PRICE_HEADROOM = 1.25
# Vast sells bandwidth in Mbit/s; the plan's setup time assumed the download at this much.
MBPS_PER_GBPS = 1000.0


def country_code(region: str) -> str:
    """The ISO country code in a marketplace region: "Sweden, SE, EU" -> "SE" (SkyPilot's Vast
    catalog), "US-Texas" -> "US" (gpucost's Vast source), "Texas, US" -> "US" (Vast itself);
    "" where none is given ("unknown", a datacentre id such as "CA-MTL-1" gives its country)."""
    for part in re.split(r"[,\s-]+", region.strip()):
        if re.fullmatch(r"[A-Z]{2}", part) and part != "EU":
            return part
    return ""


def search_for(*, provider: str, gpu_count: float, price_hr: float, region: str,
               download_gbps: float, disk_gb: float,
               bandwidth_assumed: bool) -> MarketplaceSection | None:
    """The search that finds a machine like the planned one, or None for a provider whose
    instance type names a launchable machine."""
    declared = providers.find(provider)
    if declared is None or declared.marketplace is None:
        return None
    return MarketplaceSection(
        gpu_count=max(1, round(gpu_count)),
        max_price_hr=round(price_hr * PRICE_HEADROOM, 4) if price_hr > 0 else 0.01,
        region=country_code(region),
        min_reliability=declared.marketplace.min_reliability,
        # an assumed bandwidth is no requirement the offer stated: do not demand it
        min_inet_down_mbps=(0.0 if bandwidth_assumed or not math.isfinite(download_gbps)
                            else round(download_gbps * MBPS_PER_GBPS)),
        min_disk_gb=math.ceil(disk_gb),
    )
