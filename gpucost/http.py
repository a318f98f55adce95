"""The one HTTP client for provider APIs: rate limit, retries with backoff, no leaked secrets.

Price sources talk to their providers' APIs only through :class:`RetryingHttp`,
which wraps an injected ``httpx.Client`` (its ``base_url`` points at the provider, or at a
loopback replay server in tests). Each request waits for the source's rate limit, retries 429
and 5xx answers and transport errors with exponential backoff (a ``Retry-After`` header wins
over the computed delay), and turns every failure into a :class:`ProviderError` whose message
names the source, the method and the URL with credentials removed. Request headers are never
part of a message.

Limits against a slow or hostile server: each request (all its attempts, the whole answer) has a
deadline, an answer is read streamed and refused once it passes a size cap, and a ``cancel``
event (Ctrl-C, the refresh's own deadline) ends an attempt at once. Per-read timeouts alone are
not enough: a server that drips one byte every few seconds never trips them. So a watchdog
shuts the attempt's socket down when the deadline passes or ``cancel`` is set, which ends a read
blocked anywhere (connecting, the headers, the body) within a tenth of a second.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from gpucost.errors import Cancelled as Cancelled  # re-exported: its old home
from gpucost.errors import CredentialsError, ProviderError
from gpucost.errors import HttpStatusError as HttpStatusError  # re-exported: its old home
from gpucost.limits import HTTP_READ_TIMEOUT_S, HTTP_REQUEST_DEADLINE_S, MAX_ANSWER_BYTES

if TYPE_CHECKING:
    import httpx

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_WATCH_INTERVAL_S = 0.1  # how often a watchdog looks at the clock and the cancel event
# Query parameters and JSON keys whose values are secrets (matched case-insensitively).
_SECRET_NAMES = re.compile(r"(api[_-]?key|key|token|secret|password|signature|authorization|"
                           r"credential|access[_-]?key)", re.IGNORECASE)
_BEARER = re.compile(r"(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
# What a server that echoes the request sends back: an Authorization header (AWS SigV4 names the
# access key id in Credential=), a signature or session token, or a bare AWS access key id.
_AUTH_HEADER = re.compile(r"(authorization|x-amz-security-token|x-api-key|cookie)"
                          r"(['\"]?\s*[:=]\s*['\"]?)((?:Bearer|Basic|AWS4-HMAC-SHA256)\s+)?"
                          r"[^\r\n'\"]+", re.IGNORECASE)
_AWS_SIGV4 = re.compile(r"(Credential|Signature|X-Amz-Credential|X-Amz-Signature|"
                        r"X-Amz-Security-Token)=[^\s,&'\"]+", re.IGNORECASE)
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{12,}\b")
REDACTED = "REDACTED"


def redact_url(url: str) -> str:
    """``url`` with the values of secret-looking query parameters and any userinfo replaced."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode([(k, REDACTED if _SECRET_NAMES.search(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="$',")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with bearer tokens, authorization headers, AWS signatures and access key ids,
    and each known secret value replaced."""
    out = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    out = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{REDACTED}", out)
    out = _AWS_SIGV4.sub(lambda m: f"{m.group(1)}={REDACTED}", out)
    out = _AWS_KEY_ID.sub(REDACTED, out)
    for secret in secrets:
        if secret:
            out = out.replace(secret, REDACTED)
    return out


def default_sleep(seconds: float) -> None:
    """How clients wait between attempts unless given another way (tests replace this)."""
    time.sleep(seconds)


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


class _Watchdog:
    """Ends one attempt when its deadline passes or ``cancel`` is set, whatever it waits for.

    httpcore reports each socket it opens through the ``trace`` extension; once the watchdog
    fires it shuts that socket down (the plain one and, for HTTPS, the TLS one), so a read blocked
    in another frame returns at once and httpx raises a transport error, which :meth:`reason`
    then explains."""

    def __init__(self, deadline: float, cancel: threading.Event | None) -> None:
        self.deadline = deadline
        self.cancel = cancel
        self.fired: str | None = None  # "deadline" | "cancel"
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="http-watchdog", daemon=True)

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            sock = info["return_value"].get_extra_info("socket")
            with self._lock:
                if isinstance(sock, socket.socket):
                    self._sockets.append(sock)
                fired = self.fired
            if fired:
                self._shut_down()

    def _watch(self) -> None:
        while not self._done.wait(_WATCH_INTERVAL_S):
            if self.cancel is not None and self.cancel.is_set():
                self.fired = "cancel"
            elif time.monotonic() >= self.deadline:
                self.fired = "deadline"
            else:
                continue
            self._shut_down()
            return

    def _shut_down(self) -> None:
        with self._lock:
            for sock in self._sockets:
                # Already closed, or detached by the TLS wrapper: nothing to do. The base class's
                # shutdown, since an SSLSocket's own would drop its SSL object under the reader.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def check(self) -> None:
        """Raise the reason to stop, if there is one (between chunks of an answer)."""
        if self.fired is None:
            if self.cancel is not None and self.cancel.is_set():
                self.fired = "cancel"
            elif time.monotonic() >= self.deadline:
                self.fired = "deadline"
        if self.fired is not None:
            raise _Stop(self.fired)


class _Stop(Exception):
    """Internal: an attempt ended by its watchdog ("deadline" or "cancel")."""


class _TooLarge(Exception):
    """Internal: the answer passed the size cap."""


class RetryingHttp:
    """A retrying, rate-limited JSON client for one provider API (a price source or a provider).

    ``secrets`` are values (API keys) to scrub from any message; pass the key the source sends.
    ``timeout_s`` bounds each wait for the server (connect, each read); ``deadline_s`` bounds a
    whole request, retries and answer included; an answer longer than ``max_answer_bytes`` is
    refused after reading that much; setting ``cancel`` stops a request within 0.1 s.
    """

    def __init__(self, client: httpx.Client, *, source: str, min_interval_s: float = 0.0,
                 max_attempts: int = 5, backoff_s: float = 0.5, max_backoff_s: float = 30.0,
                 timeout_s: float = HTTP_READ_TIMEOUT_S, secrets: tuple[str, ...] = (),
                 sleep: Callable[[float], None] | None = None,
                 deadline_s: float = HTTP_REQUEST_DEADLINE_S,
                 max_answer_bytes: int = MAX_ANSWER_BYTES,
                 cancel: threading.Event | None = None) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.client = client
        self.source = source
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.max_answer_bytes = max_answer_bytes
        self.cancel = cancel
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
        deadline = time.monotonic() + self.deadline_s
        last = "no attempt made"
        for attempt in range(1, self.max_attempts + 1):
            self.limiter.wait()
            self.requests_sent += 1
            watchdog = _Watchdog(deadline, self.cancel)
            try:
                with watchdog:
                    response = self._attempt(method, url, watchdog, params=params,
                                             json_body=json_body, headers=headers)
            except _Stop as stop:
                raise self._stopped(str(stop), method, shown) from None
            except _TooLarge:
                raise self._fail(f"{method} {shown} answered more than "
                                 f"{self.max_answer_bytes / 2**20:g} MiB; stopped reading it",
                                 hint="no price API answers that much: the server or the URL "
                                      "is wrong") from None
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
                    last = f"HTTP {response.status_code}: {snippet(response.text, 60)}"
                    asked = retry_after_s(response.headers.get("Retry-After"))
                    delay = (min(asked, self.max_backoff_s) if asked is not None
                             else self._backoff(attempt))
                elif response.status_code >= 400 and not return_client_errors:
                    raise HttpStatusError(
                        redact_text(f"{self.source}: {method} {shown} answered HTTP "
                                    f"{response.status_code}: {snippet(response.text)}",
                                    self.secrets), status_code=response.status_code)
                else:
                    return response, shown
            if attempt < self.max_attempts:
                if time.monotonic() + delay >= deadline:  # the next try could not finish
                    raise self._stopped("deadline", method, shown, last=last)
                self.sleep(delay)
        raise self._fail(f"{method} {shown} failed after {self.max_attempts} attempts ({last})",
                         hint="the provider may be down or throttling; try again later")

    def _attempt(self, method: str, url: str, watchdog: _Watchdog, *,
                 params: Mapping[str, Any] | None, json_body: Any,
                 headers: Mapping[str, str] | None) -> httpx.Response:
        """One try: the answer read in chunks under the size cap and the watchdog's eye."""
        import httpx

        remaining = max(0.001, watchdog.deadline - time.monotonic())
        try:
            with self.client.stream(method, url, params=params, json=json_body, headers=headers,
                                    timeout=min(self.timeout_s, remaining),
                                    extensions={"trace": watchdog.trace}) as streamed:
                stated = streamed.headers.get("Content-Length", "")
                if stated.isdigit() and int(stated) > self.max_answer_bytes:
                    raise _TooLarge
                body = bytearray()  # grows in place (no copy per chunk)
                for chunk in streamed.iter_bytes():  # decoded: a gzip bomb counts as inflated
                    body += chunk
                    if len(body) > self.max_answer_bytes:
                        raise _TooLarge
                    watchdog.check()
        except httpx.TransportError:
            watchdog.check()  # a socket the watchdog shut down: say why, not "connection failed"
            raise
        # The body is decoded already: the copy must not announce an encoding or length again.
        kept = [(k, v) for k, v in streamed.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(streamed.status_code, headers=kept, content=bytes(body),
                              request=streamed.request)

    def _stopped(self, why: str, method: str, shown: str, last: str = "") -> ProviderError:
        if why == "cancel":
            return Cancelled(f"{self.source}: {method} {shown} was cancelled")
        tried = f" (last try: {last})" if last else ""
        return self._fail(f"{method} {shown} did not finish within its {self.deadline_s:g} s "
                          f"deadline{tried}",
                          hint="the server is stalled or far too slow; try again later")

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


def snippet(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (what an error quotes of an answer)."""
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[:limit] + "..."
