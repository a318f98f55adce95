"""The aws provider against moto's server on 127.0.0.1, through a fault-injecting HTTP proxy:
lifecycle (on-demand, spot, multi-node rendezvous tag, user data), the runner's hard limits, a
provider error mid-create, a network timeout, a launcher SIGKILLed between create and ledger
update, and after every test: no instance left alive in the emulated EC2."""

from __future__ import annotations

import base64
import http.client
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import tomli_w

pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

from gpucost.cli import main  # noqa: E402
from gpucost.errors import ProviderError  # noqa: E402
from gpucost.executor.aws import RDZV_TAG, TOKEN_TAG, AwsProvider  # noqa: E402
from gpucost.executor.base import ProvisionRequest  # noqa: E402
from gpucost.executor.checkpoints import CheckpointStore  # noqa: E402
from gpucost.executor.ledger import Ledger  # noqa: E402
from gpucost.executor.runner import Runner  # noqa: E402
from gpucost.plan import load_plan  # noqa: E402

REGION = "us-east-1"
_EC2_ERROR = ('<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
              "<Message>injected by the test proxy</Message></Error></Errors>"
              "<RequestID>test</RequestID></Response>")


class FaultProxy:
    """Forwards EC2 query calls to moto; ``rules[action]`` lists faults to apply, one per call:
    ``"500-after"`` (forwarded, then a 500: the create happened but the caller never hears),
    ``"503"`` or ``"error:<Code>"`` (not forwarded), ``"delay:<s>"`` (forwarded, answered late)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.rules: dict[str, list[str]] = {}
        self.calls: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                action = parse_qs(body.decode()).get("Action", [""])[0]
                proxy.calls.append(action)
                pending = proxy.rules.get(action)
                fault = pending.pop(0) if pending else ""
                if fault == "503":
                    return self._reply(503, _EC2_ERROR.format(code="Unavailable").encode())
                if fault.startswith("error:"):
                    return self._reply(400, _EC2_ERROR.format(code=fault[6:]).encode())
                conn = http.client.HTTPConnection(proxy.upstream.hostname or "127.0.0.1",
                                                  proxy.upstream.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn.request("POST", self.path, body, headers)
                answer = conn.getresponse()
                data = answer.read()
                conn.close()
                if fault == "500-after":
                    return self._reply(500, _EC2_ERROR.format(code="InternalError").encode())
                if fault.startswith("delay:"):
                    time.sleep(float(fault.split(":")[1]))
                self._reply(answer.status, data)

            def _reply(self, status: int, data: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/xml")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def ec2(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    client = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url)
    yield client
    # Whatever a test did, nothing it created may still be alive in the emulated EC2.
    alive = client.describe_instances(Filters=[{"Name": "instance-state-name", "Values": [
        "pending", "running", "stopping", "stopped"]}])
    leaked = [i["InstanceId"] for r in alive["Reservations"] for i in r["Instances"]]
    assert leaked == [], f"instances left alive: {leaked}"


@pytest.fixture
def proxy(moto_url: str) -> Iterator[FaultProxy]:
    fp = FaultProxy(moto_url)
    yield fp
    fp.close()


@pytest.fixture
def ami(ec2: Any) -> str:
    return str(ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"])


@pytest.fixture
def aws_env(proxy: FaultProxy, ami: str, monkeypatch: pytest.MonkeyPatch) -> FaultProxy:
    monkeypatch.setenv("GPUCOST_AWS_ENDPOINT_URL", proxy.url)
    monkeypatch.setenv("GPUCOST_AWS_AMI", ami)
    return proxy


def aws_plan(tmp_path: Path, *, nodes: int = 1, market: str = "on-demand",
             price_hr: float = 32.77, budget: float = 100.0, name: str = "aws-job",
             on_demand_price_hr: float | None = None, fallback: str = "on-demand") -> Path:
    plan: dict[str, Any] = {
        "schema": "gpucost-plan", "schema_version": 1,
        "job": {"name": name, "command": ["python", "train.py", "--epochs", "3"],
                "workdir": "/opt/job", "epochs": 3.0, "dataset_size": 1000},
        "offer": {"provider": "aws", "region": REGION, "instance_type": "p4d.24xlarge",
                  "gpu": "A100 SXM4 40GB", "gpu_count": 8, "nodes": nodes, "market": market,
                  "price_hr": price_hr},
        "workload": {"throughput": 9500.0},
        "safety": {"timeout_hours": 2.0, "budget_cap_usd": budget},
        "checkpoint": {"enabled": True, "every_epochs": 1.0, "target": "s3://ckpt-bucket/runs"},
        "disk": {"size_gb": 200.0},
        "spot": {"max_wait_capacity_hours": 0.0, "fallback": fallback},
        "estimate": {"hours": 0.5, "cost_usd": min(budget, 16.4)},
    }
    if on_demand_price_hr is not None:
        plan["offer"]["on_demand_price_hr"] = on_demand_price_hr
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(plan))
    return path


def instances(ec2: Any, token: str) -> list[dict[str, Any]]:
    answer = ec2.describe_instances(Filters=[{"Name": f"tag:{TOKEN_TAG}", "Values": [token]}])
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def test_bootstrap_verifies_the_gpu_runs_under_timeout_and_shuts_down(tmp_path: Path) -> None:
    plan = load_plan(aws_plan(tmp_path, nodes=2))
    script = AwsProvider(region=REGION, image_id="ami-x").bootstrap_script(plan, "r-1")
    assert "trap 'shutdown -h now' EXIT" in script
    assert 'a = torch.randn(2048, 2048, device="cuda")' in script
    assert "timeout --signal=TERM --kill-after=60 7200 python3 -m torch.distributed.run" in script
    assert "--nproc-per-node=8 --nnodes=2 --rdzv-backend=c10d" in script
    assert '--rdzv-endpoint="$GPUCOST_RDZV"' in script and RDZV_TAG in script
    assert "export GPUCOST_CHECKPOINT_TARGET=s3://ckpt-bucket/runs" in script
    assert script.rstrip().endswith("train.py --epochs 3")
    syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True,
                            check=False)
    assert syntax.returncode == 0, syntax.stderr


def test_lifecycle_spot_multi_node_tags_user_data_stop_destroy(ec2: Any, ami: str,
                                                               moto_url: str) -> None:
    provider = AwsProvider(region=REGION, endpoint_url=moto_url, image_id=ami, poll_s=0.05)
    spot = provider.provision(ProvisionRequest(
        run_id="r-spot", token="tok-spot", instance_type="p4d.24xlarge", gpu_count=8, nodes=2,
        market="spot", region=REGION, price_hr=10.0, disk_gb=199.5, user_data="#!/bin/bash\n"))
    assert len(spot) == 2
    created = instances(ec2, "tok-spot")
    assert {i["InstanceLifecycle"] for i in created} == {"spot"}
    tags = {t["Key"]: t["Value"] for t in created[0]["Tags"]}
    assert tags["gpucost:run"] == "r-spot"
    assert tags[RDZV_TAG] == f"{spot[0].meta['private_ip']}:29400"
    user_data = ec2.describe_instance_attribute(InstanceId=spot[0].resource_id,
                                                Attribute="userData")["UserData"]["Value"]
    assert base64.b64decode(user_data) == b"#!/bin/bash\n"
    provider.wait(spot, timeout_s=10)
    assert provider.status(spot[0]) == "running"
    assert {r.resource_id for r in provider.find("tok-spot")} == {r.resource_id for r in spot}
    provider.stop(spot[0])  # a one-time spot instance cannot stop: it is terminated
    for res in spot:
        provider.destroy(res)
        provider.destroy(res)  # idempotent
    assert provider.find("tok-spot") == []

    (od,) = provider.provision(ProvisionRequest(
        run_id="r-od", token="tok-od", instance_type="g5.xlarge", gpu_count=1))
    assert "InstanceLifecycle" not in instances(ec2, "tok-od")[0]
    provider.stop(od)
    assert provider.status(od) == "stopped"
    assert provider.find("tok-od") != []  # stopped machines are still resources
    provider.destroy(od)
    assert provider.status(od) == "exited"


@pytest.mark.slow
def test_runner_stops_at_the_budget_cap_and_terminates(ec2: Any, aws_env: FaultProxy,
                                                       tmp_path: Path) -> None:
    # 3600 USD/h is 1 USD/s: the 2 USD cap is reached within seconds.
    path = aws_plan(tmp_path, price_hr=3600.0, budget=2.0)
    runner = Runner(load_plan(path), path, poll_s=0.1)
    result = runner.launch()
    assert result.state == "budget-exceeded" and result.exit_code == 1, result.messages
    assert any("bootstrap runs the CUDA matmul" in m for m in result.messages)
    assert {i["State"]["Name"] for i in instances(ec2, runner.token)} == {"terminated"}
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []
        (row, job) = ledger.resources(runner.run_id)
        assert row.config == {"region": REGION, "endpoint_url": aws_env.url,
                              "image_id": row.config["image_id"]}
        assert job.kind == "job" and job.resource_id == row.resource_id


@pytest.mark.parametrize("fallback", ["on-demand", "none"])
def test_no_spot_capacity_falls_back_to_on_demand_when_the_plan_allows(
        ec2: Any, aws_env: FaultProxy, tmp_path: Path, fallback: str) -> None:
    aws_env.rules["RunInstances"] = ["error:InsufficientInstanceCapacity"]
    # Spot at 1800 USD/h, on-demand at 3600 USD/h (1 USD/s): the 2 USD cap ends the run.
    path = aws_plan(tmp_path, market="spot", price_hr=1800.0, on_demand_price_hr=3600.0,
                    budget=2.0, fallback=fallback)
    runner = Runner(load_plan(path), path, poll_s=0.1)
    result = runner.launch()
    made = instances(ec2, runner.token)
    if fallback == "none":
        assert result.state == "failed" and made == []
        assert any("InsufficientInstanceCapacity" in m for m in result.messages)
        return
    assert result.state == "budget-exceeded", result.messages
    assert any("falling back to on-demand at 3600 USD/h" in m for m in result.messages)
    (node,) = made
    assert "InstanceLifecycle" not in node and node["State"]["Name"] == "terminated"
    with Ledger() as ledger:
        assert ledger.run(runner.run_id).price_hr == 3600.0
        assert [r.price_hr for r in ledger.resources(runner.run_id) if r.kind == "instance"] == [
            1800.0, 3600.0]  # the failed spot request, then the on-demand node


def test_provider_error_mid_create_destroys_what_was_made(ec2: Any, aws_env: FaultProxy,
                                                          tmp_path: Path) -> None:
    # Every attempt reaches EC2 and creates instances, but the answer is lost (HTTP 500):
    # botocore retries, the runner gives up, then finds the orphans by tag and terminates them.
    aws_env.rules["RunInstances"] = ["500-after"] * 10
    path = aws_plan(tmp_path)
    runner = Runner(load_plan(path), path)
    result = runner.launch()
    assert result.state == "failed" and result.exit_code == 3
    made = instances(ec2, runner.token)
    assert aws_env.calls.count("RunInstances") == 4  # AwsProvider's default attempts
    assert len(made) == 4  # one per attempt: moto has no ClientToken idempotency
    assert {i["State"]["Name"] for i in made} == {"terminated"}
    assert any("had made 4 resource(s): destroyed" in m for m in result.messages)
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []


def test_network_timeout_on_create_then_cleanup_finds_the_instance(
        ec2: Any, aws_env: FaultProxy, ami: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The create reaches EC2 but its answer comes after the client's read timeout, and the
    # recovery search fails too (503): the intent row must stay live for `gpucost cleanup`.
    aws_env.rules["RunInstances"] = ["delay:1.5"]
    aws_env.rules["DescribeInstances"] = ["503"]
    provider = AwsProvider(region=REGION, endpoint_url=aws_env.url, image_id=ami,
                           read_timeout_s=0.5, max_attempts=1)
    path = aws_plan(tmp_path)
    runner = Runner(load_plan(path), path, provider=provider)
    result = runner.launch()
    assert result.state == "failed"
    assert any("Read timeout" in m for m in result.messages)
    time.sleep(1.2)  # let the delayed create finish on the server side
    assert [i["State"]["Name"] for i in instances(ec2, runner.token)] == ["running"]
    with Ledger() as ledger:
        (row,) = ledger.resources(live_only=True)
        assert row.resource_id is None and row.state == "requested"
    assert main(["ps"]) == 0
    assert "(unknown)" in capsys.readouterr().out
    assert main(["cleanup"]) == 0
    assert f"{runner.run_id}: destroy aws instance" in capsys.readouterr().out
    assert [i["State"]["Name"] for i in instances(ec2, runner.token)] == ["terminated"]
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []


_DYING_LAUNCHER = """
import os, signal, sys
from gpucost.executor.aws import AwsProvider
from gpucost.executor.runner import Runner
from gpucost.plan import load_plan

