"""The skypilot engine against SkyPilot itself, offline (run in the gpucost[skypilot] environment;
.ci/run builds one; the main environment skips this module).

* Tasks written for plans that `gpucost plan` makes load through SkyPilot's own loader
  (``sky.Task.from_yaml``), and their resources validate against SkyPilot's catalog lookups,
  which read a catalog cache seeded from gpucost's embedded SkyPilot catalogs (the network is
  shut: a lookup that tried to download would fail the test).
* The SDK calls run against a recording stand-in at that one boundary: each stand-in binds its
  arguments to the real SDK function's signature (a wrong keyword fails), records the call and
  plays a small cloud (clusters, jobs, managed jobs that get preempted and recover).
"""

from __future__ import annotations

import ast
import csv
import datetime as dt
import importlib.util
import inspect
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skypilot

if importlib.util.find_spec("sky") is None:
    pytest.skip("SkyPilot is not installed (gpucost[skypilot])", allow_module_level=True)
# SkyPilot reads its catalogs and state under this folder; it is fixed when sky is imported.
_RUNTIME = Path(tempfile.mkdtemp(prefix="gpucost-sky-"))
os.environ["SKY_RUNTIME_DIR"] = str(_RUNTIME)
import sky  # noqa: E402

from gpucost.cli import main  # noqa: E402
from gpucost.executor import SKYPILOT_CLOUDS  # noqa: E402
from gpucost.executor.base import ProvisionRequest, Resource  # noqa: E402
from gpucost.executor.ledger import Ledger  # noqa: E402
from gpucost.executor.rundir import RunDir  # noqa: E402
from gpucost.executor.runfiles import RunStatusFile  # noqa: E402
from gpucost.executor.runner import Runner  # noqa: E402
from gpucost.executor.skypilot import SkyClient, SkyPilotProvider  # noqa: E402
from gpucost.executor.skypilot_task import accelerator, not_enforced, task_yaml  # noqa: E402
from gpucost.limits import node_limit  # noqa: E402
from gpucost.paths import embedded_snapshots_dir, user_snapshots_dir  # noqa: E402
from gpucost.planfile import Plan, load_plan  # noqa: E402
from gpucost.pricing.snapshot import (  # noqa: E402
    Offers,
    Snapshot,
    latest_snapshot_paths,
    read_snapshot,
    write_snapshot,
)

CATALOG_COLUMNS = ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
                   "GpuInfo", "Price", "SpotPrice", "Region", "AvailabilityZone", "Arch"]
# SkyPilot's Vast catalog has no zones and no architecture (sky/catalog/data_fetchers/fetch_vast.py)
VAST_COLUMNS = [c for c in CATALOG_COLUMNS if c not in ("AvailabilityZone", "Arch")]
# name -> SkyPilot's spelling
CLOUDS = {"aws": "AWS", "lambda": "Lambda", "runpod": "RunPod", "vast": "Vast"}


def catalog_names(cloud: str, snapshot: Snapshot) -> dict[str, str]:
    """gpucost GPU name -> the catalog's own AcceleratorName column, as the importer recorded it
    (``gpu_names`` in the snapshot's provenance), not as gpucost's task writer spells it."""
    return {gpu: name for name, gpus in snapshot.provenance["gpu_names"].items() for gpu in gpus}


