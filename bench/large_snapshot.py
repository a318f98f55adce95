"""`gpucost compare` on large price snapshots: wall time and peak memory.

    python bench/large_snapshot.py [--rows 1000000] [--baseline-rows 10000]

Writes generated snapshots (bench/compare_speed.py's offers: NVIDIA GPUs on x86-64 hosts, six
providers, 40 regions) of ``--baseline-rows``, gpucost.limits.MAX_SNAPSHOT_OFFERS (the most a
ranking reads) and ``--rows`` offers to a temporary folder, then runs `gpucost compare --prices
FILE --limit 10` on each in a fresh process, timed, its peak RSS taken as a child's ru_maxrss
(tests/hostile_server.measured). Issue 22 saw a 1M-row snapshot (112 MiB, under the old 256 MiB
cap) take compare to 3.1 GB and 99 s; past the offers cap it is now refused (exit 2) before
ranking. Printed: each run's exit code, seconds and peak MiB, and their ratios to the baseline
measured in the same run. Goal: the largest snapshot compare accepts stays near 1 GB.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from compare_speed import generate_offers  # noqa: E402
from hostile_server import measured, peak_rss_mib  # noqa: E402

from gpucost.limits import MAX_SNAPSHOT_OFFERS  # noqa: E402
from gpucost.pricing.snapshot import Snapshot, write_snapshot  # noqa: E402


def run_compare(snapshot: Path, home: Path) -> tuple[int, float, float, str]:
    """(exit code, wall seconds, peak RSS MiB, last stdout line) of one compare."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPUCOST_HOME": str(home)}
    started = time.perf_counter()
    done = subprocess.run(
        measured([sys.executable, "-m", "gpucost", "compare", "--prices", str(snapshot),
                  "--limit", "10"]),
        env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    # stderr's last line is the peak RSS (measured); an error is the line before it
    lines = done.stdout.strip().splitlines() or done.stderr.strip().splitlines()[:-1]
    return done.returncode, wall, peak_rss_mib(done.stderr), lines[-1] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--baseline-rows", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        sizes = (("baseline", args.baseline_rows), ("at the cap", MAX_SNAPSHOT_OFFERS),
                 ("large", args.rows))
        for label, rows in sizes:
            folder = Path(tmp) / label.replace(" ", "-")
            folder.mkdir()
            path = write_snapshot(Snapshot(source="bench", fetched_at=dt.datetime.now(dt.UTC),
                                           offers=generate_offers(rows)), folder)
            size_mib = path.stat().st_size / 2**20
            rc, wall, rss, last = run_compare(path, Path(tmp) / "home")
            results[label] = (wall, rss)
            print(f"{label}: {rows:,} rows ({size_mib:.0f} MiB on disk): exit {rc}, "
                  f"{wall:.2f} s, peak {rss:.0f} MiB")
            if rc != 0:
                print(f"  {last}")
        base_wall, base_rss = results["baseline"]
        for label, rows in sizes[1:]:
            wall, rss = results[label]
            print(f"{label} over baseline: {wall / base_wall:.1f}x the time, "
                  f"{rss / base_rss:.1f}x the peak memory, for "
                  f"{rows / args.baseline_rows:.0f}x the rows")


if __name__ == "__main__":
    main()
