"""The one interface every live price source implements, and the helpers sources share.

A source knows its provider's API and units and nothing else: it takes an injected client (a
:class:`~gpucost.http.RetryingHttp` over ``httpx.Client`` for REST/GraphQL sources, boto3
clients for AWS), reads prices and returns one :class:`Snapshot`. Where the client comes from,
concurrency, progress and writing files belong to :mod:`gpucost.pricing.refresh`.

The registry that lists the sources is :mod:`gpucost.pricing.sources.registry`: it imports this
module and the sources, and this module imports none of them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import math
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from gpucost.catalog import get_gpu, try_resolve_gpu_name
from gpucost.errors import ProviderError, SnapshotError
from gpucost.http import RetryingHttp
from gpucost.limits import HTTP_READ_TIMEOUT_S, HTTP_REQUEST_DEADLINE_S, MAX_ANSWER_BYTES
from gpucost.pricing.snapshot import Offers, Snapshot
from gpucost.providers import Provider

if TYPE_CHECKING:
    from gpucost.http import RetryingHttp

ClientT = TypeVar("ClientT")

# Exceptions that mean "the payload did not have the shape we expect".
_SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError,
                 decimal.InvalidOperation, json.JSONDecodeError)


class PriceSource(ABC, Generic[ClientT]):
    """A live price source. Subclasses set the class attributes and implement the three methods.

    ``credentials_hint`` says how a user provides credentials ("" when the API is public).
    ``min_interval_s`` is the provider's rate limit as the least time between two requests.
    A provider's own source names its declaration, ``class S(HttpPriceSource,
    declared=PROVIDER)``, which sets ``name``, ``provider`` and ``month_hours`` from it.
    """

    name: ClassVar[str]  # snapshot source name and --source value
    provider: ClassVar[str]  # who bills: the offers' provider column
    month_hours: ClassVar[float]  # the provider's $/month -> $/hour convention
    credentials_hint: ClassVar[str]
    default_base_url: ClassVar[str]
    min_interval_s: ClassVar[float] = 0.0

    def __init_subclass__(cls, *, declared: Provider | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if declared is not None:
            cls.name = cls.provider = declared.name
            cls.month_hours = declared.month_hours

    @property
    def url_env_var(self) -> str:
        """The environment variable that points this source at another URL (a replay server)."""
        return "GPUCOST_" + self.name.upper().replace("-", "_") + "_URL"

    def base_url(self, env: Mapping[str, str] | None = None) -> str:
        env = os.environ if env is None else env
        return env.get(self.url_env_var) or self.default_base_url

    def unavailable(self) -> str | None:
        """Why this source cannot run on this installation (a missing extra), or None."""
        return None

    @abstractmethod
    def find_credentials(self, env: Mapping[str, str], home: Path) -> str | None:
        """The secret this source sends ("" for a public API), or None when none is set."""

    @abstractmethod
    def open_client(self, base_url: str, secret: str,
                    cancel: threading.Event | None = None) -> AbstractContextManager[ClientT]:
        """A client for the real API (or ``base_url``), closed when the context exits. Where the
        client can, it gives up a request as soon as ``cancel`` is set."""

    @abstractmethod
    def fetch(self, client: ClientT, *, now: dt.datetime | None = None) -> Snapshot:
        """Read the current prices. Raises ProviderError (never a bare KeyError) on bad answers."""


class HttpPriceSource(PriceSource["RetryingHttp"]):
    """A source over HTTP: the client is a :class:`RetryingHttp` wrapping ``httpx.Client``."""

    timeout_s: ClassVar[float] = HTTP_READ_TIMEOUT_S  # connect, and each read
    deadline_s: ClassVar[float] = HTTP_REQUEST_DEADLINE_S  # a request, retries and answer
    max_answer_bytes: ClassVar[int] = MAX_ANSWER_BYTES
    # The environment variable that holds the API key ("" for a public API), and the files
    # under the home folder a provider's own tool writes it to, read when it is not set.
    api_key_env: ClassVar[str]
    api_key_files: ClassVar[tuple[str, ...]] = ()

    def find_credentials(self, env: Mapping[str, str], home: Path) -> str | None:
        if not self.api_key_env:
            return ""
        return env_or_file(env, self.api_key_env, *(home / f for f in self.api_key_files))

    def auth(self, secret: str) -> tuple[dict[str, str], dict[str, str]]:
        """(headers, query parameters) that carry ``secret``; bearer token by default."""
        return ({"Authorization": f"Bearer {secret}"} if secret else {}), {}

    def open_client(self, base_url: str, secret: str,
                    cancel: threading.Event | None = None) -> AbstractContextManager[RetryingHttp]:
        return self._client(base_url, secret, cancel)

    @contextlib.contextmanager
    def _client(self, base_url: str, secret: str,
                cancel: threading.Event | None) -> Iterator[RetryingHttp]:
        import httpx

        headers, params = self.auth(secret)
        headers["User-Agent"] = "gpucost price refresh"
        with httpx.Client(base_url=base_url, headers=headers, params=params,
                          follow_redirects=True, timeout=self.timeout_s) as raw:
            yield RetryingHttp(raw, source=self.name, min_interval_s=self.min_interval_s,
                               timeout_s=self.timeout_s, secrets=(secret,) if secret else (),
                               deadline_s=self.deadline_s,
                               max_answer_bytes=self.max_answer_bytes, cancel=cancel)


def env_or_file(env: Mapping[str, str], var: str, *files: Path) -> str | None:
    """A key from ``var``, else the first non-empty file among ``files`` (stripped)."""
    value = env.get(var, "").strip()
    if value:
        return value
    for path in files:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if text:
            return text
    return None


@contextlib.contextmanager
def parsing(source: str, what: str) -> Iterator[None]:
    """Turn a payload of the wrong shape into a ProviderError that says where it broke."""
    try:
        yield
    except ProviderError:
        raise
    except _SHAPE_ERRORS as exc:
        detail = f"missing field {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args \
            else f"{type(exc).__name__}: {exc}"
        detail = " ".join(detail.split())  # one line, whatever the payload held
        detail = detail if len(detail) <= 200 else detail[:200] + "..."
        raise ProviderError(f"{source}: unexpected {what} ({detail})",
                            hint="the API changed or the answer was cut off; retry, and report "
                                 "it if it persists") from None


def expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it is a ``kind`` (a bool is no number here), else TypeError naming ``what``."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:40] + "..."
        raise TypeError(f"{what} is {shown}, expected {' or '.join(k.__name__ for k in kinds)}")
    return value


def price(value: Any, what: str) -> float:
    """A non-negative, finite USD amount from a JSON number or a decimal string, read exactly."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"{what} is {value!r}, expected a price")
    amount = decimal.Decimal(str(value).strip())
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{what} is {value!r}, expected a non-negative price")
    return float(amount)


