"""The money side of a plan: stop vs destroy, spot and checkpoints, disk, and the full $/job.

Pure functions over floats or numpy arrays (they broadcast), so ``gpucost compare`` prices
100,000 plans in one pass. Units: hours for time (the unit prices are quoted in), GB for sizes
(10^9 bytes, as providers bill), USD for money, rates per hour.

Stop or destroy (between runs). A stopped machine bills its disk by allocated size:
``stopped $/h = GB x $/GB-month / hours-per-month`` (730, or 720 on marketplaces that bill
30-day months). Destroying bills nothing, but coming back means rebuilding:
``rebuild $ = setup hours x running $/h + inbound GB x $/GB``. Break-even idle hours =
rebuild / stopped $/h. Stopping also releases the GPUs: with probability ``p_no_gpus`` they are
gone on return and the rebuild is paid anyway (or a user-given ``lost_gpus_usd``), which moves
the break-even down to ``(rebuild - p x lost) / stopped $/h``.

Interruptions (spot, or unreliable marketplace hosts). Interruptions arrive as a Poisson process
at ``rate`` per hour for the whole group (any node lost stops a synchronous job). A segment of
``s`` hours of work, restarted from its beginning after ``restart`` hours each time it is
interrupted, takes in expectation ``(1/rate + restart) x (e^(rate x s) - 1)`` hours (the
classic result for restart-from-scratch under exponential failures). Without checkpoints the
whole job is one segment: an interruption at 80 % loses the 80 % and bills it. With a
checkpoint of ``C`` hours every ``tau`` hours of work, the job is ``W / tau`` segments of
``tau + C``; ``tau`` is the Young/Daly interval ``sqrt(2 C / rate)``. The model uses whichever
of the two is cheaper (checkpointing a job shorter than its interval only costs writes). A spot
instance's own disk goes with it when it is reclaimed, so on spot only checkpoints kept in an
object store (``s3://``, :func:`outlives_instance`) are resumed from: without one a spot run is
priced as restart-from-zero, however often it would write checkpoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from gpucost.columns import Bool, Float, Text, column
from gpucost.errors import InputError
from gpucost.factor import Factor
from gpucost.format import usd
from gpucost.model.interruptions import interruption_rates
from gpucost.model.setup_times import check_setup_minutes, setup_minutes, setup_time
from gpucost.pricing.rates import HYPERSCALER_MONTH_HOURS

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
TextArray = npt.NDArray[np.object_]
Num = TypeVar("Num", float, FloatArray)

# Month conventions live with the providers' rates (gpucost.pricing.rates, one home); an offer
# that states none is billed on the clouds' 730-hour month.
MONTH_HOURS_CLOUD = HYPERSCALER_MONTH_HOURS

# Assumptions used only when an offer does not state the number (each shows in the plan notes).
DEFAULT_STORAGE_USD_GB_MONTH = 0.10  # block SSD: AWS gp3 0.08, GCP pd-balanced 0.10, Vast ~0.15
DEFAULT_DOWNLOAD_GBPS = 1.0  # effective download speed when the offer gives no bandwidth
MAX_DOWNLOAD_GBPS = 10.0  # a dataset download rarely beats this, whatever the NIC says
DEFAULT_CHECKPOINT_WRITE_GB_S = 0.5  # local NVMe or object store with parallel parts
CHECKPOINT_FIXED_S = 5.0  # per checkpoint: pausing, gathering state, syncing, whatever its size
DISK_HEADROOM = 0.30
# The boot disk also holds the OS, the NVIDIA driver, CUDA and the training image: AWS's Deep
# Learning Base AMIs and SkyPilot's GPU images are ~50 GB snapshots, a pytorch/pytorch CUDA image
# on Vast unpacks to ~15-20 GB. A plan sized for the data alone (1 GB) cannot boot.
SYSTEM_DISK_GB = 50.0
# Expected hours are capped here: a job this far out never finishes, and the cap keeps every
# cost finite (and the ordering intact) instead of overflowing to inf.
NEVER_HOURS = 1e9


def _arr(x: Any) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


# ---- stop vs destroy ----------------------------------------------------------------------


def stopped_usd_per_hour(
    disk_gb: Num, storage_usd_gb_month: Num, month_hours: Num | float = MONTH_HOURS_CLOUD
) -> Num:
    """What a stopped machine costs per hour: its allocated disk."""
    return disk_gb * storage_usd_gb_month / month_hours


def rebuild_usd(
    running_usd_hr: Num,
    setup_hours: Num | float,
    ingress_gb: Num | float = 0.0,
    ingress_usd_gb: Num | float = 0.0,
) -> Num:
    """What coming back to a destroyed machine costs: setup billed at the running rate, plus
    the data pulled in again."""
    return running_usd_hr * setup_hours + ingress_gb * ingress_usd_gb


def breakeven_idle_hours(
    stopped_usd_hr: Num,
    rebuild: Num,
    p_no_gpus: Num | float = 0.0,
    lost_gpus_usd: Num | float | None = None,
) -> Num:
    """Idle hours beyond which destroying is cheaper than stopping (inf if stopping is free).

    Stopping for ``h`` hours costs ``stopped x h + p_no_gpus x lost`` in expectation, where
    ``lost`` (default: the rebuild) is what it costs when the GPUs are gone on return.
    """
    lost = rebuild if lost_gpus_usd is None else lost_gpus_usd
    saved = np.maximum(_arr(rebuild) - _arr(p_no_gpus) * _arr(lost), 0.0)
    stopped = _arr(stopped_usd_hr)
    with np.errstate(divide="ignore", invalid="ignore"):
        hours = np.where(stopped > 0, saved / np.where(stopped > 0, stopped, 1.0), np.inf)
    return hours if hours.ndim else float(hours)  # type: ignore[return-value]


def idle_costs(
    idle_hours: Num,
    stopped_usd_hr: Num | float,
    rebuild: Num | float,
    p_no_gpus: Num | float = 0.0,
    lost_gpus_usd: Num | float | None = None,
) -> tuple[Num, Num]:
    """Expected USD of (stopping, destroying) for an idle gap of ``idle_hours``."""
    lost = rebuild if lost_gpus_usd is None else lost_gpus_usd
    stop = idle_hours * stopped_usd_hr + p_no_gpus * lost
    destroy = idle_hours * 0.0 + rebuild
    return stop, destroy


@dataclass(frozen=True)
class Breakeven:
    """Stop vs destroy for one machine, with the inputs it came from."""

    running_usd_hr: float
    disk_gb: float
    storage_usd_gb_month: float
    month_hours: float
    setup_hours: float
    ingress_gb: float
    ingress_usd_gb: float
    p_no_gpus: float
    lost_gpus_usd: float  # what losing the GPUs costs (default: a rebuild)
    stopped_usd_hr: float
    setup_usd: float
    ingress_usd: float
    rebuild_usd: float
    expected_loss_usd: float  # p_no_gpus x lost_gpus_usd, paid by stopping
    breakeven_hours: float

    def policy(self, idle_hours: float) -> str:
        """'stop' or 'destroy' for an expected idle gap (ties go to destroy: nothing billed)."""
        stop, destroy = idle_costs(
            idle_hours, self.stopped_usd_hr, self.rebuild_usd, self.p_no_gpus, self.lost_gpus_usd
        )
        return "stop" if stop < destroy else "destroy"

    def advice(self, idle_hours: float | None = None) -> str:
        """The recommendation in words, with the risk of not getting the GPUs back."""
        be = self.breakeven_hours
        if math.isinf(be):
            text = "stopping bills nothing here, so stop rather than destroy"
        elif be <= 0:
            text = (
                "destroy: the expected cost of not getting the GPUs back exceeds the rebuild, "
                "so stopping never pays"
            )
        else:
            text = (
                f"stop if you will be back within {be:.1f} h, destroy if later "
                f"(stopped ${self.stopped_usd_hr:.4f}/h vs a "
                f"{usd(self.rebuild_usd, exact=True)} rebuild)"
            )
        if idle_hours is not None:
            stop, destroy = idle_costs(
                idle_hours,
                self.stopped_usd_hr,
                self.rebuild_usd,
                self.p_no_gpus,
                self.lost_gpus_usd,
            )
            text += (
                f"; for {idle_hours:g} h idle: {self.policy(idle_hours)} "
                f"(stop {usd(stop, exact=True)} expected, destroy {usd(destroy, exact=True)})"
            )
        if self.p_no_gpus > 0:
            text += (
                f"; stopping releases the GPUs: a {self.p_no_gpus:.0%} chance they are gone "
                f"on return costs {usd(self.expected_loss_usd, exact=True)} in expectation"
            )
        else:
            text += (
                "; stopping releases the GPUs and a restart may find none free "
                "(set a probability to price that)"
            )
        return text


def breakeven(
    running_usd_hr: float,
    disk_gb: float,
    storage_usd_gb_month: float,
    *,
    month_hours: float = MONTH_HOURS_CLOUD,
    setup_minutes: float | None = None,
    ingress_gb: float = 0.0,
    ingress_usd_gb: float = 0.0,
    p_no_gpus: float = 0.0,
    lost_gpus_usd: float | None = None,
    provider: str = "",
    instance_type: str = "",
) -> Breakeven:
    """Stop vs destroy for one machine. The measured case: 8x RTX 4090 at $3.4828/h with a
    250 GB disk at $0.20/GB-month in 720-hour months, 15 min setup and 43 GB pulled in at
    $0.003/GB: $0.0694/h stopped, a $1.00 rebuild, break-even after 14.4 idle hours.

    ``setup_minutes`` defaults to the setup time of ``provider`` and ``instance_type`` from the
    sourced table (:mod:`gpucost.model.setup_times`; the catch-all row without a provider)."""
    if setup_minutes is None:
        setup_minutes = setup_time(provider, instance_type).minutes

    for name, value in (
        ("running $/h", running_usd_hr),
        ("disk GB", disk_gb),
        ("$/GB-month", storage_usd_gb_month),
        ("setup minutes", setup_minutes),
        ("ingress GB", ingress_gb),
        ("ingress $/GB", ingress_usd_gb),
    ):
        if not math.isfinite(value) or value < 0:
            raise InputError(f"{name} must be a number >= 0, got {value!r}")
    if not month_hours > 0:
        raise InputError(
            f"hours per month must be positive, got {month_hours!r}",
            hint="730 for AWS/GCP/Azure, 720 for 30-day marketplace months",
        )
    if not 0.0 <= p_no_gpus <= 1.0:
        raise InputError(
            f"the probability of not getting the GPUs back must be in 0..1, got {p_no_gpus!r}"
        )
    if lost_gpus_usd is not None and not lost_gpus_usd >= 0:
        raise InputError(f"the cost of losing the GPUs must be >= 0, got {lost_gpus_usd!r}")
    setup_hours = setup_minutes / 60.0
    stopped = stopped_usd_per_hour(disk_gb, storage_usd_gb_month, month_hours)
    setup = running_usd_hr * setup_hours
    ingress = ingress_gb * ingress_usd_gb
    rebuild = rebuild_usd(running_usd_hr, setup_hours, ingress_gb, ingress_usd_gb)
    lost = rebuild if lost_gpus_usd is None else lost_gpus_usd
    return Breakeven(
        running_usd_hr=running_usd_hr,
        disk_gb=disk_gb,
        storage_usd_gb_month=storage_usd_gb_month,
        month_hours=month_hours,
        setup_hours=setup_hours,
        ingress_gb=ingress_gb,
        ingress_usd_gb=ingress_usd_gb,
        p_no_gpus=p_no_gpus,
        lost_gpus_usd=lost,
        stopped_usd_hr=stopped,
        setup_usd=setup,
        ingress_usd=ingress,
        rebuild_usd=rebuild,
        expected_loss_usd=p_no_gpus * lost,
        breakeven_hours=float(breakeven_idle_hours(stopped, rebuild, p_no_gpus, lost)),
    )


# ---- disk ---------------------------------------------------------------------------------


def disk_size_gb(
    data_gb: Num,
    checkpoint_gb: Num | float = 0.0,
    *,
    checkpoints_kept: int = 2,
    results_gb: Num | float = 0.0,
    headroom: float = DISK_HEADROOM,
    system_gb: float = SYSTEM_DISK_GB,
) -> Num:
    """Disk to allocate, whole GB: the OS and image, then data + checkpoints kept + results
    plus headroom.

    Billed by allocated size and never shrinks, so this is also what storage costs are
    computed from.
    """
    need = data_gb + checkpoints_kept * checkpoint_gb + results_gb  # as in disk_need_gb
    size = np.ceil(_arr(need) * (1.0 + headroom) - 1e-9) + system_gb
    return size if size.ndim else float(size)  # type: ignore[return-value]


def disk_need(data_gb: float, checkpoint_gb: float, *, checkpoints_kept: int, results_gb: float,
              system_gb: float = SYSTEM_DISK_GB) -> tuple[float, int]:
    """For one plan: (GB the run cannot do without: system + data + checkpoints kept + results;
    the whole GB :func:`disk_size_gb` allocates for it, with headroom). Pre-flight checks a
    plan's ``[disk] size_gb`` against these two, so plans and checks share one rule."""
    need = system_gb + data_gb + checkpoints_kept * checkpoint_gb + results_gb
    want = disk_size_gb(data_gb, checkpoint_gb, checkpoints_kept=checkpoints_kept,
                        results_gb=results_gb, system_gb=system_gb)
    return need, math.ceil(float(want))


