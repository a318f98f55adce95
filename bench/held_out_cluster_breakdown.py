"""Where the multi-GPU error on a cluster never fitted sits, and what the traces say of it.

    python bench/held_out_cluster_breakdown.py [--data ../shared/data] [--rows 15]

The questions of ``prediction_accuracy.held_out_clusters`` at the same local batch (each Sia
cluster held out in turn, the host's socket bandwidth and the overlap exponent refitted on the
other), split by held-out
cluster, job and placement kind (one node, two nodes, three or more): the model's mean error,
the floor's (the 1-GPU compute plus the trace's true sync time), and how many points of the
overall mean the group's excess over the floor makes, largest first. Then, on each cluster with
groups of three or more nodes, a two-node group's sync against the three-node group's with the
same GPUs per node, beside the ratio of their rings' traffic (2(R-1)/R of the gradient per GPU):
a two-node group that merely moved its ring's bytes would sync a little faster than the
three-node one, never twice as slow.

Last, two things the gap is not, each an upper bound on what it could win: the host's socket
bandwidth and the overlap exponent fitted on the held-out cluster itself (in-sample: no user
knows them beforehand), and
each job's modelled sync scaled by what the job's own 2-GPU one-node placement measured (the
median over its local batches of that placement's measured step over the 1-GPU step's excess,
against the model's), as a user who ran the job on two GPUs first could scale it; the other
placements asked so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import TypeAlias

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "scripts"))

import fit_calibration as fitc  # noqa: E402
from prediction_accuracy import refit_on, refit_without_cluster, trace_times  # noqa: E402

from gpucost.model.perf import using_calibration  # noqa: E402

# (cluster, job, placement, local batch) -> (sync, compute) seconds: prediction_accuracy's
Times: TypeAlias = dict[tuple[str, str, tuple[int, ...], int], tuple[float, float]]


def placement_kind(placement: tuple[int, ...]) -> str:
    return {1: "one node", 2: "two nodes"}.get(len(placement), "3+ nodes")


Groups: TypeAlias = dict[tuple[str, str, str], list[tuple[float, float]]]


def group_errors(rows: list[fitc.SiaRow], times: Times) -> Groups:
    """(model, floor) absolute errors of each uniform multi-GPU step time of a held-out cluster
    at its own local batch, by (held-out cluster, job, placement kind)."""
    groups: Groups = defaultdict(list)
    for held in sorted(fitc.SIA_CLUSTERS):
        with using_calibration(refit_without_cluster(rows, held).calibration):
            for r in rows:
                if r.cluster != held or len(set(r.placement)) != 1:
                    continue
                model = fitc.pod_step_s(r, r.local_bsz, r.single_step_s)
                sync_s = times[(r.cluster, r.model, r.placement, r.local_bsz)][0]
                compute_s = times[(r.cluster, r.model, (1,), r.local_bsz)][1]
                groups[(held, r.model.split(" (")[0], placement_kind(r.placement))].append(
                    (abs(model / r.step_s - 1), abs((compute_s + sync_s) / r.step_s - 1)))
    return groups


def print_excess(groups: Groups, rows_shown: int) -> None:
    total = sum(len(v) for v in groups.values())
    model_mean = 100 * sum(m for v in groups.values() for m, _ in v) / total
    floor_mean = 100 * sum(f for v in groups.values() for _, f in v) / total
    print(f"cluster never fitted, same batch: model {model_mean:.1f} %, floor {floor_mean:.1f} %"
          f" over {total} step times; per held-out cluster, job and placement kind, largest "
          "excess first:")
    print(f"  {'cluster':<7} {'job':<26} {'placement':<10} {'steps':>5} {'model':>7} "
          f"{'floor':>7} {'points of the mean':>19}")
    ranked = sorted(groups.items(), key=lambda kv: -sum(m - f for m, f in kv[1]))
    for (cluster, job, kind), errs in ranked[:rows_shown]:
        excess = 100 * sum(m - f for m, f in errs) / total
        print(f"  {cluster:<7} {job[:26]:<26} {kind:<10} {len(errs):>5} "
              f"{100 * statistics.mean(m for m, _ in errs):>6.1f}% "
              f"{100 * statistics.mean(f for _, f in errs):>6.1f}% {excess:>19.2f}")


def two_against_three_nodes(times: Times) -> None:
    by_group: dict[tuple[str, str, tuple[int, ...]], list[float]] = defaultdict(list)
    for (cluster, job, placement, _), (sync_s, _) in times.items():
        by_group[(cluster, job, placement)].append(sync_s)
    print("two-node against three-node sync, same GPUs per node (medians over local batches):")
    for cluster in sorted(fitc.SIA_CLUSTERS):
        for job in sorted({j for c, j, _ in by_group if c == cluster}):
            pairs = []
            for k in range(1, 9):
                two, three = by_group.get((cluster, job, (k, k))), by_group.get(
                    (cluster, job, (k, k, k)))
                if two and three:
                    ring = (1 - 1 / (2 * k)) / (1 - 1 / (3 * k))  # 2(R-1)/R, R = 2k over 3k
                    slower = statistics.median(two) / statistics.median(three)
                    pairs.append(f"{k}/node {slower:.2f}x (traffic {ring:.2f}x)")
            if pairs:
                print(f"  {cluster} {job.split(' (')[0]}: " + ", ".join(pairs))


def own_fit(rows: list[fitc.SiaRow]) -> dict[str, tuple[float, list[float]]]:
    """Per cluster, (the socket bandwidth fitted on its own rows, the same-batch errors of its
    uniform multi-GPU rows with it and the overlap exponent fitted there too): the held-out
    cluster known in advance."""
    out = {}
    for cluster in sorted(fitc.SIA_CLUSTERS):
        own = [r for r in rows if r.cluster == cluster]
        refit = refit_on(own)
        with using_calibration(refit.calibration):
            out[cluster] = (refit.socket_gbs,
                            [abs(fitc.pod_step_s(r, r.local_bsz, r.single_step_s) / r.step_s - 1)
                             for r in own if len(set(r.placement)) == 1])
    return out


def scaled_by_two_gpus(rows: list[fitc.SiaRow]) -> tuple[list[float], list[float]]:
    """(model, scaled) same-batch errors of the held-out clusters' uniform placements other than
    one node of two GPUs, the scaled prediction being the 1-GPU step plus the model's excess over
    it times the job's median measured over modelled excess on that 2-GPU placement."""
    model: list[float] = []
    scaled: list[float] = []
    for held in sorted(fitc.SIA_CLUSTERS):
        with using_calibration(refit_without_cluster(rows, held).calibration):
            asked = [(r, fitc.pod_step_s(r, r.local_bsz, r.single_step_s)) for r in rows
                     if r.cluster == held and len(set(r.placement)) == 1]
        ratios: dict[str, list[float]] = defaultdict(list)
        for r, predicted in asked:
            if r.placement == (2,) and predicted > r.single_step_s:
                ratios[r.model].append((r.step_s - r.single_step_s)
                                       / (predicted - r.single_step_s))
        for r, predicted in asked:
            if r.placement == (2,) or not ratios[r.model]:
                continue
            scale = statistics.median(ratios[r.model])
            model.append(abs(predicted / r.step_s - 1))
            scaled.append(abs((r.single_step_s + scale * (predicted - r.single_step_s))
                              / r.step_s - 1))
    return model, scaled


