"""A run's lifecycle: provision, verify on arrival, supervise, tear down.

:class:`Runner` drives one plan through a provider. Every provider call is bracketed by ledger
writes; the job runs under a hard wall-clock timeout and a budget cap (cost so far = nodes x
price_hr x elapsed hours since the run began); teardown runs in a ``finally`` on success,
failure, Ctrl-C, SIGTERM, timeout and budget cap. After a successful job the plan's idle policy
decides between stopping (keep the disk for a return within the break-even time) and destroying;
after anything else the resources are destroyed.
:mod:`gpucost.executor.control` acts on runs from outside their launcher (stop, down, cleanup).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpucost.errors import CapacityError, ExecutorError, GpuCostError, InputError
from gpucost.executor import get_provider, provider_config
from gpucost.executor.base import JobSpec, Provider, ProvisionRequest, Resource
from gpucost.executor.checkpoints import CheckpointStore
from gpucost.executor.guard import EXIT_BUDGET, EXIT_TIMED_OUT
from gpucost.executor.ledger import Ledger
from gpucost.executor.records import job_position, report_fields
from gpucost.executor.rundir import RunDir
from gpucost.executor.runlock import RunLock, hold_job
from gpucost.executor.verify import (
    VerifyResult,
    arrival_stop,
    band_limits,
    plan_band,
    verify_throughput,
)
from gpucost.executor.watchdog import WATCH_POLL_S, budget_warning, start_watchdog
from gpucost.format import usd_text
from gpucost.jobname import NAME_HINT, job_name_problem
from gpucost.measurements import record_on_arrival
from gpucost.planfile import Plan

POLL_S = 0.5
CAPACITY_RETRY_S = 60.0  # between attempts to get spot capacity

# Final run states and the CLI exit code each maps to (0 ok, 1 policy, 3 failure, 130 interrupt).
EXIT_CODES: dict[str, int] = {
    "succeeded": 0, "stopped": 0, "probed": 0, "failed": 3, "verify-failed": 1, "timed-out": 1,
    "budget-exceeded": 1, "interrupted": 130,
}


@dataclass(frozen=True)
class ProbeLimit:
    """How long a probe (:mod:`gpucost.executor.probe`) lets its job run: until the job's
    ``reports``-th throughput report, or ``seconds`` of job time, whichever comes first. The
    run then ends as ``probed``, and its launcher records one measurement for it (the runner
    and its provider record none on arrival)."""

    reports: int
    seconds: float


@dataclass
class LaunchResult:
    run_id: str
    state: str
    run_dir: Path
    exit_code: int
    messages: list[str] = field(default_factory=list)


def new_run_id(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "run"
    return f"{slug}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


@contextmanager
def _signals_ignored() -> Iterator[None]:
    """A second Ctrl-C (or SIGTERM) must not cut a teardown short and leak what it releases."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sigs}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP) raise KeyboardInterrupt, so the same teardown path runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


