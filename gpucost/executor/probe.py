"""Probes: measure the close candidates before committing to a long run (`gpucost probe`).

A prediction across GPUs is good to 15-20 % at best: when the cost bands of the cheapest plans
overlap, their order is a coin toss. A probe runs the job's own command on one candidate through
the candidate's engine (local, torchrun, SkyPilot: one short cluster, torn down after) until the
job has made ``reports`` throughput reports (``gpucost.report(throughput=...)``; under SkyPilot
they come home as log markers) or ``minutes`` of job time have passed, whichever comes first.
The median of those reports is recorded in measurements.json (source "probe"), and the
candidates are re-ranked by the $/job their measured throughput projects
(:func:`gpucost.executor.verify.verify_throughput`).

A probe is a run like any other (the runner, the ledger, the guard or the watchdog, teardown,
one live run per job), with its own plan written to ``GPUCOST_HOME/probes/RUN.toml``: the
candidate's plan with the job named ``NAME-probe`` (so it never holds or resumes the real job's
lock or checkpoints), checkpoints off, destroy after, ``verify_action = "warn"`` (a probe
measures; it is not stopped for being slow), and limits sized for the probe: a hard timeout of
setup + twice the probe's minutes + :data:`SLACK_MIN`, and a budget cap of that time at the
plan's price. The run ends as ``probed``.

Expected cost, which ``--probe-budget-usd`` is held against, is the most a probe runs for:
nodes x USD/h x (the plan's setup + ``minutes``), plus the plan's data download.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpucost import paths
from gpucost.errors import GpuCostError, InputError
from gpucost.executor import PROVIDERS
from gpucost.executor.ledger import Ledger
from gpucost.executor.rundir import RunDir
from gpucost.executor.runner import POLL_S, ProbeLimit, Runner, new_run_id
from gpucost.executor.verify import verify_throughput
from gpucost.jobname import MAX_LENGTH
from gpucost.measurements import Measurement, record_on_arrival
from gpucost.planfile import (
    CheckpointSection,
    EstimateSection,
    IdleSection,
    Plan,
    SafetySection,
    load_plan,
    save_plan,
)
from gpucost.planning.advice import Advice, Choice
from gpucost.planning.planbuild import to_plan
from gpucost.planning.plans import PlanRow
from gpucost.planning.ranking import rank
from gpucost.planning.request import Request

DEFAULT_REPORTS = 3  # the median of three is past one slow first report (as the SkyPilot watch)
DEFAULT_MINUTES = 5.0
DEFAULT_TOP = 3
DEFAULT_BUDGET_USD = 5.0
SLACK_MIN = 2.0  # on-arrival matmul and teardown, beyond the probe's own time
PROBE_SUFFIX = "-probe"


@dataclass(frozen=True)
class Candidate:
    """One plan that may be the cheapest: a plan file the user named, or a plan of a ranking."""

    plan: Plan
    workdir: Path  # where the job's command runs
    label: str
    source: str  # the plan file, or "ranking row N"
    cost_low_usd: float | None = None  # the prediction's cost band, when the ranking gave it
    cost_high_usd: float | None = None

    @property
    def cost_usd(self) -> float:
        return self.plan.estimate.cost_usd


@dataclass(frozen=True)
class Probe:
    """A candidate's probe: its plan, what it may cost, and why it will not run (if so)."""

    candidate: Candidate
    plan: Plan
    setup_hours: float
    hours: float  # at most: setup + the probe's minutes
    cost_usd: float  # expected, at most (what the probe budget is held against)
    refused: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What one probe did and measured."""

    probe: Probe
    run_id: str
    state: str  # the run's final state ("probed", "failed", ...), or "not-started"
    exit_code: int
    throughputs: tuple[float, ...] = ()  # the reports it used, samples/s (whole group)
    measurement: Measurement | None = None
    spent_usd: float = 0.0
    job_cost_usd: float | None = None  # the candidate's $/job at the measured throughput
    note: str = ""  # why nothing was measured or recorded

    @property
    def throughput(self) -> float | None:
        return statistics.median(self.throughputs) if self.throughputs else None


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    cost_usd: float  # measured $/job when probed, else predicted
    measured: bool
    throughput: float | None = None


@dataclass
class Result:
    """The probes, what they measured, and the candidates re-ranked with it."""

    probes: list[Probe]
    outcomes: list[Outcome] = field(default_factory=list)
    ranked: list[Ranked] = field(default_factory=list)
    cheapest_now: PlanRow | None = None  # the request re-ranked with the measurements

    @property
    def spent_usd(self) -> float:
        return sum(o.spent_usd for o in self.outcomes)

    @property
    def settled_usd(self) -> float | None:
        """The measured $/job difference between the first two measured candidates."""
        measured = [r for r in self.ranked if r.measured]
        return measured[1].cost_usd - measured[0].cost_usd if len(measured) > 1 else None

    @property
    def saved_usd(self) -> float | None:
        """What picking by measurement saves per job over the plan predicted cheapest, both at
        their measured $/job (None unless both were measured)."""
        first = next((o for o in self.outcomes if o.probe.candidate is self.probes[0].candidate
                      and o.job_cost_usd is not None), None)
        measured = [r for r in self.ranked if r.measured]
        if first is None or first.job_cost_usd is None or not measured:
            return None
        return first.job_cost_usd - measured[0].cost_usd

    @property
    def exit_code(self) -> int:
        """0 when every probe that ran measured; else the first failed probe's code."""
        return next((o.exit_code for o in self.outcomes if o.exit_code != 0), 0)


