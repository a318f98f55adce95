"""`gpucost prices ...`: import, inspect (and refresh, diff) price snapshots.

One ``prices`` parser with a sub-parser per action. To add one (``refresh``, ``diff``), write a
``_register_<name>(sub)`` function below that adds its parser and sets ``handler``, and list it
in ``SUBCOMMANDS``. Heavy modules (numpy, the catalog) load inside handlers.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console

from gpucost.catalog import resolve_gpu_name
from gpucost.cli import add_command
from gpucost.cli.outputs import check_output_folder
from gpucost.envelope import add_format_argument, print_document
from gpucost.errors import InputError, UnknownProviderError
from gpucost.format import text_table
from gpucost.limits import REFRESH_DEADLINE_S
from gpucost.model.setup_times import rules
from gpucost.paths import user_snapshots_dir, writable_dir
from gpucost.pricing.cheapest import cheapest_per_gpu_hour
from gpucost.pricing.diff import diff_snapshots, format_diff
from gpucost.pricing.rates import month_hours_for, rates_for
from gpucost.pricing.refresh import refresh
from gpucost.pricing.registry import DEFAULT_MAX_AGE_DAYS, IMPORTERS, is_stale, run_importer
from gpucost.pricing.snapshot import Offers, load_snapshots, write_snapshot
from gpucost.pricing.sources.registry import get_source, sources
from gpucost.pricing.sources.skypilot_catalog import load_provenance_file

SubRegister = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        sub, "prices",
        description="Manage the dated price snapshots gpucost plans with.")
    actions = parser.add_subparsers(dest="prices_command", metavar="ACTION",
                                    parser_class=type(parser))
    for add in SUBCOMMANDS:
        add(actions)

    def no_action(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    parser.set_defaults(handler=no_action)


# ---------------------------------------------------------------------------------------- import

def _register_import(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = actions.add_parser(
        "import", help="import a published price catalog as snapshots",
        description="Read a price catalog folder and write one dated snapshot per source. "
                    "Kinds: " + "; ".join(f"{i.name}: {i.description}"
                                          for i in IMPORTERS.values()))
    p.add_argument("kind", choices=sorted(IMPORTERS), help="catalog format")
    p.add_argument("directory", help="folder holding the catalog files")
    p.add_argument("--out", metavar="DIR",
                   help="snapshot folder to write (default: $GPUCOST_HOME/snapshots)")
    p.add_argument("--provenance", metavar="FILE",
                   help="JSON or TOML with fetched_at and commit/commits, if the folder's "
                        "README does not state them")
    p.add_argument("--fetched-at", metavar="DATE",
                   help="date of the prices (YYYY-MM-DD), overriding README/provenance")
    p.set_defaults(handler=_import)


def _import(args: argparse.Namespace) -> int:
    out = (check_output_folder(args.out, flag="--out") if args.out
           else writable_dir(user_snapshots_dir()))
    provenance = load_provenance_file(args.provenance) if args.provenance else None
    snapshots = run_importer(args.kind, args.directory, provenance=provenance,
                             fetched_at=args.fetched_at)
    for snap in snapshots:
        path = write_snapshot(snap, out)
        print(f"{snap.source}: {len(snap.offers):,} offers {_import_summary(snap.provenance)} "
              f"-> {path}")
    return 0


def _import_summary(provenance: Any) -> str:
    read = provenance.get("rows_read")
    skipped: dict[str, int] = provenance.get("rows_skipped") or {}
    if read is None:
        return ""
    detail = ", ".join(f"{n:,} {reason}" for reason, n in skipped.items())
    total = f"{sum(skipped.values()):,} skipped"
    return f"({read:,} rows read, {total}{': ' + detail if detail else ''})"


# ------------------------------------------------------------------------------------------ show

def _register_show(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = actions.add_parser(
        "show", help="list loaded snapshots (age, STALE) and the cheapest offers for a GPU",
        description="Per source: offers, providers, date of the prices, age and a STALE flag. "
                    "With --gpu, also the cheapest offers for that GPU by $ per GPU-hour.")
    p.add_argument("--source", action="append", metavar="S",
                   help="only this snapshot source (repeatable)")
    p.add_argument("--gpu", metavar="G", help="show the cheapest offers for this GPU")
    p.add_argument("--max-age-days", type=float, default=DEFAULT_MAX_AGE_DAYS, metavar="DAYS",
                   help="flag snapshots older than this as STALE "
                        f"(default {DEFAULT_MAX_AGE_DAYS:g})")
    p.add_argument("--limit", type=int, default=10, help="offers to list with --gpu (default 10)")
    p.add_argument("--prices", action="append", metavar="PATH",
                   help="snapshot file or folder (default: embedded and $GPUCOST_HOME snapshots)")
    p.add_argument("--rates", action="store_true",
                   help="also list the storage, egress and month conventions applied per provider")
    add_format_argument(p)
    p.set_defaults(handler=_show)


def _show(args: argparse.Namespace) -> int:
    if args.max_age_days < 0:
        raise InputError(f"--max-age-days must be 0 or more, got {args.max_age_days:g}")
    if args.limit < 1:
        raise InputError(f"--limit must be at least 1, got {args.limit}")
    snapshots = load_snapshots(args.prices)
    if args.source:
        known = sorted(s.source for s in snapshots)
        for name in args.source:
            if name not in known:
                raise UnknownProviderError(name, known)
        snapshots = [s for s in snapshots if s.source in args.source]
    sources: list[dict[str, Any]] = [{
        "source": s.source,
        "offers": len(s.offers),
        "providers": sorted(set(s.offers.provider.tolist())),
        "date": s.date,
        "age_days": round(s.age_days(), 1),
        "stale": is_stale(s, args.max_age_days),
        "path": str(s.path) if s.path else None,
    } for s in snapshots]
    gpu = resolve_gpu_name(args.gpu) if args.gpu else None
    cheapest = None if gpu is None else cheapest_per_gpu_hour(
        Offers.concat([s.offers for s in snapshots]), gpu, args.limit)
    rates = _rates(sorted({p for s in sources for p in s["providers"]})) if args.rates else None
    if args.format == "json":
        payload: dict[str, Any] = {"max_age_days": args.max_age_days, "sources": sources}
        if rates is not None:
            payload["rates"] = rates
            payload["setup_times"] = _setup_times([r["provider"] for r in rates])
        if cheapest is not None:
            payload["gpu"] = gpu
            payload["offers"] = [dataclasses.asdict(o) for o in cheapest]
        print_document("prices-show", payload)
        return 0
    print(text_table(["source", "offers", "providers", "prices of", "age", ""],
                     [[s["source"], f"{s['offers']:,}", ",".join(s["providers"]), s["date"],
                       f"{s['age_days']:.1f} d", "STALE" if s["stale"] else ""]
                      for s in sources],
                     right={1, 4}))
    stale = [s["source"] for s in sources if s["stale"]]
    if stale:
        print(f"\nSTALE: prices older than {args.max_age_days:g} days from {', '.join(stale)}; "
              "run `gpucost prices refresh` or import a newer catalog")
    if rates is not None:
        print("\nstorage and transfer (USD; see gpucost.pricing.rates for sources):")
        print(text_table(
            ["provider", "disk", "$/GB-month", "stopped", "egress $/GB", "ingress $/GB",
             "h/month", "as of"],
            [[r["provider"], r["storage_kind"], _usd(r["storage_gb_month"]),
              _usd(r["stopped_gb_month"]), _usd(r["egress_usd_per_gb"]),
              _usd(r["ingress_usd_per_gb"]),
              f"{r['month_hours']:g}", r["as_of"]] for r in rates],
            right={2, 3, 4, 5, 6}))
        print("\nsetup before training, by instance family (gpucost/model/setup_times.csv has "
              "each source; --setup-min overrides):")
        print(text_table(
            ["provider", "instance", "minutes", "confidence"],
            [[r["provider"], r["instance"], f"{r['minutes']:g}", r["confidence"]]
             for r in _setup_times([r["provider"] for r in rates])],
            right={2}))
    if cheapest is not None:
        print(f"\ncheapest {gpu} offers by on-demand $ per GPU-hour:")
        if not cheapest:
            print("  (none in these snapshots)")
        else:
            print(text_table(
                ["provider", "region", "instance", "GPUs", "$/h", "spot $/h", "$/GPU-h", "source",
                 "prices of"],
                [[o.provider, o.region, o.instance_type, f"{o.gpu_count:g}", f"{o.price_hr:.3f}",
                  "-" if o.spot_price_hr is None else f"{o.spot_price_hr:.3f}",
                  f"{o.usd_per_gpu_hr:.3f}", o.source, o.date] for o in cheapest],
                right={3, 4, 5, 6}))
    return 0


def _rates(providers: Sequence[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for provider in providers:
        r = rates_for(provider)
        out.append({
            "provider": provider,
            "storage_kind": r.storage_kind if r else "unknown",
            "storage_gb_month": r.storage_gb_month if r else None,
            "stopped_gb_month": r.stopped_gb_month if r else None,
            "egress_usd_per_gb": r.egress_gb if r else None,
            "ingress_usd_per_gb": r.ingress_gb if r else None,
            "month_hours": month_hours_for(provider),
            "as_of": r.as_of if r else "",
            "source": r.source if r else "",
        })
    return out


def _setup_times(providers: Sequence[str]) -> list[dict[str, Any]]:
    """The setup-time rows that apply to these providers (their own, then the catch-all)."""
    wanted = {*providers, "*"}
    return [{"provider": r.provider, "instance": r.instance, "minutes": r.minutes,
             "confidence": r.confidence, "source": r.source}
            for r in rules() if r.provider in wanted]


def _usd(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


# --------------------------------------------------------------------------------------- refresh

def _register_refresh(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = actions.add_parser(
        "refresh", help="fetch live prices from the provider APIs into dated snapshots",
        description="Fetch every source (or those named) concurrently and write one snapshot per "
                    "source. A failing source keeps its previous snapshot; a source without "
                    "credentials is skipped with a note on how to set them. Each source's base "
                    "URL can be overridden with GPUCOST_<SOURCE>_URL (see --list). An answer with "
                    "no offers, or with fewer than half of the previous snapshot's, is refused "
                    "as suspicious (the previous snapshot stays) unless --allow-shrink. Exit 0 "
                    "when no source failed, 3 when one failed or was refused, 2 when none could "
                    "run.")
    p.add_argument("--source", action="append", metavar="NAME",
                   help="only this source (repeatable; see --list)")
    p.add_argument("--out", metavar="DIR",
                   help="snapshot folder to write (default: $GPUCOST_HOME/snapshots)")
    p.add_argument("--list", action="store_true",
                   help="list the sources, their credentials and URL variables, and exit")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--allow-shrink", action="store_true",
                   help="write an answer even if it has no offers or under half the previous "
                        "snapshot's")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                   help="give up on sources not done after this long (default "
                        f"{REFRESH_DEADLINE_S:g}); each request also has its own deadline")
    p.set_defaults(handler=_refresh)


def _refresh(args: argparse.Namespace) -> int:
    deadline = REFRESH_DEADLINE_S if args.deadline is None else args.deadline
    if not 0 < deadline <= 86_400:
        raise InputError(f"--deadline must be above 0 and at most 86400 seconds, got "
                         f"{args.deadline:g}")
    if args.list:
        for source in sources().values():
            needs = source.credentials_hint or "no credentials needed"
            print(f"{source.name:<16} {source.url_env_var:<30} {needs}")
        return 0
    for name in args.source or ():
        get_source(name)  # unknown names fail before anything runs
    if args.out:
        check_output_folder(args.out, flag="--out")
    console = None
    if not args.quiet:
        console = Console(stderr=True)
    results = refresh(args.source, out_dir=args.out, console=console, deadline_s=deadline,
                      allow_shrink=args.allow_shrink)
    for result in results:
        print(f"{result.source}: {result.status}: {result.message}")
    if any(r.status in ("failed", "refused") for r in results):
        return 3
    if not any(r.status == "updated" for r in results):
        print("gpucost: nothing was refreshed; the reasons are above", file=sys.stderr)
        return 2
    return 0


# ------------------------------------------------------------------------------------------ diff

def _register_diff(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = actions.add_parser(
        "diff", help="price changes between two snapshots (added, removed, changed)",
        description="Compare two snapshot files or folders (a folder means its newest snapshot "
                    "per source). An offer is (source, provider, region, zone, instance type); "
                    "it changed when its on-demand or spot $/h moved by more than the threshold "
                    "or its spot market appeared or went away.")
    p.add_argument("old", help="the older snapshot file or folder")
    p.add_argument("new", help="the newer snapshot file or folder")
    p.add_argument("--threshold-pct", type=float, default=5.0, metavar="PCT",
                   help="report price moves larger than this percentage (default 5)")
    p.add_argument("--limit", type=int, default=50,
                   help="offers to list (default 50; 0 lists all)")
    add_format_argument(p)
    p.set_defaults(handler=_diff)


def _diff(args: argparse.Namespace) -> int:
    if not args.threshold_pct >= 0:
        raise InputError(f"--threshold-pct must be 0 or more, got {args.threshold_pct:g}")
    if args.limit < 0:
        raise InputError(f"--limit must be 0 or more, got {args.limit}")
    diff = diff_snapshots([args.old], [args.new], threshold_pct=args.threshold_pct)
    if args.format == "json":
        print_document("prices-diff", {
            "threshold_pct": diff.threshold_pct, "unchanged": diff.unchanged,
            "added": diff.added,
            "removed": diff.removed,
            "changed": [{"key": list(c.key), "gpu": c.gpu, "gpu_count": c.gpu_count,
                         "old_price_hr": c.old_price_hr, "new_price_hr": c.new_price_hr,
                         "old_spot_price_hr": c.old_spot_price_hr,
                         "new_spot_price_hr": c.new_spot_price_hr}
                        for c in diff.changed],
        })
        return 0
    print("\n".join(format_diff(diff, limit=args.limit or None)))
    return 0


# Actions in help order.
SUBCOMMANDS: tuple[SubRegister, ...] = (_register_import, _register_show, _register_refresh,
                                        _register_diff)