class Runner:
    def __init__(self, plan: Plan, plan_path: str | os.PathLike[str], *,
                 provider: Provider | None = None, ledger: Ledger | None = None,
                 echo: Callable[[str], None] = lambda _msg: None, poll_s: float = POLL_S,
                 run_id: str | None = None, probe: ProbeLimit | None = None) -> None:
        self.plan = plan
        self.probe = probe
        self.plan_path = Path(plan_path).resolve()
        self.provider = provider or get_provider(plan.offer.provider,
                                                 provider_config(plan.offer.provider))
        self._ledger = ledger
        self.echo = echo
        self.poll_s = poll_s
        if run_id is not None and (problem := job_name_problem(run_id)):
            raise InputError(f"run id {run_id!r} is refused: {problem}", hint=NAME_HINT)
        self.run_id = run_id or new_run_id(plan.job.name)
        self.run_dir = RunDir.for_run(self.run_id)
        self.token = f"gpucost-{self.run_id}"
        self.provider.bind(plan, self.plan_path, self.run_id, self.run_dir.log_path)
        if probe is not None:
            self.provider.measure_for_probe()
        self.messages: list[str] = []
        self.hardware: dict[str, Any] | None = None  # the on-arrival matmul's report
        self._verification: VerifyResult | None = None
        self._budget_warning: str | None = None  # said once the spend nears the cap
        self._started = 0.0
        self._lock = RunLock(())
        self._early_notes: list[str] = []
        self._price_hr = plan.offer.price_hr  # USD/h per node; on-demand after a spot fallback
        # Billing begins when a create is accepted: waiting for spot capacity costs nothing.
        self._billed_from: float | None = None  # seconds into the run
        self.capacity_retry_s = CAPACITY_RETRY_S
        self._watchdog: subprocess.Popen[bytes] | None = None

    @property
    def ledger(self) -> Ledger:
        """Opened on first use, so that a dry run leaves no trace."""
        if self._ledger is None:
            self._ledger = Ledger()
        return self._ledger

    # -- description ---------------------------------------------------------------------------
    def describe(self) -> list[str]:
        """What launch would do, in words (``--dry-run``)."""
        p, o, s = self.plan, self.plan.offer, self.plan.safety
        lines = [
            f"run {self.run_id}: {p.job.name} on {o.provider} {o.instance_type} x{o.nodes} "
            f"({o.gpu_count:g} x {o.gpu} per node, {o.market}, {o.price_hr:.4f} USD/h per node)",
            f"command: {' '.join(p.job.command)} (in {p.workdir(self.plan_path)})",
            f"limits: timeout {s.timeout_hours:g} h, budget cap {usd_text(s.budget_cap_usd)} "
            f"(estimate {usd_text(p.estimate.cost_usd)} over {p.estimate.hours:.3g} h)",
            f"verify on arrival: matmul on the device, then throughput within "
            f"{s.verify_margin_pct:g}% of {p.workload.throughput:g} samples/s, else "
            f"{s.verify_action}",
        ]
        ck = p.checkpoint
        if ck.enabled:
            store = self._checkpoints()
            try:
                latest = store.latest_epoch()
            except GpuCostError:
                latest = None
            lines.append(f"checkpoints: every {ck.every_epochs or 1:g} epoch(s) to "
                         f"{store.resolved_target}/{p.job.name}"
                         + (f"; resumes from epoch {latest}" if ck.resume and latest else ""))
        after = p.idle.policy
        if after == "stop" and not self.provider.supports("stop"):
            after = f"destroy ({o.provider} cannot stop: {self.provider.unsupported['stop']})"
        lines.append(f"after the job: {after}; on failure, interrupt, timeout or budget cap: "
                     "destroy")
        for op, why in self.provider.unsupported.items():
            lines.append(f"{o.provider} does not support {op}: {why}")
        return lines + self.provider.dry_run_lines()

    def _say(self, message: str) -> None:
        self.messages.append(message)
        self.echo(message)
        if self.run_dir.path.is_dir():
            self.run_dir.note(message)

    def _checkpoints(self) -> CheckpointStore:
        return CheckpointStore(self.plan.checkpoint.target, namespace=self.plan.job.name,
                               base_dir=self.plan.workdir(self.plan_path))

    # -- provider calls, each bracketed by ledger writes -------------------------------------------
    def _provision(self) -> list[tuple[int, Resource]]:
        """Create the nodes; without spot capacity, retry until the plan's longest wait for it,
        then fall back to on-demand if the plan allows (the cost model priced that in)."""
        offer, spot = self.plan.offer, self.plan.spot
        market: Literal["spot", "on-demand"] = "spot" if offer.market == "spot" else "on-demand"
        deadline = time.monotonic() + spot.max_wait_capacity_hours * 3600.0
        while True:
            try:
                nodes = self._provision_once(market)
                self._billed_from = time.time() - self._started
                self.ledger.open_segment(self.run_id, price_hr=self._price_hr,
                                         nodes=self.plan.offer.nodes)
                return nodes
            except CapacityError as err:
                if market != "spot":
                    raise
                if time.monotonic() + self.capacity_retry_s < deadline:
                    self._say(f"no spot capacity ({err.message}); retrying in "
                              f"{self.capacity_retry_s:g} s")
                    time.sleep(self.capacity_retry_s)
                    continue
                if spot.fallback != "on-demand" or offer.on_demand_price_hr is None:
                    raise
                self._price_hr = offer.on_demand_price_hr
                self.ledger.set_run_price(self.run_id, self._price_hr)
                self._say(f"no spot capacity within {spot.max_wait_capacity_hours:g} h: falling "
                          f"back to on-demand at {self._price_hr:g} USD/h per node")
                market = "on-demand"

    def _provision_once(self, market: Literal["spot", "on-demand"]) -> list[tuple[int, Resource]]:
        o = self.plan.offer
        request = ProvisionRequest(
            run_id=self.run_id, token=self.token, instance_type=o.instance_type,
            gpu_count=max(1, round(o.gpu_count)), nodes=o.nodes, market=market, region=o.region,
            zone=o.zone, price_hr=self._price_hr, disk_gb=self.plan.disk.size_gb)
        row = self.ledger.intent(run_id=self.run_id, provider=self.provider.name,
                                 token=self.token, kind="instance", region=o.region,
                                 price_hr=self._price_hr, config=self.provider.config())
        try:
            resources = self.provider.provision(request)
        except BaseException:
            self._recover(row)
            raise
        ids = self.ledger.record(row, resources, "pending")
        return list(zip(ids, resources, strict=True))

    def _recover(self, row: int) -> None:
        """After a failed create, destroy whatever the provider made anyway (found by token)."""
        try:
            found = self.provider.find(self.token)
            for res in found:
                self.provider.destroy(res)
        except GpuCostError as err:
            # The intent row stays live, so `gpucost cleanup` retries the search later.
            self._say(f"could not check for half-created resources ({err}); run `gpucost "
                      "cleanup` when the provider is reachable")
            return
        if found:
            self._say(f"the failed create had made {len(found)} resource(s): destroyed "
                      + ", ".join(r.resource_id for r in found))
        self.ledger.set_state(row, "failed")

    # -- the run -----------------------------------------------------------------------------------
    def launch(self, on_started: Callable[[], None] | None = None) -> LaunchResult:
        """Run the plan to its end; ``on_started`` is called once the run is in the ledger."""
        plan = self.plan
        workdir = plan.workdir(self.plan_path)
        if self.provider.runs_locally and not workdir.is_dir():
            raise InputError(f"the job's workdir {workdir} does not exist",
                             hint="fix [job] workdir (relative to the plan file)")
        self.provider.check_ready()  # before the ledger or run folder is written
        ledger = self.ledger  # an unreadable ledger stops the launch before anything exists
        ck = self._checkpoints() if plan.checkpoint.enabled else None
        # A local folder is locked inside itself where this machine trains into it (on a
        # SkyPilot node the same path is another machine's folder).
        folder = ck.local_dir if ck is not None and self.provider.runs_locally else None
        self._lock = hold_job(ledger, job=plan.job.name, run_id=self.run_id,
                              checkpoints=f"{ck.resolved_target}/{ck.namespace}" if ck else None,
                              note=self._early_note, folder=folder)
        try:
            return self._launch_locked(ledger, on_started)
        finally:
            self._lock.release()

    def _launch_locked(self, ledger: Ledger,
                       on_started: Callable[[], None] | None) -> LaunchResult:
        plan = self.plan
        self.run_dir.create()
        for message in self._early_notes:  # said before the run folder existed
            self.run_dir.note(message)
        ledger.create_run(run_id=self.run_id, name=plan.job.name,
                          plan_path=str(self.plan_path), provider=self.provider.name,
                          run_dir=str(self.run_dir.path), price_hr=plan.offer.price_hr,
                          nodes=plan.offer.nodes, budget_cap_usd=plan.safety.budget_cap_usd)
        self._started = time.time()
        if self.provider.needs_watchdog:  # before any machine exists that it must release
            self._start_watchdog()
        self._status("provisioning")
        if on_started is not None:
            on_started()
        nodes: list[tuple[int, Resource]] = []
        job: tuple[int, Resource] | None = None
        outcome = "failed"
        try:
            with _sigterm_as_interrupt():
                try:
                    nodes = self._provision()
                    self._say(f"run {self.run_id}: provisioned "
                              + ", ".join(r.resource_id + (f" ({r.meta['machine']})"
                                                           if r.meta.get("machine") else "")
                                          for _, r in nodes))
                    self.provider.wait([r for _, r in nodes], timeout_s=self._wait_budget_s())
                    for row, _ in nodes:
                        self.ledger.set_state(row, "running")
                    self._status("verifying")
                    self._verify_hardware([r for _, r in nodes])
                    job = self._start_job([r for _, r in nodes])
                    self._status("running")
                    outcome = self._supervise(job[1])
                except KeyboardInterrupt as err:
                    outcome = "interrupted"
                    self._say(f"interrupted ({err or 'Ctrl-C'}): tearing down")
                except GpuCostError as err:
                    outcome = "failed"
                    self._say(f"error: {err}")
                finally:
                    with _signals_ignored():
                        self._teardown(nodes, job, outcome)
        finally:
            self.ledger.set_run_state(self.run_id, outcome, ended=True)
            self._status(outcome, final=True)
            if self._watchdog is not None:  # it sees the end within its poll and exits
                with suppress(subprocess.TimeoutExpired):
                    self._watchdog.wait(timeout=3 * WATCH_POLL_S)
        code = EXIT_CODES.get(outcome, 3)
        return LaunchResult(self.run_id, outcome, self.run_dir.path, code, self.messages)

    def _start_watchdog(self) -> None:
        timeout_at = self._started + self.plan.safety.timeout_hours * 3600.0
        try:
            self._watchdog = start_watchdog(self.run_id, timeout_at,
                                            self.run_dir.launcher_log_path,
                                            hold_fds=self._lock.fds)
        except OSError as err:
            raise ExecutorError(f"cannot start the run's watchdog: {err}",
                                hint="without it the budget cap and the hard timeout would "
                                     "die with the launcher") from err

    def _wait_budget_s(self) -> float:
        left = self.plan.safety.timeout_hours * 3600.0 - (time.time() - self._started)
        wanted = max(1800.0, self.plan.spot.max_wait_capacity_hours * 3600.0)
        return max(1.0, min(left, wanted))

    def _verify_hardware(self, resources: Sequence[Resource]) -> None:
        result = self.provider.verify_hardware(resources, self.plan.workdir(self.plan_path))
        if result is None:
            self._say("verify: the task runs the CUDA matmul on the machine before the job")
        elif result.get("cuda_available"):
            self._say(f"verify: CUDA matmul ok on {result.get('device')} "
                      f"(sm {result.get('capability')}, torch {result.get('torch')})")
        else:
            self._say(f"verify: CPU matmul ok (torch {result.get('torch')}); no CUDA device here, "
                      "so CUDA was not checked")
        self.hardware = result

    def _start_job(self, nodes: Sequence[Resource]) -> tuple[int, Resource]:
        plan = self.plan
        env = {"GPUCOST_RUN_DIR": str(self.run_dir.path), "GPUCOST_RUN_ID": self.run_id,
               "GPUCOST_CHECKPOINT_DIR": str(self.run_dir.scratch_checkpoints)}
        if plan.checkpoint.enabled:
            store = self._checkpoints()
            env.update(GPUCOST_CHECKPOINT_TARGET=store.resolved_target,
                       GPUCOST_CHECKPOINT_NAMESPACE=plan.job.name,
                       GPUCOST_CHECKPOINT_EVERY=f"{plan.checkpoint.every_epochs or 1:g}")
            if plan.checkpoint.resume and self.provider.runs_locally:
                latest = store.fetch_latest(self.run_dir.scratch_checkpoints,
                                            skipped=self._say)
                if latest is not None:
                    env["GPUCOST_RESUME_FROM"] = str(latest)
                    self._say(f"resuming from {latest}")
        spec = JobSpec(argv=plan.job.command, workdir=plan.workdir(self.plan_path), env=env,
                       log_path=self.run_dir.log_path,
                       nproc_per_node=max(1, round(plan.offer.gpu_count)),
                       timeout_at=self._started + plan.safety.timeout_hours * 3600.0,
                       budget_at=self._budget_at(), inherit_fds=self._lock.fds)
        row = self.ledger.intent(run_id=self.run_id, provider=self.provider.name,
                                 token=self.token, kind="process", region=plan.offer.region,
                                 config=self.provider.config())
        try:
            res = self.provider.run(nodes, spec)
        except BaseException:
            self.ledger.set_state(row, "failed")
            raise
        self.ledger.record(row, [res], "running")
        self._say(f"job started: {res.kind} {res.resource_id}; log {self.run_dir.log_path}")
        return row, res

    def _supervise(self, job: Resource) -> str:
        plan, safety = self.plan, self.plan.safety
        timeout_s = safety.timeout_hours * 3600.0
        job_started = time.time()
        verified = False
        while True:
            state = self.provider.status(job)
            progress = self.run_dir.read_progress()
            elapsed = time.time() - self._started
            cost = self._cost(elapsed)
            if self._budget_warning is None and (
                    warning := budget_warning(cost, safety.budget_cap_usd)):
                self._budget_warning = warning
                self._say(warning)
            if progress and not verified and progress.get("throughput"):
                verified = True
                check = verify_throughput(plan, float(progress["throughput"]), self._price_hr)
                if self.probe is None:  # a probe's launcher records its own, at the end
                    record_on_arrival(plan, check.measured)  # teaches later predictions
                self._verification = check
                limits = band_limits(plan, plan_band(plan))
                self._say(check.message(limits))
                if (why := arrival_stop(plan, check, limits)) is not None:
                    self._say(why)
                    return "verify-failed"
            if (why := self.provider.stop_reason()) is not None:
                self._say(why)
                return "verify-failed"
            if self.probe is not None and (why := self._probed(job_started)) is not None:
                self._say(why)
                return "probed"
            self._status("running", progress=progress, job_started=job_started)
            if state not in ("running", "pending", "unknown"):
                code = self.provider.exit_code(job)
                if code in (EXIT_TIMED_OUT, EXIT_BUDGET):
                    limit = "timeout" if code == EXIT_TIMED_OUT else "budget cap"
                    self._say(f"{limit}: the job's guard ended it at the limit")
                    return "timed-out" if code == EXIT_TIMED_OUT else "budget-exceeded"
                if code == 0 or (code is None and state == "exited"):
                    self._say("job finished" + ("" if code is None else f" (exit code {code})"))
                    return "succeeded"
                self._say(f"job ended with exit code {code}; see {self.run_dir.log_path}")
                return "failed"
            if elapsed >= timeout_s:
                self._say(f"timeout: {elapsed / 3600:.3g} h reached the {safety.timeout_hours:g} h "
                          "limit; stopping the run")
                return "timed-out"
            if cost >= safety.budget_cap_usd:
                self._say(f"budget cap: {usd_text(cost)} spent reached the "
                          f"{usd_text(safety.budget_cap_usd)} cap; stopping the run")
                return "budget-exceeded"
            if self.run_dir.stop_request_path.exists():
                self._say("stop requested (`gpucost stop`): stopping the run")
                return "stopped"
            time.sleep(self.poll_s)

    def _probed(self, job_started: float) -> str | None:
        """Why a probe has measured enough (None while it has not): its reports are in, or
        its time is up."""
        assert self.probe is not None
        limit = self.probe
        try:
            reports = sum(1 for r in self.run_dir.metrics() if r.get("throughput"))
        except GpuCostError:  # a damaged line: the time limit still ends the probe
            reports = 0
        if reports >= limit.reports:
            return f"probe: {reports} throughput reports in; ending the probe"
        if time.time() - job_started >= limit.seconds:
            return (f"probe: {limit.seconds / 60:g} min of job time with {reports} of "
                    f"{limit.reports} throughput reports; ending the probe")
        return None

    def _budget_at(self) -> float | None:
        """When the spend reaches the budget cap at today's price (None if it costs nothing)."""
        per_s = self.plan.offer.nodes * self._price_hr / 3600.0
        if per_s <= 0:
            return None
        now = time.time()
        return now + max(0.0, self.plan.safety.budget_cap_usd
                         - self._cost(now - self._started)) / per_s

    def _early_note(self, message: str) -> None:
        """Say it now, and keep it for the run's launcher.log (a detached launcher's stderr is
        gone by the time anyone looks)."""
        self.messages.append(message)
        self.echo(message)
        self._early_notes.append(message)

    def _cost(self, elapsed_s: float) -> float:
        """Spend ``elapsed_s`` into the run: nodes x the price that got capacity x the time since
        the create was accepted (the spot waits before it are not billed)."""
        if self._billed_from is None:
            return 0.0
        return (self.plan.offer.nodes * self._price_hr
                * max(0.0, elapsed_s - self._billed_from) / 3600.0)

    def _status(self, state: str, *, progress: dict[str, Any] | None = None,
                job_started: float | None = None, final: bool = False) -> None:
        elapsed = time.time() - self._started
        status: dict[str, Any] = {
            "run_id": self.run_id, "name": self.plan.job.name, "state": state,
            "provider": self.provider.name, "elapsed_s": elapsed,
            "cost_usd": self._cost(elapsed), "budget_cap_usd": self.plan.safety.budget_cap_usd,
            "timeout_s": self.plan.safety.timeout_hours * 3600.0,
            "epoch": None, "epochs": self.plan.job.epochs, "eta_s": None, "metrics": {},
            "throughput": None, "planned_throughput": self.plan.workload.throughput,
            "launcher_pid": os.getpid(), "final": final,
            "budget_warning": self._budget_warning, **self.provider.status_fields(),
        }
        if progress is None:
            progress = self.run_dir.read_progress()
        if progress:
            status.update(epoch=progress.get("epoch"), metrics=progress.get("metrics") or {},
                          throughput=progress.get("throughput"),
                          checkpoint=progress.get("checkpoint"))
            status["eta_s"] = self._eta(progress, job_started)
        if final:  # the newest checkpoint shipped that is still there, as every view says
            report, status["checkpoint"] = job_position(self.run_dir, status.get("checkpoint"))
            status.update(report_fields(report))
        check = self._verification
        if check is not None:
            status["verify"] = {"deviation_pct": check.deviation_pct,
                                "within_margin": check.within_margin,
                                "reestimated_cost_usd": check.reestimated_cost_usd}
        self.run_dir.write_status(status)

    def _eta(self, progress: dict[str, Any], job_started: float | None) -> float | None:
        epochs, epoch = self.plan.job.epochs, progress.get("epoch")
        if epochs is None or epoch is None or job_started is None:
            return None
        if (throughput := progress.get("throughput")) and self.plan.job.dataset_size:
            return max(0.0, (epochs - float(epoch)) * self.plan.job.dataset_size
                       / float(throughput))
        return None

    def _teardown(self, nodes: Sequence[tuple[int, Resource]], job: tuple[int, Resource] | None,
                  outcome: str) -> None:
        """Release everything; only a finished job keeps machines, and only per idle policy."""
        errors = []
        if job is not None:
            row, res = job
            try:
                if self.provider.status(res) in ("running", "pending", "unknown"):
                    # `gpucost stop` on a kept machine stops it; anything else ends the job.
                    if outcome == "stopped" and self.plan.idle.policy == "stop":
                        self.provider.stop(res)
                    else:
                        self.provider.destroy(res)
                elif self.provider.runs_locally:
                    # The guard has exited; killed outright, it left the job's processes
                    # running: destroy ends what carries the token or is in its record.
                    self.provider.destroy(res)
                self.ledger.set_state(row, "exited")
            except GpuCostError as err:
                errors.append(err)
        keep = (outcome in ("succeeded", "stopped") and self.plan.idle.policy == "stop"
                and self.provider.supports("stop"))
        for row, res in nodes:
            try:
                if keep:
                    self.provider.stop(res)
                    self.ledger.set_state(row, "stopped")
                else:
                    self.provider.destroy(res)
                    self.ledger.set_state(row, "destroyed")
            except GpuCostError as err:
                errors.append(err)
        if nodes:
            idle = self.plan.idle
            if keep:
                self._say(f"idle policy: stopped {len(nodes)} node(s), disk kept (return expected "
                          f"within {idle.expected_return_hours or 0:g} h, break-even "
                          f"{idle.breakeven_hours or 0:g} h); `gpucost down {self.run_id}` "
                          "destroys them")
            else:
                self._say(f"destroyed {len(nodes)} resource(s)")
        if errors:
            self._say(f"teardown incomplete: {errors[0]}; run `gpucost cleanup`")