# -- candidates ----------------------------------------------------------------------------------

def plan_label(plan: Plan) -> str:
    """"2 x aws p3.8xlarge (us-east-1), 4x V100 per node, spot", as a ranking's rows read."""
    o = plan.offer
    where = f"{o.provider} {o.instance_type}" + (f" ({o.region})" if o.region else "")
    group = f"{o.nodes} x {where}" if o.nodes > 1 else where
    return f"{group}, {o.gpu_count:g}x {o.gpu}{' per node' if o.nodes > 1 else ''}, {o.market}"


def engine_of(plan: Plan) -> str:
    """The engine that runs the plan, in words: "local", "torchrun", "skypilot (aws)"."""
    provider = plan.offer.provider
    module, _ = PROVIDERS.get(provider, ("", ""))
    return f"skypilot ({provider})" if module.endswith(".skypilot") else provider


def candidates_from_files(paths: Sequence[str | Path]) -> list[Candidate]:
    """The plans the user names, cheapest predicted first."""
    found = []
    for path in paths:
        plan = load_plan(path)
        found.append(Candidate(plan, plan.workdir(path), f"{plan_label(plan)} [{path}]",
                               str(path)))
    if len({c.plan.job.name for c in found}) > 1:
        raise InputError("the plans name different jobs: "
                         + ", ".join(sorted({c.plan.job.name for c in found})),
                         hint="probe candidates for one job: plans written by `gpucost plan` "
                              "for the same job and command")
    return sorted(found, key=lambda c: c.cost_usd)


def close_rows(advice: Advice, top: int) -> list[int]:
    """The ranking rows worth probing: the cheapest plan meeting the constraints and, cheapest
    first, the next ones meeting them whose cost band overlaps its band, at most ``top`` in
    all. One row per (GPU, GPUs per node, nodes): a measurement there holds for every region
    and provider of it, so probing it twice teaches nothing."""
    if advice.cheapest is None:
        return []
    plans = advice.ranking.plans
    first = advice.cheapest.index
    rows = [first]
    seen = {_config(plans.row(first))}
    for i in np.argsort(plans.cost_usd, kind="stable"):
        if len(rows) >= top:
            break
        i = int(i)
        row = plans.row(i)
        if (i == first or not advice.feasible[i] or _config(row) in seen
                or row.cost_low_usd > plans.cost_high_usd[first]):
            continue
        rows.append(i)
        seen.add(_config(row))
    return rows


def _config(row: PlanRow) -> tuple[str, float, int]:
    return row.gpu, row.gpu_count, row.nodes