# ---- interruptions and checkpoints --------------------------------------------------------


def outlives_instance(checkpoint_target: str) -> bool:
    """Whether checkpoints written to ``checkpoint_target`` survive the instance that wrote
    them (an object store), so a reclaimed spot run can resume from one; a ``local:`` folder
    is deleted with a reclaimed spot instance."""
    return checkpoint_target.startswith("s3://")


def young_daly_interval_hours(checkpoint_hours: Num, rate_per_hr: Num) -> Num:
    """Work between checkpoints minimising expected loss: sqrt(2 C / rate); inf at rate 0."""
    c, lam = _arr(checkpoint_hours), _arr(rate_per_hr)
    with np.errstate(divide="ignore", over="ignore"):  # a denormal rate: an infinite interval
        tau = np.where(lam > 0, np.sqrt(2.0 * c / np.where(lam > 0, lam, 1.0)), np.inf)
    return tau if tau.ndim else float(tau)  # type: ignore[return-value]


def _expm1_over_x(x: FloatArray) -> FloatArray:
    """(e^x - 1) / x, 1 at x = 0, without cancellation."""
    safe = np.where(x > 0, np.minimum(x, 700.0), 1.0)  # e^700 is near float64's limit
    return np.where(x > 0, np.expm1(safe) / safe, 1.0)


