"""Wall time of `gpucost compare` on the embedded default, as a user runs it.

    python bench/cli_latency.py [--runs 7]

Runs the command in fresh processes and prints the median next to two baselines measured in
the same run: a bare `python -c pass` (interpreter start) and `python -c "import pandas"` (what
the command would cost if it built a DataFrame). Goal: the median under 0.5 s on a 2-core
machine, and no torch, textual, boto3 or pandas imported on the way.

Also, in this process, loading the embedded snapshots alone (best of three after a warm-up):
goal under 0.15 s (tests/test_snapshot.py keeps only a deadline that a loaded machine meets).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from gpucost.paths import embedded_snapshots_dir
from gpucost.pricing.snapshot import load_offers

COMPARE = (
    "import sys; from gpucost.cli import main; rc = main(['compare']); "
    "heavy = [m for m in ('torch', 'textual', 'boto3', 'pandas') if m in sys.modules]; "
    "sys.stderr.write('heavy imports: %s\\n' % heavy); raise SystemExit(rc)"
)


def median_wall(code: str, runs: int) -> tuple[float, str]:
    times = []
    err = ""
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        times.append(time.perf_counter() - t0)
        err = done.stderr
    return statistics.median(times), err


def embedded_load_s() -> float:
    load_offers([embedded_snapshots_dir()])  # warm the import and file caches
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        load_offers([embedded_snapshots_dir()])
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    bare, _ = median_wall("pass", args.runs)
    pandas, _ = median_wall("import pandas", args.runs)
    compare, err = median_wall(COMPARE, args.runs)
    print(f"python -c pass:          {bare:.3f} s")
    print(f"python -c 'import pandas': {pandas:.3f} s")
    print(
        f"gpucost compare:         {compare:.3f} s   [goal < 0.5 s]  "
        f"({compare / pandas:.2f}x the pandas import alone)"
    )
    print(err.strip())
    print(f"loading the embedded snapshots: {embedded_load_s():.3f} s   [goal < 0.15 s]")


if __name__ == "__main__":
    main()