def seed_catalogs(root: Path) -> None:
    """SkyPilot's v8 catalog files (``<cloud>/vms.csv``) rebuilt from the embedded snapshots, so
    that SkyPilot's catalog lookups answer without a download."""
    from sky.skylet import constants

    catalogs = root / ".sky" / "catalogs" / constants.CATALOG_SCHEMA_VERSION
    newest = {p.parent.name: p for p in latest_snapshot_paths([embedded_snapshots_dir()])}
    accelerators: dict[str, set[str]] = {}
    memory: dict[str, float] = {}
    for cloud, spelt in CLOUDS.items():
        snapshot = read_snapshot(newest[f"skypilot-{cloud}"])
        names = catalog_names(cloud, snapshot)
        rows = snapshot.offers.to_records()
        for r in rows:
            accelerators.setdefault(names[r["gpu"]], set()).add(spelt)
            memory[names[r["gpu"]]] = r["gpu_memory_gb"]
        out = catalogs / cloud / "vms.csv"
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(VAST_COLUMNS if cloud == "vast" else CATALOG_COLUMNS)
            for r in rows:
                count = int(r["gpu_count"])
                mib = int(r["gpu_memory_gb"] * 1024)
                info = {"Gpus": [{"Name": names[r["gpu"]], "Manufacturer": "NVIDIA",
                                  "Count": count, "MemoryInfo": {"SizeInMiB": mib}}],
                        "TotalGpuMemoryInMiB": mib * count}
                spot = r["spot_price_hr"]
                row = [r["instance_type"], names[r["gpu"]], float(count), r["vcpus"],
                       r["ram_gb"], repr(info), r["price_hr"], "" if spot != spot else spot,
                       r["region"], r["zone"], "x86_64"]
                if cloud == "vast":  # SkyPilot's own Vast catalog states every SpotPrice 0.00
                    row = [*row[:7], "0.00" if spot != spot else spot, r["region"]]
                writer.writerow(row)
    (catalogs / "common").mkdir(exist_ok=True)
    with (catalogs / "common" / "accelerators.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["AcceleratorName", "Clouds"])
        writer.writerows([name, repr(sorted(clouds))] for name, clouds in
                         sorted(accelerators.items()))
    with (catalogs / "common" / "metadata.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["GPU", "MemoryGB", "Manufacturer"])
        writer.writerows([name, gb, "NVIDIA"] for name, gb in sorted(memory.items()))


seed_catalogs(_RUNTIME)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only loopback: a catalog download or an API-server call would fail here."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else str(address)
        if self.family == socket.AF_UNIX or str(host).startswith("127.") or host == "::1":
            return real_connect(self, address)
        raise OSError(f"network access to {host} in an offline test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: (_ for _ in ()).throw(
        OSError("DNS in an offline test")))


def planned(tmp_path: Path, *args: str) -> tuple[Plan, Path]:
    """A plan written by `gpucost plan` from the embedded catalogs, with a workdir."""
    (tmp_path / "train.py").write_text("print('training')\n")
    path = tmp_path / "plan.toml"
    assert main(["plan", *args, "--command", "python train.py", "-o", str(path)]) == 0
    return load_plan(path), path


def vast_offers_with_bids() -> None:
    """Vast offers as `gpucost prices refresh vast` writes them (an ask id for instance type,
    "US-Texas" for region, Vast's minimum bid as the spot price) in this test's GPUCOST_HOME:
    the embedded SkyPilot Vast catalog states no spot price."""
    rows = [{"provider": "vast", "region": "US-Texas", "instance_type": "24768912",
             "gpu": "RTX 4090", "gpu_count": 2, "gpu_memory_gb": 24.0, "vcpus": 32.0,
             "ram_gb": 128.0, "price_hr": 0.82, "spot_price_hr": 0.41, "storage_gb_month": 0.2,
             "month_hours": 720, "network_gbps": 0.9, "reliability": 0.99}]
    write_snapshot(Snapshot(source="vast", fetched_at=dt.datetime.now(dt.UTC),
                            offers=Offers.from_records(rows)), user_snapshots_dir())


PLANS = {
    "aws on-demand": ("--provider", "aws", "--gpu", "A100 SXM4 40GB"),
    "aws spot, 2 nodes": ("--provider", "aws", "--gpu", "V100 SXM2 16GB", "--spot",
                          "--max-nodes", "2", "--pick", "fastest"),
    "lambda": ("--provider", "lambda", "--gpu", "H100 SXM5 80GB"),
    "runpod": ("--provider", "runpod", "--gpu", "RTX 4090"),
    "vast": ("--provider", "vast", "--gpu", "RTX 4090"),
    "vast A100 80GB (SkyPilot's Vast catalog calls it A100)": ("--provider", "vast", "--gpu",
                                                               "A100 PCIe 80GB"),
    "vast spot": ("--provider", "vast", "--gpu", "RTX 4090", "--spot"),
}


@pytest.mark.parametrize("args", list(PLANS.values()), ids=list(PLANS))
def test_every_task_loads_through_skypilot_and_its_catalog(tmp_path: Path,
                                                           args: tuple[str, ...]) -> None:
    if "vast" in args and "--spot" in args:
        vast_offers_with_bids()
    plan, path = planned(tmp_path, *args)
    yaml_path = tmp_path / "task.yaml"
    yaml_path.write_text(task_yaml(plan, path, run_id="r1"))
    task = sky.Task.from_yaml(str(yaml_path))
    task.validate(skip_file_mounts=True)  # what the API server runs, catalog lookups included
    (res,) = list(task.resources)
    o = plan.offer
    assert task.num_nodes == o.nodes and task.workdir == str(tmp_path)
    assert str(res.cloud).lower() == o.provider
    assert res.use_spot == (o.market == "spot")
    assert res.disk_size == plan.disk.size_gb
    assert "SKYPILOT_NODE_RANK" in task.run and task.envs["GPUCOST_RUN_ID"] == "r1"
    if o.provider == "vast":
        check_vast_task(plan, res)
        return
    assert res.instance_type == o.instance_type
    assert res.accelerators == {accelerator(plan): round(o.gpu_count)}
    assert res.region == o.region
    if plan.marketplace is not None:  # RunPod: any datacentre of the region, as its search says
        assert o.zone and res.zone is None
    # The catalog answered: SkyPilot prices the instance (spot or not) as the plan did.
    assert res.get_cost(3600) == pytest.approx(o.price_hr, rel=0.02)


def check_vast_task(plan: Plan, res: Any) -> None:
    """A Vast offer is gone by launch: the task names no instance type, and SkyPilot's own
    catalog lookup (what its optimizer runs at launch) finds Vast instance types for the task's
    accelerator, region and market, the planned one among them when it came from that catalog."""
    from sky import catalog

    o, search = plan.offer, plan.marketplace
    assert search is not None and res.instance_type is None
    names = catalog_names("vast", read_snapshot(next(
        p for p in latest_snapshot_paths([embedded_snapshots_dir()])
        if p.parent.name == "skypilot-vast")))
    if o.gpu in names:  # the catalog's own spelling of the planned GPU
        assert res.accelerators == {names[o.gpu]: round(o.gpu_count)}
    found, _ = catalog.get_instance_type_for_accelerator(
        *next(iter(res.accelerators.items())), use_spot=res.use_spot, region=res.region,
        clouds="vast")
    assert found, f"SkyPilot finds no Vast instance type for {res}"
    if o.price_source == "skypilot-vast":  # planned from SkyPilot's catalog: its region, its type
        assert res.region == o.region and search.region in o.region
        assert o.instance_type in found
        assert catalog.get_hourly_cost(o.instance_type, use_spot=False, region=res.region,
                                       zone=None, clouds="vast") == pytest.approx(o.price_hr)
    else:  # `prices refresh vast` ("US-Texas"): not a SkyPilot region, so any region
        assert res.region is None
    lines = "\n".join(not_enforced(plan))
    assert f"max {search.max_price_hr:g} USD/h is not enforced" in lines
    assert f"reliability >= {search.min_reliability:g} is not enforced" in lines


def test_the_catalog_check_is_a_real_one(tmp_path: Path) -> None:
    plan, path = planned(tmp_path, *PLANS["aws on-demand"])
    text = task_yaml(plan, path).replace(plan.offer.instance_type, "p4d.48xlarge")
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(Exception, match=r"p4d\.48xlarge"):
        sky.Task.from_yaml(str(tmp_path / "bad.yaml")).validate(skip_file_mounts=True)
    misspelt = task_yaml(plan, path).replace("use_spot:", "use_spotty:")
    (tmp_path / "misspelt.yaml").write_text(misspelt)
    with pytest.raises(Exception, match="use_spotty"):
        sky.Task.from_yaml(str(tmp_path / "misspelt.yaml"))


# -- the SDK boundary ------------------------------------------------------------------------
class FakeCloud:
    """Stands in for the SkyPilot API server: every SDK function gpucost calls is replaced by a
    recorder that binds the arguments to the real function's signature, and answers with a
    request id that ``sky.get`` / ``sky.stream_and_get`` resolve."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.clusters: dict[str, str] = {}
        self.jobs: dict[tuple[str, int], list[str]] = {}  # statuses still to report, in turn
        self.managed: dict[int, tuple[str, list[str]]] = {}
        self.results: dict[str, Any] = {}
        self.fail_get: set[str] = set()  # SDK functions whose request dies unanswered
        self._ids = itertools.count(1)
        for name in ("launch", "status", "job_status", "tail_logs", "cancel", "stop", "down",
                     "get", "stream_and_get"):
            monkeypatch.setattr(sky, name, self._recorder(name, getattr(sky, name)))
        for name in ("launch", "queue", "cancel", "tail_logs"):
            monkeypatch.setattr(sky.jobs, name,
                                self._recorder(f"jobs.{name}", getattr(sky.jobs, name)))

    def _recorder(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(real)

        def call(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)  # a wrong argument is a TypeError here
            self.calls.append((name, dict(bound.arguments)))
            return getattr(self, "_" + name.replace(".", "_"))(**bound.arguments)

        return call

    def names(self) -> list[str]:
        return [n for n, _ in self.calls if n not in ("get", "stream_and_get")]

    def _request(self, fn: str, result: Any) -> str:
        request_id = f"{fn}-{next(self._ids)}"
        self.results[request_id] = result
        return request_id

    def _get(self, request_id: str) -> Any:
        if request_id.split("-")[0] in self.fail_get:
            raise ConnectionError("the API server went away")
        result = self.results.pop(request_id)
        return result() if callable(result) else result

    def _stream_and_get(self, request_id: str, output_stream: Any = None, **_: Any) -> Any:
        if output_stream is not None:
            output_stream.write(f"provisioning ({request_id})\n")
        return self._get(request_id)

    def _launch(self, task: Any, cluster_name: str, **_: Any) -> str:
        assert isinstance(task, sky.Task)
        self.clusters[cluster_name] = "UP"
        self.jobs[(cluster_name, 1)] = ["RUNNING", "RUNNING", "SUCCEEDED"]
        return self._request("launch", (1, Handle(task)))

    def _status(self, cluster_names: list[str], **_: Any) -> str:
        return self._request("status", [{"name": n, "status": sky.ClusterStatus(self.clusters[n])}
                                        for n in cluster_names if n in self.clusters])

    def _job_status(self, cluster_name: str, job_ids: list[int]) -> str:
        def answer() -> dict[int, Any]:
            out = {}
            for job_id in job_ids:
                states = self.jobs[(cluster_name, job_id)]
                out[job_id] = sky.JobStatus(states.pop(0) if len(states) > 1 else states[0])
            return out

        return self._request("job_status", answer)

    def _tail_logs(self, cluster_name: str, job_id: int, follow: bool,
                   output_stream: Any = None, **_: Any) -> int:
        output_stream.write(f"epoch 1 on {cluster_name} job {job_id}\n")
        return 0

    def _cancel(self, cluster_name: str, job_ids: list[int], **_: Any) -> str:
        self.jobs[(cluster_name, job_ids[0])] = ["CANCELLED"]
        return self._request("cancel", None)

    def _stop(self, cluster_name: str, **_: Any) -> str:
        self.clusters[cluster_name] = "STOPPED"
        return self._request("stop", None)

    def _down(self, cluster_name: str, **_: Any) -> str:
        del self.clusters[cluster_name]
        return self._request("down", None)

    def _jobs_launch(self, task: Any, name: str, **_: Any) -> str:
        assert isinstance(task, sky.Task)
        self.managed[7] = (name, ["PENDING", "RUNNING", "RECOVERING", "RECOVERING", "RUNNING",
                                  "SUCCEEDED"])
        return self._request("jobs.launch", ([7], None))  # the controller's, not the job's

    def _jobs_queue(self, refresh: bool, **_: Any) -> str:
        def answer() -> list[dict[str, Any]]:
            out = []
            for job_id, (name, states) in self.managed.items():
                status = states.pop(0) if len(states) > 1 else states[0]
                out.append({"job_id": job_id, "job_name": name,
                            "status": sky.ManagedJobStatus(status)})
            return out

        return self._request("jobs.queue", answer)

    def _jobs_cancel(self, name: str, **_: Any) -> str:
        for job_id, (job_name, _states) in list(self.managed.items()):
            if job_name == name:
                self.managed[job_id] = (name, ["CANCELLED"])
        return self._request("jobs.cancel", None)

    def _jobs_tail_logs(self, name: str, follow: bool, output_stream: Any = None,
                        **_: Any) -> int:
        output_stream.write(f"epoch 1 of managed job {name}\n")
        return 0


class Handle:
    """What a launch answers with: the resources SkyPilot got (here, the task's own)."""

    def __init__(self, task: Any) -> None:
        self.launched_nodes = task.num_nodes
        (self.launched_resources,) = list(task.resources)


@pytest.fixture
def cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloud]:
    fake = FakeCloud(monkeypatch)
    yield fake
    assert fake.clusters == {} or all(s == "STOPPED" for s in fake.clusters.values())


def test_an_on_demand_plan_launches_a_cluster_streams_its_log_and_downs_it(
        cloud: FakeCloud, tmp_path: Path) -> None:
    plan, path = planned(tmp_path, *PLANS["aws on-demand"])
    runner = Runner(plan, path, provider=SkyPilotProvider("aws"), poll_s=0.01, run_id="od-1")
    result = runner.launch()
    assert result.state == "succeeded", result.messages
    launch = dict(cloud.calls)["launch"]
    assert launch["cluster_name"] == "gpucost-od-1"
    assert launch["idle_minutes_to_autostop"] == 10 and launch["down"] is True
    (res,) = list(launch["task"].resources)
    assert res.instance_type == plan.offer.instance_type
    assert cloud.names()[-1] == "down" and cloud.clusters == {}
    got = f"1x {res}"  # the machine SkyPilot got is recorded
    assert any(f"provisioned gpucost-od-1 ({got})" in m for m in result.messages)
    with Ledger() as ledger:
        (row,) = [r for r in ledger.resources("od-1") if r.kind == "cluster"]
        assert row.meta["machine"] == got
    log = runner.run_dir.log_path.read_text()
    assert "provisioning (launch-" in log and "epoch 1 on gpucost-od-1 job 1" in log
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []
        assert {r.provider for r in ledger.resources("od-1")} == {"skypilot"}


def test_the_budget_cap_cancels_the_job_and_downs_the_cluster(cloud: FakeCloud,
                                                              tmp_path: Path) -> None:
    plan, path = planned(tmp_path, *PLANS["aws on-demand"])
    provider = SkyPilotProvider("aws")
    runner = Runner(plan, path, provider=provider, poll_s=0.01, run_id="cap-1")
    runner._price_hr = 1e9  # the first look at the job is over the cap
    result = runner.launch()
    assert result.state == "budget-exceeded" and result.exit_code == 1
    assert [n for n in cloud.names() if n in ("cancel", "down")] == ["cancel", "down"]
    assert cloud.clusters == {}


def test_a_spot_plan_is_a_managed_job_that_survives_its_preemption(cloud: FakeCloud,
                                                                   tmp_path: Path) -> None:
    plan, path = planned(tmp_path, *PLANS["aws spot, 2 nodes"])
    assert plan.offer.market == "spot"
    runner = Runner(plan, path, provider=SkyPilotProvider("aws", managed=True), poll_s=0.01,
                    run_id="spot-1")
    result = runner.launch()
    assert result.state == "succeeded", result.messages
    launched = dict(cloud.calls)["jobs.launch"]
    assert launched["name"] == "gpucost-spot-1"
    (res,) = list(launched["task"].resources)
    assert res.use_spot and launched["task"].num_nodes == plan.offer.nodes
    assert "launch" not in cloud.names() and "jobs.cancel" not in cloud.names()
    assert "epoch 1 of managed job gpucost-spot-1" in runner.run_dir.log_path.read_text()


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_a_vast_plan_runs_through_skypilot(cloud: FakeCloud, tmp_path: Path,
                                           spot: bool) -> None:
    """What the direct Vast engine could not do: the workdir goes up with the task, the log comes
    back, and an interruptible (spot) rental is a managed job that SkyPilot recovers."""
    if spot:
        vast_offers_with_bids()
    plan, path = planned(tmp_path, *PLANS["vast spot" if spot else "vast"])
    assert plan.offer.provider == "vast" and plan.marketplace is not None
    runner = Runner(plan, path, poll_s=0.01, run_id="vast-1")  # the engine PROVIDERS maps
    assert isinstance(runner.provider, SkyPilotProvider)
    result = runner.launch()
    assert result.state == "succeeded", result.messages
    launched = dict(cloud.calls)["jobs.launch" if spot else "launch"]
    task = launched["task"]
    (res,) = list(task.resources)
    assert str(res.cloud) == "Vast" and res.instance_type is None and res.use_spot == spot
    assert task.workdir == str(tmp_path)  # the code is uploaded
    log = runner.run_dir.log_path.read_text()
    if spot:
        assert "launch" not in cloud.names() and launched["name"] == "gpucost-vast-1"
        assert "epoch 1 of managed job gpucost-vast-1" in log
    else:
        assert launched["cluster_name"] == "gpucost-vast-1"
        assert "epoch 1 on gpucost-vast-1 job 1" in log
        assert cloud.names()[-1] == "down" and cloud.clusters == {}
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []
        assert {(r.provider, r.config.get("cloud")) for r in ledger.resources("vast-1")} == {
            ("skypilot", "vast")}


def test_a_launch_whose_answer_is_lost_is_found_by_its_cluster_name_and_downed(
        cloud: FakeCloud, tmp_path: Path) -> None:
    plan, path = planned(tmp_path, *PLANS["aws on-demand"])
    cloud.fail_get.add("launch")
    result = Runner(plan, path, provider=SkyPilotProvider("aws"), run_id="lost-1").launch()
    assert result.state == "failed"
    assert any("the API server went away" in m for m in result.messages)
    assert any("had made 1 resource(s): destroyed gpucost-lost-1" in m for m in result.messages)
    assert cloud.clusters == {}


def test_cleanup_finds_a_cluster_by_its_name_from_the_ledger(cloud: FakeCloud,
                                                              tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    cloud.clusters["gpucost-orphan-1"] = "UP"  # launched by a launcher that was then killed
    with Ledger() as ledger:
        ledger.create_run(run_id="orphan-1", name="x", plan_path="p", provider="skypilot",
                          run_dir=str(tmp_path), price_hr=1.0, nodes=1, budget_cap_usd=5.0)
        ledger.intent(run_id="orphan-1", provider="skypilot", token="gpucost-orphan-1",
                      kind="instance", config={"cloud": "aws", "managed": False})
        ledger.set_run_state("orphan-1", "failed", ended=True)  # its launcher is gone
    assert main(["cleanup"]) == 0
    assert "orphan-1: destroy skypilot cluster gpucost-orphan-1" in capsys.readouterr().out
    assert cloud.clusters == {}


def intent_of_a_dead_launcher(run_id: str, tmp_path: Path) -> None:
    """A launch killed between its create request and the answer: an intent, no cluster name
    recorded as made, its launcher gone."""
    with Ledger() as ledger:
        ledger.create_run(run_id=run_id, name="x", plan_path="p", provider="skypilot",
                          run_dir=str(tmp_path), price_hr=1.0, nodes=1, budget_cap_usd=5.0)
        ledger.intent(run_id=run_id, provider="skypilot", token=f"gpucost-{run_id}",
                      kind="instance", config={"cloud": "vast", "managed": False})
        ledger.set_run_state(run_id, "failed", ended=True)


def test_cleanup_forget_drops_a_create_skypilot_cannot_be_asked_about(
        cloud: FakeCloud, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    intent_of_a_dead_launcher("f-1", tmp_path)
    cloud.fail_get.add("status")  # the API server is gone: nobody can say what was made
    assert main(["cleanup"]) == 3
    assert "f-1: cannot destroy skypilot instance (id unknown" in capsys.readouterr().err
    assert main(["cleanup", "--forget", "f-1"]) == 0
    assert capsys.readouterr().out.strip() == (
        "f-1: forgot skypilot instance request gpucost-f-1 (never created)")
    cloud.fail_get.clear()
    assert main(["cleanup"]) == 0
    assert capsys.readouterr().out.strip() == "nothing to clean up"


def test_cleanup_forget_refuses_what_skypilot_still_has(
        cloud: FakeCloud, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    intent_of_a_dead_launcher("f-2", tmp_path)
    cloud.clusters["gpucost-f-2"] = "UP"  # the create went through; its answer was lost
    assert main(["cleanup", "--forget", "f-2"]) == 3
    err = capsys.readouterr().err
    assert "f-2: skypilot has cluster gpucost-f-2 carrying its token" in err
    assert "`gpucost cleanup` destroys it" in err
    assert main(["cleanup"]) == 0 and cloud.clusters == {}


@pytest.mark.parametrize("cloud", SKYPILOT_CLOUDS)
def test_plans_are_single_node_exactly_where_skypilot_has_no_multi_node(cloud: str) -> None:
    """gpucost plans groups of nodes only on clouds where SkyPilot can launch them."""
    from sky.clouds.cloud import CloudImplementationFeatures
    from sky.utils.registry import CLOUD_REGISTRY

    sky_cloud = CLOUD_REGISTRY.from_str(cloud)
    unsupported = sky_cloud._unsupported_features_for_resources(sky.Resources(cloud=sky_cloud))
    single = CloudImplementationFeatures.MULTI_NODE in unsupported
    assert (node_limit(cloud) == 1) == single


def test_the_sdk_boundary_names_only_real_functions() -> None:
    """Every sky.* call in SkyClient exists in the installed SDK (the stand-in above checks
    their arguments)."""
    tree = ast.parse(inspect.getsource(SkyClient))
    used = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)
            and ast.unparse(node.func).startswith("self.sky.")}
    assert used >= {"self.sky.launch", "self.sky.jobs.launch", "self.sky.get"}
    for name in used:
        obj: Any = sky
        for part in name.removeprefix("self.sky.").split("."):
            obj = getattr(obj, part)
        assert callable(obj), name


def test_a_spot_plan_that_falls_back_to_on_demand_launches_a_cluster(
        cloud: FakeCloud, tmp_path: Path) -> None:
    plan, path = planned(tmp_path, *PLANS["aws spot, 2 nodes"])
    provider = SkyPilotProvider("aws", managed=True)
    provider.bind(plan, path, "fb-1", tmp_path / "log")
    (res,) = provider.provision(ProvisionRequest(
        run_id="fb-1", token="gpucost-fb-1", instance_type=plan.offer.instance_type,
        gpu_count=8, nodes=plan.offer.nodes, market="on-demand"))
    task = dict(cloud.calls)["launch"]["task"]
    (resources,) = list(task.resources)
    assert not resources.use_spot and res.kind == "cluster"
    assert [r.kind for r in provider.find("gpucost-fb-1")] == ["cluster"]  # cleanup finds it
    provider.destroy(res)


# -- the watchdog: the limits outlive the launcher ----------------------------------------------
FAKE_SKY = Path(__file__).resolve().parent / "fixtures" / "fake_sky"


@pytest.mark.parametrize("limit", ["timeout", "budget"])
def test_the_watchdog_downs_the_cluster_at_the_limit_after_the_launcher_is_sigkilled(
        tmp_path: Path, limit: str) -> None:
    plan, path = planned(tmp_path, *PLANS["aws on-demand"])
    if limit == "timeout":  # 12 s from the launch
        text = re.sub(r"(?m)^timeout_hours = .*$", "timeout_hours = 0.003333",
                      re.sub(r"(?m)^hours = .*$", "hours = 0.0001", path.read_text()))
        limit_s, state, note = 12.0, "timed-out", "the hard timeout is reached"
    else:  # at the highest price a plan may hold, spend reaches the cap soon after the create
        text = re.sub(r"(?m)^price_hr = .*$", "price_hr = 10000.0", path.read_text())
        limit_s = plan.safety.budget_cap_usd * 3600 / (plan.offer.nodes * 10000.0)
        state, note = "budget-exceeded", "the budget cap is reached"
    path.write_text(text)
    cloud = tmp_path / "cloud.json"
    env = {**os.environ, "FAKE_SKY_STATE": str(cloud),
           "PYTHONPATH": os.pathsep.join([str(FAKE_SKY), os.environ.get("PYTHONPATH", "")])}
    launcher = subprocess.Popen([sys.executable, "-m", "gpucost", "launch", str(path),
                                 "--run-id", "wd-1"], env=env, stdout=subprocess.DEVNULL,
                                stderr=(tmp_path / "launcher.err").open("wb"))

    def cloud_state() -> dict[str, Any]:
        return json.loads(cloud.read_text()) if cloud.exists() else {}

    def wait_for(what: str, done: Callable[[], bool], limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while not done():
            assert time.monotonic() < deadline, \
                f"no {what} after {limit_s:g} s: {(tmp_path / 'launcher.err').read_text()}"
            time.sleep(0.2)

    try:
        wait_for("running job", lambda: cloud_state().get("jobs", {}).get("gpucost-wd-1")
                 == "RUNNING", 60)
        assert launcher.poll() is None, (tmp_path / "launcher.err").read_text()
        with Ledger() as ledger:
            wait_for("job row", lambda: any(r.kind == "job" and r.state == "running"
                                            for r in ledger.resources("wd-1")), 30)
        launcher.kill()  # as the OOM killer would: nothing of gpucost's runs its teardown
        launcher.wait()
        assert cloud_state()["clusters"] == {"gpucost-wd-1": "UP"}
        wait_for("down", lambda: cloud_state()["clusters"] == {}, limit_s + 30)
    finally:
        launcher.kill()
    calls = [(pid, name) for pid, name, _ in cloud_state()["calls"]]
    by_watchdog = [name for pid, name in calls if pid != launcher.pid]
    assert [n for n in by_watchdog if n in ("cancel", "down")] == ["cancel", "down"]
    assert cloud_state()["jobs"]["gpucost-wd-1"] == "CANCELLED"
    with Ledger() as ledger:
        wait_for("recorded end", lambda: ledger.run("wd-1").ended_at is not None, 60)
        run = ledger.run("wd-1")
        assert run.state == state and ledger.resources("wd-1", live_only=True) == []
    # the watchdog ends the run in the ledger first, then writes status.json: wait for it
    wait_for("final status", lambda: (RunDir(run.run_dir).read_status()
                                          or RunStatusFile()).final is True, 60)
    status = RunDir(run.run_dir).read_status()
    assert status is not None and (status.state, status.final) == (state, True)
    assert status.reason is not None and note in status.reason and "watchdog" in status.reason


def test_the_watchdog_cancels_a_managed_job_once_the_segments_spend_reaches_the_cap(
        cloud: FakeCloud, tmp_path: Path) -> None:
    from gpucost.executor.guard import EXIT_BUDGET
    from gpucost.executor.skypilot import MANAGED
    from gpucost.executor.watchdog import watch

    cloud.managed[7] = ("gpucost-m-1", ["RUNNING"])
    with Ledger() as ledger:
        ledger.create_run(run_id="m-1", name="x", plan_path="p", provider="skypilot",
                          run_dir=str(tmp_path), price_hr=2.0, nodes=2, budget_cap_usd=0.01)
        row = ledger.intent(run_id="m-1", provider="skypilot", token="gpucost-m-1",
                            kind="instance", config={"cloud": "aws", "managed": True})
        ledger.record(row, [Resource(provider="skypilot", resource_id="gpucost-m-1",
                                     token="gpucost-m-1", kind=MANAGED)], "running")
        ledger.open_segment("m-1", price_hr=2.0, nodes=2)  # 4 USD/h: the cap in 9 s
        assert ledger.run("m-1").budget_at(time.time()) is not None
    # This process is the run's launcher and is alive: a zero grace stands for a hung one.
    start = time.monotonic()
    assert watch("m-1", timeout_at=None, poll_s=0.05, launcher_grace_s=0.0) == EXIT_BUDGET
    assert 8.0 <= time.monotonic() - start < 60.0
    assert "jobs.cancel" in cloud.names() and cloud.managed[7][1] == ["CANCELLED"]
    with Ledger() as ledger:
        run = ledger.run("m-1")
        assert run.state == "budget-exceeded" and run.ended_at is not None
        assert 0.01 <= run.cost_usd() < 0.02
        assert ledger.resources("m-1", live_only=True) == []


def test_the_watchdog_holds_the_job_so_a_second_launch_is_refused(tmp_path: Path) -> None:
    """The one-run-per-job lock outlives a SIGKILLed launcher in its watchdog: a second launch
    of the plan refuses (it used to end the first run's cluster and launch another) until the
    first run is ended."""
    from gpucost.executor.runlock import LockBusy, RunLock

    plan, path = planned(tmp_path, *PLANS["aws on-demand"])
    cloud = tmp_path / "cloud.json"
    env = {**os.environ, "FAKE_SKY_STATE": str(cloud),
           "PYTHONPATH": os.pathsep.join([str(FAKE_SKY), os.environ.get("PYTHONPATH", "")])}

    def gpucost(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "gpucost", *args], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def clusters() -> dict[str, str]:
        return json.loads(cloud.read_text())["clusters"] if cloud.exists() else {}

    def wait_for(what: str, done: Callable[[], bool], limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while not done():
            assert time.monotonic() < deadline, f"no {what} after {limit_s:g} s"
            time.sleep(0.2)

    first = gpucost("launch", str(path), "--run-id", "lock-1")
    second: subprocess.Popen[str] | None = None
    try:
        with Ledger() as ledger:
            wait_for("running job", lambda: any(r.kind == "job" and r.state == "running"
                                                for r in ledger.resources("lock-1")), 60)
        first.kill()  # the launcher dies; its watchdog does not
        first.wait()
        second = gpucost("launch", str(path), "--run-id", "lock-2")
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2, err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"the job {plan.job.name!r} is in use by run lock-1, which runs on under its " \
               "watchdog" in err and "`gpucost down lock-1` ends it" in err
        assert clusters() == {"gpucost-lock-1": "UP"}  # the first run goes on, alone
        with Ledger() as ledger:
            assert [r.run_id for r in ledger.runs()] == ["lock-1"]
            assert ledger.run("lock-1").ended_at is None
        with pytest.raises(LockBusy):  # held by the watchdog alone now
            RunLock([f"job:{plan.job.name}"]).acquire("probe")
        down = gpucost("down", "lock-1")
        assert down.wait(timeout=60) == 0, down.communicate()
        assert clusters() == {}
        lock = RunLock([f"job:{plan.job.name}"])

        def free() -> bool:
            try:
                lock.acquire("probe")
            except LockBusy:
                return False
            return True

        wait_for("lock released by the watchdog", free, 60)  # it saw the end and let go
        lock.release()
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
