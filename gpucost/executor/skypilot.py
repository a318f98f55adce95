"""The ``skypilot`` engine: cloud plans run through SkyPilot's Python SDK (``gpucost[skypilot]``).

SkyPilot provisions the plan's offer, syncs the workdir, mounts the checkpoint bucket, runs setup
and the job on every node, streams the log back, and stops or tears the cluster down when it
goes idle (the plan's idle policy as autostop/autodown). On-demand plans launch a cluster
(``sky.launch``); spot plans are managed jobs (``sky.jobs.launch``) that SkyPilot re-provisions
and restarts after a preemption, the job resuming from its newest checkpoint.

gpucost keeps what is its own: the ledger (the cluster or managed-job name is the run's recovery
token, so `gpucost cleanup` finds what a killed launcher started), status.json, the budget cap
and the hard timeout (the runner cancels the job and downs the cluster when one is reached, and
so does the run's watchdog, :func:`gpucost.executor.watchdog.watch`, when the launcher is dead),
and verify on arrival (the matmul at the top of the task's ``run``). The job's reports come home
in its log (:mod:`gpucost.executor.markers`): :class:`ThroughputWatch` writes each into the run
folder's metrics.jsonl and progress.json as the job's own gpucost.report() does on a local run
(so the runner's status.json and verify on arrival see them), records the measured throughput,
and checks it against the prediction's error band.

Every SDK call goes through :class:`SkyClient`, the one boundary with SkyPilot; in SkyPilot
0.10+ each call returns a request id whose result :func:`sky.get` waits for.
"""

from __future__ import annotations

import io
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, ClassVar

from gpucost._optional import installed, require
from gpucost.errors import CapacityError, CredentialsError, InputError, ProviderError
from gpucost.executor.base import JobSpec, Provider, ProvisionRequest, Resource, ResourceState
from gpucost.executor.markers import parse_marker
from gpucost.executor.rundir import RunDir
from gpucost.executor.skypilot_task import (
    IDLE_MINUTES,
    cloud_of,
    managed,
    task_config,
    task_yaml,
)
from gpucost.executor.verify import (
    band_limits,
    over_budget,
    plan_band,
    stop_reason,
    verify_throughput,
)
from gpucost.format import usd_text
from gpucost.measurements import record_on_arrival
from gpucost.planfile import Plan
from gpucost.reporting import write_report

# SkyPilot's status names -> the ledger's states.
_CLUSTER_STATES: dict[str, ResourceState] = {"INIT": "pending", "UP": "running",
                                             "STOPPED": "stopped"}
_JOB_STATES: dict[str, ResourceState] = {
    "INIT": "pending", "PENDING": "pending", "SETTING_UP": "pending", "RUNNING": "running",
    "SUCCEEDED": "exited", "FAILED": "failed", "FAILED_SETUP": "failed",
    "FAILED_DRIVER": "failed", "CANCELLED": "exited",
}
_MANAGED_STATES: dict[str, ResourceState] = {
    "PENDING": "pending", "SUBMITTED": "pending", "STARTING": "pending",
    # preempted and being re-provisioned by SkyPilot: not an end
    "RECOVERING": "pending", "RUNNING": "running", "WINDING_DOWN": "running",
    "CANCELLING": "running", "SUCCEEDED": "exited", "CANCELLED": "exited",
    "FAILED": "failed", "FAILED_SETUP": "failed", "FAILED_PRECHECKS": "failed",
    "FAILED_NO_RESOURCE": "failed", "FAILED_CONTROLLER": "failed",
}
CLUSTER, JOB, MANAGED = "cluster", "job", "managed-job"
FIRST_CHECK_AFTER = 3  # throughput markers: the median of three is past one slow first epoch
RECHECK_S = 300.0  # then the throughput since the last check, every five minutes
MAX_PENDING_CHARS = 1 << 16  # a partial line longer than this is no marker: dropped