def expected_segment_hours(segment_hours: Num, rate_per_hr: Num, restart_hours: Num | float) -> Num:
    """Expected wall hours to get through ``segment_hours`` of uninterrupted work that restarts
    from its beginning (after ``restart_hours``) on every interruption."""
    s, lam, r = _arr(segment_hours), _arr(rate_per_hr), _arr(restart_hours)
    # (1/rate + restart)(e^(rate s) - 1) = s (1 + rate restart) (e^(rate s) - 1)/(rate s)
    with np.errstate(over="ignore"):
        out = np.minimum(s * (1.0 + lam * r) * _expm1_over_x(lam * s), NEVER_HOURS)
    return out if out.ndim else float(out)  # type: ignore[return-value]


@dataclass(frozen=True)
class SpotRun:
    """Expected wall-clock of a run of ``work_hours`` under interruptions (arrays broadcast)."""

    hours: FloatArray  # expected wall hours: work + checkpoint writes + rework + restarts
    checkpoint_hours: FloatArray  # writing checkpoints, uninterrupted path
    rework_hours: FloatArray  # lost work redone and restarts, in expectation
    interval_hours: FloatArray  # work between checkpoints; inf = no checkpoints
    interruptions: FloatArray  # expected number
    p_interrupted: FloatArray  # probability of at least one


