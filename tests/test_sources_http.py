"""The shared price-source HTTP client against a real loopback server: retries, limits, secrets."""

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import Iterator

import httpx
import pytest
from api_replay import ReplayServer, Reply, json_reply

from gpucost.errors import CredentialsError, ProviderError
from gpucost.http import (
    HttpStatusError,
    RateLimiter,
    RetryingHttp,
    redact_text,
    redact_url,
    retry_after_s,
)

SECRET = "sk-live-abcdef123456"


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as s:
        yield s


def client_for(server: ReplayServer, sleeps: list[float], **kwargs: object) -> RetryingHttp:
    raw = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {SECRET}"},
                       params={"api_key": SECRET})
    return RetryingHttp(raw, source="test", secrets=(SECRET,), sleep=sleeps.append,
                     **kwargs)  # type: ignore[arg-type]


def test_429_then_success_honours_retry_after(server: ReplayServer) -> None:
    server.add("GET", "/p", Reply(429, b"slow down", {"Retry-After": "7"}), json_reply({"ok": 1}))
    sleeps: list[float] = []
    assert client_for(server, sleeps).get_json("/p") == {"ok": 1}
    assert sleeps == [7.0]
    assert len(server.requests) == 2


def test_retry_after_is_capped_and_http_dates_are_read() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    later = email.utils.format_datetime(now + dt.timedelta(seconds=30), usegmt=True)
    assert retry_after_s(later, now=now) == pytest.approx(30.0)
    assert retry_after_s("2.5") == 2.5
    assert retry_after_s("soon") is None
    assert retry_after_s(None) is None


def test_5xx_storm_exhausts_retries_with_exponential_backoff(server: ReplayServer) -> None:
    server.add("GET", "/p", Reply(503, b"busy"))
    sleeps: list[float] = []
    client = client_for(server, sleeps, max_attempts=4, backoff_s=0.5)
    with pytest.raises(ProviderError, match=r"failed after 4 attempts \(HTTP 503: ") as err:
        client.get_json("/p")
    assert sleeps == [0.5, 1.0, 2.0]
    assert len(server.requests) == 4
    assert SECRET not in str(err.value)
    assert "api_key=REDACTED" in str(err.value)


def test_connection_refused_is_a_provider_error_after_retries() -> None:
    sleeps: list[float] = []
    with ReplayServer() as s:
        url = s.url  # a port that is closed once the server stops
    raw = httpx.Client(base_url=url)
    client = RetryingHttp(raw, source="test", max_attempts=2, sleep=sleeps.append)
    with pytest.raises(ProviderError, match="connection failed"):
        client.get_json("/p")
    assert sleeps == [0.5]


def test_client_errors_are_not_retried_and_carry_the_status(server: ReplayServer) -> None:
    server.add("GET", "/missing", json_reply({"error": f"bad key {SECRET}"}, 404))
    sleeps: list[float] = []
    with pytest.raises(HttpStatusError) as err:
        client_for(server, sleeps).get_json("/missing")
    assert err.value.status_code == 404
    assert sleeps == []
    assert SECRET not in str(err.value)  # even when the API echoes the key back


def test_refused_credentials_raise_credentials_error(server: ReplayServer) -> None:
    server.add("GET", "/p", Reply(401, b"unauthorized"))
    with pytest.raises(CredentialsError, match="HTTP 401"):
        client_for(server, []).get_json("/p")


def test_a_body_that_is_not_json_is_a_provider_error(server: ReplayServer) -> None:
    server.add("GET", "/p", Reply(200, b'{"Items": [1, 2'))
    with pytest.raises(ProviderError, match="not JSON"):
        client_for(server, []).get_json("/p")


def test_timeouts_are_retried_then_reported(server: ReplayServer) -> None:
    import time

    def slow(_: object) -> bool:
        time.sleep(0.3)
        return True

    server.add("GET", "/slow", json_reply({}), when=slow)
    sleeps: list[float] = []
    client = client_for(server, sleeps, max_attempts=2, timeout_s=0.05)
    with pytest.raises(ProviderError, match=r"timed out after 0\.05 s"):
        client.get_json("/slow")
    assert len(sleeps) == 1


def test_rate_limiter_spaces_requests() -> None:
    clock = [100.0]
    waited: list[float] = []

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        clock[0] += seconds

    limiter = RateLimiter(6.0, clock=lambda: clock[0], sleep=sleep)
    limiter.wait()
    clock[0] += 1.0
    limiter.wait()
    limiter.wait()
    assert waited == [pytest.approx(5.0), pytest.approx(6.0)]


def test_redaction() -> None:
    url = "https://x.test/v1/skus?key=AIzaSECRET&pageToken=abc&currencyCode=USD"
    assert "AIzaSECRET" not in redact_url(url)
    assert "currencyCode=USD" in redact_url(url)
    assert redact_url("https://user:pw@x.test/p") == "https://x.test/p"
    assert redact_text("Authorization: Bearer abc.def-ghi") == "Authorization: Bearer REDACTED"
    assert redact_text("key is s3cr3t!", ("s3cr3t",)) == "key is REDACTED!"
