"""The one HTTP client for provider APIs: rate limit, retries with backoff, no leaked secrets.

Price sources and the Vast executor talk to their APIs only through :class:`RetryingHttp`,
which wraps an injected ``httpx.Client`` (its ``base_url`` points at the provider, or at a
loopback replay server in tests). Each request waits for the source's rate limit, retries 429
and 5xx answers and transport errors with exponential backoff (a ``Retry-After`` header wins
over the computed delay), and turns every failure into a :class:`ProviderError` whose message
names the source, the method and the URL with credentials removed. Request headers are never
part of a message.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from gpucost.errors import CredentialsError, ProviderError

if TYPE_CHECKING:
    import httpx

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Query parameters and JSON keys whose values are secrets (matched case-insensitively).
_SECRET_NAMES = re.compile(r"(api[_-]?key|key|token|secret|password|signature|authorization|"
                           r"credential|access[_-]?key)", re.IGNORECASE)
_BEARER = re.compile(r"(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
REDACTED = "REDACTED"


def redact_url(url: str) -> str:
    """``url`` with the values of secret-looking query parameters and any userinfo replaced."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode([(k, REDACTED if _SECRET_NAMES.search(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="$',")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with bearer tokens and each known secret value replaced."""
    out = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    for secret in secrets:
        if secret:
            out = out.replace(secret, REDACTED)
    return out


def default_sleep(seconds: float) -> None:
    """How clients wait between attempts unless given another way (tests replace this)."""
    time.sleep(seconds)


class HttpStatusError(ProviderError):
    """The API answered with an HTTP error status that retrying does not fix (404, 400, ...)."""

    def __init__(self, message: str, *, status_code: int, hint: str | None = None) -> None:
        self.status_code = status_code
        super().__init__(message, hint=hint)


class RateLimiter:
    """At most one request per ``min_interval_s`` across threads (a provider's stated limit)."""

    def __init__(self, min_interval_s: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next_s = -float("inf")

    def wait(self) -> None:
        with self._lock:
            now = self._clock()
            if now < self._next_s:
                self._sleep(self._next_s - now)
                now = self._next_s
            self._next_s = now + self.min_interval_s


def retry_after_s(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date); None if absent."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - (now or dt.datetime.now(dt.UTC))).total_seconds())


class RetryingHttp:
    """A retrying, rate-limited JSON client for one provider API (a price source or a provider).

    ``secrets`` are values (API keys) to scrub from any message; pass the key the source sends.
    """

    def __init__(self, client: httpx.Client, *, source: str, min_interval_s: float = 0.0,
                 max_attempts: int = 5, backoff_s: float = 0.5, max_backoff_s: float = 30.0,
                 timeout_s: float = 30.0, secrets: tuple[str, ...] = (),
                 sleep: Callable[[float], None] | None = None) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.client = client
        self.source = source
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s
        self.secrets = secrets
        self.sleep = sleep if sleep is not None else default_sleep
        self.limiter = RateLimiter(min_interval_s, sleep=self.sleep)
        self.requests_sent = 0

    def _fail(self, text: str, *, hint: str | None = None) -> ProviderError:
        return ProviderError(redact_text(f"{self.source}: {text}", self.secrets), hint=hint)

    def send(self, method: str, url: str, *, params: Mapping[str, Any] | None = None,
             json_body: Any = None, headers: Mapping[str, str] | None = None,
             return_client_errors: bool = False) -> tuple[httpx.Response, str]:
        """The first answer that is not retried, and the redacted URL; ProviderError after the
        last try. A 4xx other than 401/403/429 raises HttpStatusError, or is returned with
        ``return_client_errors`` (for APIs whose 4xx bodies say what happened)."""
        import httpx

        shown = redact_url(str(self.client.build_request(method, url, params=params).url))
        last = "no attempt made"
        for attempt in range(1, self.max_attempts + 1):
            self.limiter.wait()
            self.requests_sent += 1
            try:
                response = self.client.request(method, url, params=params, json=json_body,
                                               headers=headers, timeout=self.timeout_s)
            except httpx.TimeoutException:
                last = f"timed out after {self.timeout_s:g} s"
                delay = self._backoff(attempt)
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
                delay = self._backoff(attempt)
            else:
                if response.status_code in (401, 403):
                    raise CredentialsError(
                        redact_text(f"{self.source}: {method} {shown} was refused with HTTP "
                                    f"{response.status_code}", self.secrets),
                        hint="check the API key this source reads")
                if response.status_code in RETRY_STATUSES:
                    last = f"HTTP {response.status_code}: {_snippet(response.text, 60)}"
                    asked = retry_after_s(response.headers.get("Retry-After"))
                    delay = (min(asked, self.max_backoff_s) if asked is not None
                             else self._backoff(attempt))
                elif response.status_code >= 400 and not return_client_errors:
                    raise HttpStatusError(
                        redact_text(f"{self.source}: {method} {shown} answered HTTP "
                                    f"{response.status_code}: {_snippet(response.text)}",
                                    self.secrets), status_code=response.status_code)
                else:
                    return response, shown
            if attempt < self.max_attempts:
                self.sleep(delay)
        raise self._fail(f"{method} {shown} failed after {self.max_attempts} attempts ({last})",
                         hint="the provider may be down or throttling; try again later")

    def request_json(self, method: str, url: str, *, params: Mapping[str, Any] | None = None,
                     json_body: Any = None, headers: Mapping[str, str] | None = None) -> Any:
        """The decoded JSON body of a successful answer."""
        response, shown = self.send(method, url, params=params, json_body=json_body,
                                     headers=headers)
        try:
            return json.loads(response.content)
        except json.JSONDecodeError as exc:
            raise self._fail(f"{method} {shown} returned a body that is not JSON ({exc.msg} at "
                             f"char {exc.pos})", hint="the API changed or the answer was cut "
                             "off; retry later") from None
        except UnicodeDecodeError:
            raise self._fail(f"{method} {shown} returned a body that is not UTF-8 JSON") from None

    def get_json(self, url: str, *, params: Mapping[str, Any] | None = None,
                 headers: Mapping[str, str] | None = None) -> Any:
        return self.request_json("GET", url, params=params, headers=headers)

    def post_json(self, url: str, body: Any, *, headers: Mapping[str, str] | None = None) -> Any:
        return self.request_json("POST", url, json_body=body, headers=headers)

    def get_text(self, url: str) -> str:
        """A text body (CSV catalogs) under the same retry and rate-limit rules."""
        response, shown = self.send("GET", url)
        try:
            return response.content.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(f"GET {shown} returned a body that is not UTF-8 text") from None

    def _backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))


def _snippet(text: str, limit: int = 200) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[:limit] + "..."