class ThroughputWatch:
    """The reports a SkyPilot job's log brings home, written into the run folder and checked.

    After the first :data:`FIRST_CHECK_AFTER` throughput markers, and then every
    :data:`RECHECK_S`, the median throughput since the last check is recorded in
    measurements.json and compared with the plan's prediction and its band (never narrower
    than the plan's verify margin: a measurement predicting itself still varies run to run).
    Outside it, or when the $/job it projects exceeds the budget cap, one line in launcher.log
    when it leaves the band and :attr:`warning` for status.json; :attr:`stop_reason` asks the
    runner to stop when the plan's verify_action says so
    (:func:`gpucost.executor.verify.stop_reason`: the plan cheapest now with it).
    """

    def __init__(self, plan: Plan, run_dir: RunDir, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.band = plan_band(plan)
        self._clock = clock
        self._lock = threading.Lock()  # the log threads of a spot fallback may overlap
        self._since_check: list[float] = []
        self._checked_at: float | None = None
        self.warning: str | None = None
        self.stop_reason: str | None = None
        self.records = True  # False for a probe: its launcher records its measurement

    def line(self, text: str) -> None:
        """One line of the job's log (never raises into the log stream)."""
        report = parse_marker(text)
        if report is None:
            return
        with self._lock:
            try:
                write_report(self.run_dir.path, report)
            except OSError as err:
                self._note(f"report not written to the run folder: {err}")
            if report["throughput"] is None:
                return
            self._since_check.append(float(report["throughput"]))
            now = self._clock()
            if (len(self._since_check) >= FIRST_CHECK_AFTER if self._checked_at is None
                    else now - self._checked_at >= RECHECK_S):
                self._check(now)

    def _check(self, now: float) -> None:
        measured = statistics.median(self._since_check)
        self._since_check, self._checked_at = [], now
        if self.records:
            record_on_arrival(self.plan, measured)  # teaches later predictions, the re-rank
        planned = self.plan.workload.throughput
        low, high = band_limits(self.plan, self.band)
        check = verify_throughput(self.plan, measured)
        outside = not low <= measured <= high
        projection = over_budget(self.plan, check)
        if not outside and projection is None:
            self.warning = None
            return
        warning = (f"throughput: measured {measured:.1f} samples/s vs predicted {planned:.1f} "
                   f"({check.deviation_pct:+.0f}%), "
                   f"{'outside' if outside else 'inside'} the prediction's band "
                   f"{low:.1f}-{high:.1f}; re-estimated $/job "
                   f"{usd_text(check.reestimated_cost_usd)} over "
                   f"{check.reestimated_hours:.3g} h"
                   + ("" if projection is None else
                      f", over the budget cap {usd_text(self.plan.safety.budget_cap_usd)}"))
        if self.warning is None:
            self._note(warning)
        self.warning = warning
        if self.stop_reason is None and (
                why := stop_reason(self.plan, check, outside=outside)) is not None:
            self.stop_reason = f"{warning}; {why}"

    def _note(self, message: str) -> None:
        with suppress(OSError):  # the run folder is gone: nothing left to tell
            self.run_dir.note(message)


class LogTee(io.TextIOBase):
    """The stream SkyPilot writes a job's log to: every write goes on to train.log, and every
    complete line to ``on_line``."""

    def __init__(self, out: io.TextIOBase, on_line: Callable[[str], None]) -> None:
        super().__init__()
        self._out = out
        self._on_line = on_line
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._out.write(text)
        *lines, self._pending = (self._pending + text).split("\n")
        if len(self._pending) > MAX_PENDING_CHARS:
            self._pending = ""
        for line in lines:
            self._on_line(line)
        return len(text)

    def flush(self) -> None:
        self._out.flush()


def _machine(handle: Any) -> str:
    """What SkyPilot got, from a launch's resource handle ("1x AWS(p4d.24xlarge, ...)")."""
    launched = getattr(handle, "launched_resources", None)
    nodes = getattr(handle, "launched_nodes", None)
    return "" if launched is None else f"{nodes or 1}x {launched}"


def _name(status: Any) -> str:
    """An enum member's value ("UP"), or the string itself."""
    return str(getattr(status, "value", status))


class SkyClient:
    """SkyPilot's SDK, one method per call gpucost makes (imported on first use)."""

    def __init__(self) -> None:
        self.sky = require("sky", needed_for="launching a cloud plan (through SkyPilot)",
                           then="set up credentials (`sky check`) and launch again")

    def _get(self, request_id: Any, log: io.TextIOBase | None = None) -> Any:
        if log is not None:
            return self.sky.stream_and_get(request_id, output_stream=log)
        return self.sky.get(request_id)

    def task(self, config: Mapping[str, Any]) -> Any:
        # from_yaml_config consumes keys of the dict it reads: give it a copy
        return self.sky.Task.from_yaml_config(dict(config))

    def launch(self, config: Mapping[str, Any], cluster: str, *, idle_minutes: int,
               down: bool, log: io.TextIOBase | None) -> tuple[int | None, str]:
        request = self.sky.launch(self.task(config), cluster_name=cluster,
                                  idle_minutes_to_autostop=idle_minutes, down=down)
        job_id, handle = self._get(request, log)
        return None if job_id is None else int(job_id), _machine(handle)

    def jobs_launch(self, config: Mapping[str, Any], name: str,
                    log: io.TextIOBase | None) -> tuple[int | None, str]:
        request = self.sky.jobs.launch(self.task(config), name=name)
        job_ids, handle = self._get(request, log)
        return int(job_ids[0]) if job_ids else None, _machine(handle)

    def cluster_status(self, cluster: str) -> str | None:
        """UP, INIT or STOPPED; None when there is no such cluster."""
        records = self._get(self.sky.status(cluster_names=[cluster]))
        return _name(records[0]["status"]) if records else None

    def job_status(self, cluster: str, job_id: int) -> str | None:
        statuses = self._get(self.sky.job_status(cluster, job_ids=[job_id]))
        status = statuses.get(job_id)
        return None if status is None else _name(status)

    def managed_jobs(self, name: str) -> list[tuple[int, str]]:
        """(job id, status) of the managed jobs called ``name``, newest first."""
        records = self._get(self.sky.jobs.queue(refresh=False, skip_finished=False))
        found = [(int(r["job_id"]), _name(r["status"])) for r in records
                 if r.get("job_name") == name]
        return sorted(found, reverse=True)

    def tail_logs(self, cluster: str, job_id: int, out: io.TextIOBase) -> None:
        self.sky.tail_logs(cluster, job_id, follow=True, output_stream=out)

    def jobs_tail_logs(self, name: str, out: io.TextIOBase) -> None:
        self.sky.jobs.tail_logs(name=name, follow=True, output_stream=out)

    def cancel(self, cluster: str, job_id: int) -> None:
        self._get(self.sky.cancel(cluster, job_ids=[job_id]))

    def jobs_cancel(self, name: str) -> None:
        self._get(self.sky.jobs.cancel(name=name))

    def stop(self, cluster: str) -> None:
        self._get(self.sky.stop(cluster))

    def down(self, cluster: str) -> None:
        self._get(self.sky.down(cluster))


def _provider_error(what: str, err: Exception) -> Exception:
    """SkyPilot's exceptions as gpucost's, by class name (sky need not be importable here)."""
    kind = type(err).__name__
    text = f"skypilot {what}: {kind}: {str(err).splitlines()[0] if str(err) else ''}"
    if kind in ("ResourcesUnavailableError", "NoCloudAccessError"):
        if "credential" in str(err).lower() or kind == "NoCloudAccessError":
            return CredentialsError(text, hint="run `sky check` to set up cloud credentials")
        return CapacityError(text, hint="try another zone, region or market")
    if kind in ("ClusterDoesNotExist", "ClusterNotUpError"):
        return ProviderError(text)
    return ProviderError(text, hint="`sky status` and `sky api logs` say more; `gpucost "
                                    "cleanup` releases anything left behind")


class SkyPilotProvider(Provider):
    """The plan's cloud through SkyPilot; ``cloud`` is kept in the ledger for cleanup."""

    name = "skypilot"
    unsupported: ClassVar[Mapping[str, str]] = {
        "stop-spot": "a managed (spot) job cannot be stopped, only cancelled; its cluster is "
                     "released when it ends",
    }

    needs_watchdog = True

    def __init__(self, cloud: str = "", managed: bool = False, *,
                 client_factory: Callable[[], SkyClient] = SkyClient) -> None:
        self.cloud = cloud
        self.managed = managed  # spot plans: a managed job, else a cluster
        self._factory = client_factory
        self._client: SkyClient | None = None
        self._config: dict[str, dict[str, Any]] | None = None  # market -> task
        self._yaml = ""
        self._token = ""
        self._log_path: Path | None = None
        self._idle_down = True
        self._log_threads: list[threading.Thread] = []
        self.watch: ThroughputWatch | None = None

    @property
    def sdk(self) -> SkyClient:
        if self._client is None:
            self._client = self._factory()
        return self._client

    def config(self) -> dict[str, Any]:
        return {"cloud": self.cloud, "managed": self.managed}

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (InputError, ProviderError):
            raise
        except Exception as err:  # SkyPilot raises its own classes and plain ones
            raise _provider_error(what, err) from err

    # -- the task ------------------------------------------------------------------------------
    def bind(self, plan: Plan, plan_path: Path, run_id: str, log_path: Path) -> None:
        self.cloud = cloud_of(plan)
        self.managed = managed(plan)
        self._idle_down = plan.idle.policy == "destroy"
        self._config = {market: task_config(plan, plan_path, run_id=run_id, market=market)
                        for market in ("spot", "on-demand")}
        self._yaml = task_yaml(plan, plan_path, run_id=run_id)
        self._log_path = log_path
        self._token = f"gpucost-{run_id}"
        self.watch = ThroughputWatch(plan, RunDir(log_path.parent))

    def measure_for_probe(self) -> None:
        if self.watch is not None:
            self.watch.records = False

    def status_fields(self) -> dict[str, Any]:
        return {"throughput_warning": None if self.watch is None else self.watch.warning}

    def stop_reason(self) -> str | None:
        return None if self.watch is None else self.watch.stop_reason

    def check_ready(self) -> None:
        self.sdk  # noqa: B018 (imports SkyPilot, or says how to install it)

    def dry_run_lines(self) -> list[str]:
        how = ("a managed job (`sky jobs launch`), recovered after preemptions" if self.managed
               else f"cluster {self._token} (`sky launch`)")
        return [f"skypilot would submit this task as {how}:", self._yaml.rstrip()]

    # -- lifecycle -------------------------------------------------------------------------------
    def provision(self, request: ProvisionRequest) -> list[Resource]:
        """Launch: SkyPilot provisions, syncs, runs setup and submits the job in one request."""
        if self._config is None:
            raise InputError("the skypilot engine needs the plan's task",
                             hint="launch through `gpucost launch PLAN`")
        config = self._config[request.market]  # on-demand after a spot plan's fallback
        if request.market == "spot":
            job_id, machine = self._with_log("jobs launch", self.sdk.jobs_launch, config,
                                             request.token)
            return [Resource(provider=self.name, resource_id=request.token, token=request.token,
                             region=request.region, kind=MANAGED, price_hr=request.price_hr,
                             meta={"job_id": job_id, "machine": machine})]
        job_id, machine = self._with_log("launch", self.sdk.launch, config, request.token,
                                         idle_minutes=IDLE_MINUTES, down=self._idle_down)
        return [Resource(provider=self.name, resource_id=request.token, token=request.token,
                         region=request.region, kind=CLUSTER, price_hr=request.price_hr,
                         meta={"job_id": job_id, "machine": machine})]

    def _with_log(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A launch, its provisioning and setup output appended to the run's log."""
        if self._log_path is None:
            return self._call(what, fn, *args, log=None, **kwargs)
        with open(self._log_path, "a", encoding="utf-8") as log:
            return self._call(what, fn, *args, log=log, **kwargs)

    def wait(self, resources: Sequence[Resource], timeout_s: float) -> None:
        """sky.launch returns once the cluster is up; a managed job provisions on its own."""
        for res in resources:
            if res.kind == CLUSTER and self.status(res) != "running":
                raise ProviderError(f"skypilot cluster {res.resource_id} is not up after launch")

    def run(self, resources: Sequence[Resource], job: JobSpec) -> Resource:
        """The job was submitted with the launch; stream its log into the run folder."""
        first = resources[0]
        job_id = first.meta.get("job_id")
        if first.kind == MANAGED:
            handle = Resource(provider=self.name, resource_id=first.resource_id,
                              token=first.token, region=first.region, kind=MANAGED,
                              meta=first.meta)
            self._follow(job.log_path, self.sdk.jobs_tail_logs, first.resource_id)
            return handle
        if job_id is None:
            raise ProviderError(f"skypilot launched {first.resource_id} but submitted no job")
        self._follow(job.log_path, self.sdk.tail_logs, first.resource_id, int(job_id))
        return Resource(provider=self.name, resource_id=f"{first.resource_id}/{job_id}",
                        token=first.token, region=first.region, kind=JOB,
                        meta={"cluster": first.resource_id, "job_id": int(job_id)})

    def _follow(self, log_path: Path, tail: Callable[..., None], *args: Any) -> None:
        def stream() -> None:
            try:
                with open(log_path, "a", encoding="utf-8") as out:
                    tail(*args, out if self.watch is None else LogTee(out, self.watch.line))
            except Exception as err:  # the run goes on without its log
                with open(log_path, "a", encoding="utf-8") as out:
                    out.write(f"gpucost: log streaming stopped: {err}\n")

        thread = threading.Thread(target=stream, name="skypilot-logs", daemon=True)
        thread.start()
        self._log_threads.append(thread)

    def status(self, resource: Resource) -> ResourceState:
        if resource.kind == CLUSTER:
            found = self._call("status", self.sdk.cluster_status, resource.resource_id)
            return "destroyed" if found is None else _CLUSTER_STATES.get(found, "unknown")
        if resource.kind == JOB:
            cluster, job_id = resource.meta["cluster"], int(resource.meta["job_id"])
            if self._call("status", self.sdk.cluster_status, cluster) is None:
                return "failed"  # the cluster went away under the job
            found = self._call("job status", self.sdk.job_status, cluster, job_id)
            return "unknown" if found is None else _JOB_STATES.get(found, "unknown")
        jobs = self._call("jobs queue", self.sdk.managed_jobs, resource.resource_id)
        if not jobs:
            return "destroyed"
        return _MANAGED_STATES.get(jobs[0][1], "unknown")

    def exit_code(self, resource: Resource) -> int | None:
        state = self.status(resource)
        if state in ("running", "pending", "unknown"):
            return None
        return 0 if state == "exited" and self._succeeded(resource) else 1

    def _succeeded(self, resource: Resource) -> bool:
        if resource.kind == JOB:
            found = self.sdk.job_status(resource.meta["cluster"], int(resource.meta["job_id"]))
            return found == "SUCCEEDED"
        jobs = self.sdk.managed_jobs(resource.resource_id)
        return bool(jobs) and jobs[0][1] == "SUCCEEDED"

    def stop(self, resource: Resource) -> None:
        if resource.kind == CLUSTER:
            self._call("stop", self.sdk.stop, resource.resource_id)
        else:
            self.destroy(resource)  # a job is cancelled; a managed job cannot be kept

    def destroy(self, resource: Resource) -> None:
        if resource.kind == JOB:
            if self.sdk.cluster_status(resource.meta["cluster"]) is not None:
                self._call("cancel", self.sdk.cancel, resource.meta["cluster"],
                           int(resource.meta["job_id"]))
            return
        if resource.kind == MANAGED:
            if any(_MANAGED_STATES.get(s) in ("pending", "running")
                   for _, s in self._call("jobs queue", self.sdk.managed_jobs,
                                          resource.resource_id)):
                self._call("jobs cancel", self.sdk.jobs_cancel, resource.resource_id)
            return
        if self._call("status", self.sdk.cluster_status, resource.resource_id) is not None:
            self._call("down", self.sdk.down, resource.resource_id)

    def find(self, token: str) -> list[Resource]:
        """The cluster or managed job named after the run's token (recovery after a crash)."""
        if not installed("sky"):
            return []  # without the SDK this machine cannot have created anything
        found = []
        if self.managed:  # a spot plan's managed job (its cluster is the controller's)
            jobs = self._call("jobs queue", self.sdk.managed_jobs, token)
            if any(_MANAGED_STATES.get(s) in ("pending", "running") for _, s in jobs):
                found.append(Resource(provider=self.name, resource_id=token, token=token,
                                      kind=MANAGED))
        # a cluster: an on-demand plan's, or a spot plan's after its on-demand fallback
        if self._call("status", self.sdk.cluster_status, token) is not None:
            found.append(Resource(provider=self.name, resource_id=token, token=token,
                                  kind=CLUSTER))
        return found