def print_bounds(rows: list[fitc.SiaRow]) -> None:
    own = own_fit(rows)
    every = [e for _, errs in own.values() for e in errs]
    print("what the gap is not: the held-out cluster's own socket bandwidth and overlap "
          "exponent (in-sample) "
          f"{100 * statistics.mean(every):.1f} % ("
          + ", ".join(f"{c} {gbs:.1f} GB/s {100 * statistics.mean(errs):.1f} %"
                      for c, (gbs, errs) in own.items()) + ")")
    model, scaled = scaled_by_two_gpus(rows)
    print("  each job's sync scaled by its own 2-GPU placement: "
          f"{100 * statistics.mean(scaled):.1f} % against the model's "
          f"{100 * statistics.mean(model):.1f} % on the same "
          f"{len(model)} step times")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--rows", type=int, default=15, help="groups to list (default 15)")
    args = ap.parse_args()
    path = args.data / "benchmarks" / "sia_step_times_calibration.csv"
    if not path.exists():
        print(f"no Sia traces at {path}: pass --data", file=sys.stderr)
        return 2
    rows = [r for r in fitc.load_sia(path) if r.cluster in fitc.SIA_CLUSTERS]
    times = trace_times(path)
    print_excess(group_errors(rows, times), args.rows)
    two_against_three_nodes(times)
    print_bounds(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
