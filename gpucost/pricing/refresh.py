"""``gpucost prices refresh``: every live source at once, each into its own dated snapshot.

Sources are fetched concurrently, one thread each (they wait on the network, not the CPU); each
has its own client, rate limit, retries and per-request deadline (:mod:`gpucost.http`). A source
is *skipped* when its credentials are missing (the message says how to set them), *failed* when
it raised or did not finish within the refresh's deadline, *refused* when its answer looks
broken (zero offers, or under ``MAX_REFRESH_SHRINK`` of the previous snapshot's offers: see
:func:`shrink_refusal`), else *updated*. A source that is not updated keeps its previous
snapshot as it was: snapshots are written only here, by the calling thread, after the whole
answer has parsed, and atomically.
One source's failure never stops the others.

The calling thread only waits, in short slices: Ctrl-C is honoured at once, and at the deadline
the refresh returns whatever is unfinished as failed. Fetch threads are daemons told to stop
through a cancel event (an HTTP source stops within 0.1 s); none is waited for, so neither a
stalled server nor boto3 can hold the command or the interpreter's exit.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpucost.errors import GpuCostError, SnapshotError
from gpucost.http import redact_text
from gpucost.limits import MAX_REFRESH_SHRINK, REFRESH_DEADLINE_S
from gpucost.paths import user_snapshots_dir, writable_dir
from gpucost.pricing.snapshot import Snapshot, read_snapshot, snapshot_candidates, write_snapshot
from gpucost.pricing.sources.base import PriceSource
from gpucost.pricing.sources.registry import get_source, sources

if TYPE_CHECKING:
    from rich.console import Console

Status = Literal["updated", "skipped", "failed", "refused"]

_WAIT_SLICE_S = 0.1  # how often the waiting thread wakes (Ctrl-C lands between slices)


@dataclass(frozen=True)
class SourceResult:
    source: str
    status: Status
    message: str  # one line: what was written, why skipped, or why it failed
    path: Path | None = None  # the snapshot written (updated) or kept (otherwise)
    offers: int = 0
    seconds: float = 0.0


def fetch_one(source: PriceSource[Any], *, env: Mapping[str, str], home: Path,
              now: dt.datetime | None = None, cancel: threading.Event | None = None,
              report: Callable[[str], None] = lambda _: None) -> Snapshot | SourceResult:
    """The source's snapshot, or a skipped or failed result saying why (one line, no secret;
    the snapshot it keeps is for the caller to add). Never raises for the source's failures."""
    missing = source.unavailable()
    if missing:
        return SourceResult(source.name, "skipped", missing)
    secret = source.find_credentials(env, home)
    if secret is None:
        return SourceResult(source.name, "skipped", f"no credentials: {source.credentials_hint}")
    secrets = (secret,) if secret else ()
    try:
        report("fetching")
        with source.open_client(source.base_url(env), secret, cancel) as client:
            return source.fetch(client, now=now)
    except GpuCostError as exc:
        return SourceResult(source.name, "failed", redact_text(str(exc), secrets))
    except Exception as exc:  # a bug or an unforeseen library error: report, keep the others going
        text = redact_text(f"{type(exc).__name__}: {exc}", secrets)
        return SourceResult(source.name, "failed", f"{source.name}: internal error ({text})")


def shrink_refusal(new_offers: int, previous: Snapshot | None) -> str | None:
    """Why an answer with ``new_offers`` offers looks broken next to ``previous``, or None."""
    if new_offers == 0:
        return "the answer has no offers"
    if previous is not None and new_offers < MAX_REFRESH_SHRINK * len(previous.offers):
        return (f"the answer has {new_offers} offers, fewer than {MAX_REFRESH_SHRINK:.0%} of the "
                f"{len(previous.offers)} in {previous.path}")
    return None


def store(source: str, snapshot: Snapshot, out_dir: Path, *, allow_shrink: bool = False,
          seconds: float = 0.0) -> SourceResult:
    """Write ``snapshot`` unless it shrinks the source suspiciously (see :func:`shrink_refusal`)."""
    previous = _newest_intact(out_dir, source)
    kept = f"; kept {previous.path}" if previous else "; no previous snapshot"
    refusal = None if allow_shrink else shrink_refusal(len(snapshot.offers), previous)
    if refusal:
        return SourceResult(source, "refused", f"{source}: suspicious answer: {refusal}{kept} "
                            "(--allow-shrink writes it anyway)",
                            previous.path if previous else None, seconds=seconds)
    try:
        path = write_snapshot(snapshot, out_dir)
    except (GpuCostError, OSError) as exc:
        return SourceResult(source, "failed", f"{source}: cannot write the snapshot ({exc}){kept}",
                            previous.path if previous else None, seconds=seconds)
    refused = snapshot.provenance.get("rows_refused")
    note = (f" ({refused} refused, e.g. {snapshot.provenance['rows_refused_first'][0]})"
            if refused else "")
    return SourceResult(source, "updated", f"{len(snapshot.offers)} offers{note} -> {path}", path,
                        offers=len(snapshot.offers), seconds=seconds)