def spot_run(
    work_hours: Num,
    rate_per_hr: Num,
    *,
    restart_hours: Num | float = 0.0,
    checkpoint_hours: Num | float = 0.0,
    checkpoints: bool | npt.NDArray[np.bool_] = True,
) -> SpotRun:
    """Expected run under interruptions, with Young/Daly checkpoints when they pay off.

    ``rate_per_hr`` is the group's rate (nodes x per-node rate for a synchronous job).
    ``checkpoint_hours`` is one checkpoint's write time (0 = no checkpoint possible).
    ``checkpoints`` (per row, or for all): whether an interrupted run can resume from one;
    where not, it restarts from zero.
    """
    w, lam = _arr(work_hours), _arr(rate_per_hr)
    c, r = _arr(checkpoint_hours), _arr(restart_hours)
    no_ckpt = _arr(expected_segment_hours(w, lam, r))
    tau = np.minimum(_arr(young_daly_interval_hours(c, lam)), np.maximum(w, 1e-12))
    tau = np.where(c > 0, tau, np.inf)
    finite = np.isfinite(tau)
    tau_f = np.where(finite, tau, 1.0)
    n_ckpt = np.where(finite, w / tau_f, 0.0)
    with_ckpt = n_ckpt * _arr(expected_segment_hours(tau_f + c, lam, r))
    use = finite & (with_ckpt < no_ckpt) & np.asarray(checkpoints, dtype=bool)
    hours = np.where(use, with_ckpt, no_ckpt)
    ckpt_hours = np.where(use, n_ckpt * c, 0.0)
    interruptions = lam * hours  # Poisson arrivals over the time spent running
    return SpotRun(
        hours=hours,
        checkpoint_hours=ckpt_hours,
        rework_hours=np.maximum(hours - w - ckpt_hours, 0.0),
        interval_hours=np.where(use, tau, np.inf),
        interruptions=interruptions,
        p_interrupted=-np.expm1(-interruptions),
    )


