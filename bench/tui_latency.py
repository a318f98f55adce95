"""How responsive `gpucost tui` is on the embedded catalog, against the ranking it waits for.

    python bench/tui_latency.py [--profile NAME] [--repeat N]

Baseline (measured in the same run): the ranking alone (:func:`gpucost.tui.session.rank_view`,
what the worker computes). Against it, headless at 80x24: the time from start to the first
ranked table, and from Enter on a new deadline to the re-ranked table, for a deadline plans meet
and for one nothing meets (then the advisor re-ranks with relaxed constraints to say what to
relax). A probe task wakes every 5 ms and records how late it woke: the longest delay
is the longest the UI froze, which would be the whole ranking if it ran on the UI thread.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


async def _ui(profile: str | None, deadlines_h: tuple[float, ...],
              repeat: int) -> dict[str, float]:
    """Median ms to the first table and to each re-ranked table; the longest loop stall."""
    from gpucost.tui.app import GpuCostApp

    timings: dict[str, list[float]] = {}
    stalls = []
    for _ in range(repeat):
        app = GpuCostApp(profile=profile)
        done = asyncio.Event()
        lateness: list[float] = []

        async def probe(done: asyncio.Event, lateness: list[float]) -> None:
            while not done.is_set():
                before = time.perf_counter()
                await asyncio.sleep(0.005)
                lateness.append((time.perf_counter() - before - 0.005) * 1e3)

        start = time.perf_counter()
        async with app.run_test(size=(80, 24)) as pilot:
            task = asyncio.create_task(probe(done, lateness))
            while app.offers.view is None:
                await asyncio.sleep(0.002)
            timings.setdefault("first", []).append((time.perf_counter() - start) * 1e3)
            for deadline in deadlines_h:
                app.screen.query_one("#job-deadline").focus()
                await pilot.press("end", *["backspace"] * 12, *f"{deadline:g}")
                start = time.perf_counter()
                await pilot.press("enter")
                # a pause while typing may re-rank an intermediate value first: wait for ours
                while app.offers.view.inputs.deadline_hours != deadline:
                    await asyncio.sleep(0.002)
                timings.setdefault(f"{deadline:g}", []).append(
                    (time.perf_counter() - start) * 1e3)
            done.set()
            await task
            stalls.append(max(lateness))
    out = {k: statistics.median(v) for k, v in timings.items()}
    out["stall"] = max(stalls)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=None, help="profile (default: the ResNet-50 example)")
    parser.add_argument("--deadline-h", type=float, default=6.0, help="a deadline plans meet")
    parser.add_argument("--tight-deadline-h", type=float, default=0.01,
                        help="a deadline nothing meets")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from gpucost.pricing.snapshot import load_snapshots
    from gpucost.profile import resolve_profile
    from gpucost.tui.session import MAX_ROWS, JobInputs, rank_view

    profile = resolve_profile(args.profile)
    snapshots = load_snapshots(None)
    deadlines = (args.deadline_h, args.tight_deadline_h)
    default = _median_ms(lambda: rank_view(profile, snapshots, JobInputs()), args.repeat)
    alone = {d: _median_ms(lambda d=d: rank_view(profile, snapshots,  # type: ignore[misc]
                                                  JobInputs(deadline_hours=d)), args.repeat)
             for d in deadlines}
    ui = asyncio.run(_ui(args.profile, deadlines, args.repeat))
    plans = len(rank_view(profile, snapshots, JobInputs()).advice.ranking)
    print(f"{profile.name}, {plans:,} plans on the embedded catalog, median of {args.repeat}")
    print(f"start -> first table ({MAX_ROWS} rows)   {ui['first']:8.1f} ms "
          f"({ui['first'] / default:.2f}x the ranking alone, {default:.1f} ms)")
    for d in deadlines:
        what = "nothing meets it: the advisor works out what to relax" \
            if d == args.tight_deadline_h else "re-ranked"
        print(f"Enter on deadline {d:g} h -> table  {ui[f'{d:g}']:8.1f} ms "
              f"({ui[f'{d:g}'] / alone[d]:.2f}x the ranking alone, {alone[d]:.1f} ms; {what})")
    worst = max(alone.values())
    print(f"longest UI freeze (event-loop stall) {ui['stall']:8.1f} ms "
          f"({ui['stall'] / worst:.3f}x the longest ranking, which runs in a worker)")

if __name__ == "__main__":
    main()
