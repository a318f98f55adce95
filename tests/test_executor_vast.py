"""The vast provider against a real HTTP server on 127.0.0.1 that replays recorded Vast.ai
responses (tests/fixtures/vast, and the offers of tests/fixtures/api/vast_bundles.json for the
search) with its own instance bookkeeping, and injects 429, 5xx, late answers and half-done
creates. After every test no instance may be left alive in the emulator."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from gpucost.cli import main
from gpucost.errors import CapacityError, CredentialsError, ProviderError
from gpucost.executor.base import ProvisionRequest
from gpucost.executor.ledger import Ledger
from gpucost.executor.runner import Runner
from gpucost.executor.vast import VastProvider
from gpucost.planfile import load_plan

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "vast"
BUNDLES = FIXTURES.parent / "api" / "vast_bundles.json"
KEY = "test-key"
_OPS = {"eq": lambda a, b: a == b, "gte": lambda a, b: a >= b, "lte": lambda a, b: a <= b,
        "in": lambda a, b: a in b}


def matches(offer: dict[str, Any], query: dict[str, Any]) -> bool:
    """Vast's search filters, as the server applies them: {field: {op: value}}; geolocation
    compares the two-letter country code, verified reads the offer's verification."""
    for key, ops in query.items():
        if not isinstance(ops, dict):
            continue  # order, limit, type, allocated_storage
        value = offer.get(key)
        if key == "geolocation":
            value = str(value).rpartition(",")[2].strip()
        elif key == "verified":
            value = offer.get("verification") == "verified"
        if value is None or not all(_OPS[op](value, want) for op, want in ops.items()):
            return False
    return True


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


