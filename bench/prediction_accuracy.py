"""How well does the performance model predict throughput it has not seen?

    python bench/prediction_accuracy.py [--data ../shared/data]

Single GPU, on lambda_throughput_calibration.csv: leave-one-workload-out (the headline: each
workload family, ResNet-50, SSD300 and BERT (base and large together, see WORKLOAD_FAMILIES),
with ALL its rows out of the refit, as a user's new model would be) and leave-one-GPU-out (each
GPU H with all its rows out). The coefficients are refitted without the held-out rows
(scripts/fit_calibration.py), then each held-out row is predicted from every other GPU's
measurement of the same model and precision in the same bench version, through the
public ``gpucost.predict(..., batch_size=...)`` at the batch the target was measured with (the
model's per-step terms move the source's batch to the target's; "model at source
batch" is the same call without ``batch_size``). Baselines, computed on the same pairs: the
spec-sheet ratio (target over source peak FLOPS at the precision; and, separately, memory
bandwidth).

Multi-GPU: held-out placements of sia_step_times_calibration.csv. Every third placement (GPUs
per node, e.g. "2 2 4") of each cluster is held out; the cluster's link coefficients and each
job's gradient bytes and overlap exponent are fitted on the others; each held-out step time is
predicted from the same job's 1-GPU step at the same local batch. Baseline: linear scaling with
no communication (the step time stays the 1-GPU step time). The traces' own floor: an oracle
that knows each held-out step's sync time exactly (the trace's sync_time_s) and adds it to the
1-GPU compute time; what it still misses is compute time varying between placements, which no
sync model can predict. Only the AWS T4 and Azure V100 clusters are read (SIA_CLUSTERS); the
DGX-A100, RTX 2080 Ti and Quadro RTX 6000 clusters of the traces are held out of everything.
Reference for what the traces allow: a lookup of the same job, local batch, node count and GPUs
on the fullest node among the training placements (no model at all), next to the model on the
same step times.

Prints mean and median absolute percentage error for the model and the baselines, and the
memory rule at the batches Lambda ran (:func:`memory_at_lambda_batches`).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import fit_calibration as fitc  # noqa: E402

import gpucost  # noqa: E402
from gpucost.model import bands, translate  # noqa: E402
from gpucost.model.perf import using_calibration  # noqa: E402


def _pct(errors: list[float]) -> str:
    mean, median = statistics.mean(errors), statistics.median(errors)
    return f"mean {100 * mean:5.1f} %  median {100 * median:5.1f} %"


# Workload families of the Lambda tables, each held out whole. BERT-base and BERT-large are
# one family: the same encoder architecture and op mix at two widths and depths, so holding one
# out while the other stays in the fit would leave the held-out workload's own kernels in it.
# SSD300 keeps a ResNet-50 backbone but adds detection heads, a larger input and its own
# data pipeline: a separate family (what leaving it out measures is the heads and pipeline).
WORKLOAD_FAMILIES = {"resnet50": "ResNet-50", "ssd": "SSD300", "bert_base_squad": "BERT",
                     "bert_large_squad": "BERT", "maskrcnn": "Mask R-CNN",
                     "tacotron2": "Tacotron2", "waveglow": "WaveGlow"}
# The three questions, the headline first: the memory rule decides the target's batch from the
# source's (what `gpucost predict` answers), the target's own batch given, and pairs measured at
# the same batch (translation alone).
SOURCE_BATCH = "source batch, memory rule"
TARGET_BATCH = "target's batch"
SAME_BATCH = "same batch"
QUESTIONS = (SOURCE_BATCH, TARGET_BATCH, SAME_BATCH)
RATIOS = "measured over predicted"  # signed, for the error bands


def band_table(samples: dict[str, list[float]], multi: list[float],
               one_node_links: dict[str, list[float]], data: Path) -> dict[str, Any]:
    """The error-band table (gpucost.model.bands): 10th and 90th percentiles of measured over
    predicted throughput per key, for several GPUs in one machine per link, and for several
    GPUs on held-out clusters."""
    def entry(ratios: list[float]) -> dict[str, float]:
        deciles = statistics.quantiles(ratios, n=10)
        return {"low": round(min(deciles[0], 1.0), 4), "high": round(max(deciles[-1], 1.0), 4),
                "pairs": len(ratios)}

    return {
        "provenance": {
            "written_by": "python bench/prediction_accuracy.py --write-bands",
            "date": dt.date.today().isoformat(),
            "data": [*sorted(p.name for p in fitc.lambda_paths(data)),
                     "sia_step_times_calibration.csv"],
            "method": "leave-one-workload-out predictions at the source's batch with the memory "
                      "rule deciding (single GPU), the Sia traces' 1-GPU steps moved from one "
                      "or two measured batches to the others (same-gpu, same-gpu-line), "
                      "Lambda's runs of 2-8 GPUs in one machine from the 1-GPU run, "
                      "leave-one-workload-out, per link (one_node), leave-one-cluster-out "
                      "step times at the same local batch (several GPUs); 10th and 90th "
                      "percentiles of measured over predicted throughput (low is at most 1, "
                      "high at least 1)",
        },
        "single_gpu": {k: entry(v) for k, v in sorted(samples.items()) if len(v) >= 10},
        "one_node": {k: entry(v) for k, v in sorted(one_node_links.items()) if len(v) >= 10},
        "multi_gpu": entry(multi),
    }


# Target batch over source batch, as issue 20 tabulated the error: a model too flat in the batch
# reads > 1 on the left (small batches too fast) and < 1 on the right.
BATCH_RATIO_BUCKETS = ("<=0.1x", "0.1-0.5x", "0.5-1x", "same", "1-2x", ">2x")


def batch_ratio_bucket(ratio: float) -> str:
    if ratio == 1.0:
        return "same"
    edges = ((0.1, "<=0.1x"), (0.5, "0.1-0.5x"), (1.0, "0.5-1x"), (2.0, "1-2x"))
    return next((label for edge, label in edges if ratio <= edge), ">2x")


def _cross_validate(obs: list[Any], group_of: Any, label: str,
                    band_samples: dict[str, list[float]] | None = None, *,
                    by_precision: bool = False) -> dict[str, list[float]]:
    """Hold out each group (all its rows out of the refit), predict each held-out row from every
    other GPU's measurement of the same model, precision and bench version; errors per method.
    ``band_samples`` collects measured over predicted throughput at the source's batch by what
    separates source and target (``bands`` keys); ``by_precision`` also prints the source-batch
    error per held-out group and precision."""
    from gpucost.catalog import get_gpu

    errors: dict[str, list[float]] = {q: [] for q in QUESTIONS}
    errors.update({"flops ratio": [], "bandwidth ratio": []})
    per_group: dict[str, dict[str, list[float]]] = {}
    # At the source's batch, per precision class of the pair (fp32 on Ampere and newer ran on
    # TF32 in the benchmark's containers): the float32 transformers are BERT's "tf32" rows.
    per_precision: dict[str, list[float]] = {}
    by_ratio: dict[str, list[float]] = {}  # log(predicted / measured) at the target's batch
    reduced = 0
    shipped = dict(translate.shipped_calibration_data())
    for held in sorted({group_of(o) for o in obs}):
        fit = fitc.fit_single([o for o in obs if group_of(o) != held], get_gpu)
        cal: dict[str, Any] = {**shipped, **fitc.single_calibration(fit)}
        group = per_group.setdefault(held, {q: [] for q in QUESTIONS})
        for tgt in (o for o in obs if group_of(o) == held):
            target_spec = get_gpu(tgt.gpu)
            for src in obs:
                if src.gpu == tgt.gpu or (src.version, src.model, src.precision) != (
                        tgt.version, tgt.model, tgt.precision):
                    continue
                source_spec = get_gpu(src.gpu)
                profile = fitc.measured_profile(src)
                with using_calibration(cal):  # the public predict, with the refit
                    ruled = gpucost.predict(profile, gpu=tgt.gpu)
                    at_target = gpucost.predict(profile, gpu=tgt.gpu,
                                                batch_size=tgt.batch_size).throughput
                reduced += ruled.batch_reduced_from is not None
                if band_samples is not None:
                    key = bands.single_key(bands.relation(source_spec, target_spec),
                                           bands.batch_key(src.batch_size, ruled.batch_size))
                    band_samples.setdefault(key, []).append(tgt.throughput / ruled.throughput)
                flops = src.throughput * (translate.peak_tflops(target_spec, src.precision)
                                          / translate.peak_tflops(source_spec, src.precision))
                bandwidth = src.throughput * target_spec.mem_bw_gbs / source_spec.mem_bw_gbs
                by_ratio.setdefault(batch_ratio_bucket(tgt.batch_size / src.batch_size),
                                    []).append(math.log(at_target / tgt.throughput))
                answers = {SOURCE_BATCH: ruled.throughput, TARGET_BATCH: at_target}
                if src.batch_size == tgt.batch_size:
                    answers[SAME_BATCH] = at_target
                for question, predicted in answers.items():
                    err = abs(predicted / tgt.throughput - 1)
                    errors[question].append(err)
                    group[question].append(err)
                per_precision.setdefault(f"{held} {src.precision}", []).append(
                    abs(ruled.throughput / tgt.throughput - 1))
                errors["flops ratio"].append(abs(flops / tgt.throughput - 1))
                errors["bandwidth ratio"].append(abs(bandwidth / tgt.throughput - 1))
    print(f"single GPU: {label}, {len(errors[SOURCE_BATCH])} (source, target) pairs over "
          f"{len(per_group)} held-out groups ({reduced} re-planned by the memory rule)")
    for name, errs in errors.items():
        print(f"  {name:<26} {_pct(errs)}  ({len(errs)} pairs)")
    for question in QUESTIONS:
        print(f"  per held-out group, {question} (mean): " + ", ".join(
            f"{g} {100 * statistics.mean(e[question]):.1f}"
            for g, e in sorted(per_group.items()) if e[question]))
    if by_precision:
        print(f"  per held-out group and precision, {SOURCE_BATCH} (mean): " + ", ".join(
            f"{k} {100 * statistics.mean(v):.1f}" for k, v in sorted(per_precision.items())))
    print("  at the target's batch, predicted over measured (geometric mean) by target batch / "
          "source batch: " + ", ".join(
              f"{label} {math.exp(statistics.mean(by_ratio[label])):.2f} "
              f"({len(by_ratio[label])})" for label in BATCH_RATIO_BUCKETS if label in by_ratio))
    return errors


def single_gpu_workload_out(data: Path, band_samples: dict[str, list[float]]
                            ) -> dict[str, list[float]]:
    """Leave-one-workload-out errors; its measured over predicted ratios go into
    ``band_samples`` (the error bands' single-GPU part)."""
    from gpucost.catalog import get_gpu

    obs, _ = fitc.load_lambda(fitc.lambda_paths(data), get_gpu)
    return _cross_validate(obs, lambda o: WORKLOAD_FAMILIES[o.model],
                           "leave-one-workload-out (the accuracy to expect on a new model)",
                           band_samples, by_precision=True)


def single_gpu(data: Path, band_samples: dict[str, list[float]]
               ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(leave-one-workload-out, leave-one-GPU-out) errors; the workload-out ratios go into
    ``band_samples``."""
    from gpucost.catalog import get_gpu

    obs, unresolved = fitc.load_lambda(fitc.lambda_paths(data), get_gpu)
    workload = single_gpu_workload_out(data, band_samples)
    gpu = _cross_validate(obs, lambda o: o.gpu, "leave-one-GPU-out")
    print("  GPUs in the table the catalog does not resolve: "
          + (", ".join(unresolved) if unresolved else "none"))
    return workload, gpu


def memory_at_lambda_batches(rows: list[Any]) -> dict[str, float]:
    """The memory rule against what ran: for each Lambda row (``fitc.load_lambda``), the peak
    its workload's signature estimates at the row's own per-GPU batch over what that GPU can
    use (``gpucost.fit_memory``, measured as if on a larger GPU so no source cap applies); the
    median per family and precision. The benchmark picked each batch to fill its GPU, so a
    signature that keeps what its model keeps reads near the same share for every family; one
    far below keeps less than its runs did, and the rule re-plans too few batches for it."""
    from gpucost.catalog import get_gpu

    shares: dict[str, list[float]] = {}
    for row in rows:
        profile = gpucost.Profile.from_measurement(
            gpu="H200 SXM 141GB", throughput=row.throughput, batch_size=row.batch_size,
            precision=row.precision, param_count=fitc.FAMILY_PARAMS[row.model],
            name=fitc.MODEL_NAMES[row.model])
        fit = gpucost.fit_memory(profile, get_gpu(row.gpu))
        shares.setdefault(f"{fitc.MODEL_NAMES[row.model]} {row.precision}", []).append(
            fit.peak_gb / fit.usable_gb)
    medians = {key: statistics.median(v) for key, v in sorted(shares.items())}
    print("the memory rule at the batches Lambda ran (estimated peak over usable memory, "
          "median): " + ", ".join(f"{key} {value:.2f}" for key, value in medians.items()))
    return medians


def _per_gpu_prices() -> dict[str, dict[str, float]]:
    """provider -> catalog GPU -> cheapest on-demand $/h per GPU in the embedded snapshot."""
    from gpucost.pricing.snapshot import load_offers

    cols = load_offers().columns
    prices: dict[str, dict[str, float]] = {}
    for provider, gpu, count, price in zip(cols["provider"], cols["gpu"], cols["gpu_count"],
                                           cols["price_hr"], strict=True):
        per_gpu = float(price) / float(count)
        if per_gpu > 0.0 and per_gpu == per_gpu:
            table = prices.setdefault(str(provider), {})
            table[str(gpu)] = min(per_gpu, table.get(str(gpu), float("inf")))
    return prices


def decision_regret(obs: list[Any]) -> dict[str, tuple[list[float], list[float]]]:
    """What picking the cheapest GPU per sample costs against the best pick, per provider:
    for each held-out workload family (refitted without it), each (bench version, model,
    precision) and each GPU measured as the source, the model ranks that provider's GPUs with a
    measurement by predicted $/sample (its cheapest on-demand $/h per GPU over the predicted
    throughput, the memory rule deciding the batch); the regret is the true $/sample of the
    pick over the truly cheapest one's, minus 1. Beside it the same for ranking by $/hour."""
    from gpucost.catalog import get_gpu

    prices = _per_gpu_prices()
    shipped = dict(translate.shipped_calibration_data())
    regret: dict[str, tuple[list[float], list[float]]] = {p: ([], []) for p in prices}
    for held in sorted(set(WORKLOAD_FAMILIES.values())):
        fit = fitc.fit_single([o for o in obs if WORKLOAD_FAMILIES[o.model] != held], get_gpu)
        cal: dict[str, Any] = {**shipped, **fitc.single_calibration(fit)}
        groups: dict[tuple[str, str, str], dict[str, Any]] = {}
        for o in obs:
            if WORKLOAD_FAMILIES[o.model] == held:
                groups.setdefault((o.version, o.model, o.precision), {})[o.gpu] = o
        for measured in groups.values():
            for provider, table in prices.items():
                candidates = [g for g in measured if g in table]
                if len(candidates) < 2:
                    continue
                true_cost = {g: table[g] / measured[g].throughput for g in candidates}
                best = min(true_cost.values())
                by_hour = min(candidates, key=lambda g: table[g])
                for src in measured.values():
                    profile = fitc.measured_profile(src)
                    with using_calibration(cal):
                        predicted = {g: table[g] / gpucost.predict(profile, gpu=g).throughput
                                     for g in candidates}
                    pick = min(candidates, key=lambda g: predicted[g])
                    regret[provider][0].append(true_cost[pick] / best - 1)
                    regret[provider][1].append(true_cost[by_hour] / best - 1)
    print("decision regret (held-out workloads): extra $/sample of the pick over the best "
          "on one provider's measured GPUs, model vs cheapest $/hour")
    for provider, (model, hourly) in sorted(regret.items()):
        if model:
            print(f"  {provider:<10} model {100 * statistics.mean(model):5.1f} %   $/hour "
                  f"{100 * statistics.mean(hourly):5.1f} %   ({len(model)} picks)")
    return regret


def trace_times(path: Path) -> dict[tuple[str, str, tuple[int, ...], int], tuple[float, float]]:
    """(sync, compute) seconds per (cluster, job, placement, local batch) of the traces' rows
    (medians), for the clusters the model may read."""
    import csv

    groups: dict[tuple[str, str, tuple[int, ...], int], list[tuple[float, float]]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["cluster"] not in fitc.SIA_CLUSTERS:
                continue  # held-out clusters are never read
            key = (row["cluster"], row["model"], tuple(int(c) for c in row["placement"]),
                   int(row["local_bsz"]))
            groups.setdefault(key, []).append((float(row["sync_time_s"]),
                                               float(row["compute_time_s"])))
    return {k: (statistics.median(s for s, _ in v), statistics.median(c for _, c in v))
            for k, v in groups.items()}


def multi_gpu(data: Path) -> dict[str, list[float]]:
    from gpucost.catalog import get_gpu

    path = data / "benchmarks" / "sia_step_times_calibration.csv"
    rows = [r for r in fitc.load_sia(path) if r.cluster in fitc.SIA_CLUSTERS]
    times = trace_times(path)
    errors: dict[str, list[float]] = {"model": [], "floor (true sync)": [], "linear scaling": []}
    # How repeatable the traces are: each held-out step predicted by a lookup, the median
    # slowdown (step over 1-GPU step) of the training placements of the same job and local batch
    # with the same node count and GPUs on the fullest node; and the model on the same rows.
    lookup: dict[str, list[float]] = {"trace lookup": [], "model, same rows": []}
    for cluster in sorted({r.cluster for r in rows}):
        placements = sorted({r.placement for r in rows if r.cluster == cluster})
        held = set(placements[1::3])
        train = [r for r in rows if r.cluster != cluster or r.placement not in held]
        params, jobs = fitc.fit_scaling(train, get_gpu)
        spec = get_gpu(fitc.SIA_CLUSTERS[cluster].gpu)
        test = [r for r in rows if r.cluster == cluster and r.placement in held]
        slowdowns: dict[tuple[str, int, int, int], list[float]] = {}
        for r in train:
            if r.cluster == cluster:
                key = (r.model, r.local_bsz, len(r.placement), max(r.placement))
                slowdowns.setdefault(key, []).append(r.step_s / r.single_step_s)
        for r in test:
            predicted = fitc.predict_sia_step(r, jobs[(r.cluster, r.model)], params[cluster],
                                              spec)
            err = abs(predicted / r.step_s - 1)
            errors["model"].append(err)
            sync_s = times[(r.cluster, r.model, r.placement, r.local_bsz)][0]
            single_compute_s = times[(r.cluster, r.model, (1,), r.local_bsz)][1]
            errors["floor (true sync)"].append(abs((single_compute_s + sync_s) / r.step_s - 1))
            errors["linear scaling"].append(abs(r.single_step_s / r.step_s - 1))
            similar = slowdowns.get((r.model, r.local_bsz, len(r.placement), max(r.placement)))
            if similar:
                looked_up = r.single_step_s * statistics.median(similar)
                lookup["trace lookup"].append(abs(looked_up / r.step_s - 1))
                lookup["model, same rows"].append(err)
        n = len(test)
        print(f"  {cluster}: {len(held)} of {len(placements)} placements held out, "
              f"{n} step times; model {_pct(errors['model'][-n:])}, floor "
              f"{_pct(errors['floor (true sync)'][-n:])}")
    print(f"multi GPU: held-out placements, {len(errors['model'])} step times")
    for name, errs in errors.items():
        print(f"  {name:<22} {_pct(errs)}")
    print(f"  the traces' own repeatability, on the {len(lookup['trace lookup'])} step times "
          "with a training placement of the same shape:")
    for name, errs in lookup.items():
        print(f"    {name:<20} {_pct(errs)}")
    return errors


def one_node(data: Path, link_ratios: dict[str, list[float]] | None = None
             ) -> dict[str, list[float]]:
    """Several GPUs in one machine, on Lambda's runs of 2-8 GPUs: each run predicted from the
    1-GPU run of the same version, model, precision, GPU and per-GPU batch, through the public
    ``gpucost.predict`` over the link NCCL used (the runs with peer copies off went through the
    host: "pcie"), with the step-time variation (``straggler_cv``) refitted without the run's
    workload family on the NVLink runs (leave-one-workload-out, as for one GPU). Baselines on
    the same runs: the model without the wait for the slowest GPU, and linear scaling. Errors
    also per link: NVLink, and through the host (PCIe cards, peer copies off). ``link_ratios``
    collects the model's measured over predicted throughput per link as predict names it
    ("nvlink", "pcie": the error bands of one node)."""
    from gpucost.catalog import get_gpu

    runs = fitc.load_one_node_runs(fitc.lambda_paths(data), get_gpu)
    shipped = translate.shipped_calibration_data()
    errors: dict[str, list[float]] = {"model": [], "no wait for the slowest": [],
                                      "linear scaling": []}
    per_family: dict[str, list[float]] = {}
    per_link: dict[str, list[float]] = {}
    cv_range = []
    for family in sorted({r.one.model for r in runs}):
        held = [r for r in runs if r.one.model == family]
        cv = fitc.fit_straggler_cv(
            fitc.nvlink_runs([r for r in runs if r.one.model != family], get_gpu), shipped)
        cv_range.append(cv)
        for name, value in (("model", cv), ("no wait for the slowest", 0.0)):
            with using_calibration({**shipped, "scaling": {**shipped["scaling"],
                                                           "straggler_cv": value}}):
                predicted_over_measured = [fitc.one_node_ratio(r) for r in held]
            errs = [abs(ratio - 1) for ratio in predicted_over_measured]
            errors[name] += errs
            if name == "model":
                per_family[family] = errs
                for run, err, ratio in zip(held, errs, predicted_over_measured, strict=True):
                    kind = fitc.link_kind(run, get_gpu)
                    per_link.setdefault("host, peer copies off" if run.link else kind,
                                        []).append(err)
                    if link_ratios is not None:
                        link_ratios.setdefault(kind, []).append(1.0 / ratio)
        errors["linear scaling"] += [abs(r.gpus * r.one.throughput / r.throughput - 1)
                                     for r in held]
    print(f"several GPUs in one machine (Lambda's runs of 2-8 GPUs, same per-GPU batch, "
          f"leave-one-workload-out), {len(runs)} runs; the step-time variation fitted on the "
          f"NVLink runs without the family {min(cv_range):.3f}-{max(cv_range):.3f}")
    for name, errs in errors.items():
        print(f"  {name:<24} {_pct(errs)}")
    print("  per link, model: " + ", ".join(
        f"{link} {_pct(errs)} ({len(errs)})" for link, errs in sorted(per_link.items())))
    print("  per held-out family (mean): " + ", ".join(
        f"{fitc.MODEL_NAMES[f]} {100 * statistics.mean(e):.1f}" for f, e in per_family.items()))
    return errors


def _pod_network_words(cluster_name: str) -> str:
    network_gbps, pods = fitc.pod_network(cluster_name)
    stream = (f", {pods.streams} x {pods.stream_gbps:g} Gbit/s TCP streams"
              if pods.stream_gbps else "")
    transport = fitc.SIA_CLUSTERS[cluster_name].transport
    return f"{cluster_name} {network_gbps:g} Gbit/s {transport}{stream}"


@dataclass(frozen=True)
class SiaRefit:
    """The coefficients the Sia traces teach, fitted on some clusters' rows, and the shipped
    calibration with them."""

    overlap_gamma: float
    socket_gbs: float  # the host's socket bus bandwidth, GB/s
    calibration: dict[str, Any]


def refit_on(rows: list[Any]) -> SiaRefit:
    """The overlap exponent (the median job's of the per-job fit, as shipped) fitted on
    ``rows`` alone, then the host's socket bandwidth with it, each as fit_calibration fits it."""
    from gpucost.catalog import get_gpu

    shipped = dict(translate.shipped_calibration_data())
    gamma = fitc.median_overlap_gamma(fitc.fit_scaling(rows, get_gpu)[1])
    cal = {**shipped, "scaling": {**shipped["scaling"], "overlap_gamma": gamma}}
    socket_gbs = fitc.fit_socket_host_busbw(rows, cal)
    return SiaRefit(gamma, socket_gbs, {**cal, "scaling": {**cal["scaling"],
                                                           "socket_host_busbw_gbs": socket_gbs}})


def refit_without_cluster(rows: list[Any], held: str) -> SiaRefit:
    """What a cluster never fitted is asked with: the Sia coefficients fitted on every other
    cluster's rows (:func:`refit_on`)."""
    return refit_on([r for r in rows if r.cluster != held])


def held_out_clusters(data: Path) -> dict[str, list[float]]:
    """Multi-GPU on a cluster never fitted, as a user asks it: the job's 1-GPU step on the
    cluster's GPU, translated by the public ``gpucost.predict`` to the placement (nodes x GPUs
    per node, the cluster's listed network and transport with the TCP stream caps its pods
    met (fitc.SIA_CLUSTERS, POD_NETWORKS), over sockets inside a node (one pod per GPU), the
    shipped link coefficients, which come from NCCL anchors, except the two the traces teach,
    the host's socket bandwidth and backward's overlap exponent, refitted on the other cluster
    alone: :func:`refit_without_cluster`), at the same local batch and from the
    1-GPU step at the job's median measured local batch ("target's batch": the traces span up
    to 1,000x in batch); the job's size is its published parameter count (fitc.SIA_PARAMS);
    "target's batch, two measured" adds the 1-GPU step at the next larger batch as a second
    measurement (rows at either measured batch left out of both). Uniform placements only (the
    model's groups have one GPU count per node). Baselines: no communication (the 1-GPU step),
    and the floor (1-GPU compute plus the trace's true sync time)."""
    path = data / "benchmarks" / "sia_step_times_calibration.csv"
    rows = [r for r in fitc.load_sia(path) if r.cluster in fitc.SIA_CLUSTERS]
    times = trace_times(path)
    two = f"{TARGET_BATCH}, two measured"
    errors: dict[str, list[float]] = {SAME_BATCH: [], TARGET_BATCH: [], two: [],
                                      "no communication": [], "floor (true sync)": [], RATIOS: []}
    for held in sorted(fitc.SIA_CLUSTERS):
        refit = refit_without_cluster(rows, held)
        singles: dict[str, dict[int, float]] = {}
        for r in rows:
            if r.cluster == held:
                singles.setdefault(r.model, {})[r.local_bsz] = r.single_step_s
        middle = {m: sorted(b.items())[len(b) // 2] for m, b in singles.items()}
        second = {m: sorted(b.items())[len(b) // 2 + 1] for m, b in singles.items()}
        n_before = len(errors[SAME_BATCH])
        with using_calibration(refit.calibration):
            for r in rows:
                if r.cluster != held or len(set(r.placement)) != 1:
                    continue
                same = fitc.pod_step_s(r, r.local_bsz, r.single_step_s)
                moved = fitc.pod_step_s(r, *middle[r.model])
                errors[SAME_BATCH].append(abs(same / r.step_s - 1))
                errors[RATIOS].append(same / r.step_s)  # measured over predicted throughput
                errors[TARGET_BATCH].append(abs(moved / r.step_s - 1))
                if r.local_bsz not in (middle[r.model][0], second[r.model][0]):
                    moved_two = fitc.pod_step_s(r, *middle[r.model], other=second[r.model])
                    errors[two].append(abs(moved_two / r.step_s - 1))
                errors["no communication"].append(abs(r.single_step_s / r.step_s - 1))
                sync_s = times[(r.cluster, r.model, r.placement, r.local_bsz)][0]
                single_compute_s = times[(r.cluster, r.model, (1,), r.local_bsz)][1]
                errors["floor (true sync)"].append(
                    abs((single_compute_s + sync_s) / r.step_s - 1))
        print(f"  {held} held out: {len(errors[SAME_BATCH]) - n_before} multi-GPU step times, "
              f"same batch {_pct(errors[SAME_BATCH][n_before:])}; fitted on the other cluster: "
              f"the host's socket bus bandwidth {refit.socket_gbs:.1f} GB/s, the overlap "
              f"exponent {refit.overlap_gamma:.3f}")
    print(f"multi GPU on a held-out cluster (leave-one-cluster-out, uniform placements), "
          f"{len(errors[SAME_BATCH])} step times; the network as the jobs reached it: "
          + ", ".join(_pod_network_words(c) for c in sorted(fitc.SIA_CLUSTERS))
          + f"; {fitc.PODS_INTRA_NODE_LINK} inside a node")
    for name, errs in errors.items():
        if name != RATIOS:
            print(f"  {name:<26} {_pct(errs)}")
    return errors


def sia_batch_shape(data: Path, band_samples: dict[str, list[float]] | None = None
                    ) -> dict[str, list[float]]:
    """Throughput in the batch on one GPU, as the Sia traces measured it: each job's 1-GPU step
    at its median measured local batch, moved by the public ``gpucost.predict(...,
    batch_size=b)`` to every other batch the trace ran on the same GPU (the AWS T4 and Azure
    V100 clusters only). Nothing is refitted: from one measurement the per-step terms come from
    the signature the job's name matches at its published parameter count; from two (the
    median batch and the next larger one, ``Profile.from_measurement(other_batches=...)``, as a
    user who measured twice would give them) the step's fixed and per-sample parts are
    measured (a line steeper than the model's per-step costs allow only beyond two standard
    errors of its noise: ``perf.measured_fixed_share``). Prints the mean error per job and the
    signed bias on smaller and larger batches. ``band_samples`` collects measured over
    predicted throughput (the error bands' rows for the measured GPU at another batch)."""
    steps: dict[tuple[str, str], dict[int, list[float]]] = {}
    with (data / "benchmarks" / "sia_step_times_calibration.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["cluster"] in fitc.SIA_CLUSTERS and row["placement"] == "1":
                steps.setdefault((row["cluster"], row["model"]), {}).setdefault(
                    int(row["local_bsz"]), []).append(float(row["step_time_s"]))
    errors: dict[str, list[float]] = {"one batch measured": [], "two batches measured": []}
    band_rel = {"one batch measured": bands.SAME_GPU, "two batches measured": bands.SAME_GPU_LINE}
    for question, errs in errors.items():
        smaller: list[float] = []
        larger: list[float] = []
        per_job = []
        for (cluster, model), by_batch in sorted(steps.items()):
            median = {b: statistics.median(v) for b, v in by_batch.items()}
            batches = sorted(median)
            middle = batches[len(batches) // 2]
            measured = {middle}
            others = {}
            if question == "two batches measured":
                second = batches[batches.index(middle) + 1]
                measured.add(second)
                others = {second: second / median[second]}
            profile = gpucost.Profile.from_measurement(
                gpu=fitc.SIA_CLUSTERS[cluster].gpu, throughput=middle / median[middle],
                batch_size=middle, precision="fp32", param_count=fitc.SIA_PARAMS[model], name=model,
                other_batches=others)
            job = []
            for b in batches:
                if b in measured:
                    continue
                ratio = (gpucost.predict(profile, batch_size=b, fit_batch="keep").step_time_s
                         / median[b])
                job.append(abs(ratio - 1))
                (smaller if b < middle else larger).append(math.log(ratio))
                if band_samples is not None:  # a step ratio is the inverse throughput's
                    band_samples.setdefault(bands.single_key(
                        band_rel[question], bands.batch_key(middle, b)), []).append(ratio)
            errs.extend(job)
            per_job.append(f"{cluster}/{model.split(' (')[0]} {100 * statistics.mean(job):.0f}")
        print(f"single GPU, throughput in the batch (Sia traces, same job and GPU, {question}, "
              f"{len(errs)} other batches): {_pct(errs)}; predicted over measured step time on "
              f"smaller batches {math.exp(statistics.mean(smaller)):.2f}, on larger "
              f"{math.exp(statistics.mean(larger)):.2f}")
        print("  per job (mean %): " + ", ".join(per_job))
    return errors


# NCCL all-reduce bus bandwidth anchors (nccl_busbw_reference.csv) the model can be held to:
# (setting as in the file, catalog GPU, GPUs, link).
NCCL_CHECKS = (
    ("8x H100 SXM (1 node)", "H100 SXM5 80GB", 8, "nvlink"),
    ("8x A100 SXM4 80GB (1 node)", "A100 SXM4 80GB", 8, "nvlink"),
    ("A100 NVLink pair (NV12)", "A100 SXM4 80GB", 2, "nvlink"),
    ("8x RTX 5090 (PCIe only)", "RTX 5090", 8, "pcie"),
    ("5x RTX 4090 (P2P enabled by tinygrad patched driver)", "RTX 4090", 5, "pcie"),
)


def nccl_anchors(data: Path) -> None:
    """Predicted intra-node bus bandwidth next to the measured NCCL figures."""
    import csv
    import re

    from gpucost.catalog import get_gpu
    from gpucost.model import scaling

    with (data / "nccl_busbw_reference.csv").open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["algo"] in ("RING", "default")]
    print("intra-node all-reduce bus bandwidth, model vs NCCL reference (GB/s):")
    cal = translate.shipped_calibration().scaling
    for setting, gpu, k, link in NCCL_CHECKS:
        measured = [float(v) for r in rows if r["setting"] == setting
                    for v in re.findall(r"\d+(?:\.\d+)?", r["busbw_gbps"])][:2]
        if not measured:
            continue
        lk = scaling.resolve_links(get_gpu(gpu), cal, intra_node_gbps=None, inter_node_gbps=None,
                                   intra_node_link=link, gpus_per_node=k)
        model = min(lk.intra_busbw_Bps, lk.host_busbw_Bps / k) / 1e9
        print(f"  {setting:<55} model {model:6.1f}  measured {statistics.mean(measured):6.1f}")


def predict_speed() -> float:
    """Microseconds per predict() call over the configurations a compare run asks for."""
    from gpucost.catalog import get_gpu

    p = gpucost.Profile.from_measurement(gpu="V100 SXM2 16GB", throughput=1200.0, batch_size=256,
                                 precision="amp", param_count=25.6e6)
    gpus = [get_gpu(g).name for g in ("T4", "L4", "A10G", "L40S", "A100 SXM4 80GB",
                                      "H100 SXM5 80GB", "H200 SXM 141GB", "RTX 4090")]
    configs = [(g, k, n, net) for g in gpus for k in (1, 2, 4, 8) for n in range(1, 9)
               for net in (25.0, 100.0, 400.0)]
    timings = []
    for batch in (None, 512):  # the profile's batch; another one
        for g, k, n, net in configs:  # first calls fill the catalog and rate caches
            gpucost.predict(p, gpu=g, gpus_per_node=k, nodes=n, inter_node_gbps=net,
                            batch_size=batch)
        t0 = time.perf_counter()
        for g, k, n, net in configs:
            gpucost.predict(p, gpu=g, gpus_per_node=k, nodes=n, inter_node_gbps=net,
                            batch_size=batch)
        timings.append((time.perf_counter() - t0) / len(configs) * 1e6)
    print(f"predict(): {timings[0]:.1f} us per call over {len(configs)} configurations, "
          f"{timings[1]:.1f} us at another batch (target < 30 us)")
    return max(timings)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--write-bands", action="store_true",
                    help=f"write the error-band table to {bands.BANDS_PATH.relative_to(REPO)}")
    args = ap.parse_args()
    if not (args.data / "benchmarks").is_dir():
        print(f"reference data not found under {args.data}; pass --data", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    band_samples: dict[str, list[float]] = {}
    workload, single = single_gpu(args.data, band_samples)
    from gpucost.catalog import get_gpu

    lambda_rows = fitc.load_lambda(fitc.lambda_paths(args.data), get_gpu)[0]
    memory_at_lambda_batches(lambda_rows)
    regret = decision_regret(lambda_rows)
    multi = multi_gpu(args.data)
    link_ratios: dict[str, list[float]] = {}
    machine = one_node(args.data, link_ratios)
    clusters = held_out_clusters(args.data)
    shape = sia_batch_shape(args.data, band_samples)
    table = band_table(band_samples, clusters[RATIOS], link_ratios, args.data)
    print("error bands (measured / predicted throughput, 10th-90th percentile):")
    for key, entry in [*table["single_gpu"].items(),
                       *((f"one node, {link}", e) for link, e in table["one_node"].items()),
                       ("several GPUs", table["multi_gpu"])]:
        print(f"  {key:<24} {entry['low']:.3f} - {entry['high']:.3f}  ({entry['pairs']} pairs)")
    if args.write_bands:
        from gpucost._io import atomic_write_text

        atomic_write_text(bands.BANDS_PATH, json.dumps(table, indent=2) + "\n")
        print(f"wrote {bands.BANDS_PATH}")
    nccl_anchors(args.data)
    predict_speed()
    ranked = [(m, h) for m, h in regret.values() if m]
    beaten = sum(statistics.mean(m) < statistics.mean(h) for m, h in ranked)
    w_model = statistics.mean(workload[SOURCE_BATCH])
    w_target = statistics.mean(workload[TARGET_BATCH])
    w_same = statistics.mean(workload[SAME_BATCH])
    s_model = statistics.mean(single[SOURCE_BATCH])
    m_model = statistics.mean(multi["model"])
    m_floor = statistics.mean(multi["floor (true sync)"])
    print(f"summary: single-GPU leave-one-workload-out mean error {100 * w_model:.1f} % at the "
          f"source's batch with the memory rule (goal <= 15 %), {100 * w_target:.1f} % at the "
          f"target's batch, {100 * w_same:.1f} % at the same batch; leave-one-GPU-out "
          f"{100 * s_model:.1f} % (spec-sheet FLOPS "
          f"ratio {100 * statistics.mean(single['flops ratio']):.1f} %), multi-GPU "
          f"{100 * m_model:.1f} % (floor {100 * m_floor:.1f} %, goal within 2 points; linear "
          "scaling "
          f"{100 * statistics.mean(multi['linear scaling']):.1f} %); several GPUs in one "
          f"machine {100 * statistics.mean(machine['model']):.1f} % (without the wait for the "
          f"slowest {100 * statistics.mean(machine['no wait for the slowest']):.1f} %); "
          "multi-GPU on a held-out "
          f"cluster {100 * statistics.mean(clusters[SAME_BATCH]):.1f} % (floor "
          f"{100 * statistics.mean(clusters['floor (true sync)']):.1f} %, no communication "
          f"{100 * statistics.mean(clusters['no communication']):.1f} %); one GPU across the "
          f"Sia traces' batches {100 * statistics.mean(shape['one batch measured']):.1f} % from "
          f"one measured batch, {100 * statistics.mean(shape['two batches measured']):.1f} % "
          f"from two; decision regret below "
          f"the $/hour ranking's on {beaten} of {len(ranked)} providers; "
          f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