def _newest_intact(out_dir: Path, name: str) -> Snapshot | None:
    for file in snapshot_candidates([out_dir]).get(name, []):
        try:
            return read_snapshot(file)
        except SnapshotError:
            continue  # a damaged file is no baseline; the next older one is
    return None


def refresh(names: Sequence[str] | None = None, *, out_dir: str | os.PathLike[str] | None = None,
            env: Mapping[str, str] | None = None, home: Path | None = None,
            now: dt.datetime | None = None, console: Console | None = None,
            deadline_s: float = REFRESH_DEADLINE_S,
            allow_shrink: bool = False) -> list[SourceResult]:
    """Refresh ``names`` (default: every registered source) into ``out_dir``.

    ``out_dir`` defaults to the user snapshot folder; ``env`` to ``os.environ`` (credentials and
    ``GPUCOST_<SOURCE>_URL`` overrides); ``console`` shows a live line per source when given.
    Returns within ``deadline_s`` (plus the writing); results come in the order of ``names``.
    A KeyboardInterrupt while waiting stops every fetch and propagates at once.
    """
    chosen = [get_source(n) for n in dict.fromkeys(names)] if names else list(sources().values())
    target = Path(out_dir) if out_dir is not None else writable_dir(user_snapshots_dir())
    environment = dict(os.environ if env is None else env)
    user_home = home or Path.home()
    if console is None:
        return _run(chosen, target, environment, user_home, now, deadline_s, allow_shrink,
                    lambda _name, _state: None)

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description:<16}"),
               TextColumn("{task.fields[state]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        tasks = {s.name: progress.add_task(s.name, total=1, state="waiting") for s in chosen}

        def show(name: str, state: str) -> None:
            progress.update(tasks[name], state=state)

        results = _run(chosen, target, environment, user_home, now, deadline_s, allow_shrink,
                       show)
        for result in results:
            progress.update(tasks[result.source], completed=1, state=_summary(result))
    return results


def _run(chosen: Sequence[PriceSource[Any]], target: Path, env: Mapping[str, str], home: Path,
         now: dt.datetime | None, deadline_s: float, allow_shrink: bool,
         show: Callable[[str, str], None]) -> list[SourceResult]:
    started = time.monotonic()
    deadline = started + deadline_s
    cancel = threading.Event()
    done: queue.Queue[tuple[str, Snapshot | SourceResult, float]] = queue.Queue()

    def work(source: PriceSource[Any]) -> None:
        outcome = fetch_one(source, env=env, home=home, now=now, cancel=cancel,
                            report=lambda state: show(source.name, state))
        done.put((source.name, outcome, time.monotonic() - started))

    for source in chosen:
        threading.Thread(target=work, args=(source,), name=f"refresh-{source.name}",
                         daemon=True).start()
    results: dict[str, SourceResult] = {}
    try:
        while len(results) < len(chosen) and time.monotonic() < deadline:
            try:
                name, outcome, seconds = done.get(
                    timeout=min(_WAIT_SLICE_S, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                continue
            if isinstance(outcome, Snapshot):
                show(name, "writing")
                results[name] = store(name, outcome, target, allow_shrink=allow_shrink,
                                      seconds=seconds)
            else:
                results[name] = _keeping_previous(outcome, target, seconds)
    finally:
        cancel.set()  # stragglers (the deadline) or everyone (Ctrl-C) stop fetching
    for source in chosen:
        if source.name not in results:
            late = SourceResult(source.name, "failed", f"{source.name}: did not finish within the "
                                f"refresh deadline of {deadline_s:g} s")
            results[source.name] = _keeping_previous(late, target, deadline_s)
    return [results[s.name] for s in chosen]


def _keeping_previous(result: SourceResult, target: Path, seconds: float) -> SourceResult:
    """``result`` naming the snapshot that stays in place (a failure also says so)."""
    previous = _newest_path(target, result.source)
    message = result.message
    if result.status == "failed":
        message += f"; kept {previous}" if previous else "; no previous snapshot"
    return dataclasses.replace(result, message=message, path=previous, seconds=seconds)


def _newest_path(out_dir: Path, name: str) -> Path | None:
    found = snapshot_candidates([out_dir]).get(name)
    return found[0] if found else None


def _summary(result: SourceResult) -> str:
    if result.status == "updated":
        return f"[green]updated[/] {result.offers} offers"
    if result.status == "skipped":
        return "[yellow]skipped[/]"
    if result.status == "refused":
        return "[red]refused[/] (suspicious answer)"
    return "[red]failed[/]"
