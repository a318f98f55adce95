"""`gpucost compare --max-nodes N` on the embedded default: wall time and peak memory.

    python bench/many_nodes.py [--max-nodes 4096] [--runs 3]

Each command runs in a fresh process started by a small wrapper interpreter, whose
RUSAGE_CHILDREN high-water mark is the command's own peak RSS (an exec'd or forked child of a
big parent would report the parent's). Printed next to a one-node `gpucost compare` measured the
same way in the same run, with the ratios, and the number of plans ranked. Goals at 4,096 nodes:
under 5 s and under 1 GB peak.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

# Runs one compare in a child and reports its wall time, peak RSS and plan count as JSON.
WRAPPER = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
done = subprocess.run([sys.executable, "-m", "gpucost", "compare", "--format", "json",
                       "-n", "1", *sys.argv[1:]], capture_output=True, text=True)
wall = time.perf_counter() - t0
if done.returncode:
    sys.exit(done.stderr)
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall_s": wall, "peak_mb": peak_kib / 1024,
                  "plans": json.loads(done.stdout)["plans_total"]}))
"""


def measure(argv: list[str], runs: int) -> dict[str, float]:
    results = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True,
                             text=True, check=True)
        results.append(json.loads(out.stdout))
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-nodes", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    one = measure([], args.runs)
    many = measure(["--max-nodes", str(args.max_nodes)], args.runs)
    print(f"compare (1 node):        {one['wall_s']:.2f} s, peak {one['peak_mb']:.0f} MB, "
          f"{one['plans']:,.0f} plans")
    print(f"compare --max-nodes {args.max_nodes}: {many['wall_s']:.2f} s, peak "
          f"{many['peak_mb']:.0f} MB, {many['plans']:,.0f} plans   [goal < 5 s, < 1 GB]")
    print(f"ratios: time {many['wall_s'] / one['wall_s']:.1f}x, memory "
          f"{many['peak_mb'] / one['peak_mb']:.1f}x, plans {many['plans'] / one['plans']:.0f}x")


if __name__ == "__main__":
    main()