# ---- the full $/job -----------------------------------------------------------------------


@dataclass(frozen=True)
class JobParams:
    """What the job moves and writes, and how long a machine takes to become useful."""

    data_gb: float = 0.0  # dataset downloaded onto each node and kept on its disk
    checkpoint_gb: float = 0.0  # one checkpoint (0 = the job cannot resume)
    results_gb: float = 0.0  # copied off at the end
    # provisioning + image pull + environment, before the data; None = per provider and
    # instance family from the sourced table (gpucost.model.setup_times)
    setup_minutes: float | None = None
    checkpoints_kept: int = 2
    checkpoint_write_gb_s: float = DEFAULT_CHECKPOINT_WRITE_GB_S
    disk_gb: float | None = None  # allocated per node; None = sized from the above
    interruption_rate_per_hr: float | None = None  # per node; None = from the rates table
    checkpoints: bool = True
    # Checkpoints go to an object store (:func:`outlives_instance`): only then does a spot run
    # resume from one after an interruption; without, it is priced as restart-from-zero.
    object_store_checkpoints: bool = False
    # After a spot interruption capacity may not come back: with this probability it is still
    # missing after max_wait_capacity_hours, and the rest of the job moves to on-demand.
    p_no_capacity: float = 0.0
    max_wait_capacity_hours: float = 2.0

    def __post_init__(self) -> None:
        if self.setup_minutes is not None:
            check_setup_minutes(self.setup_minutes, "setup minutes")
        for name in ("data_gb", "checkpoint_gb", "results_gb"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise InputError(f"{name.replace('_', ' ')} must be a number >= 0, got {value!r}")
        for name in ("disk_gb", "interruption_rate_per_hr"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise InputError(f"{name.replace('_', ' ')} must be a number >= 0, got {value!r}")
        if not 0.0 <= self.p_no_capacity <= 1.0:
            raise InputError(
                f"the probability of no spot capacity must be in 0..1, got {self.p_no_capacity!r}"
            )
        if not (math.isfinite(self.max_wait_capacity_hours) and self.max_wait_capacity_hours >= 0):
            raise InputError(
                f"max wait for capacity must be >= 0 hours, got {self.max_wait_capacity_hours!r}"
            )
        if self.checkpoint_write_gb_s <= 0:
            raise InputError("checkpoint write speed must be positive")

    @property
    def allocated_disk_gb(self) -> float:
        if self.disk_gb is not None:
            return self.disk_gb
        return float(
            disk_size_gb(
                self.data_gb,
                self.checkpoint_gb,
                checkpoints_kept=self.checkpoints_kept,
                results_gb=self.results_gb,
            )
        )

    @property
    def checkpoint_hours(self) -> float:
        if self.checkpoint_gb <= 0:
            return 0.0
        return (CHECKPOINT_FIXED_S + self.checkpoint_gb / self.checkpoint_write_gb_s) / 3600.0


@dataclass(frozen=True)
class ExpectedCost(Generic[Float]):
    """The expected $/job: the first column of :class:`JobCosts`, and a plan's."""

    __slots__ = ()
    cost_usd: Float = column("USD (expected, whole job)")


@dataclass(frozen=True)
class CostTerms(Generic[Float, Bool, Text]):
    """What :func:`job_costs` adds up, and the unit prices it used (defaults filled in where the
    offer is silent): columns of :class:`JobCosts` and of a plan, declared here once."""

    __slots__ = ()
    total_hours: Float = column("h (expected wall clock: setup + compute + checkpoints + rework)")
    setup_hours: Float = column("h (provisioning, image, data download)")
    setup_minutes: Float = column(
        "min (provisioning, boot, driver, image: before the data download)")
    setup_source: Text = column("where the setup time comes from")
    compute_usd: Float = column("USD (nodes x $/h x compute hours)")
    setup_usd: Float = column("USD (nodes x $/h x setup hours)")
    storage_usd: Float = column(
        "USD (disk GB x $/GB-month / month hours x wall hours, all nodes)")
    egress_usd: Float = column("USD (checkpoint + results GB out)")
    ingress_usd: Float = column("USD (data GB in, all nodes)")
    checkpoint_usd: Float = column("USD (checkpoint writes)")
    spot_rework_usd: Float = column("USD (expected lost work, restarts and on-demand fallback)")
    disk_gb: Float = column("GB allocated per node")
    interruption_rate: Float = column("interruptions per node-hour")
    rate_source: Text = column("where the interruption rate comes from")
    checkpoint_interval_hours: Float = column(
        "h of work between checkpoints (Young/Daly; null = none)")
    interruptions: Float = column("expected interruptions over the job")
    risk: Float = column("probability of at least one interruption")
    worst_usd: Float = column("USD if interrupted at the worst moment and finished on-demand")
    on_demand_hr: Float = column("USD/h per node on-demand (the spot fallback)")
    storage_gb_month: Float = column("USD per GB-month of disk")
    month_hours: Float = column("h per billing month")
    # Prices per GB, named as the price snapshots' columns; outputs name them by their unit, or
    # a reader of "egress_gb": 0.09 takes them for the GB moved.
    egress_gb: Float = column("USD per GB out", json_name="egress_usd_per_gb")
    ingress_gb: Float = column("USD per GB in", json_name="ingress_usd_per_gb")
    download_gbps: Float = column("Gbit/s assumed for the data download")
    storage_price_assumed: Bool = column(
        "the offer gives no disk price: a typical one was used")
    bandwidth_assumed: Bool = column(
        "the offer gives no network bandwidth: a typical one was used")


@dataclass(frozen=True, slots=True)
class JobCosts(CostTerms[FloatArray, BoolArray, TextArray], ExpectedCost[FloatArray]):
    """The expected $/job of each plan and its terms, per row."""

    def columns(self) -> dict[str, np.ndarray]:
        """Field name -> column: a plan's cost columns, as they are."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class CostInputs:
    """Per plan, what :func:`job_costs` prices it from: the offer in the plan's market at its
    node count. Text columns stay fixed-width: the rates tables match them fastest so."""

    provider: np.ndarray
    instance_type: np.ndarray
    market: np.ndarray  # "on-demand" | "spot"
    reliability: FloatArray  # 0..1 where a marketplace states it, else NaN
    nodes: FloatArray
    price_hr: FloatArray  # per node, in the plan's market
    on_demand_hr: FloatArray  # per node: the spot fallback and the worst case
    network_gbps: FloatArray  # NaN: unknown
    storage_gb_month: FloatArray  # NaN: unknown
    egress_gb: FloatArray  # USD per GB; NaN: free
    ingress_gb: FloatArray
    month_hours: FloatArray  # NaN: the clouds' month


@dataclass(frozen=True)
class OfferTerms:
    """Per row, what the sourced tables say for its offer and market: setup minutes and the
    interruption rate, each with its source. They depend on the offer, not the node count, so a
    caller costing many node counts of the same offers looks them up once per offer."""

    setup_minutes: FloatArray
    setup_source: npt.NDArray[np.object_]
    interruption_rate: FloatArray  # per node-hour
    rate_source: npt.NDArray[np.object_]

    def take(self, index: npt.NDArray[np.int64]) -> OfferTerms:
        return OfferTerms(self.setup_minutes[index], self.setup_source[index],
                          self.interruption_rate[index], self.rate_source[index])


def offer_terms(params: JobParams, *, provider: np.ndarray | Factor, instance_type: np.ndarray,
                market: np.ndarray, reliability: FloatArray) -> OfferTerms:
    """:class:`OfferTerms` for rows of these offers (per row: provider, or its factor, instance
    type, market, reliability)."""
    setup_min, setup_source = setup_minutes(provider, instance_type, override=params.setup_minutes)
    rate, rate_source = interruption_rates(
        provider, instance_type, market, _arr(reliability),
        override=params.interruption_rate_per_hr,
    )
    n = len(instance_type)
    return OfferTerms(np.broadcast_to(setup_min, (n,)).astype(np.float64),
                      np.broadcast_to(setup_source, (n,)).astype(object), rate,
                      np.asarray(rate_source, dtype=object))


def job_costs(
    cols: CostInputs,
    compute_hours: FloatArray,
    params: JobParams,
    *,
    terms: OfferTerms | None = None,
) -> JobCosts:
    """The expected $/job and each of its terms, per plan. ``compute_hours`` is the
    uninterrupted compute time of the whole job. ``terms``: the rows' :class:`OfferTerms` when
    already looked up.
    """
    nodes = _arr(cols.nodes)
    price = _arr(cols.price_hr)
    w = _arr(compute_hours)
    running = nodes * price  # USD/h for the group

    net = _arr(cols.network_gbps)
    bandwidth_assumed = np.isnan(net) | (net <= 0)
    download_gbps = np.where(
        bandwidth_assumed, DEFAULT_DOWNLOAD_GBPS, np.minimum(net, MAX_DOWNLOAD_GBPS)
    )
    terms = terms or offer_terms(params, provider=cols.provider, instance_type=cols.instance_type,
                                 market=cols.market, reliability=cols.reliability)
    setup_min, setup_source = terms.setup_minutes, terms.setup_source
    setup_hours = setup_min / 60.0 + params.data_gb * 8.0 / download_gbps / 3600.0
    # your own machine is already set up and already holds the data
    setup_hours = np.where(cols.provider == "local", 0.0, setup_hours)

    rate, rate_source = terms.interruption_rate, terms.rate_source
    restart_hours = setup_hours + params.checkpoint_hours  # rebuild, then reload
    is_spot = cols.market == "spot"
    # A reclaimed spot instance takes its disk along: only an object store's checkpoints
    # resume (an on-demand host that drops out comes back with its disk).
    resumable = params.checkpoints & (~is_spot | params.object_store_checkpoints)
    run = spot_run(
        w,
        nodes * rate,
        restart_hours=restart_hours,
        checkpoint_hours=params.checkpoint_hours,
        checkpoints=resumable,
    )
    # Falling back to on-demand: after some interruption capacity stays away past the maximum
    # wait (probability 1 - (1 - p)^interruptions); the remaining work, half the job on
    # average, then runs at the on-demand price, and the wait delays the finish.
    od = _arr(cols.on_demand_hr)
    q = params.p_no_capacity
    p_fallback = np.where(
        is_spot & (q > 0), -np.expm1(run.interruptions * np.log1p(-min(q, 1 - 1e-12))), 0.0
    )
    fallback_usd = p_fallback * nodes * np.maximum(od - price, 0.0) * 0.5 * w
    total_hours = setup_hours + run.hours + p_fallback * params.max_wait_capacity_hours

    disk = params.allocated_disk_gb
    gb_month = _arr(cols.storage_gb_month)
    storage_assumed = np.isnan(gb_month)
    gb_month = np.where(storage_assumed, DEFAULT_STORAGE_USD_GB_MONTH, gb_month)
    month = _arr(cols.month_hours)
    month = np.where(np.isnan(month) | (month <= 0), MONTH_HOURS_CLOUD, month)
    storage = nodes * stopped_usd_per_hour(np.full(w.shape, disk), gb_month, month) * total_hours
    egress_price = np.nan_to_num(_arr(cols.egress_gb), nan=0.0)
    ingress_price = np.nan_to_num(_arr(cols.ingress_gb), nan=0.0)
    egress = (params.checkpoint_gb + params.results_gb) * egress_price
    # every start (the first, and each restart) pulls the data in again on every node
    ingress = nodes * params.data_gb * ingress_price * (1.0 + run.interruptions)

    compute = running * w
    setup = running * setup_hours
    checkpoint = running * run.checkpoint_hours
    rework = running * run.rework_hours + fallback_usd
    cost = compute + setup + storage + egress + ingress + checkpoint + rework

    # The worst plausible case: interrupted just before the next checkpoint (or the end) and
    # the lost work redone on-demand after a rebuild.
    lost = np.where(np.isfinite(run.interval_hours), run.interval_hours, w)
    interruptible = rate > 0
    worst = np.where(
        interruptible,
        cost
        - rework
        + nodes * od * (lost + restart_hours)
        + nodes * params.data_gb * ingress_price,
        cost,
    )
    return JobCosts(
        cost_usd=cost,
        total_hours=total_hours,
        setup_hours=np.broadcast_to(setup_hours, w.shape).astype(np.float64),
        setup_minutes=np.broadcast_to(setup_min, w.shape).astype(np.float64),
        setup_source=np.broadcast_to(setup_source, w.shape).astype(object),
        compute_usd=compute,
        setup_usd=setup,
        storage_usd=storage,
        egress_usd=np.broadcast_to(egress, w.shape).astype(np.float64),
        ingress_usd=ingress,
        checkpoint_usd=checkpoint,
        spot_rework_usd=rework,
        disk_gb=np.full(w.shape, disk),
        interruption_rate=rate,
        rate_source=rate_source,
        checkpoint_interval_hours=np.where(
            np.isfinite(run.interval_hours), run.interval_hours, np.nan
        ),
        interruptions=run.interruptions,
        risk=run.p_interrupted,
        worst_usd=worst,
        on_demand_hr=od,
        storage_gb_month=gb_month,
        month_hours=month,
        egress_gb=egress_price,
        ingress_gb=ingress_price,
        download_gbps=download_gbps,
        storage_price_assumed=storage_assumed,
        bandwidth_assumed=bandwidth_assumed & (cols.provider != "local"),
    )