def optional_price(value: Any, what: str) -> float:
    """Like :func:`price`; None, "" and 0 (no market) become NaN."""
    if value is None or value == "":
        return math.nan
    amount = price(value, what)
    return amount if amount > 0 else math.nan


def now_utc(now: dt.datetime | None) -> dt.datetime:
    return (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).replace(microsecond=0)


def counted_snapshot(source: PriceSource[Any], rows: Iterable[Mapping[str, Any]],
                     dropped: Mapping[str, int], *, fetched_at: dt.datetime, endpoint: str,
                     read: tuple[str, int], **details: Any) -> Snapshot:
    """The snapshot of an answer read as a list of ``read = (what, how many)``: its provenance
    names the endpoint, how many were read and how many dropped per reason
    (``<what>_read``, ``<what>_dropped``), then ``details``."""
    what, count = read
    return build_snapshot(source, rows, fetched_at=fetched_at, provenance={
        "endpoint": endpoint, f"{what}_read": count,
        f"{what}_dropped": dict(sorted(dropped.items())), **details})


def build_snapshot(source: PriceSource[Any], rows: Iterable[Mapping[str, Any]], *,
                   fetched_at: dt.datetime, provenance: Mapping[str, Any]) -> Snapshot:
    """Validate rows into a snapshot. A row the snapshot format refuses (a price past the
    ceiling, an impossible GPU count: one marketplace host's typo) is left out and counted in
    the provenance (``rows_refused``, with the first reasons), so that one bad offer cannot
    block a source; an answer that loses most of its rows this way is caught by the refresh's
    shrink check."""
    rows = list(rows)
    origin = f"{source.name} answer"
    extra: dict[str, Any] = {}
    try:
        offers = Offers.from_records(rows, origin=origin)
    except SnapshotError:
        kept, reasons = [], []
        for index, row in enumerate(rows):  # only when something is wrong: find which rows
            try:
                Offers.from_records([row], origin=f"{origin} offer {index}")
            except SnapshotError as exc:
                reasons.append(str(exc))
            else:
                kept.append(row)
        offers = Offers.from_records(kept, origin=origin)
        extra = {"rows_refused": len(reasons), "rows_refused_first": reasons[:5]}
    return Snapshot(source=source.name, fetched_at=fetched_at, offers=offers,
                    month_hours=source.month_hours,
                    provenance={"api": source.default_base_url, **provenance,
                                "offers": len(offers), **extra})


def resolve_gpu(name: str, memory_gb: float | None = None) -> str | None:
    """The catalog's canonical name for a provider's GPU name, or None (not a known GPU)."""
    return try_resolve_gpu_name(name, memory_gb=memory_gb)


def gpu_link(canonical: str) -> str:
    """"nvlink" for SXM/OAM boards, "pcie" otherwise (what the catalog says of the form factor)."""
    form = get_gpu(canonical).form_factor.upper()
    return "nvlink" if form.startswith("SXM") or form in ("OAM", "SUPERCHIP") else "pcie"