def candidates_from_advice(advice: Advice, top: int, workdir: Path,
                           **plan_options: Any) -> list[Candidate]:
    """:func:`close_rows` as plans (:func:`gpucost.planning.planbuild.to_plan` with
    ``plan_options``: profile_ref, command, name, checkpoint_target ...)."""
    found = []
    for i in close_rows(advice, top):
        row = advice.ranking.plans.row(i)
        plan = to_plan(Choice("chosen", i, row, ()), advice, **plan_options)
        found.append(Candidate(plan, workdir, row.label(), f"ranking row {i + 1}",
                               row.cost_low_usd, row.cost_high_usd))
    return found


# -- probes --------------------------------------------------------------------------------------

def setup_hours(plan: Plan) -> float:
    """The plan's setup before the job runs (provisioning, image, data download), hours: its
    estimate less the compute hours at the predicted throughput, as verify on arrival reads it."""
    samples = plan.total_samples or 0.0
    return max(0.0, plan.estimate.hours - samples / plan.workload.throughput / 3600.0)


def _cents_up(usd: float) -> float:
    return max(0.01, math.ceil(round(usd * 100, 6)) / 100)


def probe_plan(candidate: Candidate, *, reports: int, minutes: float) -> Probe:
    """The candidate's probe: its plan reshaped for a short measured run (module docstring)."""
    plan, o = candidate.plan, candidate.plan.offer
    setup = setup_hours(plan)
    hours = setup + minutes / 60.0
    per_hr = o.nodes * o.price_hr
    ingress = plan.estimate.ingress_usd
    cost = per_hr * hours + ingress
    timeout = setup + 2 * minutes / 60.0 + SLACK_MIN / 60.0
    worst_hr = o.nodes * max(o.price_hr, o.on_demand_price_hr or 0.0)  # after a spot fallback
    name = plan.job.name[:MAX_LENGTH - len(PROBE_SUFFIX)] + PROBE_SUFFIX
    probe = dataclasses.replace(
        plan,
        job=dataclasses.replace(plan.job, name=name, workdir=str(candidate.workdir),
                                deadline_hours=None, budget_usd=None),
        safety=SafetySection(timeout_hours=math.ceil(timeout * 1e4) / 1e4,
                             budget_cap_usd=_cents_up(worst_hr * timeout + ingress),
                             verify_margin_pct=plan.safety.verify_margin_pct,
                             verify_action="warn"),
        checkpoint=CheckpointSection(enabled=False, resume=False),
        spot=dataclasses.replace(plan.spot, max_wait_capacity_hours=0.0),
        idle=IdleSection(policy="destroy"),
        estimate=EstimateSection(hours=hours, cost_usd=cost, compute_usd=per_hr * minutes / 60,
                                 setup_usd=per_hr * setup, ingress_usd=ingress),
        assumptions=dataclasses.replace(plan.assumptions, notes=[
            f"probe of {candidate.label}: until {reports} throughput reports or {minutes:g} min "
            "of job time, whichever comes first (gpucost probe)", *plan.assumptions.notes]),
    )
    return Probe(candidate, probe, setup, hours, cost)


def plan_probes(candidates: Sequence[Candidate], *, reports: int = DEFAULT_REPORTS,
                minutes: float = DEFAULT_MINUTES,
                budget_usd: float = DEFAULT_BUDGET_USD) -> list[Probe]:
    """One probe per candidate, in order; a probe that would take the probes' expected cost
    past ``budget_usd`` is refused (and the ones after it are still considered)."""
    if reports < 1:
        raise InputError(f"--reports must be 1 or more, got {reports}")
    if not (math.isfinite(minutes) and minutes > 0):
        raise InputError(f"--minutes must be more than 0, got {minutes:g}")
    probes, total = [], 0.0
    for candidate in candidates:
        probe = probe_plan(candidate, reports=reports, minutes=minutes)
        if total + probe.cost_usd > budget_usd:
            probe = dataclasses.replace(probe, refused=(
                f"its expected cost (at most) would take the probes to "
                f"{total + probe.cost_usd:.4g} USD, over the probe budget {budget_usd:g} USD"))
        else:
            total += probe.cost_usd
        probes.append(probe)
    return probes