class DiesAfterCreate(AwsProvider):
    def provision(self, request):
        super().provision(request)
        os.kill(os.getpid(), signal.SIGKILL)  # after EC2 answered, before the ledger write

plan = load_plan(sys.argv[1])
provider = DiesAfterCreate(region="us-east-1", endpoint_url=sys.argv[2], image_id=sys.argv[3])
Runner(plan, sys.argv[1], provider=provider, run_id="sigkilled").launch()
"""


@pytest.mark.slow
def test_launcher_sigkilled_between_create_and_ledger_update(
        ec2: Any, aws_env: FaultProxy, ami: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = aws_plan(tmp_path, nodes=2)
    done = subprocess.run([sys.executable, "-c", _DYING_LAUNCHER, str(path), aws_env.url, ami],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -9, done.stderr
    made = instances(ec2, "gpucost-sigkilled")
    assert len(made) == 2 and {i["State"]["Name"] for i in made} == {"running"}
    with Ledger() as ledger:
        (row,) = ledger.resources(live_only=True)
        assert row.resource_id is None  # the ledger only knows the intent and its token
        assert not ledger.run("sigkilled").owner_alive
    assert main(["cleanup"]) == 0
    assert capsys.readouterr().out.count("sigkilled: destroy aws instance") == 2
    assert {i["State"]["Name"] for i in instances(ec2, "gpucost-sigkilled")} == {"terminated"}
    assert main(["ps"]) == 0
    assert capsys.readouterr().out.strip() == "no live resources"


def test_unreachable_endpoint_is_a_provider_error(tmp_path: Path) -> None:
    provider = AwsProvider(region=REGION, endpoint_url="http://127.0.0.1:9", image_id="ami-x",
                           connect_timeout_s=0.5, max_attempts=1)
    with pytest.raises(ProviderError, match="aws describe_instances"):
        provider.find("anything")


def test_checkpoints_ship_to_s3_and_resume_from_the_newest(moto_url: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    boto3.client("s3", region_name=REGION, endpoint_url=moto_url).create_bucket(Bucket="ckb")
    store = CheckpointStore("s3://ckb/team/runs", namespace="job")
    assert store.latest_epoch() is None and store.fetch_latest(tmp_path) is None
    src = tmp_path / "c.pt"
    for epoch in (1, 2, 11):
        src.write_bytes(f"weights {epoch}".encode())
        assert store.ship(src, epoch) == f"s3://ckb/team/runs/job/epoch-{epoch:06d}.pt"
    assert store.latest_epoch() == 11
    got = store.fetch_latest(tmp_path / "dl")
    assert got is not None and got.read_bytes() == b"weights 11"
    with pytest.raises(ProviderError, match="cannot upload checkpoint"):
        CheckpointStore("s3://no-such-bucket", namespace="job").ship(src, 1)
