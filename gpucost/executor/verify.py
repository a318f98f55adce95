"""Verify on arrival, the second half: the job's measured throughput against the plan's.

The first half (a real matmul where the job will run) is the provider's
:meth:`~gpucost.executor.base.Provider.verify_hardware`; this module turns the throughput the
job reports into a deviation from the plan and a re-estimated $/job, and decides what a slow run
does under the plan's ``[safety] verify_action``:

* ``"warn"``: warn only (the budget cap still ends the run once the spend reaches it);
* ``"stop-over-budget"`` (the default): warn, and stop the run as soon as the $/job projected
  from the measured throughput exceeds ``budget_cap_usd``: the cap would end it unfinished;
* ``"stop"``: that, and stop any run whose throughput is outside the prediction's band.

A stop names the plan that is cheapest now: the job re-ranked through the planning core, which
starts from the measurement just stored (:func:`gpucost.measurements.record_on_arrival`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucost.errors import GpuCostError
from gpucost.format import usd_text
from gpucost.model.bands import NO_BAND, Band, band_for
from gpucost.model.perf import default_intra_node_link
from gpucost.model.translate import gpu_spec
from gpucost.planfile import Plan


@dataclass(frozen=True)
class VerifyResult:
    measured: float  # samples/s, whole group
    planned: float  # samples/s, whole group
    deviation_pct: float
    within_margin: bool
    reestimated_cost_usd: float
    reestimated_hours: float

    def message(self, limits: tuple[float, float]) -> str:
        """One line on the measurement against the throughputs ``limits`` allows
        (:func:`band_limits`)."""
        low, high = limits
        word = "inside" if low <= self.measured <= high else "outside"
        return (f"verify: measured {self.measured:.1f} samples/s vs planned {self.planned:.1f} "
                f"({self.deviation_pct:+.0f}%, {word} the prediction's band {low:.1f}-{high:.1f}"
                f"); re-estimated $/job {usd_text(self.reestimated_cost_usd)} over "
                f"{self.reestimated_hours:.3g} h")


def verify_throughput(plan: Plan, measured: float,
                      price_hr: float | None = None) -> VerifyResult:
    """Compare the job's measured throughput with the plan's and re-estimate $/job from it
    (at ``price_hr`` USD/h per node when it differs from the plan's, after a spot fallback)."""
    planned = plan.workload.throughput
    deviation = (measured - planned) / planned * 100.0
    samples = plan.total_samples or 0.0
    est = plan.estimate
    setup_hours = max(0.0, est.hours - samples / planned / 3600.0)
    hours = setup_hours + samples / measured / 3600.0
    compute = plan.offer.nodes * (plan.offer.price_hr if price_hr is None else price_hr) * hours
    # Only the compute term scales with throughput; storage, egress, setup stay as planned.
    cost = est.cost_usd - est.compute_usd + compute if est.compute_usd > 0 else max(
        est.cost_usd * planned / measured, compute)
    return VerifyResult(measured=measured, planned=planned, deviation_pct=deviation,
                        within_margin=abs(deviation) <= plan.safety.verify_margin_pct,
                        reestimated_cost_usd=cost, reestimated_hours=hours)


def over_budget(plan: Plan, check: VerifyResult) -> str | None:
    """The projection in words when the $/job the measured throughput projects exceeds the
    plan's budget cap, else None."""
    cap = plan.safety.budget_cap_usd
    if check.reestimated_cost_usd <= cap:
        return None
    return (f"projected $/job {usd_text(check.reestimated_cost_usd)} at the measured "
            f"{check.measured:.1f} samples/s exceeds the budget cap {usd_text(cap)}")


def stop_reason(plan: Plan, check: VerifyResult, *, outside: bool) -> str | None:
    """Why the run stops under the plan's verify_action, with the plan cheapest now; None when
    it goes on. ``outside``: the throughput is outside the prediction's band (or margin)."""
    action = plan.safety.verify_action
    if action == "stop" and outside:
        why = "verify_action = stop: stopping the run"
    elif action != "warn" and (projection := over_budget(plan, check)) is not None:
        why = f"{projection}; verify_action = {action}: stopping the run"
    else:
        return None
    return f"{why}; {cheaper_plan(plan, check)}"


def arrival_stop(plan: Plan, check: VerifyResult, limits: tuple[float, float]) -> str | None:
    """The runner's on-arrival decision: :func:`stop_reason`, outside meaning outside the
    throughputs the prediction's band allows (``limits``: :func:`band_limits`), as a SkyPilot
    run's checks decide it."""
    low, high = limits
    return stop_reason(plan, check, outside=not low <= check.measured <= high)


def cheaper_plan(plan: Plan, check: VerifyResult) -> str:
    """The plan that is cheapest now, in one clause: the plan's job re-ranked through the
    planning core (same market, up to the plan's node count) against this plan at the measured
    throughput. Never raises: a ranking that cannot be made is said instead."""
    # Here, not at the top: `gpucost status`, `ps` and `logs` import the runner, and so this
    # module, without numpy; the ranking loads only for a run that is being stopped.
    from gpucost.planning.ranking import rank
    from gpucost.planning.request import build_request

    job, offer = plan.job, plan.offer
    here = f"this plan at the measured rate: {usd_text(check.reestimated_cost_usd)}/job"
    if not plan.workload.profile:  # the planner's default workload would be another job's
        return f"no re-ranking (the plan names no [workload] profile); {here}"
    try:
        ranking = rank(build_request(
            plan.workload.profile, samples=plan.total_samples,
            market="any" if job.spot or offer.market != "on-demand" else "on-demand",
            max_nodes=offer.nodes, data_gb=job.data_gb, checkpoint_gb=job.checkpoint_gb,
            results_gb=job.results_gb))
    except (GpuCostError, OSError) as err:
        return f"no re-ranking ({err}); {here}"
    # The same offer is this plan, priced above from the measurement itself (the ranking uses
    # a stored measurement only for one GPU).
    for i in range(len(ranking.plans)):
        row = ranking.plans.row(i)
        if (row.provider, row.instance_type, row.region, row.nodes, row.market) == (
                offer.provider, offer.instance_type, offer.region, offer.nodes, offer.market):
            continue
        if row.cost_usd >= check.reestimated_cost_usd:
            return (f"no other plan is cheaper: {here}, the next {row.label()} "
                    f"{usd_text(row.cost_usd)}/job")
        return (f"cheaper now: {row.label()} at {usd_text(row.cost_usd)}/job "
                f"({row.throughput:.1f} samples/s predicted); {here}")
    return f"no other plan ranks for this job; {here}"


def band_limits(plan: Plan, band: Band) -> tuple[float, float]:
    """The throughputs (samples/s, whole group) the prediction's band allows, never narrower
    than the plan's verify margin: a measurement predicting itself still varies run to run."""
    planned, margin = plan.workload.throughput, plan.safety.verify_margin_pct
    return (planned * min(band.low, 1.0 - margin / 100.0),
            planned * max(band.high, 1.0 + margin / 100.0))


def plan_band(plan: Plan) -> Band:
    """The plan's prediction band, recomputed (a plan file does not carry it): its profile's
    GPU to its offer's GPU at its per-device batch, the offer's nodes meeting over the GPU's
    default link. The profile's own batch is not in the file; it is taken as the plan's, whose
    band is the wider one when the plan's batch was reduced. A plan that names no profile GPU
    (a hand-written throughput, not the model's) has no band: its verify margin decides."""
    work, offer = plan.workload, plan.offer
    if not work.profile_gpu:
        return NO_BAND
    per_node = max(1, round(offer.gpu_count))
    batch = float(work.batch_size or 1)
    try:
        target = gpu_spec(offer.gpu)
        source = None if work.profile_gpu == "CPU" else gpu_spec(work.profile_gpu)
        link = default_intra_node_link(offer.gpu, per_node) if per_node > 1 else ""
    except GpuCostError:  # a GPU this catalog does not know (a hand-edited plan): the plan's
        return NO_BAND  # verify margin alone, which the watch widens every band to
    return band_for(source, target, batch, batch, per_node * offer.nodes, nodes=offer.nodes,
                    link=link)
