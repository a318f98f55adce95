"""Hostile input and output (issue 22): bounded memory for every answer and file a command reads,
no injection through a value written into a task or printed to a terminal, and no secret kept
in a profile or quoted in an error."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_server import HostileServer

from gpucost.errors import ProviderError
from gpucost.pricing.sources import aws
from gpucost.pricing.sources.aws import SOURCE as AWS

KEY_ID = "AKIAHOSTILETEST12345"


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
    with (HostileServer("huge", size=12 << 20, content_length=True) as server,
          AWS.open_client(server.url, "") as clients, pytest.raises(ProviderError) as exc):
        AWS.fetch(clients)
    message = str(exc.value)
    assert "more than 1 MiB" in message
    assert len(message) < 400 and "offers" not in message
    assert server.sent < 8 << 20  # the client hung up long before the end


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
