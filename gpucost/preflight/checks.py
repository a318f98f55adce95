"""The pre-flight checks: each a small function over a plan with an id, a severity and a fix.

A check returns one :class:`CheckResult`: ``pass``, ``fail`` or ``skip``, with a message that
says what was found and a fix that says what to change. What a failure costs the build is its
``exit_code``: 1 for an error-level check or a policy threshold, 3 for stale price data, 2 for
bad input found on the way (an unknown GPU name, an unparseable date); warnings fail nothing
unless the policy says ``fail_on_warnings``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpucost import providers
from gpucost.catalog import get_gpu
from gpucost.errors import GpuCostError, InputError, UnknownGpuError
from gpucost.format import hours as fmt_hours
from gpucost.format import usd_text as fmt_usd
from gpucost.model.economics import SYSTEM_DISK_GB, disk_need, outlives_instance, spot_run
from gpucost.model.memory import fit_memory, usable_gb
from gpucost.planfile import Plan
from gpucost.planning.fit import need_gb, plan_memory
from gpucost.planning.planbuild import (
    STARTUP_ALLOWANCE_HOURS,
    TIMEOUT_FACTOR,
    limit_hours,
    safety_timeout_hours,
)
from gpucost.preflight import arch, mainguard
from gpucost.preflight.policy import Policy
from gpucost.profile import Profile, resolve_profile

if TYPE_CHECKING:
    from gpucost.catalog.spec import GpuSpec
    from gpucost.profile import Profile

Status = Literal["pass", "fail", "skip"]
Severity = Literal["error", "warning"]

# Providers that run on the user's own machines: prices are electricity, disks are local.
LOCAL_PROVIDERS = ("local", "torchrun")
CHECKPOINTS_KEPT = 2  # the newest, plus the next one while it is written (atomic replace)
# A timeout is there to bound the bill of a hung run; past twice the estimate (and more than
# this many dollars over it) it no longer does.
TIMEOUT_SLACK_FACTOR = 2.0
TIMEOUT_SLACK_USD = 10.0
# A spot plan that cannot resume is honest when its estimate's rework covers restarts from zero;
# the plan's own figure adds the reload of a checkpoint to each restart, so it is not below.
RESTART_PRICED_SHARE = 0.95
# Moving the data to another continent, USD/GB, list prices (approximate, first tier), assuming
# it is stored with the compute provider: its declaration's cross_continent_usd_gb. Data held
# anywhere else leaves through its host's internet egress, ~0.09 at the big clouds.
DEFAULT_EGRESS_USD_PER_GB = 0.09


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    status: Status
    severity: Severity  # of a failure; passes and skips keep the check's own
    message: str
    fix: str = ""
    exit_code: int = 0  # 0 nothing wrong (or a warning), 1 error/policy, 2 input, 3 stale/internal
    file: str | None = None  # where the fix goes, relative to the working folder
    line: int | None = None
    details: dict[str, Any] = field(default_factory=dict)  # the figures behind the verdict

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status,
                "severity": self.severity, "message": self.message, "fix": self.fix,
                "exit_code": self.exit_code, "file": self.file, "line": self.line,
                "details": self.details}


@dataclass
class Context:
    """Everything a check may look at; the profile and GPU spec are resolved once, lazily."""

    plan: Plan
    plan_path: Path
    plan_text: str
    policy: Policy
    today: dt.date
    display_path: str  # the plan path as the user gave it, for reports and annotations
    baseline_cost_usd: float | None = None

    @property
    def hourly_usd(self) -> float:
        return self.plan.offer.price_hr * self.plan.offer.nodes

    @property
    def is_local(self) -> bool:
        return self.plan.offer.provider in LOCAL_PROVIDERS

    @property
    def on_cpu(self) -> bool:
        return self.plan.offer.gpu.strip().upper() == "CPU"

    def line_of(self, section: str, key: str) -> int | None:
        """Line of ``key`` in ``[section]`` of the plan file (1-based), for annotations."""
        current = ""
        for number, raw in enumerate(self.plan_text.splitlines(), start=1):
            text = raw.strip()
            header = re.match(r"^\[([^\[\]]+)\]", text)
            if header:
                current = header.group(1).strip()
                if current == section and not key:
                    return number
            elif current == section and re.match(rf"^{re.escape(key)}\s*=", text):
                return number
        return None

    @cached_property
    def spec(self) -> GpuSpec:
        """The device one process of the plan sees (a fractional offer's slice of its GPU)."""
        return get_gpu(self.plan.offer.gpu).share(self.plan.offer.gpu_count)

    @cached_property
    def profile(self) -> Profile | None:
        """The workload's profile (a path beside the plan, or an embedded example), if any."""
        ref = self.plan.workload.profile
        if not ref:
            return None
        beside = self.plan_path.resolve().parent / ref
        if beside.is_file():
            return Profile.load(beside)
        return resolve_profile(ref)


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    severity: Severity
    run: Callable[[Check, Context], CheckResult]

    def ok(self, message: str, **details: Any) -> CheckResult:
        return CheckResult(self.id, self.title, "pass", self.severity, message, details=details)

    def skip(self, message: str) -> CheckResult:
        return CheckResult(self.id, self.title, "skip", self.severity, message)

    def fail(self, message: str, fix: str, *, severity: Severity | None = None,
             exit_code: int | None = None, file: str | None = None, line: int | None = None,
             **details: Any) -> CheckResult:
        sev = severity or self.severity
        code = exit_code if exit_code is not None else (1 if sev == "error" else 0)
        return CheckResult(self.id, self.title, "fail", sev, message, fix, code, file, line,
                           details)


# --- money and time ------------------------------------------------------------------------


def check_budget(c: Check, ctx: Context) -> CheckResult:
    cost = ctx.plan.estimate.cost_usd
    limits = [(v, where) for v, where in ((ctx.plan.job.budget_usd, "[job] budget_usd"),
                                          (ctx.policy.max_job_usd, "policy max_job_usd"))
              if v is not None]
    if not limits:
        return c.skip("no budget: set [job] budget_usd or max_job_usd in the policy")
    limit, where = min(limits)
    if cost > limit:
        return c.fail(f"estimated {fmt_usd(cost)} for the job is over {where} = {fmt_usd(limit)} "
                      f"(by {(cost / limit - 1) * 100:.1f} %)",
                      "pick a cheaper offer or node count (`gpucost compare`), allow spot, "
                      f"shrink the job, or raise {where}",
                      file=ctx.display_path, line=ctx.line_of("estimate", "cost_usd"),
                      cost_usd=cost, limit_usd=limit)
    return c.ok(f"estimated {fmt_usd(cost)}, {cost / limit * 100:.0f} % of {where} = "
                f"{fmt_usd(limit)}", cost_usd=cost, limit_usd=limit)


def check_deadline(c: Check, ctx: Context) -> CheckResult:
    deadline = ctx.plan.job.deadline_hours
    hours = ctx.plan.estimate.hours
    if deadline is None:
        return c.skip("no deadline: set [job] deadline_hours to check one")
    if hours > deadline:
        return c.fail(f"estimated {fmt_hours(hours)} is past [job] deadline_hours = "
                      f"{fmt_hours(deadline)}",
                      "add nodes or pick a faster GPU (`gpucost compare --sort time`), or "
                      "move the deadline",
                      file=ctx.display_path, line=ctx.line_of("estimate", "hours"),
                      hours=hours, deadline_hours=deadline)
    return c.ok(f"estimated {fmt_hours(hours)}, within the {fmt_hours(deadline)} deadline",
                hours=hours, deadline_hours=deadline)


def check_hourly(c: Check, ctx: Context) -> CheckResult:
    limit = ctx.policy.max_hourly_usd
    if limit is None:
        return c.skip("no max_hourly_usd in the policy")
    rate = ctx.hourly_usd
    nodes = ctx.plan.offer.nodes
    if rate > limit:
        return c.fail(f"{fmt_usd(rate)}/h for the run ({nodes} node(s) x "
                      f"{fmt_usd(ctx.plan.offer.price_hr)}/h) is over policy max_hourly_usd = "
                      f"{fmt_usd(limit)}/h", "use fewer nodes or a cheaper instance, or raise "
                      "max_hourly_usd in the policy",
                      file=ctx.display_path, line=ctx.line_of("offer", "price_hr"),
                      hourly_usd=rate, limit_usd=limit)
    return c.ok(f"{fmt_usd(rate)}/h, within {fmt_usd(limit)}/h", hourly_usd=rate, limit_usd=limit)


def check_price_age(c: Check, ctx: Context) -> CheckResult:
    offer = ctx.plan.offer
    if ctx.is_local:
        return c.skip(f"provider {offer.provider!r}: your own machines, no market price")
    line = ctx.line_of("offer", "price_date")
    max_days = ctx.policy.max_price_age_days
    if not offer.price_date:
        return c.fail("the plan does not say when its prices were fetched ([offer] price_date "
                      "is empty), so their age cannot be checked",
                      "re-plan from a dated price snapshot with `gpucost plan`",
                      exit_code=3, file=ctx.display_path, line=line)
    try:
        date = dt.date.fromisoformat(offer.price_date[:10])
    except ValueError:
        return c.fail(f"[offer] price_date = {offer.price_date!r} is not a date",
                      "write it as YYYY-MM-DD", exit_code=2, file=ctx.display_path, line=line)
    age = (ctx.today - date).days
    if age < -1:  # a day of slack for time zones
        return c.fail(f"[offer] price_date {date} is {-age} days in the future (today is "
                      f"{ctx.today})", "fix the date, or the clock of this machine",
                      exit_code=2, file=ctx.display_path, line=line)
    source = f" from {offer.price_source}" if offer.price_source else ""
    if age > max_days:
        return c.fail(f"prices{source} are {_days(age)} old (dated {date}); the policy allows "
                      f"{max_days:g}", "refresh the price snapshot and re-plan (`gpucost plan`), "
                      "or raise max_price_age_days in the policy",
                      exit_code=3, file=ctx.display_path, line=line, age_days=age,
                      max_age_days=max_days)
    return c.ok(f"prices{source} are {_days(max(age, 0))} old (limit {max_days:g})",
                age_days=max(age, 0), max_age_days=max_days)


def _days(n: int) -> str:
    return f"{n} day" if n == 1 else f"{n} days"


def check_timeout(c: Check, ctx: Context) -> CheckResult:
    safety, est = ctx.plan.safety, ctx.plan.estimate
    worst = min(safety.timeout_hours * ctx.hourly_usd, safety.budget_cap_usd)
    line = ctx.line_of("safety", "timeout_hours")
    planned = safety_timeout_hours(est.hours)  # what `gpucost plan` writes: never warned of
    if (worst > TIMEOUT_SLACK_FACTOR * est.cost_usd and worst - est.cost_usd > TIMEOUT_SLACK_USD
            and safety.timeout_hours > limit_hours(planned)):
        suggested = math.ceil(planned * 10) / 10
        return c.fail(f"timeout_hours = {safety.timeout_hours:g} against an estimate of "
                      f"{fmt_hours(est.hours)}: a hung run would bill up to {fmt_usd(worst)} "
                      f"before it is stopped, {worst / max(est.cost_usd, 1e-9):.1f}x the estimate",
                      f"lower [safety] timeout_hours to about {suggested:g} (the plan's rule: "
                      f"{TIMEOUT_FACTOR:g}x the estimate and {STARTUP_ALLOWANCE_HOURS * 60:g} min "
                      "to start) "
                      "or budget_cap_usd closer to the estimate",
                      severity="warning", file=ctx.display_path, line=line,
                      worst_case_usd=worst, timeout_hours=safety.timeout_hours)
    return c.ok(f"timeout {fmt_hours(safety.timeout_hours)}, budget cap "
                f"{fmt_usd(safety.budget_cap_usd)}: a hung run bills at most {fmt_usd(worst)}",
                worst_case_usd=worst, timeout_hours=safety.timeout_hours)


# --- will it run there -----------------------------------------------------------------------


def check_memory(c: Check, ctx: Context) -> CheckResult:
    """The plan's own memory plan ([workload] micro_batch, grad_accum_steps, sharding: what
    `gpucost plan` re-planned the batch to) against the planning core's rule
    (:func:`gpucost.planning.fit.need_gb`); a failure's fix is the core's own re-plan."""
    if ctx.on_cpu:
        return c.skip("the plan runs on the CPU")
    try:
        spec = ctx.spec
    except UnknownGpuError as err:
        return c.fail(err.message, f"[offer] gpu: {err.hint}", exit_code=2,
                      file=ctx.display_path, line=ctx.line_of("offer", "gpu"))
    workload = ctx.plan.workload
    line = ctx.line_of("workload", "micro_batch") or ctx.line_of("workload", "batch_size")
    usable = usable_gb(spec)
    group = max(int(ctx.plan.total_gpus), 1)
    needs: list[tuple[float, str]] = []
    replan = ""
    try:
        profile = ctx.profile
    except InputError as err:  # reported by the dataloader check; size from the plan alone
        profile = None
        unreadable = err.message
    else:
        unreadable = ""
    how = _memory_plan_words(workload.micro_batch, workload.grad_accum_steps, workload.sharding,
                             group)
    if profile is not None:
        micro = workload.micro_batch or workload.batch_size or profile.batch_size
        need, basis = need_gb(profile, micro_batch=micro, sharding=workload.sharding,
                              group_gpus=group)
        if basis != "states only" or workload.peak_memory_gb is None:
            needs.append((need, f"{basis} from profile {profile.name}{how}"))
        batch = workload.batch_size or profile.batch_size
        if batch == profile.batch_size:  # the core's own re-plan of this batch
            core = plan_memory(profile, spec, group)
            replan = (f"set [workload] micro_batch = {core.micro_batch}, grad_accum_steps = "
                      f"{core.grad_accum_steps}, sharding = \"{core.sharding}\" "
                      f"({core.reason}), or re-plan with `gpucost plan`"
                      if core.fits and core.reason else
                      "" if core.fits else f"try a GPU with more memory ({core.reason})")
        else:  # a batch of the plan's own: the core's advice for it
            advice = fit_memory(profile, spec, group_gpus=group, batch_size=batch).advice
            replan = "try " + advice.split("; try ", 1)[1] if "; try " in advice else ""
    if workload.peak_memory_gb is not None:
        needs.append((workload.peak_memory_gb, "[workload] peak_memory_gb"))
        line = ctx.line_of("workload", "peak_memory_gb") or line
    if not needs:
        if unreadable:
            return c.fail(f"memory not checked: {unreadable}",
                          "make [workload] profile a readable profile, or give "
                          "[workload] peak_memory_gb", severity="warning",
                          file=ctx.display_path, line=ctx.line_of("workload", "profile"))
        return c.skip("no profile and no [workload] peak_memory_gb to size memory from")
    need, basis = max(needs)
    if need > usable:
        fix = replan or ("try a smaller per-device batch with gradient accumulation, sharded "
                         "optimizer state (ZeRO-2/FSDP), or a GPU with more memory")
        return c.fail(f"predicted peak {need:.1f} GB per GPU ({basis}) does not fit the "
                      f"{usable:.1f} GB usable on {spec.name} ({spec.memory_gb:g} GB)",
                      fix, file=ctx.display_path, line=line, peak_gb=need,
                      usable_gb=usable)
    return c.ok(f"predicted peak {need:.1f} GB of {usable:.1f} GB usable on {spec.name} "
                f"({basis})", peak_gb=need, usable_gb=usable)


def _memory_plan_words(micro: int | None, accum: int, sharding: str, group: int) -> str:
    """", micro-batch 38 x 3 accumulation steps, ZeRO-2 over 8 GPUs" (empty: the plain batch)."""
    parts = ([f"micro-batch {micro} x {accum} accumulation steps"] if accum > 1 and micro
             else [])
    if sharding:
        parts.append(f"{sharding} over {group} GPUs")
    return "".join(f", {p}" for p in parts)


def _free_gb(folder: Path) -> float:
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free / 1e9


def check_disk(c: Check, ctx: Context) -> CheckResult:
    job, disk = ctx.plan.job, ctx.plan.disk
    kept = CHECKPOINTS_KEPT if ctx.plan.checkpoint.enabled else 0
    # Your own disk already holds the OS and the image; a rented one must hold them too.
    system_gb = 0.0 if ctx.is_local else SYSTEM_DISK_GB
    need, want = disk_need(job.data_gb, job.checkpoint_gb, checkpoints_kept=kept,
                           results_gb=job.results_gb, system_gb=system_gb)
    parts = (f"data {job.data_gb:g} GB + {kept} checkpoint(s) x {job.checkpoint_gb:g} GB + "
             f"results {job.results_gb:g} GB"
             + (f" + OS and image {system_gb:g} GB" if system_gb else "") + f" = {need:.1f} GB")
    line = ctx.line_of("disk", "size_gb")
    if ctx.is_local:  # your own disk: what counts is the free space, not an allocation
        workdir = ctx.plan.workdir(ctx.plan_path)
        free = _free_gb(workdir)
        if free < need:
            return c.fail(f"{free:.1f} GB free at {workdir} cannot hold {parts}",
                          "free disk space there, or point [job] workdir at a larger disk",
                          need_gb=need, free_gb=free)
        return c.ok(f"{free:.1f} GB free on the local disk for {parts}", need_gb=need,
                    free_gb=free)
    size = disk.size_gb
    if size < need:
        return c.fail(f"[disk] size_gb = {size:g} cannot hold {parts}",
                      f"set [disk] size_gb = {want} (with ~30 % headroom); a "
                      "provider bills the allocated size and cannot shrink it later",
                      file=ctx.display_path, line=line, size_gb=size, need_gb=need)
    if size < want:
        return c.fail(f"[disk] size_gb = {size:g} holds {parts} with only "
                      f"{(size / need - 1) * 100 if need else 0:.0f} % headroom",
                      f"set [disk] size_gb = {want}: logs, caches and a partial "
                      "download need room too", severity="warning", file=ctx.display_path,
                      line=line, size_gb=size, need_gb=need)
    return c.ok(f"{size:g} GB allocated for {parts}", size_gb=size, need_gb=need)


def check_spot(c: Check, ctx: Context) -> CheckResult:
    """A spot run resumes only from checkpoints that outlive the instance (an object store,
    :func:`gpucost.model.economics.outlives_instance`); one that cannot resume must be priced
    as restart-from-zero, as `gpucost plan` prices it, or its estimate assumes a resume it
    cannot do."""
    plan = ctx.plan
    if plan.offer.market != "spot":
        return c.skip("on-demand: not interruptible")
    ck = plan.checkpoint
    path = ctx.display_path
    if not ck.enabled:
        why = ("a spot plan without checkpoints: every interruption restarts the job from zero "
               "and bills the lost hours again")
        fix = ("set [checkpoint] enabled = true (with interval_minutes or every_epochs) and "
               "have the script save and resume, or use on-demand")
        line = ctx.line_of("checkpoint", "enabled")
    elif not ck.resume:
        why = ("a spot plan with [checkpoint] resume = false: after an interruption the job "
               "starts over although checkpoints exist")
        fix = "set [checkpoint] resume = true and load the newest checkpoint at start"
        line = ctx.line_of("checkpoint", "resume")
    elif not outlives_instance(ck.target) and not ctx.is_local:
        why = (f"checkpoints go to {ck.target}, on the spot instance's own disk, which is "
               "deleted with the instance when it is reclaimed: there is nothing to resume from")
        fix = ("set [checkpoint] target = \"s3://bucket/prefix\" (or another store that "
               "outlives the instance)")
        line = ctx.line_of("checkpoint", "target")
    else:
        why = ""
    if why:
        restart_usd = _restart_rework_usd(plan)
        priced = plan.estimate.spot_rework_usd
        if priced >= RESTART_PRICED_SHARE * restart_usd - 0.005:  # the plan's 4-digit rounding
            return c.fail(f"{why}; the estimate prices that ({fmt_usd(priced)} of expected "
                          "rework, restart-from-zero)",
                          "to resume instead, checkpoint to an object store: re-plan with "
                          "`gpucost plan --checkpoint-target s3://bucket/prefix` (the script "
                          "saves and loads them), or use on-demand",
                          severity="warning", file=path, line=line, spot_rework_usd=priced,
                          restart_rework_usd=restart_usd)
        return c.fail(f"{why}; yet the estimate prices only {fmt_usd(priced)} of rework, where "
                      f"restarts from zero cost {fmt_usd(restart_usd)} expected", fix,
                      file=path, line=line, spot_rework_usd=priced,
                      restart_rework_usd=restart_usd)
    rate = plan.spot.interruption_rate_per_hr
    interval_h = _checkpoint_interval_hours(plan)
    if rate > 0 and interval_h is not None and interval_h > 1 / rate:
        return c.fail(f"checkpoints every {fmt_hours(interval_h)}, but interruptions come every "
                      f"{fmt_hours(1 / rate)} on average ({rate:g}/h): most interruptions lose "
                      "everything since the last one",
                      "set [checkpoint] interval_minutes shorter than the mean time between "
                      "interruptions (the Young/Daly interval sqrt(2 x checkpoint time / rate); "
                      "`gpucost plan` computes it)", severity="warning", file=path,
                      line=ctx.line_of("checkpoint", "interval_minutes")
                      or ctx.line_of("checkpoint", "every_epochs"),
                      interval_hours=interval_h, mean_hours_between=1 / rate)
    return c.ok(f"checkpoints to {ck.target}, resume on restart"
                + (f", every {fmt_hours(interval_h)}" if interval_h is not None else ""))


def _restart_rework_usd(plan: Plan) -> float:
    """Expected USD of lost work and rebuilds when every interruption restarts the job from
    zero (economics.spot_run without checkpoints), from the plan's own compute and setup."""
    hourly = plan.offer.price_hr * plan.offer.nodes
    if hourly <= 0:
        return 0.0
    run = spot_run(plan.estimate.compute_usd / hourly,
                   plan.spot.interruption_rate_per_hr * plan.offer.nodes,
                   restart_hours=plan.estimate.setup_usd / hourly, checkpoints=False)
    return float(run.rework_hours) * hourly


def _checkpoint_interval_hours(plan: Plan) -> float | None:
    ck = plan.checkpoint
    if ck.interval_minutes is not None:
        return ck.interval_minutes / 60
    if ck.every_epochs is not None and plan.job.epochs:
        return plan.estimate.hours * ck.every_epochs / plan.job.epochs
    return None


def check_arch(c: Check, ctx: Context) -> CheckResult:
    if ctx.on_cpu:
        return c.skip("the plan runs on the CPU")
    try:
        spec = ctx.spec
    except UnknownGpuError:
        return c.skip(f"unknown GPU {ctx.plan.offer.gpu!r} (see memory-fit)")
    if not spec.compute_capability:
        return c.skip(f"{spec.name} is not an NVIDIA GPU: CUDA architectures do not apply")
    pin = ctx.plan.workload.torch_version
    line = ctx.line_of("workload", "torch_version")
    cc = spec.compute_capability
    suggestion = ", ".join(f"torch {b.replace('+', '.*+')}" for b in arch.builds_for(cc)[:3])
    if pin:
        try:
            minor, local = arch.parse_torch_version(pin)
        except ValueError:
            return c.fail(f"[workload] torch_version = {pin!r} is not a torch version",
                          'write it like "2.8.0+cu128"', exit_code=2, file=ctx.display_path,
                          line=line)
        if local is not None and not local.startswith("cu"):
            if local == "cpu":
                return c.fail(f"the job pins torch {pin}, a CPU-only build: on {spec.name} it "
                              "would train on the CPU", f"pin a CUDA build: {suggestion}",
                              file=ctx.display_path, line=line)
            return c.skip(f"torch {pin} is not a CUDA build; not checked")
        build = arch.pinned_build(pin)
        if build is None:
            return c.fail(f"no arch list is recorded for torch {pin} "
                          f"({minor}+{local or 'default CUDA'}), so it cannot be checked "
                          f"against {spec.name} (sm_{cc.replace('.', '')})",
                          f"pin a build gpucost knows ({suggestion}), or run "
                          "`python -c \"import torch; print(torch.cuda.get_arch_list())\"` "
                          "where the job runs", severity="warning", file=ctx.display_path,
                          line=line)
        what = f"torch {pin} (official wheel {build.version}, {build.basis}: {build.source})"
    else:
        build = arch.installed_build()
        if build is None:
            return c.fail("the plan pins no torch_version and torch is not installed here",
                          'set [workload] torch_version = "X.Y.Z+cuNNN" to the build the job '
                          "installs", severity="warning", file=ctx.display_path)
        if not build.archs:
            return c.fail(f"the plan pins no torch_version and the torch installed here "
                          f"({build.version}) has no CUDA kernels at all, so it says nothing "
                          "about the build the job will run",
                          'set [workload] torch_version = "X.Y.Z+cuNNN" to the build the job '
                          f"installs ({suggestion} run on {spec.name})", severity="warning",
                          file=ctx.display_path)
        what = f"the installed torch {build.version}"
    verdict = arch.runs_on(build.archs, cc)
    if not verdict.ok:
        return c.fail(f"{what} {verdict.message}: the job would report CUDA available and die "
                      "at its first kernel (\"no kernel image is available\")",
                      f"pin a build with kernels for {spec.name}: {suggestion}",
                      file=ctx.display_path, line=line, archs=list(build.archs),
                      compute_capability=cc, basis=build.basis)
    return c.ok(f"{what} {verdict.message}", archs=list(build.archs), compute_capability=cc,
                basis=build.basis)


def entry_script(plan: Plan) -> str | None:
    """The training script: [job] entry_script, else the first *.py of the command."""
    if plan.job.entry_script:
        return plan.job.entry_script
    return next((arg for arg in plan.job.command if arg.endswith(".py")), None)


def check_main_guard(c: Check, ctx: Context) -> CheckResult:
    script = entry_script(ctx.plan)
    if script is None:
        return c.skip("no entry script: set [job] entry_script to check it")
    workdir = ctx.plan.workdir(ctx.plan_path)
    path = workdir / script
    shown = _display(path)
    # Only files inside the workdir are read (symlinks resolved): the answer must not tell
    # whether some other file on this machine (say, a credentials file) exists or parses.
    if not path.resolve().is_relative_to(workdir):
        return c.fail(f"entry script {script!r} is outside the plan's workdir {_display(workdir)}, "
                      "so it is not read", "set [job] entry_script to a path inside [job] "
                      "workdir (no absolute path, .., or link leading out of it)",
                      exit_code=2, file=ctx.display_path, line=ctx.line_of("job", "entry_script"))
    if not path.is_file():
        return c.fail(f"entry script {shown} does not exist, so it cannot be checked",
                      "set [job] entry_script (relative to [job] workdir) to the script the "
                      "command runs", severity="warning", file=ctx.display_path,
                      line=ctx.line_of("job", "entry_script"))
    try:
        found = mainguard.analyse_file(path)
    except SyntaxError as err:
        return c.fail(f"{shown} is not valid Python: {err.msg} (line {err.lineno})",
                      "fix the syntax error before paying for a GPU", file=shown,
                      line=err.lineno)
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read entry script {shown}: {err}") from None
    if not found.multiprocess:
        return c.ok(f"{shown} starts no processes of its own")
    if found.ok:
        kinds = ", ".join(sorted({s.what for s in found.sites}))
        return c.ok(f"{shown} starts processes ({kinds}) only from under its __main__ guard")
    first = found.reached[0]
    severity: Severity = "warning" if all(r.site.kind == "distributed"
                                          for r in found.reached) else "error"
    via = f" through {' -> '.join(f'{n}()' for n in first.via)}" if first.via else ""
    return c.fail(f"{shown} line {first.entry_line} runs at import time{via} and reaches "
                  f"{first.site.what} (line {first.site.line}) outside "
                  "`if __name__ == \"__main__\":`: each worker re-imports the script and runs "
                  "it again", f"move the statement at line {first.entry_line} (and any other "
                  "top-level work) under `if __name__ == \"__main__\":`",
                  severity=severity, file=shown, line=first.entry_line,
                  sites=[f"{r.site.what}@{r.site.line}" for r in found.reached])


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def check_dataloader(c: Check, ctx: Context) -> CheckResult:
    if not ctx.plan.workload.profile:
        return c.skip("no profile in [workload]")
    try:
        profile = ctx.profile
    except InputError as err:
        return c.fail(f"profile {ctx.plan.workload.profile!r} could not be read: {err.message}",
                      err.hint or "set [workload] profile to a profile file or example name",
                      severity="warning", file=ctx.display_path,
                      line=ctx.line_of("workload", "profile"))
    if profile is None or profile.verdict is None:
        return c.skip("the profile has no bottleneck verdict (measure with `gpucost profile`)")
    verdict = profile.verdict
    if verdict.kind == "dataloader-bound":
        return c.fail(f"profile {profile.name}: data-loader-bound: {verdict.reason}; a faster "
                      "GPU will not make it faster, only more expensive",
                      verdict.advice or "more DataLoader workers, pinned memory, or faster "
                      "storage", file=ctx.display_path, line=ctx.line_of("workload", "profile"))
    return c.ok(f"profile {profile.name}: {verdict.kind}")


_CONTINENTS: tuple[tuple[str, str], ...] = (
    # (regex on the lower-cased region name, continent); first match wins
    (r"^ap-southeast-[24]|australia|^au-|oceania", "Oceania"),
    (r"^(us|ca|mx)-|^northamerica|^(north|south|east|west|central|northcentral|southcentral|"
     r"westcentral)us\d?$|canada|^us$", "North America"),
    (r"^sa-|^southamerica|brazil|chile", "South America"),
    (r"^eu-|^europe|^uk|france|germany|norway|sweden|switzerland|poland|italy|spain|"
     r"(west|north)europe", "Europe"),
    (r"^me-|^il-|uae|qatar|israel", "Middle East"),
    (r"^af-|africa", "Africa"),
    (r"^ap-|^asia|japan|korea|india|(south)?eastasia|jakarta|singapore", "Asia"),
)


def continent(region: str) -> str | None:
    name = region.strip().lower()
    for pattern, where in _CONTINENTS:
        if re.search(pattern, name):
            return where
    return None


def check_dataset_region(c: Check, ctx: Context) -> CheckResult:
    job, offer = ctx.plan.job, ctx.plan.offer
    if not job.dataset_region:
        return c.skip("no [job] dataset_region")
    if ctx.is_local:
        return c.skip("runs on your own machine")
    data_at, compute_at = continent(job.dataset_region), continent(offer.region)
    if data_at is None or compute_at is None:
        unknown = job.dataset_region if data_at is None else offer.region
        return c.skip(f"cannot place region {unknown!r} on a continent")
    if data_at == compute_at:
        return c.ok(f"data in {job.dataset_region} and compute in {offer.region}, both in "
                    f"{data_at}")
    declared = providers.find(offer.provider)
    stated = declared.cross_continent_usd_gb if declared else None
    rate = DEFAULT_EGRESS_USD_PER_GB if stated is None else stated
    cost = job.data_gb * rate
    budgeted = ctx.plan.estimate.egress_usd + ctx.plan.estimate.ingress_usd
    note = "" if budgeted >= cost else " (not in the plan's estimate)"
    return c.fail(f"data in {job.dataset_region} ({data_at}), compute in {offer.region} "
                  f"({compute_at}): moving {job.data_gb:g} GB across continents costs about "
                  f"{fmt_usd(cost)} at ~{rate:g} USD/GB{note}, and slows the start",
                  f"copy the data once to storage in {offer.region}, or choose an offer in "
                  f"{data_at} (`gpucost compare --region ...`)",
                  file=ctx.display_path, line=ctx.line_of("job", "dataset_region"),
                  egress_usd=cost, usd_per_gb=rate)


def check_cost_increase(c: Check, ctx: Context) -> CheckResult:
    old = ctx.baseline_cost_usd
    if old is None:
        return c.skip("no --baseline given")
    new = ctx.plan.estimate.cost_usd
    delta = new - old
    limit = ctx.policy.max_increase_pct
    if old <= 0:
        return c.ok(f"baseline was {fmt_usd(old)}; now {fmt_usd(new)}", baseline_usd=old,
                    change_usd=delta)
    pct = delta / old * 100
    said = (f"estimated {fmt_usd(new)} against {fmt_usd(old)} in the baseline "
            f"({'+' if delta >= 0 else '-'}{fmt_usd(abs(delta))}, {pct:+.1f} %)")
    if limit is not None and pct > limit:
        return c.fail(f"{said}: over the policy's max_increase_pct = {limit:g} %",
                      "find what made the job dearer (offer, node count, job size, throughput) "
                      "or raise max_increase_pct in the policy",
                      file=ctx.display_path, line=ctx.line_of("estimate", "cost_usd"),
                      baseline_usd=old, change_usd=delta, change_pct=pct)
    return c.ok(said, baseline_usd=old, change_usd=delta, change_pct=pct)


CHECKS: tuple[Check, ...] = (
    Check("budget", "Budget", "error", check_budget),
    Check("deadline", "Deadline", "error", check_deadline),
    Check("hourly-rate", "Hourly rate", "error", check_hourly),
    Check("price-age", "Price data age", "error", check_price_age),
    Check("timeout", "Timeout", "error", check_timeout),
    Check("memory-fit", "GPU memory fit", "error", check_memory),
    Check("disk-size", "Disk size", "error", check_disk),
    Check("spot-checkpoint", "Spot checkpointing", "error", check_spot),
    Check("cuda-arch", "CUDA architecture", "error", check_arch),
    Check("main-guard", "__main__ guard", "error", check_main_guard),
    Check("dataloader", "Data loader", "warning", check_dataloader),
    Check("dataset-region", "Dataset region", "warning", check_dataset_region),
    Check("cost-increase", "Cost vs baseline", "error", check_cost_increase),
)
CHECK_IDS: tuple[str, ...] = tuple(c.id for c in CHECKS)


def run_checks(ctx: Context) -> list[CheckResult]:
    """Every check, in order; one that raises becomes a failed result, never a traceback."""
    results: list[CheckResult] = []
    for check in CHECKS:
        reason = ctx.policy.skip.get(check.id)
        if reason is not None:
            results.append(check.skip(f"skipped by policy: {reason}"))
            continue
        try:
            result = check.run(check, ctx)
        except GpuCostError as err:
            result = check.fail(err.message, err.hint or "", exit_code=err.exit_code)
        except Exception as err:  # a bug in a check must not hide the other checks' results
            result = check.fail(f"internal error: {type(err).__name__}: {err}",
                                "report it at the gpucost issue tracker", exit_code=3)
        if result.status == "fail" and result.severity == "warning" \
                and ctx.policy.fail_on_warnings:
            result = replace(result, exit_code=1)
        results.append(result)
    return results
