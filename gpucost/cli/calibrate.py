"""`gpucost calibrate`: the measurements gpucost keeps from your own runs (list, forget)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from gpucost.envelope import add_format_argument, print_document

if TYPE_CHECKING:
    from gpucost.measurements import Measurement


def register(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="list or forget the measurements your own runs taught the model",
        description="Every profile you measure and every throughput a run measures on arrival "
        "is kept in GPUCOST_HOME/measurements.json; predictions for the same workload start from "
        "them (the target itself if measured, else the nearest measured GPU, or with two or more "
        "GPUs the workload's own fitted compute/memory mix).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list the stored measurements")
    listing.add_argument("--workload", help="only this workload (profile name)")
    add_format_argument(listing)
    listing.set_defaults(handler=run_list)
    forget = actions.add_parser("forget", help="forget measurements by id, or all of them")
    forget.add_argument("ids", nargs="*", metavar="ID", help="ids from `gpucost calibrate list`")
    forget.add_argument("--all", action="store_true", help="forget every stored measurement")
    add_format_argument(forget)
    forget.set_defaults(handler=run_forget)


def run_list(args: argparse.Namespace) -> int:
    from gpucost.measurements import read_store, store_path

    store = read_store()
    found = [m for m in store.measurements if args.workload in (None, m.workload)]
    if args.format == "json":
        print_document("calibrate", {"store": str(store_path()),
                                     "measurements": [_record(m) for m in found],
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
        print(workload)
        for m in found:
            if m.workload == workload:
                print(f"  {m.describe()}")
    return 0


def _record(m: Measurement) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(m)


def run_forget(args: argparse.Namespace) -> int:
    from gpucost.errors import InputError
    from gpucost.measurements import forget

    if bool(args.ids) == bool(args.all):
        raise InputError("give measurement ids or --all (not both)",
                         hint="`gpucost calibrate list` shows the ids")
    gone = forget(args.ids, everything=args.all)
    if args.format == "json":
        print_document("calibrate-forget", {"forgotten": list(gone)})
    else:
        print(f"forgot {len(gone)} measurement(s)")
    return 0
