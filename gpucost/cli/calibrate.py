"""`gpucost calibrate`: the measurements gpucost keeps from your own runs (list, forget).

``list`` also shows what they taught: per workload and per GPU it ran on, the prediction gpucost
made before that GPU was measured (from the profile and the other GPUs measured by then), how far
the measurement was from it and whether it fell inside the prediction's band, and the band a
prediction there carries now (:func:`gpucost.measurements.learning`).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from gpucost.cli import add_command
from gpucost.envelope import add_format_argument, print_document
from gpucost.errors import InputError
from gpucost.measurements import Learned, Measurement, forget, learning, read_store, store_path
from gpucost.model.bands import Band
from gpucost.profile import resolve_profile
from gpucost.terminal import printable


def register(sub: Any) -> None:
    p = add_command(
        sub, "calibrate",
        description="Every profile you measure and every throughput a run measures on arrival "
        "is kept in GPUCOST_HOME/measurements.json; predictions for the same workload start from "
        "them (the target itself if measured, else the nearest measured GPU, or with two or more "
        "GPUs the workload's own fitted compute/memory mix).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list the stored measurements")
    listing.add_argument("--workload", help="only this workload (profile name)")
    listing.add_argument("--profile", "-p", action="append", default=[], metavar="PROFILE",
                         help="a workload's profile JSON, for the predictions to compare with "
                         "(default: the example profile of the workload's name); repeatable")
    add_format_argument(listing)
    listing.set_defaults(handler=run_list)
    forgetting = actions.add_parser("forget", help="forget measurements by id, or all of them")
    forgetting.add_argument("ids", nargs="*", metavar="ID",
                            help="ids from `gpucost calibrate list`")
    forgetting.add_argument("--all", action="store_true", help="forget every stored measurement")
    add_format_argument(forgetting)
    forgetting.set_defaults(handler=run_forget)


def run_list(args: argparse.Namespace) -> int:
    store = read_store()
    found = [m for m in store.measurements if args.workload in (None, m.workload)]
    profiles = [resolve_profile(p) for p in args.profile]
    learned = learning(found, profiles) if found else []
    if args.format == "json":
        print_document("calibrate", {"store": str(store_path()),
                                     "measurements": [_record(m) for m in found],
                                     "learning": [_learned_record(x) for x in learned],
                                     "skipped": [{"id": i, "problem": p}
                                                 for i, p in store.skipped]})
        return 0
    # records skipped as bad are listed by id, so that `forget ID` can remove them
    for rid, why in store.skipped:
        print(f"skipped {rid}: it {why} (`gpucost calibrate forget {rid}` removes it)")
    if not found:
        print(f"no measurements stored in {store_path()}")
        return 0
    print(f"{len(found)} measurement(s) in {store_path()}:")
    for workload in sorted({m.workload for m in found}):
        print(printable(workload, keep=""))
        for m in found:
            if m.workload == workload:
                print(f"  {printable(m.describe(), keep='')}")
        for x in learned:
            if x.measurement.workload == workload:
                for i, line in enumerate(_learned_lines(x)):
                    print(("  " if i == 0 else "    ") + printable(line, keep=""))
    return 0


def _band_text(value: float, band: Band) -> str:
    if band.low == band.high == 1.0:
        return band.key
    return (f"{value * band.low:,.1f}-{value * band.high:,.1f} "
            f"(x{band.low:.2f}-{band.high:.2f}, {band.key})")


def _learned_lines(x: Learned) -> list[str]:
    """Two lines: 'on 1 x A100 SXM4 80GB (amp, batch 64): measured 500.0 images/s; predicted
    before it 1,054.4 (profile), -53 %, outside its band ...' and 'band now: ...'."""
    m = x.measurement
    head = (f"on {m.device_count} x {m.gpu} ({m.precision}, batch {m.batch_size}): measured "
            f"{m.throughput:,.1f} {m.sample_unit}/s")
    if x.predicted is None or x.band_before is None or x.band_now is None:
        return [f"{head}; no prediction to compare: {x.note}"]
    word = "inside" if x.inside_before else "outside"
    now = x.band_now
    narrowed = ("narrowed to " + _band_text(x.predicted_now or x.predicted, now)
                if now != x.band_before else "unchanged")
    return [f"{head}; predicted before it {x.predicted:,.1f} ({x.method}), "
            f"{x.error_pct:+.0f} %, {word} its band {_band_text(x.predicted, x.band_before)}",
            f"band now: {narrowed}" + (f"; {x.note}" if x.note else "")]


def _band_record(value: float | None, band: Band | None) -> dict[str, Any] | None:
    if band is None:
        return None
    return {"low": band.low, "high": band.high, "basis": band.key,
            "throughput_low": None if value is None else value * band.low,
            "throughput_high": None if value is None else value * band.high}


def _learned_record(x: Learned) -> dict[str, Any]:
    m = x.measurement
    return {"workload": m.workload, "gpu": m.gpu, "precision": m.precision,
            "batch_size": m.batch_size, "device_count": m.device_count,
            "measurement_id": m.id, "measured": m.throughput,
            "predicted_before": x.predicted, "method_before": x.method or None,
            "error_pct": x.error_pct, "inside_band_before": x.inside_before,
            "band_before": _band_record(x.predicted, x.band_before),
            "predicted_now": x.predicted_now,
            "band_now": _band_record(x.predicted_now, x.band_now), "note": x.note or None}


def _record(m: Measurement) -> dict[str, Any]:
    return dataclasses.asdict(m)


def run_forget(args: argparse.Namespace) -> int:
    if bool(args.ids) == bool(args.all):
        raise InputError("give measurement ids or --all (not both)",
                         hint="`gpucost calibrate list` shows the ids")
    gone = forget(args.ids, everything=args.all)
    if args.format == "json":
        print_document("calibrate-forget", {"forgotten": list(gone)})
    else:
        print(f"forgot {len(gone)} measurement(s)")
    return 0