def run_probes(probes: Sequence[Probe], *, reports: int = DEFAULT_REPORTS,
               minutes: float = DEFAULT_MINUTES, echo: Callable[[str], None] = lambda _m: None,
               poll_s: float | None = None) -> list[Outcome]:
    """Run each probe that is not refused, one after another, through the runner; record each
    one's median throughput. Stops after a probe that was interrupted (Ctrl-C)."""
    outcomes = []
    for k, probe in enumerate(probes, 1):
        if probe.refused is not None:
            continue
        outcome = run_one(probe, k, reports=reports, minutes=minutes, echo=echo, poll_s=poll_s)
        outcomes.append(outcome)
        if outcome.state == "interrupted":
            break
    return outcomes


def run_one(probe: Probe, number: int, *, reports: int, minutes: float,
            echo: Callable[[str], None], poll_s: float | None) -> Outcome:
    run_id = new_run_id(f"probe-{number}-{probe.candidate.plan.job.name}")
    path = paths.writable_dir(paths.home() / "probes") / f"{run_id}.toml"
    save_plan(probe.plan, path)  # the ledger points at it: status, down and cleanup read it
    try:
        runner = Runner(probe.plan, path, echo=echo, run_id=run_id, poll_s=poll_s or POLL_S,
                        probe=ProbeLimit(reports=reports, seconds=minutes * 60.0))
        result = runner.launch()
    except GpuCostError as err:  # refused before it began (a busy job, an engine not installed)
        return Outcome(probe, run_id, "not-started", err.exit_code, note=str(err))
    try:
        measured = tuple(float(r["throughput"]) for r in RunDir(result.run_dir).metrics()
                         if r.get("throughput"))[:reports]
    except GpuCostError as err:
        measured, note = (), f"its reports could not be read: {err}"
    else:
        note = "" if measured else "the job made no throughput report (gpucost.report)"
    with Ledger() as ledger:
        spent = ledger.run(run_id).cost_usd()
    if not measured:
        return Outcome(probe, run_id, result.state, result.exit_code, spent_usd=spent, note=note)
    median = statistics.median(measured)
    kept = record_on_arrival(probe.plan, median, source="probe")
    work = probe.plan.workload
    if kept is None:
        note = ("not kept in measurements.json: " + (
            "the store refused it (said above)" if work.profile and work.precision
            and work.batch_size else "the plan's [workload] names no profile, precision and "
            "batch_size to keep it under"))
    job_cost = verify_throughput(probe.candidate.plan, median).reestimated_cost_usd
    return Outcome(probe, run_id, result.state, result.exit_code, measured, kept, spent,
                   job_cost, note)


def rerank(probes: Sequence[Probe], outcomes: Sequence[Outcome]) -> list[Ranked]:
    """The candidates by $/job: measured where a probe measured, else as predicted."""
    measured = {id(o.probe.candidate): o for o in outcomes if o.job_cost_usd is not None}
    ranked = []
    for probe in probes:
        c = probe.candidate
        o = measured.get(id(c))
        if o is not None and o.job_cost_usd is not None:
            ranked.append(Ranked(c, o.job_cost_usd, True, o.throughput))
        else:
            ranked.append(Ranked(c, c.cost_usd, False))
    return sorted(ranked, key=lambda r: r.cost_usd)


def cheapest_now(request: Request) -> PlanRow | None:
    """The request's cheapest plan, ranked again: predictions start from the measurements
    just stored (one GPU per device group; :func:`gpucost.measurements.source_for`)."""
    try:
        ranking = rank(request)
    except GpuCostError:
        return None
    return ranking.plans.row(0) if len(ranking) else None


def run(probes: Sequence[Probe], *, reports: int = DEFAULT_REPORTS,
        minutes: float = DEFAULT_MINUTES, request: Request | None = None,
        echo: Callable[[str], None] = lambda _m: None, poll_s: float | None = None) -> Result:
    """Run the probes :func:`plan_probes` made and re-rank their candidates (``request``: the
    one they were ranked from, ranked again at the end with the measurements)."""
    result = Result(list(probes))
    result.outcomes = run_probes(probes, reports=reports, minutes=minutes, echo=echo,
                                 poll_s=poll_s)
    result.ranked = rerank(probes, result.outcomes)
    if request is not None and any(o.measurement is not None for o in result.outcomes):
        result.cheapest_now = cheapest_now(request)
    return result