class VastEmulator:
    """Vast's instance API on loopback: ``offers`` are rentable once; ``faults[kind]`` lists
    injected answers per call kind (create, list, show, stop, destroy): "429", "500", "502",
    "503", "delay:<s>" (answered late), "500-after" (done, then answered 500)."""

    def __init__(self, offers: set[int], market: list[dict[str, Any]] | None = None) -> None:
        self.offers = set(offers)
        self.market = market or []  # what a search can find (asks not in offers are taken)
        self.searches: list[dict[str, Any]] = []
        self.instances: dict[int, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []  # every create's payload, for inspection
        self.faults: dict[str, list[str]] = {}
        self.calls: list[str] = []
        self._next = fixture("create_instance.json")["new_contract"]
        self._lock = threading.Lock()
        emu = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                emu.handle(self, "GET")

            def do_PUT(self) -> None:
                emu.handle(self, "PUT")

            def do_POST(self) -> None:
                emu.handle(self, "POST")

            def do_DELETE(self) -> None:
                emu.handle(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def alive(self) -> list[int]:
        return sorted(self.instances)

    def handle(self, req: BaseHTTPRequestHandler, method: str) -> None:
        body = req.rfile.read(int(req.headers.get("Content-Length") or 0))
        payload = json.loads(body) if body else {}
        path = req.path.split("?")[0]
        kind = {("PUT", "asks"): "create", ("GET", "list"): "list", ("GET", "one"): "show",
                ("PUT", "one"): "stop", ("DELETE", "one"): "destroy",
                ("POST", "bundles"): "search"}.get(
            (method, "asks" if path.startswith("/api/v0/asks/") else
             "bundles" if path == "/api/v0/bundles/" else
             "list" if path == "/api/v0/instances/" else "one"), "unknown")
        self.calls.append(kind)
        if req.headers.get("Authorization") != f"Bearer {KEY}":
            return self.reply(req, 401, {"success": False, "error": "not_authorized"})
        with self._lock:
            pending = self.faults.get(kind)
            fault = pending.pop(0) if pending else ""
        if fault.startswith("http:"):  # an error status with a JSON body
            return self.reply(req, int(fault[5:]), {"success": False, "error": "bad_request"})
        if fault in ("429", "500", "502", "503"):
            text = (FIXTURES / "rate_limited.txt").read_bytes() if fault == "429" else b"oops"
            return self.reply_raw(req, int(fault), text, "text/plain")
        with self._lock:
            status, answer = self.apply(kind, path, payload)
        if fault == "500-after":
            return self.reply_raw(req, 500, b"Internal Server Error", "text/plain")
        if fault.startswith("delay:"):
            time.sleep(float(fault.split(":")[1]))
        self.reply(req, status, answer)

    def apply(self, kind: str, path: str, payload: dict[str, Any]) -> tuple[int, Any]:
        ident = int(m.group(1)) if (m := re.search(r"/(\d+)/$", path)) else -1
        if kind == "search":
            self.searches.append(payload)
            return 200, {"offers": [o for o in self.market if matches(o, payload)]}
        if kind == "create":
            if ident not in self.offers:
                taken = fixture("create_instance_no_such_ask.json")
                taken["msg"] = taken["msg"].replace(str(taken["ask_id"]), str(ident))
                taken["ask_id"] = ident
                return 404, taken
            self.offers.discard(ident)
            self.created.append({**payload, "ask": ident})
            contract = self._next
            self._next += 1
            inst = copy.deepcopy(fixture("show_instance.json")["instances"])
            inst.update(id=contract, label=payload.get("label"), ask_contract_id=ident,
                        actual_status="loading", onstart=payload.get("onstart"),
                        image_uuid=payload.get("image"))
            self.instances[contract] = inst
            return 200, {**fixture("create_instance.json"), "new_contract": contract}
        if kind == "list":
            return 200, {"instances": list(self.instances.values())}
        inst = self.instances.get(ident)
        if inst is None:
            return 404, {"success": False, "error": "no_such_instance"}
        if kind == "show":
            shown = {"instances": copy.deepcopy(inst)}
            if inst["actual_status"] == "loading":  # boots by the next look
                inst["actual_status"] = "running"
            return 200, shown
        if kind == "stop":
            inst.update(intended_status=payload["state"], actual_status=payload["state"])
            return 200, fixture("stop_instance.json")
        if kind == "destroy":
            del self.instances[ident]
            return 200, fixture("destroy_instance.json")
        return 404, {"success": False, "error": "unknown endpoint"}

    def reply(self, req: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        self.reply_raw(req, status, json.dumps(body).encode(), "application/json")

    @staticmethod
    def reply_raw(req: BaseHTTPRequestHandler, status: int, data: bytes, ctype: str) -> None:
        try:
            req.send_response(status)
            req.send_header("Content-Type", ctype)
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def vast(monkeypatch: pytest.MonkeyPatch) -> Iterator[VastEmulator]:
    emu = VastEmulator({24768912, 24768913, 24768914})
    monkeypatch.setenv("VAST_API_KEY", KEY)
    monkeypatch.setenv("GPUCOST_VAST_URL", emu.url)
    yield emu
    emu.close()
    assert emu.alive() == [], f"instances left alive: {emu.alive()}"


def fast(url: str, **kw: Any) -> VastProvider:
    return VastProvider(url, backoff_s=0.01, poll_s=0.01, **kw)


def request(offer: str = "24768912", token: str = "tok") -> ProvisionRequest:
    return ProvisionRequest(run_id="r", token=token, instance_type=offer, gpu_count=1,
                            price_hr=0.39, disk_gb=40.0, user_data="#!/bin/bash\necho hi\n")


def vast_plan(tmp_path: Path, *, offer: str = "24768912", price_hr: float = 0.39,
              budget: float = 10.0, policy: str = "destroy") -> Path:
    plan: dict[str, Any] = {
        "schema": "gpucost-plan", "schema_version": 1,
        "job": {"name": "vast-job", "command": ["python", "train.py"], "workdir": "/workspace",
                "samples": 1e6},
        "offer": {"provider": "vast", "instance_type": offer, "gpu": "RTX 4090", "gpu_count": 1,
                  "price_hr": price_hr},
        "workload": {"throughput": 1000.0},
        "safety": {"timeout_hours": 1.0, "budget_cap_usd": budget},
        "idle": {"policy": policy},
        "estimate": {"hours": 0.3, "cost_usd": min(budget, 0.12)},
    }
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(plan))
    return path


def test_lifecycle_create_wait_stop_destroy(vast: VastEmulator) -> None:
    provider = fast(vast.url)
    (res,) = provider.provision(request())
    assert res.resource_id == "1234568"
    inst = vast.instances[1234568]
    assert inst["label"] == "tok" and inst["onstart"] == "#!/bin/bash\necho hi\n"
    assert provider.status(res) == "pending"
    provider.wait([res], timeout_s=5)
    assert provider.status(res) == "running"
    assert [r.resource_id for r in provider.find("tok")] == ["1234568"]
    assert provider.find("other") == []
    provider.stop(res)
    assert provider.status(res) == "stopped"
    provider.destroy(res)
    provider.destroy(res)  # already gone: not an error
    assert provider.status(res) == "destroyed"


def test_offer_already_taken_is_a_capacity_error(vast: VastEmulator) -> None:
    with pytest.raises(CapacityError, match=r"offer 999 is already taken: .*no_such_ask"):
        fast(vast.url).provision(request(offer="999"))
    assert vast.alive() == []


def test_429_and_5xx_are_retried_with_backoff(vast: VastEmulator) -> None:
    vast.faults["create"] = ["429", "503", "502"]
    vast.faults["destroy"] = ["500"]
    provider = fast(vast.url)
    (res,) = provider.provision(request())
    assert vast.calls.count("create") == 4
    provider.destroy(res)
    assert vast.calls.count("destroy") == 2


def test_persistent_rate_limit_gives_up_with_a_provider_error(vast: VastEmulator) -> None:
    vast.faults["list"] = ["429"] * 10
    with pytest.raises(ProviderError, match=r"after 3 attempts \(HTTP 429: API requests too"):
        fast(vast.url, max_attempts=3).find("tok")


def test_missing_or_rejected_key_is_a_credentials_error(
        vast: VastEmulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VAST_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(CredentialsError, match=r"no Vast\.ai API key"):
        fast(vast.url).find("tok")
    with pytest.raises(CredentialsError, match="HTTP 401"):
        fast(vast.url, api_key="wrong").find("tok")


def test_a_create_whose_answer_is_lost_is_found_by_label_not_sent_again(
        vast: VastEmulator) -> None:
    # The create happens but its answer is a 500: the instance list, not a second create
    # (which would rent a second machine, or fail on the ask we took ourselves), has the answer.
    vast.faults["create"] = ["500-after"]
    provider = fast(vast.url)
    (res,) = provider.provision(request())
    assert res.resource_id == "1234568"
    assert vast.calls.count("create") == 1 and vast.calls.count("list") == 1
    provider.destroy(res)


def test_a_failed_create_with_nothing_made_is_sent_again(vast: VastEmulator) -> None:
    vast.faults["create"] = ["502"]  # refused before anything was made
    (res,) = fast(vast.url).provision(request())
    assert vast.calls.count("create") == 2 and len(vast.created) == 1
    fast(vast.url).destroy(res)


def test_find_with_an_error_status_is_an_error_not_no_instances(vast: VastEmulator) -> None:
    vast.faults["list"] = ["http:400"]
    with pytest.raises(ProviderError, match="list instances: HTTP 400"):
        fast(vast.url).find("tok")


def test_an_unanswered_search_leaves_the_intent_for_cleanup(vast: VastEmulator, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    # The create's answer is lost and Vast cannot say (HTTP 400) whether it made anything: the
    # intent row must stay live, so that cleanup looks again (it used to read "none" and drop it).
    vast.faults["create"] = ["500-after"]
    vast.faults["list"] = ["http:400", "http:400"]
    path = vast_plan(tmp_path)
    result = Runner(load_plan(path), path, provider=fast(vast.url)).launch()
    assert result.state == "failed"
    assert any("could not check for half-created" in m for m in result.messages)
    with Ledger() as ledger:
        (row,) = ledger.resources(live_only=True)
        assert row.resource_id is None and row.state == "requested"
    assert main(["cleanup"]) == 0
    assert "destroy vast instance 1234568" in capsys.readouterr().out
    assert vast.alive() == []


def test_network_timeout_leaves_a_row_cleanup_resolves(
        vast: VastEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vast.faults["create"] = ["delay:1.0"]
    vast.faults["list"] = ["503", "503"]  # the create's own look, then the launcher's
    path = vast_plan(tmp_path)
    provider = fast(vast.url, timeout_s=0.3, max_attempts=1)
    result = Runner(load_plan(path), path, provider=provider).launch()
    assert result.state == "failed"
    # the create timed out and Vast could not say whether it made anything
    assert any("vast list instances" in m and "HTTP 503" in m for m in result.messages)
    time.sleep(0.9)
    assert vast.alive() == [1234568]  # created after all, unknown to the ledger
    with Ledger() as ledger:
        (row,) = ledger.resources(live_only=True)
        assert row.resource_id is None and row.config == {"base_url": vast.url}
    assert main(["cleanup"]) == 0
    assert "destroy vast instance 1234568" in capsys.readouterr().out
    assert vast.alive() == []


_DYING_LAUNCHER = """
import os, signal, sys
from gpucost.executor.vast import VastProvider
from gpucost.executor.runner import Runner
from gpucost.planfile import load_plan

class DiesAfterCreate(VastProvider):
    def provision(self, request):
        super().provision(request)
        os.kill(os.getpid(), signal.SIGKILL)  # after Vast answered, before the ledger write

plan = load_plan(sys.argv[1])
Runner(plan, sys.argv[1], provider=DiesAfterCreate(sys.argv[2]), run_id="vkilled").launch()
"""


@pytest.mark.slow
def test_launcher_sigkilled_after_create_then_cleanup(
        vast: VastEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = vast_plan(tmp_path)
    done = subprocess.run([sys.executable, "-c", _DYING_LAUNCHER, str(path), vast.url],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -9, done.stderr
    assert vast.alive() == [1234568]
    assert main(["ps"]) == 0
    assert "vkilled" in capsys.readouterr().out
    assert main(["cleanup"]) == 0
    assert "vkilled: destroy vast instance 1234568" in capsys.readouterr().out
    assert main(["ps"]) == 0
    assert capsys.readouterr().out.strip() == "no live resources"


def test_runner_on_vast_stops_at_the_budget_cap(vast: VastEmulator, tmp_path: Path) -> None:
    path = vast_plan(tmp_path, price_hr=3600.0, budget=1.0)
    runner = Runner(load_plan(path), path, provider=fast(vast.url), poll_s=0.05)
    result = runner.launch()
    assert result.state == "budget-exceeded" and result.exit_code == 1
    (created,) = vast.created
    assert created["label"] == runner.token
    onstart = created["onstart"]
    assert "timeout --signal=TERM --kill-after=60 3600 python3 -m torch.distributed.run " \
        "--nproc-per-node=1 --standalone train.py" in onstart
    assert "$CONTAINER_API_KEY" in onstart  # the container stops its own instance at the end
    assert vast.alive() == []
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []


def test_multi_node_is_refused_in_words(vast: VastEmulator) -> None:
    from gpucost.errors import InputError

    with pytest.raises(InputError, match="single machines"):
        fast(vast.url).provision(ProvisionRequest(run_id="r", token="t", instance_type="1",
                                                  gpu_count=8, nodes=2))


@pytest.mark.parametrize("policy", ["destroy", "stop"])
def test_a_job_that_stops_its_instance_succeeds_and_the_idle_policy_applies(
        vast: VastEmulator, tmp_path: Path, policy: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    import httpx

    def container_stops_itself() -> None:
        # What the onstart script's exit trap does with the container's own key.
        while 1234568 not in vast.instances:
            time.sleep(0.01)
        time.sleep(0.3)
        httpx.put(f"{vast.url}/api/v0/instances/1234568/", json={"state": "stopped"},
                  headers={"Authorization": f"Bearer {KEY}"})

    path = vast_plan(tmp_path, policy=policy)
    threading.Thread(target=container_stops_itself, daemon=True).start()
    runner = Runner(load_plan(path), path, provider=fast(vast.url), poll_s=0.05)
    result = runner.launch()
    assert result.state == "succeeded" and result.exit_code == 0, result.messages
    if policy == "destroy":
        assert vast.alive() == []
        return
    assert vast.alive() == [1234568]  # kept, stopped, for a return within the break-even
    assert vast.instances[1234568]["intended_status"] == "stopped"
    assert main(["ps"]) == 0
    assert "stopped" in capsys.readouterr().out
    assert main(["cleanup"]) == 0  # leaves machines an idle policy kept
    assert vast.alive() == [1234568]
    assert main(["down", runner.run_id]) == 0
    assert "destroy vast instance 1234568" in capsys.readouterr().out
    assert vast.alive() == []


def test_a_vast_plan_written_by_gpucost_plan_launches_on_a_machine_it_searches_for(
        vast: VastEmulator, tmp_path: Path) -> None:
    """A plan made from the embedded catalog names a bucket ("4x-RTX_4090-32-65536"), not a
    machine: launch runs the plan's [marketplace] search and rents the cheapest free match."""
    path = tmp_path / "plan.toml"
    assert main(["plan", "--provider", "vast", "--gpu", "RTX 4090", "-o", str(path)]) == 0
    plan = load_plan(path)
    search, offer = plan.marketplace, plan.offer
    assert search is not None and not offer.instance_type.isdigit()
    assert plan.disk.size_gb >= 50  # the OS and image, not 1 GB
    n, country = search.gpu_count, search.region
    template = fixture_offer(24768912)

    def ask(ident: int, **changes: Any) -> dict[str, Any]:
        return {**template, "id": ident, "num_gpus": n, "geolocation": f"Berlin, {country}",
                "dph_base": offer.price_hr, **changes}

    vast.market = [
        ask(101, dph_base=offer.price_hr * 0.8),  # cheapest, but rented since the search
        ask(102),  # the one to get
        ask(103, dph_base=offer.price_hr * 0.5, gpu_name="RTX 3090", gpu_ram=24576),
        ask(104, dph_base=search.max_price_hr * 2),  # over the plan's price limit
        ask(105, dph_base=offer.price_hr * 0.5, num_gpus=n * 2),  # another machine size
        ask(106, dph_base=offer.price_hr * 0.5, geolocation="Texas, US"),  # elsewhere
    ]
    vast.offers = {102, 103, 104, 105, 106}

    def container_stops_itself() -> None:
        while 1234568 not in vast.instances:
            time.sleep(0.01)
        time.sleep(0.3)
        import httpx

        httpx.put(f"{vast.url}/api/v0/instances/1234568/", json={"state": "stopped"},
                  headers={"Authorization": f"Bearer {KEY}"})

    threading.Thread(target=container_stops_itself, daemon=True).start()
    result = Runner(plan, path, provider=fast(vast.url), poll_s=0.05).launch()
    assert result.state == "succeeded", result.messages
    (query,) = vast.searches
    assert query["num_gpus"] == {"eq": n} and query["geolocation"] == {"eq": country}
    assert query["dph_base"] == {"lte": search.max_price_hr}
    assert [c["ask"] for c in vast.created] == [102]
    assert vast.created[0]["disk"] == plan.disk.size_gb
    assert any(f"(ask 102: {n} x RTX 4090, Berlin, {country}" in m for m in result.messages)
    with Ledger() as ledger:
        (row,) = [r for r in ledger.resources(result.run_id) if r.kind == "instance"]
        assert row.resource_id == "1234568" and row.meta["offer"] == "102"
        assert row.price_hr == pytest.approx(offer.price_hr)
    assert vast.alive() == []


def test_no_machine_like_the_planned_one_is_a_capacity_error(vast: VastEmulator,
                                                             tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    assert main(["plan", "--provider", "vast", "--gpu", "RTX 4090", "-o", str(path)]) == 0
    vast.market = [{**fixture_offer(24768912), "id": 101}]  # 1 GPU in Sweden: no match
    result = Runner(load_plan(path), path, provider=fast(vast.url)).launch()
    assert result.state == "failed"
    assert any("no vast offer matches the plan's search" in m for m in result.messages)
    assert vast.created == []


def fixture_offer(ident: int) -> dict[str, Any]:
    offers = json.loads(BUNDLES.read_text())["offers"]
    return dict(next(o for o in offers if o["id"] == ident))


def test_waiting_for_spot_capacity_is_not_spend(vast: VastEmulator, tmp_path: Path) -> None:
    """Spend starts when a create is accepted: the ~1 s spent retrying a taken ask costs
    nothing (it used to be billed at the plan's price from the moment of launch)."""
    path = vast_plan(tmp_path, price_hr=1800.0, budget=2.0)  # 0.5 USD/s once billed
    doc = tomllib.loads(path.read_text())
    doc["offer"].update(market="spot", on_demand_price_hr=3600.0)
    doc["spot"] = {"max_wait_capacity_hours": 0.01, "fallback": "on-demand"}
    path.write_text(tomli_w.dumps(doc))
    vast.offers = set()  # rented by someone else, for now

    def capacity_returns() -> None:
        time.sleep(1.0)
        vast.offers.add(24768912)

    threading.Thread(target=capacity_returns, daemon=True).start()
    runner = Runner(load_plan(path), path, provider=fast(vast.url), poll_s=0.05)
    runner.capacity_retry_s = 0.2
    result = runner.launch()
    assert result.state == "budget-exceeded", result.messages
    assert any("no spot capacity" in m for m in result.messages)
    status = runner.run_dir.read_status()
    assert status is not None
    waited = status["elapsed_s"] - status["cost_usd"] / 0.5
    assert 0.9 <= waited <= 3.0  # the capacity wait, left out of the spend
    assert vast.created[0]["price"] == 1800.0  # still the spot bid: capacity came back in time


def test_a_create_without_credentials_leaves_an_entry_cleanup_forget_clears(
        vast: VastEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("VAST_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    path = vast_plan(tmp_path)
    result = Runner(load_plan(path), path, provider=fast(vast.url), run_id="nokey-1").launch()
    assert result.state == "failed"
    with Ledger() as ledger:
        (row,) = ledger.resources(live_only=True)  # the create's intent: Vast cannot be asked
    assert main(["cleanup"]) == 3  # still cannot be asked
    capsys.readouterr()
    assert main(["cleanup", "--forget", "nokey-1"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"nokey-1: forgot vast instance request {row.token} (never created)")
    assert main(["cleanup"]) == 0
    assert capsys.readouterr().out.strip() == "nothing to clean up"


def test_forget_refuses_what_the_provider_can_still_find(
        vast: VastEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = vast_plan(tmp_path)
    done = subprocess.run([sys.executable, "-c", _DYING_LAUNCHER, str(path), vast.url],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -9, done.stderr
    # killed before the id reached the ledger: Vast still answers, and has it
    assert main(["cleanup", "--forget", "vkilled"]) == 3
    err = capsys.readouterr().err
    assert "vkilled: vast has instance 1234568 carrying its token" in err
    assert "`gpucost cleanup` destroys it" in err
    assert vast.alive() == [1234568]
    assert main(["cleanup"]) == 0
    assert vast.alive() == []
