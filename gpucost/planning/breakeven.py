"""Stop or destroy a rented machine between runs: the figures `gpucost breakeven` takes from an
offer or its provider when the user does not give them (one rule for each figure), and the
break-even they give (:func:`gpucost.model.economics.breakeven`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucost.errors import InputError, NoOffersError
from gpucost.model.economics import DEFAULT_STORAGE_USD_GB_MONTH, Breakeven, breakeven
from gpucost.model.setup_times import SetupTime, check_setup_minutes, setup_time
from gpucost.pricing.cheapest import cheapest_of_instance
from gpucost.pricing.rates import month_hours_for, rates_for
from gpucost.pricing.snapshot import Offers


@dataclass(frozen=True)
class OfferTerms:
    """What a break-even reads of one offer; NaN where the offer does not say."""

    provider: str
    instance_type: str
    price_hr: float  # running, on demand
    storage_gb_month: float
    month_hours: float  # NaN or 0: the provider's convention
    ingress_gb: float  # $/GB pulled in


def offer_terms(offers: Offers, instance_type: str, provider: str = "") -> OfferTerms:
    """The cheapest on-demand offer of ``instance_type`` (on ``provider`` when named)."""
    i = cheapest_of_instance(offers, instance_type, provider)
    if i is None:
        where = f" from {provider}" if provider else ""
        raise NoOffersError(
            f"no offer of instance type {instance_type!r}{where} in the price snapshots",
            hint="check the name with `gpucost compare --format csv`, or give --running-hr",
        )
    return OfferTerms(
        provider=str(offers.provider[i]),
        instance_type=str(offers.instance_type[i]),
        price_hr=float(offers.price_hr[i]),
        storage_gb_month=float(offers.storage_gb_month[i]),
        month_hours=float(offers.month_hours[i]),
        ingress_gb=float(offers.ingress_gb[i]),
    )


@dataclass(frozen=True)
class BreakevenDefaults:
    """What the offer and its provider say when the user does not: one rule for each figure."""

    provider: str
    running_hr: float | None
    gb_month: float | None
    month_hours: float
    ingress_per_gb: float
    setup: SetupTime
    gb_month_note: str | None  # said when the figure was assumed, not known
    ingress_note: str | None


def breakeven_defaults(provider: str, offer: OfferTerms | None) -> BreakevenDefaults:
    """Disk, month, inbound and setup figures from the offer, else the provider's rates
    (gpucost.pricing.rates, the table every snapshot is priced with), else unknown. The offer's
    provider replaces ``provider``."""
    if offer is not None:
        provider = offer.provider
    rates = rates_for(provider)
    gb_month_note = ingress_note = None
    # A stopped disk: the provider's stopped price where it differs, else the offer's.
    gb_month = rates.storage_stopped_gb_month if rates else None
    if gb_month is None and offer is not None and math.isfinite(offer.storage_gb_month):
        gb_month = offer.storage_gb_month
    if gb_month is None and rates is not None:
        gb_month = rates.stopped_gb_month
    if gb_month is None and offer is not None:
        gb_month = DEFAULT_STORAGE_USD_GB_MONTH  # as compare and plan price this offer
        gb_month_note = f"disk ${gb_month:g}/GB-month: the offer gives no disk price"
    month = month_hours_for(provider)
    if offer is not None and math.isfinite(offer.month_hours) and offer.month_hours > 0:
        month = offer.month_hours
    ingress = rates.ingress_gb if rates and rates.ingress_gb is not None else None
    if offer is not None and math.isfinite(offer.ingress_gb):
        ingress = offer.ingress_gb
    if ingress is None:
        ingress = 0.0
        if provider:
            ingress_note = f"inbound data free: no inbound price for {provider}"
    return BreakevenDefaults(
        provider=provider,
        running_hr=None if offer is None else offer.price_hr,
        gb_month=gb_month,
        month_hours=month,
        ingress_per_gb=ingress,
        setup=setup_time(provider, "" if offer is None else offer.instance_type),
        gb_month_note=gb_month_note,
        ingress_note=ingress_note,
    )


@dataclass(frozen=True)
class GivenFigures:
    """The figures the user gave; None takes the default."""

    running_hr: float | None = None
    gb_month: float | None = None
    month_hours: float | None = None
    ingress_per_gb: float | None = None
    setup_min: float | None = None


def machine_breakeven(defaults: BreakevenDefaults, given: GivenFigures, *, disk_gb: float,
                      ingress_gb: float = 0.0, p_no_gpus: float = 0.0,
                      lost_gpus_usd: float | None = None) -> tuple[Breakeven, tuple[str, ...]]:
    """The break-even of the given figures, the defaults filling the others, with what was
    assumed (a default the user did not give and may want to check)."""
    running = given.running_hr if given.running_hr is not None else defaults.running_hr
    if running is None:
        raise InputError(
            "the running price is missing", hint="give --running-hr USD or --offer INSTANCE_TYPE"
        )
    gb_month = given.gb_month if given.gb_month is not None else defaults.gb_month
    if gb_month is None:
        where = f"provider {defaults.provider!r} has no" if defaults.provider else "no"
        raise InputError(
            f"the disk price is missing: {where} disk price in gpucost's rates table",
            hint="give --gb-month USD (per GB-month)"
            + ("" if defaults.provider else ", --provider NAME or --offer INSTANCE_TYPE"),
        )
    month_hours = given.month_hours if given.month_hours is not None else defaults.month_hours
    ingress_per_gb = (
        given.ingress_per_gb if given.ingress_per_gb is not None else defaults.ingress_per_gb
    )
    if given.setup_min is not None:
        check_setup_minutes(given.setup_min)
        setup_min, setup_note = given.setup_min, None
    else:
        setup_min, setup_note = defaults.setup.minutes, f"setup {defaults.setup.source}"
    assumptions = tuple(
        note
        for note, figure in (
            (defaults.gb_month_note, given.gb_month),
            (defaults.ingress_note, given.ingress_per_gb),
            (setup_note, given.setup_min),
        )
        if note and figure is None
    )
    result = breakeven(
        running,
        disk_gb,
        gb_month,
        month_hours=month_hours,
        setup_minutes=setup_min,
        ingress_gb=ingress_gb,
        ingress_usd_gb=ingress_per_gb,
        p_no_gpus=p_no_gpus,
        lost_gpus_usd=lost_gpus_usd,
    )
    return result, assumptions
