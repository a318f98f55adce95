"""``gpucost prices refresh``: every live source at once, each into its own dated snapshot.

Sources run concurrently in a thread pool (they wait on the network, not the CPU); each has its
own client, rate limit and retries. A source is *skipped* when its credentials are missing (the
message says how to set them), *failed* when it raised (its previous snapshot stays as it was:
nothing is written until the whole answer has parsed, and then atomically), else *updated*.
One source's failure never stops the others.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpucost.errors import GpuCostError
from gpucost.http import redact_text
from gpucost.pricing.snapshot import latest_snapshot_paths, write_snapshot
from gpucost.pricing.sources.base import PriceSource, get_source, sources

if TYPE_CHECKING:
    from rich.console import Console

Status = Literal["updated", "skipped", "failed"]


@dataclass(frozen=True)
class SourceResult:
    source: str
    status: Status
    message: str  # one line: what was written, why skipped, or why it failed
    path: Path | None = None  # the snapshot written (updated) or kept (failed/skipped)
    offers: int = 0
    seconds: float = 0.0


def refresh_one(source: PriceSource[Any], out_dir: Path, *, env: Mapping[str, str],
                home: Path, now: dt.datetime | None = None,
                report: Callable[[str], None] = lambda _: None) -> SourceResult:
    """Fetch one source and write its snapshot; never raises for the source's own failures."""
    started = time.monotonic()
    previous = _previous(out_dir, source.name)
    kept = f"; kept {previous}" if previous else "; no previous snapshot"
    missing = source.unavailable()
    if missing:
        return SourceResult(source.name, "skipped", missing, previous)
    secret = source.find_credentials(env, home)
    if secret is None:
        return SourceResult(source.name, "skipped", f"no credentials: {source.credentials_hint}",
                            previous)
    secrets = (secret,) if secret else ()
    try:
        report("fetching")
        with source.open_client(source.base_url(env), secret) as client:
            snapshot = source.fetch(client, now=now)
        report("writing")
        path = write_snapshot(snapshot, out_dir)
    except GpuCostError as exc:
        return SourceResult(source.name, "failed", redact_text(str(exc), secrets) + kept,
                            previous, seconds=time.monotonic() - started)
    except Exception as exc:  # a bug or an unforeseen library error: report, keep the others going
        text = redact_text(f"{type(exc).__name__}: {exc}", secrets)
        return SourceResult(source.name, "failed", f"{source.name}: internal error ({text})" + kept,
                            previous, seconds=time.monotonic() - started)
    return SourceResult(source.name, "updated", f"{len(snapshot.offers)} offers -> {path}", path,
                        offers=len(snapshot.offers), seconds=time.monotonic() - started)


def _previous(out_dir: Path, name: str) -> Path | None:
    found = [p for p in latest_snapshot_paths([out_dir]) if p.parent.name == name]
    return found[0] if found else None


def refresh(names: Sequence[str] | None = None, *, out_dir: str | os.PathLike[str] | None = None,
            env: Mapping[str, str] | None = None, home: Path | None = None,
            now: dt.datetime | None = None, max_workers: int | None = None,
            console: Console | None = None) -> list[SourceResult]:
    """Refresh ``names`` (default: every registered source) into ``out_dir``.

    ``out_dir`` defaults to the user snapshot folder; ``env`` to ``os.environ`` (credentials and
    ``GPUCOST_<SOURCE>_URL`` overrides); ``console`` shows a live line per source when given.
    Results come back in the order of ``names``.
    """
    from gpucost.paths import user_snapshots_dir

    chosen = [get_source(n) for n in dict.fromkeys(names)] if names else list(sources().values())
    target = Path(out_dir) if out_dir is not None else user_snapshots_dir()
    environment = dict(os.environ if env is None else env)
    user_home = home or Path.home()
    workers = max_workers or len(chosen) or 1

    if console is None:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="refresh") as pool:
            futures = [pool.submit(refresh_one, s, target, env=environment, home=user_home,
                                   now=now) for s in chosen]
            return [f.result() for f in futures]

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description:<16}"),
               TextColumn("{task.fields[state]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        tasks = {s.name: progress.add_task(s.name, total=1, state="waiting") for s in chosen}

        def run(source: PriceSource[Any]) -> SourceResult:
            task = tasks[source.name]
            result = refresh_one(source, target, env=environment, home=user_home, now=now,
                                 report=lambda state: progress.update(task, state=state))
            progress.update(task, completed=1, state=_summary(result))
            return result

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="refresh") as pool:
            futures = [pool.submit(run, s) for s in chosen]
            return [f.result() for f in futures]


def _summary(result: SourceResult) -> str:
    if result.status == "updated":
        return f"[green]updated[/] {result.offers} offers"
    if result.status == "skipped":
        return "[yellow]skipped[/]"
    return "[red]failed[/]"
