"""Storage, data-transfer and month conventions per provider: the prices a $/hour list leaves out.

A price catalog gives $/h for the machine; a job also pays for the disk it keeps (while running
and, if stopped, while idle), for data out, and some marketplaces for data in. These change
rarely, so they live here as a small table with a source and an "as of" date per row, and
importers copy them into each offer (snapshot columns ``storage_gb_month``, ``egress_gb``,
``ingress_gb``, ``month_hours``).

Every figure is USD: storage in $/GB-month for the disk type a training VM uses, transfer in $/GB
(first paid tier, to the internet). ``None`` means unknown (it becomes NaN in a snapshot); a
marketplace that prices storage per offer (Vast) has ``None`` here and the offer's own figure
in a snapshot taken from its API. The figures were taken from the public pricing pages named in
``source``; no network is available to re-check them at import time, so ``as_of`` says when they
were last read and ``gpucost prices show`` prints it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HYPERSCALER_MONTH_HOURS = 730.0  # 8,760 h / 12: AWS, GCP, Azure convert $/month to $/h this way
MARKETPLACE_MONTH_HOURS = 720.0  # 30-day month: Vast and RunPod bill storage on 720 h


@dataclass(frozen=True, slots=True)
class ProviderRates:
    provider: str
    storage_kind: str  # the disk type the figure is for
    storage_gb_month: float | None  # $/GB-month while the machine runs
    storage_stopped_gb_month: float | None  # $/GB-month while it is stopped (None: same as running)
    egress_gb: float | None  # $/GB out to the internet, first paid tier
    ingress_gb: float | None  # $/GB in
    month_hours: float
    source: str
    as_of: str  # YYYY-MM: when the source was read

    @property
    def stopped_gb_month(self) -> float | None:
        """$/GB-month a stopped machine's disk costs."""
        if self.storage_stopped_gb_month is not None:
            return self.storage_stopped_gb_month
        return self.storage_gb_month


RATES: dict[str, ProviderRates] = {r.provider: r for r in (
    ProviderRates(
        "aws", "EBS gp3 (us-east-1)", 0.08, None, 0.09, 0.0, HYPERSCALER_MONTH_HOURS,
        "https://aws.amazon.com/ebs/pricing/ (gp3 $0.08/GB-month); "
        "https://aws.amazon.com/ec2/pricing/on-demand/ Data Transfer (first 10 TB/month out "
        "$0.09/GB, in free)", "2025-06"),
    ProviderRates(
        "gcp", "pd-balanced (us-central1)", 0.10, None, 0.12, 0.0, HYPERSCALER_MONTH_HOURS,
        "https://cloud.google.com/compute/disks-image-pricing (pd-balanced $0.100/GB-month); "
        "https://cloud.google.com/vpc/network-pricing (Premium Tier internet egress 0-1 TiB "
        "$0.12/GB, ingress free)", "2025-06"),
    ProviderRates(
        "azure", "Premium SSD P30, 1 TiB (East US), approx. per GB", 0.132, None, 0.087, 0.0,
        HYPERSCALER_MONTH_HOURS,
        "https://azure.microsoft.com/pricing/details/managed-disks/ (P30 1,024 GiB $135.17/month); "
        "https://azure.microsoft.com/pricing/details/bandwidth/ (internet egress from North "
        "America, first 10 TB, $0.087/GB; ingress free)", "2025-06"),
    ProviderRates(
        "lambda", "persistent filesystem", 0.20, None, 0.0, 0.0, HYPERSCALER_MONTH_HOURS,
        "https://lambda.ai/pricing (filesystem storage $0.20/GB-month; no egress or ingress fees). "
        "Lambda instances cannot be stopped, only terminated: keep data on a filesystem",
        "2025-06"),
    ProviderRates(
        "runpod", "pod volume disk", 0.10, 0.20, 0.0, 0.0, MARKETPLACE_MONTH_HOURS,
        "https://docs.runpod.io/pods/pricing (volume disk $0.10/GB-month running, $0.20/GB-month "
        "while the pod is stopped; network volume $0.07/GB-month; no data transfer fees)",
        "2025-06"),
    ProviderRates(
        "vast", "per offer (storage_cost)", None, None, None, None, MARKETPLACE_MONTH_HOURS,
        "https://docs.vast.ai (each offer states storage_cost $/GB-month billed on 720 h, and "
        "inet_up_cost/inet_down_cost $/GB; see a snapshot from the Vast API)", "2025-06"),
)}

# Providers whose disks and transfer prices this table does not know: month convention only.
_DEFAULT_MONTH_HOURS = HYPERSCALER_MONTH_HOURS


def rates_for(provider: str) -> ProviderRates | None:
    return RATES.get(provider)


def month_hours_for(provider: str) -> float:
    known = RATES.get(provider)
    return known.month_hours if known else _DEFAULT_MONTH_HOURS


def offer_rates(provider: str) -> dict[str, float]:
    """The snapshot columns for ``provider``: NaN where this table does not know the figure."""
    known = RATES.get(provider)

    def value(x: float | None) -> float:
        return math.nan if x is None else x

    if known is None:
        return {"storage_gb_month": math.nan, "egress_gb": math.nan, "ingress_gb": math.nan,
                "month_hours": _DEFAULT_MONTH_HOURS}
    return {"storage_gb_month": value(known.storage_gb_month), "egress_gb": value(known.egress_gb),
            "ingress_gb": value(known.ingress_gb), "month_hours": known.month_hours}
