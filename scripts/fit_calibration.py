"""Fit the performance model's coefficients and write gpucost/model/calibration.json.

    python scripts/fit_calibration.py [--data ../shared/data] [--out gpucost/model/calibration.json]

Single GPU (lambda_throughput_calibration.csv and lambda_throughput_families.csv, 1-GPU rows,
one median per bench version, model, precision and GPU; versions are never compared with each
other; Tacotron2's and WaveGlow's throughputs converted to clips and segments, ITEM_UNITS):
time per sample is modelled as W * (1 / (peak_flops * eff * u) + 1 / (tdp * eps) + (kappa +
mu / b) / (mem_bw * eff_bw) + eta + nu / b), u the row's tile utilisation at its batch (the
signature's GEMM shapes on the GPU's SMs, translate.gemm_utilisation; recurrent cells at a
fitted share of the GEMM efficiency), W the workload's flops per sample (one per version x
model x precision, with a tight prior at its published flop count), b the per-device batch,
eff per compute capability and precision class plus a shrunk per-GPU correction (a
convolution's; the share of the flops in GEMM-like classes runs on tensor cores at a GEMM
efficiency of its own per class, shrunk towards one per unit and anchored on measured
best-matmul rates; on CUDA cores it runs at the convolutions' efficiency, never past the GPU's
best measured fp32 matmul), eps the sustained flops per joule of board power per generation (compute
capability major) and precision class (what lets an RTX 6000 Ada at 300 W run no faster than an
RTX 4090 at 450 W despite twice the listed fp32-accumulate peak), eff_bw per class plus a shrunk
per-GPU correction, kappa (bytes per flop) and eta (host seconds per sample: the data pipeline
and framework time that no GPU speeds up, written per flop of the family's fitted flops per
sample; a workload never fitted takes the families' median per sample, since it was per flop a
10x heavier model paid 10x the data pipeline: leave-one-workload-out 12.7 -> 11.1 %) per model
family and precision class, and mu, nu the same family's per-step bytes and host time (optimizer
and weight traffic, kernel launches: paid once per step, so small batches run slower per
sample). Each family's kappa, mu and nu are its signature's counted bytes, step bytes and kernel
launches (gpucost/model/signatures.json, FIT_SIGNATURE) times global scales, with a per-family
deviation shrunk by SIGMA_FAMILY: the scales are what a workload the fit never saw uses (the
bytes scale around a stated prior, BYTES_SCALE_PRIOR). The
table's fp32 rows ran in NVIDIA's NGC containers with TF32 on for matmuls and convolutions, so
they are fitted as "tf32" (on GPUs without TF32 units that is plain FP32). Least squares on log
time with the residuals scaled by SIGMA_DATA against the priors, scipy.optimize.least_squares
(trust-region reflective, the Jacobian's sparsity given). (A robust loss here did worse in
leave-one-GPU-out: 11.9 % against 9.6 % mean error, before SIGMA_DATA and the power term took it
to 7.4 %.)

Scaling (sia_step_times_calibration.csv, multi-GPU rows): step = Pollux overlap of the measured
1-GPU step with NCCL's flat ring all-reduce (see gpucost/model/scaling.py). Link
coefficients (PCIe/host and network bus-bandwidth efficiencies, per-hop latencies, a two-node
network factor) are fitted per cluster, jointly with each job's effective gradient bytes and
overlap exponent (Pollux fits both per job), with a robust loss (pseudo-Huber on log step time,
see ROBUST_SCALE_LOG: held-out placements 8.8 -> 8.5 % mean error). nccl_busbw_reference.csv
gives the NVLink efficiency, the NVLink and network hop latencies and, from PCIe-only
measurements on current hosts, the shipped PCIe coefficients (the traces' older hosts reach
less; their fits are kept in the provenance). The shipped network efficiency comes from the
file's inter-node anchors (100 Gb/s, 4x HDR and NDR InfiniBand: 0.90-0.98 of line rate); the
traces' 2019 TCP clusters reach less (AWS 0.45-0.85 depending on where the solver starts: it
trades against the jobs' gradient bytes) and stay in the provenance. The shipped
PCIe hop latency is the AWS cluster's (no PCIe latency anchor in the file); the shipped overlap
exponent is the median job's. The traces' jobs ran one Kubernetes pod per GPU, which NCCL takes
for hosts of their own, so GPUs of a node met over sockets through the host: the host's socket
bus bandwidth (socket_host_busbw_gbs, one figure for both clusters) is fitted last, on the
public predict with every shipped coefficient above and the jobs' published sizes
(fit_socket_host_busbw).

The functions here are also used by bench/prediction_accuracy.py to refit without held-out data.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import gpucost  # noqa: E402
from gpucost.catalog import all_entries  # noqa: E402
from gpucost.catalog.spec import GpuSpec  # noqa: E402
from gpucost.errors import UnknownGpuError  # noqa: E402
from gpucost.model.perf import using_calibration  # noqa: E402
from gpucost.model.scaling import (  # noqa: E402
    Links,
    allreduce_time_s,
    overlapped_s,
    resolve_links,
)
from gpucost.model.translate import (  # noqa: E402
    GEFORCE_SUFFIX,
    PRECISION_CLASS,
    class_peak_tflops,
    cuda_core_gemm_cap,
    cuda_core_peak,
    device_class,
    gemm_utilisation,
    generation,
    math_unit,
    peak_tflops,
    shipped_calibration,
    signature_step_bytes_per_flop,
)

Vector = NDArray[np.float64]

# Published forward+backward flops per sample (3 x forward): a prior (SIGMA_WORK) that pins the
# efficiencies' absolute scale, so that they are shares of the spec sheet (bounded by 1) and the
# board-power term is in real flops per joule. (A loose prior, a factor of ~e, let the CNN
# rows' flops drift with the efficiencies and the power term, and the GEMM rates a held-out
# transformer gets with them: leave-one-workload-out 15.9 % mean with 1.0, 14.9 % with these.)
FLOPS_PER_SAMPLE_PRIOR = {
    "resnet50": 3 * 8.2e9,  # 4.1 GMAC forward at 224x224
    "ssd": 3 * 2 * 2 * 4.1e9 * (300 / 224) ** 2,  # ResNet-50 backbone at 300x300 plus heads (~2x)
    "bert_base_squad": 6 * 85e6 * 384 + 3 * 4 * 384**2 * 768 * 12,  # seq 384 + attention
    "bert_large_squad": 6 * 302e6 * 384 + 3 * 4 * 384**2 * 1024 * 24,
    # Mask R-CNN R50-FPN at 1333x800: about 260 GMAC forward (backbone, FPN, RPN, box and mask
    # heads; detectron2/mmdetection model-zoo complexity tables), rough (its signature's
    # definition counts 1.58e12 a step's image).
    "maskrcnn": 3 * 2 * 260e9,
    # Tacotron2 (an utterance of FRAMES_PER_UTTERANCE mel frames) and WaveGlow (an 8,000-sample
    # segment) are per item as the throughput is converted (ITEM_UNITS), their signatures' own
    # shapes: they take the signatures' counted flops (flops_prior).
}
# Published parameter counts of the calibration workloads (the papers' and NVIDIA
# DeepLearningExamples' model cards): their once-per-step bytes (optimizer, weights) per flop.
# SSD300 on ResNet-50 takes the detection signature's own definition's count. WaveGlow's is the
# published model's, as its signature is (build_signatures.WaveGlow says why not the 512-channel
# one the benchmark trained).
FAMILY_PARAMS = {"resnet50": 25.6e6, "ssd": 23.9e6, "bert_base_squad": 110e6,
                 "bert_large_squad": 340e6, "maskrcnn": 44.4e6, "tacotron2": 28.2e6,
                 "waveglow": 87.9e6}
# The names a user would give these workloads (Profile.from_measurement's name: what matches
# their signatures).
MODEL_NAMES = {"resnet50": "resnet50", "ssd": "ssd300", "bert_base_squad": "bert-base",
               "bert_large_squad": "bert-large", "maskrcnn": "mask r-cnn",
               "tacotron2": "tacotron2", "waveglow": "waveglow"}
# LJSpeech (Tacotron2's and WaveGlow's data set): 13,100 clips, 23.9 h, 22,050 Hz, hop 256: a
# mean clip of 6.57 s is 566 mel frames. WaveGlow trains on 8,000-sample segments (the
# --segment-length NVIDIA DeepLearningExamples' training scripts and Lambda's benchmark configs
# pass; 16,000, NVIDIA's original WaveGlow config's, made every WaveGlow step twice as long as it
# was). Lambda reports these families in frames/s and audio samples/s with the batch in clips /
# segments: throughput is divided by the units per item so that a step is batch / throughput
# seconds, as for the other families.
FRAMES_PER_UTTERANCE = 566
ITEM_UNITS = {"tacotron2": FRAMES_PER_UTTERANCE, "waveglow": 8000}
# How a profile's name or description selects a fitted family (first match wins).
FAMILY_MATCH = {
    "bert_large_squad": ["bert-large", "bert_large", "bert large"],
    "bert_base_squad": ["bert"],
    "maskrcnn": ["mask r-cnn", "mask-rcnn", "mask_rcnn", "maskrcnn", "mask rcnn"],
    "ssd": ["ssd"],
    "resnet50": ["resnet"],
    "tacotron2": ["tacotron"],
    "waveglow": ["waveglow"],
}
# The built-in signature (gpucost/model/signatures.json) each calibration workload is an
# instance of, and its kernel launches relative to the signature's model (BERT-large has 24
# layers to the signature's BERT-base 12).
FIT_SIGNATURE = {"resnet50": ("cnn-classifier", 1.0), "ssd": ("detection", 1.0),
                 "bert_base_squad": ("encoder-only", 1.0),
                 "bert_large_squad": ("encoder-only", 2.0),
                 "maskrcnn": ("two-stage-detection", 1.0),
                 # The signature is LJSpeech's mean clip, FRAMES_PER_UTTERANCE frames.
                 "tacotron2": ("conv-tts", 1.0),
                 "waveglow": ("flow-audio", 1.0)}
# Prior spread (log units) of a fitted workload's bytes and host terms around what its signature
# predicts at the global scales: a workload never fitted (leave-one-workload-out, a user's new
# model) gets the signature's prediction itself.
SIGMA_FAMILY = 0.5
# Device-memory bytes a step moves per byte the signature's census counts (each operator's
# inputs and outputs, fp32 elements): an unfused kernel reads its inputs from and writes its
# outputs to device memory (a batch's activations are far larger than any L2), so 1 at fp32 and
# TF32; mixed precision keeps most activations in 2-byte elements, so half (the signatures'
# activations measured under autocast are 0.50-0.57 of their fp32 ones for the fitted
# families: build_signatures.activation_peak_per_sample). A prior, not a fit: the tables
# cannot tell this scale from the compute efficiencies (the residual is the same, rms 0.087 in
# log, with the scale held anywhere from 1.0 to 1.87 at fp32, 0.5 to 1.18 under mixed
# precision), and a free scale went wherever the family with the most counted bytes held it
# (1.17 while Tacotron2's per-frame weight traffic was counted per sample, 1.87 without it,
# taking the CUDA-core efficiency to its bound of 1).
BYTES_SCALE_PRIOR = {"tf32": 1.0, "fp16": 0.5, "bf16": 0.5}
SIGMA_BYTES_SCALE = 0.2
SIGMA_GPU = 0.15  # prior spread of a GPU's efficiency around its class (log units)
SIGMA_GPU_BW = 0.10
# Device-memory bandwidth a training step reaches, as a share of the spec sheet's: copy kernels
# (STREAM/BabelStream-style) reach about 80-92 % of the listed bandwidth on HBM and GDDR6(X)
# GPUs alike, and no kernel reaches all of it. A free share (prior sd 0.5, bounds 0.3-1.0) let
# the fit trade bandwidth against compute terms: V100 landed at 1.02 of its spec and GA102 cards
# at 0.52, so a memory-bound workload never fitted (a TTS or recommender model) was predicted
# 0.37x a V100 on an A10 whose bandwidth is 0.67x. Held to the physical range, the same trade
# has to be explained by compute: leave-one-workload-out 14.5 -> 12.7 %.
MEMORY_EFFICIENCY_PRIOR = 0.85
SIGMA_MEMORY_CLASS = 0.10
MEMORY_EFFICIENCY_BOUNDS = (0.6, 0.95)
# Prior spread (log) of a calibration workload's flops per sample around FLOPS_PER_SAMPLE_PRIOR:
# ResNet-50's and BERT's are exact counts, SSD300's head estimate is rough.
SIGMA_WORK = {"resnet50": 0.05, "bert_base_squad": 0.05, "bert_large_squad": 0.05, "ssd": 0.3,
              "maskrcnn": 0.5, "tacotron2": 0.5, "waveglow": 0.3}
# Expected spread of one log throughput around the model (system, driver and container
# differences between the table's runs): data residuals are divided by it so the priors above
# weigh against the data as in a posterior. Without it (an implicit 1.0) the per-GPU
# corrections were shrunk to nothing (|log| < 0.01) and leave-one-GPU-out error was 9.6 %;
# 0.07-0.15 all give 7.4-7.6 %.
SIGMA_DATA = 0.10


def flops_prior(model_key: str) -> float:
    """A calibration workload's flops per item: published, else its signature's count (the
    signature profiled the same shape)."""
    from gpucost.model.signature import builtin

    if model_key in FLOPS_PER_SAMPLE_PRIOR:
        return FLOPS_PER_SAMPLE_PRIOR[model_key]
    counted = builtin()[FIT_SIGNATURE[model_key][0]].flops_per_sample
    assert counted is not None, model_key
    return counted


def sha256_prefix(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def least_squares(fun: Callable[[Vector], Vector], x0: Vector, *,
                  bounds: tuple[Vector, Vector] | None = None,
                  sparsity: NDArray[np.bool_] | None = None) -> Vector:
    """Minimise sum(fun(x)**2) with scipy's trust-region reflective solver.

    Parameters whose lower and upper bound coincide are held there (scipy wants lo < hi).
    ``sparsity`` (residuals x parameters, True where a residual depends on a parameter) lets
    the finite-difference Jacobian perturb many parameters at once: each observation touches
    about ten of the single-GPU fit's ~200 parameters.
    """
    from scipy.optimize import least_squares as scipy_least_squares

    x = x0.astype(float).copy()
    lo, hi = bounds if bounds is not None else (np.full_like(x, -np.inf), np.full_like(x, np.inf))
    free = lo < hi
    x = np.clip(x, lo, hi)

    def sub(z: Vector) -> Vector:
        full = x.copy()
        full[free] = z
        return fun(full)

    result = scipy_least_squares(
        sub, x[free], bounds=(lo[free], hi[free]), method="trf",
        jac_sparsity=None if sparsity is None else sparsity[:, free], max_nfev=2000)
    x[free] = result.x
    return np.asarray(x, dtype=float)


# Pseudo-Huber scale of the scaling fit's log-time residuals: quadratic within ~1 % (the
# traces' run-to-run noise), absolute beyond, so a few odd placements do not pull the link
# coefficients every other placement relies on.
ROBUST_SCALE_LOG = 0.01


def robust(r: Vector, scale: float = ROBUST_SCALE_LOG) -> Vector:
    """Residuals whose sum of squares is the pseudo-Huber loss of ``r`` (for least_squares)."""
    return np.asarray(np.sign(r) * np.sqrt(2 * scale * scale * (np.sqrt(1 + (r / scale) ** 2) - 1)))


# ---------------------------------------------------------------- single-GPU translation --
@dataclass(frozen=True)
class Obs:
    version: str
    model: str
    precision: str
    gpu: str  # canonical catalog name
    throughput: float  # samples/s, median of runs
    batch_size: int


def lambda_paths(data: Path) -> tuple[Path, ...]:
    """The Lambda benchmark tables under a reference-data folder (calibration and families)."""
    bench = data / "benchmarks"
    return tuple(p for p in (bench / "lambda_throughput_calibration.csv",
                             bench / "lambda_throughput_families.csv") if p.exists())


def measured_profile(obs: Obs) -> gpucost.Profile:
    """``obs`` as a user would give it: ``Profile.from_measurement`` with the model's name
    (matched to a workload signature) and its published parameter count; nothing fitted."""
    return gpucost.Profile.from_measurement(
        gpu=obs.gpu, throughput=obs.throughput, batch_size=obs.batch_size,
        precision=obs.precision, param_count=FAMILY_PARAMS[obs.model], name=MODEL_NAMES[obs.model])


# Lambda's v1 and v2 "fp16" Tacotron2 and WaveGlow rows trained in fp32 (TF32): their configs
# pass `--amp-run` to a Tacotron2/train.py whose flag is `--amp` and which parses with
# parse_known_args() (LambdaLabsML's DeepLearningExamples, lambda/benchmark), so the flag is
# ignored. On every v1/v2 GPU they run at 0.94-1.28x the fp32 rows, V100 (no TF32) at 1.00-1.01x,
# where the v0 rows, which did train in fp16, run at 1.3-3.2x. They are left out: the fp32 rows
# measure that run already, and read as fp16 they taught the fit a half-precision rate that no
# half-precision run had (held-out WaveGlow's "fp16" pairs were 36 % off).
AMP_FLAG_IGNORED = frozenset((model, version, "fp16") for model in ("tacotron2", "waveglow")
                             for version in ("v1", "v2"))


@dataclass(frozen=True)
class LambdaRow:
    version: str
    model: str
    precision: str  # fp32 read as "tf32" (see _lambda_rows)
    gpu: str  # canonical catalog name
    gpus: int  # GPUs in the run, all in one machine
    per_gpu_batch: int
    throughput: float  # samples/s over all GPUs, per item (ITEM_UNITS)
    peer_to_peer: bool  # False: NCCL ran with NCCL_P2P_DISABLE=1 (p2p_disabled)


# Lambda's benchmark_pytorch.sh exported NCCL_P2P_DISABLE=1 before every run from commit
# 0a684b62 (2022-10-16, "Add 2x4090_v1": GeForce cards without peer access) until aad0d1cd
# (2023-02-06) commented it out. With peer copies off NCCL moves a node's gradients through
# host shared memory (its SHM transport), over each GPU's PCIe link and the host, NVLink or not:
# the "pcie" link of gpucost.model.scaling. A run's result file is named by its start date.
P2P_DISABLED_FROM, P2P_DISABLED_UNTIL = dt.date(2022, 10, 16), dt.date(2023, 2, 6)
_RESULT_DATE = re.compile(r"(\d\d)-(\d\d)-(\d{4})_\d\d-\d\d-\d\d\.txt$")


def p2p_disabled(source_path: str) -> bool:
    """Whether the run whose log is ``source_path`` (a results file named DD-MM-YYYY_HH-MM-SS,
    or a glob of repeats, which all fall outside the window) ran with NCCL's peer copies off."""
    match = _RESULT_DATE.search(source_path)
    if match is None:
        return False
    day, month, year = (int(g) for g in match.groups())
    return P2P_DISABLED_FROM <= dt.date(year, month, day) < P2P_DISABLED_UNTIL


def _lambda_rows(paths: Path | Sequence[Path], resolve: Callable[[str], GpuSpec]
                 ) -> tuple[list[LambdaRow], list[str]]:
    """Every run with a batch whose GPU the catalog resolves; also the GPU names not resolved."""
    unresolved: set[str] = set()
    raw: list[dict[str, str]] = []
    for path in [paths] if isinstance(paths, Path) else paths:
        with path.open(newline="") as fh:
            raw.extend(csv.DictReader(fh))
    rows = []
    for row in raw:
        if not row["batch_size"].strip():
            continue
        try:
            name = resolve(row["gpu"]).name
        except UnknownGpuError:
            unresolved.add(row["gpu"])
            continue
        if (row["model_key"], row["bench_version"], row["precision"]) in AMP_FLAG_IGNORED:
            continue
        # Lambda's runs use NVIDIA's NGC PyTorch containers, which set
        # TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 (matmuls on TF32; the v0 containers' PyTorch
        # < 1.12 did by default) on top of cuDNN's TF32 default: their fp32 is "tf32".
        # (MONAI's docs/source/precision_accelerating.md states the container layer; the
        # PyTorch 1.12 notes, pytorch#79537, the upstream default change.)
        precision = "tf32" if row["precision"] == "fp32" else row["precision"]
        gpus = int(row["num_gpus"])
        # The table's batch is the global one (per GPU x GPUs); its throughput all GPUs'.
        rows.append(LambdaRow(row["bench_version"], row["model_key"], precision, name, gpus,
                              round(float(row["batch_size"]) / gpus),
                              float(row["throughput"]) / ITEM_UNITS.get(row["model_key"], 1),
                              not p2p_disabled(row["source_path"])))
    return rows, sorted(unresolved)


def load_lambda(paths: Path | Sequence[Path], resolve: Callable[[str], GpuSpec]
                ) -> tuple[list[Obs], list[str]]:
    """1-GPU medians per (version, model, precision, GPU); also the GPU names not resolved.
    Rows without a batch are skipped; throughputs are per item (ITEM_UNITS)."""
    rows, unresolved = _lambda_rows(paths, resolve)
    groups: dict[tuple[str, str, str, str], list[LambdaRow]] = defaultdict(list)
    for row in rows:
        if row.gpus == 1:
            groups[(row.version, row.model, row.precision, row.gpu)].append(row)
    obs = [Obs(v, m, p, g, statistics.median(r.throughput for r in runs),
               round(statistics.median(r.per_gpu_batch for r in runs)))
           for (v, m, p, g), runs in sorted(groups.items())]
    return obs, unresolved


@dataclass(frozen=True)
class OneNodeRun:
    """A run of ``gpus`` GPUs in one machine and the 1-GPU run at the same per-GPU batch."""

    one: Obs
    gpus: int
    throughput: float  # samples/s over all GPUs
    link: str | None = None  # the intra-node link NCCL used; None: the GPU's own (predict's)


# A data-parallel group at the same per-GPU batch cannot beat linear scaling: runs more than 5 %
# past it (up to 2.7x, Lambda's B200 BERT fp16 at 8 GPUs) measured something else.
SUPERLINEAR = 1.05


def load_one_node_runs(paths: Path | Sequence[Path], resolve: Callable[[str], GpuSpec]
                       ) -> list[OneNodeRun]:
    """Lambda's runs of 2-8 GPUs with a 1-GPU run of the same version, model, precision, GPU
    and per-GPU batch (medians of repeats, those with NCCL's peer copies off apart: they ran
    over the host, ``link`` "pcie"), less the superlinear ones."""
    rows, _ = _lambda_rows(paths, resolve)
    groups: dict[tuple[str, str, str, str, int], dict[tuple[int, bool], list[float]]] = (
        defaultdict(lambda: defaultdict(list)))
    for r in rows:
        # A lone GPU syncs nothing: its runs are one reference whatever NCCL's settings.
        groups[(r.version, r.model, r.precision, r.gpu, r.per_gpu_batch)][
            (r.gpus, r.peer_to_peer or r.gpus == 1)].append(r.throughput)
    runs = []
    for (version, model, precision, gpu, batch), by_count in sorted(groups.items()):
        if (1, True) not in by_count or model not in FAMILY_PARAMS:
            continue
        one = Obs(version, model, precision, gpu, statistics.median(by_count[(1, True)]), batch)
        for (gpus, peer_to_peer), throughputs in sorted(by_count.items()):
            rate = statistics.median(throughputs)
            if 2 <= gpus <= 8 and rate <= SUPERLINEAR * gpus * one.throughput:
                runs.append(OneNodeRun(one, gpus, rate, None if peer_to_peer else "pcie"))
    return runs


def one_node_ratio(run: OneNodeRun) -> float:
    """Predicted over measured throughput of ``run``, from its 1-GPU run through the public
    ``gpucost.predict`` on the same GPU, at its per-GPU batch."""
    return gpucost.predict(measured_profile(run.one), gpus_per_node=run.gpus,
                           intra_node_link=run.link, batch_size=run.one.batch_size,
                           fit_batch="keep").throughput / run.throughput


def link_kind(run: OneNodeRun, resolve: Callable[[str], GpuSpec]) -> str:
    """The intra-node link ``run``'s sync crossed as gpucost models it: "nvlink", or "pcie"
    (through the host: a PCIe card, or peer copies off)."""
    return resolve_links(resolve(run.one.gpu), shipped_calibration().scaling,
                         intra_node_gbps=None, inter_node_gbps=None, intra_node_link=run.link,
                         gpus_per_node=run.gpus).intra_kind


def nvlink_runs(runs: Iterable[OneNodeRun], resolve: Callable[[str], GpuSpec]
                ) -> list[OneNodeRun]:
    """The runs whose GPUs synced over NVLink with peer copies on: there the sync is a few per
    cent of the step and NCCL's NVLink anchors fix it, so what the group loses beyond it is the
    wait for the slowest GPU. Through the host the sync is most of the loss and varies ~50x
    between hosts (GeForce cards without peer access and the runs with peer copies off move
    gradients through host memory), which a step-time variation would absorb."""
    return [r for r in runs if link_kind(r, resolve) == "nvlink"]


def fit_straggler_cv(runs: Sequence[OneNodeRun], cal: Mapping[str, Any]) -> float:
    """The step time's coefficient of variation (``straggler_cv``) that brings ``runs`` closest
    to their measured throughputs, by mean absolute log error, with every other coefficient as
    ``cal`` has it (fitted on :func:`nvlink_runs`, where the sync is small and anchored)."""
    if not runs:
        raise ValueError("no one-node multi-GPU runs to fit the step-time variation on")
    # From steady steps to steps varying by half their length.
    return fit_scaling_coefficient("straggler_cv", lambda: map(one_node_ratio, runs), cal,
                                   (0.0, 0.5), xatol=1e-3)


@dataclass
class SingleFit:
    compute_gpu: dict[str, float]
    compute_class: dict[str, float]
    compute_default: dict[str, float]
    compute_default_cuda_core: float
    power_flops_per_joule: dict[str, float]  # "generation|precision class"
    memory_gpu: dict[str, float]
    memory_class: dict[str, float]
    memory_default: float
    bytes_per_flop: dict[str, dict[str, float]]  # family -> precision class -> kappa
    default_bytes_per_flop: dict[str, float]
    host_s_per_flop: dict[str, dict[str, float]]  # family -> precision class -> eta
    flops_per_sample: dict[str, dict[str, float]]  # family -> precision class -> fitted flops
    default_host_s_per_flop: dict[str, float]  # for a workload whose flops are unknown
    default_host_s_per_sample: dict[str, float]
    # Per-step terms (optimizer/weight traffic, per-kernel launches) that a batch amortises:
    # per-step bytes, and host seconds, over flops per sample.
    step_bytes_per_flop: dict[str, dict[str, float]]
    default_step_bytes_per_flop: dict[str, float]
    step_host_s_per_flop: dict[str, dict[str, float]]
    default_step_host_s_per_flop: dict[str, float]
    # Per terms class: what multiplies a signature's counted bytes and step bytes, and a GPU
    # host's seconds per kernel launch (for workloads the fit has not seen).
    signature_scale: dict[str, dict[str, float]]
    # GEMM-like classes' efficiency on tensor cores ("GPU|unit", "device class|unit", and per
    # unit for classes never fitted): cuBLAS's share of the peak, not cuDNN's convolutions'
    gemm_gpu: dict[str, float]
    gemm_class: dict[str, float]
    gemm_default: dict[str, float]
    recurrent_efficiency: float  # recurrent cells' share of a GEMM's tensor-core efficiency
    residual_rms_log: float
    residuals_pct: dict[str, float]
    # the share of their listed FP32 rate the CUDA-core GPUs' best matmuls reach
    fp32_matmul_reached: float


def fp32_matmul_reached(gpus: Iterable[GpuSpec]) -> float:
    """Median share of the listed FP32 rate the best measured fp32 matmul reaches on ``gpus``
    (those the fit sees on CUDA cores that have a measurement): the level the fitted CUDA-core
    efficiencies are relative to."""
    shares = [g.fp32_matmul_tflops / g.fp32_tflops for g in gpus if g.fp32_matmul_tflops]
    return statistics.median(shares) if shares else 1.0


def chip(spec: GpuSpec) -> str:
    """The silicon a GPU's compute efficiency belongs to: its compute capability and SM count
    (V100 SXM2 16GB and 32GB, the four A100s, A40 and RTX A6000 are one chip each). Variants of
    one chip differ in memory and power limit, which the model holds apart (bandwidth, TDP);
    what their tensor cores reach of the peak is the chip's."""
    return f"{spec.compute_capability or spec.arch}/{spec.sm_count or spec.name}"


def power_floors(gens: Collection[tuple[str, str]]) -> dict[tuple[str, str], float]:
    """Lowest flops per joule each (generation, tensor-core unit) power term may take: a board
    sustains its measured best bf16 matmul (the catalog's ``mamf_bf16_tflops``) within its
    power limit, so ``TDP x flops per joule >= MAMF``. A TF32 matmul runs on the same tensor
    cores at the spec sheet's TF32 rate, so it draws no more power than bf16's at full occupancy:
    its floor is the same board's MAMF scaled by the TF32 over bf16 peak. Without this the term
    is free, and a held-out fit capped the H100's TF32 at 178 TFLOPS (0.25 TFLOPS per joule at
    700 W) because the convolution rows could not tell it from a low efficiency."""
    floors: dict[tuple[str, str], float] = {}
    for entry in all_entries():
        sg = entry.spec
        if not entry.mamf_bf16_tflops or not sg.bf16_tflops or not sg.tdp_w:
            continue
        per_joule = entry.mamf_bf16_tflops * 1e12 / sg.tdp_w
        for unit, peak in (("fp16", sg.bf16_tflops), ("tf32", sg.tf32_tflops)):
            key = (generation(sg), unit)
            if peak and key in gens:
                floors[key] = max(floors.get(key, 0.0), per_joule * peak / sg.bf16_tflops)
    return floors


def fit_single(obs: Sequence[Obs], spec: Callable[[str], GpuSpec]) -> SingleFit:
    from gpucost.model.signature import builtin

    def unit(o: Obs) -> str:  # the unit a row's flops ran on (all classes alike here)
        return math_unit(spec(o.gpu), o.precision)

    sigs = builtin()
    works = sorted({(o.version, o.model, o.precision) for o in obs})
    classes = sorted({(device_class(spec(o.gpu)), unit(o)) for o in obs})
    gpus_p = sorted({(o.gpu, unit(o)) for o in obs})
    mclasses = sorted({device_class(spec(o.gpu)) for o in obs})
    gpus = sorted({o.gpu for o in obs})
    fams = sorted({(o.model, PRECISION_CLASS[o.precision]) for o in obs})
    tclasses = sorted({PRECISION_CLASS[o.precision] for o in obs})
    gens = sorted({(generation(spec(o.gpu)), unit(o)) for o in obs})
    # Tensor-core (device class, unit) pairs: each has a GEMM efficiency of its own, shrunk
    # towards the unit's global one (what a class the transformer rows never reached gets).
    tc_classes = sorted({(device_class(spec(o.gpu)), unit(o)) for o in obs
                         if not cuda_core_peak(spec(o.gpu), unit(o))})
    tc_units = sorted({u for _, u in tc_classes})
    idx: dict[tuple[str, Any], int] = {}
    chips_p = sorted({(chip(spec(g)), pc) for g, pc in gpus_p})
    fitted_chips = set(chips_p)
    for tag, keys in (("p", gens), ("w", works), ("c", classes), ("g", chips_p), ("m", mclasses),
                      ("b", gpus), ("k", fams), ("h", fams), ("u", fams), ("v", fams),
                      ("K", tclasses), ("H", tclasses), ("U", tclasses), ("V", tclasses),
                      ("E", tc_units), ("e", tc_classes), ("R", ("recurrent",)),
                      ("Z", ("zero",))):
        for key in keys:
            idx[(tag, key)] = len(idx)

    def sig_log_terms(model_key: str, pclass: str) -> tuple[float, float, float]:
        """log (bytes per flop, step bytes per flop, launches per flop of one sample) of a
        calibration workload at a precision class: its signature's, the step bytes at the
        workload's own parameters per flop (as a prediction computes them)."""
        name, launch_scale = FIT_SIGNATURE[model_key]
        sig = sigs[name]
        step = signature_step_bytes_per_flop(sig, pclass, FAMILY_PARAMS[model_key],
                                             flops_prior(model_key))
        return (math.log(sig.bytes_per_flop), math.log(step),
                math.log(sig.dispatched_launches_per_step * launch_scale
                         / flops_prior(model_key)))
    n = len(idx)
    x0 = np.zeros(n)
    for w in works:
        x0[idx[("w", w)]] = math.log(flops_prior(w[1]))
    for c in classes:
        x0[idx[("c", c)]] = math.log(0.4)
    for m in mclasses:
        x0[idx[("m", m)]] = math.log(MEMORY_EFFICIENCY_PRIOR)
    for gp in gens:
        x0[idx[("p", gp)]] = math.log(3e12)  # flops per joule
    # Family terms are deviations (shrunk by SIGMA_FAMILY) from the signature's prediction at
    # global scales: bytes x K, step bytes x U, host seconds per launch V, host per flop H.
    for u in tc_units:
        x0[idx[("E", u)]] = math.log(0.6)
    x0[idx[("R", "recurrent")]] = math.log(RECURRENT_EFFICIENCY_PRIOR)
    for t in tclasses:
        x0[idx[("K", t)]] = math.log(BYTES_SCALE_PRIOR[t])
        x0[idx[("U", t)]] = 0.0  # counted once-per-step bytes (weights, gradients, Adam state)
        x0[idx[("V", t)]] = math.log(LAUNCH_FLOOR_S)  # prior: a few us per launch (below)
        x0[idx[("H", t)]] = math.log(5e-5)  # host seconds per sample (data pipeline)
    reached = fp32_matmul_reached({spec(o.gpu) for o in obs if unit(o) == "fp32"})
    rows = []
    for o in obs:
        s = spec(o.gpu)
        pc = unit(o)
        tc = PRECISION_CLASS[o.precision]
        lk, lu, lv = sig_log_terms(o.model, tc)
        # Share of the flops in GEMM-like classes, on tensor cores only (a GEMM efficiency apart
        # from the convolutions' is a tensor-core effect; CUDA cores run both alike).
        tensor_cores = not cuda_core_peak(s, pc)
        fit_sig = sigs[FIT_SIGNATURE[o.model][0]]
        gemm_share = sum(fit_sig.share(c) for c in GEMM_LIKE) if tensor_cores else 0.0
        recurrent_share = fit_sig.share("recurrent") if tensor_cores else 0.0
        # On CUDA cores the GEMM-like share runs at its class's listed rate times the row's
        # efficiency, but never faster than the GPU's best measured fp32 matmul
        # (``translate.cuda_core_gemm_cap``); the convolutions at the listed rate.
        cuda_gemm_share = 0.0 if tensor_cores else 1.0 - fit_sig.share("conv")
        cuda_gemm_peak = class_peak_tflops(s, pc, "gemm", reached) * 1e12
        cuda_gemm_cap = cuda_core_gemm_cap(s, pc) or math.inf
        # What the row's GEMMs and convolutions fill of the GPU's SMs at its batch.
        utilisation = gemm_utilisation(fit_sig.gemm_shapes, float(o.batch_size), s.sm_count)
        rows.append((idx[("w", (o.version, o.model, o.precision))],
                     idx[("c", (device_class(s), pc))], idx[("g", (chip(s), pc))],
                     idx[("m", device_class(s))], idx[("b", o.gpu)], idx[("k", (o.model, tc))],
                     idx[("h", (o.model, tc))], idx[("u", (o.model, tc))],
                     idx[("v", (o.model, tc))], idx[("p", (generation(s), pc))],
                     idx[("K", tc)], idx[("H", tc)], idx[("U", tc)], idx[("V", tc)],
                     (peak_tflops(s, pc) if tensor_cores
                      else class_peak_tflops(s, pc, "conv", reached)) * 1e12, s.mem_bw_gbs * 1e9,
                     s.tdp_w,
                     o.batch_size, math.log(1.0 / o.throughput), lk, lu, lv, gemm_share,
                     # unused (gemm_share 0) off tensor cores
                     idx[("E", pc)] if tensor_cores else 0,
                     idx[("e", (device_class(s), pc))] if tensor_cores else 0,
                     recurrent_share, utilisation, cuda_gemm_share, cuda_gemm_peak,
                     cuda_gemm_cap * 1e12))
    arr = np.array(rows)
    iw, ic, ig, im, ib, ik, ih, iu, iv, ip, iK, iH, iU, iV = (arr[:, j].astype(int)
                                                              for j in range(14))
    peak, bw, tdp, batch, y, sk, su, sv, gshare = (arr[:, j] for j in range(14, 23))
    iE, ie = arr[:, 23].astype(int), arr[:, 24].astype(int)
    rshare, util, cshare, cpeak, ccap = (arr[:, j] for j in range(25, 30))
    iR = idx[("R", "recurrent")]
    # Measured best matmul rates (catalog mamf_bf16_tflops) anchor the GEMM efficiency on the
    # GPUs that have one: predicted GEMM rate = peak x GEMM efficiency, power-capped, against the
    # measurement (the table's workloads alone cannot tell GEMMs from convolutions when the
    # transformer family is held out).
    from gpucost.catalog import get_entry

    anchors = []
    for g in gpus:
        mamf = get_entry(g).mamf_bf16_tflops
        key = (device_class(spec(g)), "fp16")
        if mamf and ("c", key) in idx and ("g", (chip(spec(g)), "fp16")) in idx:
            sg = spec(g)
            anchors.append((idx[("E", "fp16")], idx[("g", (chip(sg), "fp16"))],
                            idx[("p", (generation(sg), "fp16"))], idx[("e", key)],
                            peak_tflops(sg, "bf16") * 1e12, sg.tdp_w, math.log(mamf * 1e12)))
    anc = np.array(anchors).reshape(-1, 7)
    ac, ag, ap, agen = (anc[:, j].astype(int) for j in range(4))
    apeak, atdp, ay = anc[:, 4], anc[:, 5], anc[:, 6]
    # Efficiencies are shares of what the spec sheet says the unit can do, each a sum of terms
    # (unit, class, GPU) in log, so their physical ranges are one-sided residuals on the sums
    # rather than bounds on any one term ("Z" is a term held at 0 for two-term sums):
    # - no GEMM or convolution outruns the fastest rate its unit has: fp16 tensor cores with
    #   fp16 accumulation where that is faster (GeForce cards halve fp32 accumulation), else
    #   the unit's own peak;
    # - device memory moves 60-95 % of the listed bandwidth (MEMORY_EFFICIENCY_BOUNDS).
    zero = idx[("Z", "zero")]
    sums: list[tuple[int, int, int, float, float]] = []
    for g, pc in gpus_p:
        sg = spec(g)
        key = (device_class(sg), pc)
        fastest = max(peak_tflops(sg, pc), (get_entry(g).fp16_acc16_tflops or 0.0)
                      if pc == "fp16" else 0.0)
        ceiling = math.log(fastest / peak_tflops(sg, pc))
        sums.append((idx[("c", key)], idx[("g", (chip(sg), pc))], zero, -math.inf, ceiling))
        if key in tc_classes:
            sums.append((idx[("E", pc)], idx[("e", key)], idx[("g", (chip(sg), pc))], -math.inf,
                         ceiling))
    for g in gpus:
        sums.append((idx[("m", device_class(spec(g)))], idx[("b", g)], zero,
                     *(math.log(b) for b in MEMORY_EFFICIENCY_BOUNDS)))
    bounded = np.array(sums).reshape(-1, 5)
    s1, s2, s3 = (bounded[:, j].astype(int) for j in range(3))
    sum_lo, sum_hi = bounded[:, 3], bounded[:, 4]
    prior_mu = x0.copy()
    prior_sd = np.full(n, 10.0)
    for w in works:
        prior_sd[idx[("w", w)]] = SIGMA_WORK[w[1]]
    for cp in chips_p:
        prior_sd[idx[("g", cp)]] = SIGMA_GPU
    for b in gpus:
        prior_sd[idx[("b", b)]] = SIGMA_GPU_BW
    for m in mclasses:
        prior_sd[idx[("m", m)]] = SIGMA_MEMORY_CLASS
    for f in fams:
        for tag in "khuv":
            prior_sd[idx[(tag, f)]] = SIGMA_FAMILY
    for t in tclasses:  # the benchmarks' large batches say little about per-launch host time
        prior_sd[idx[("V", t)]] = 1.0
        # Once-per-step bytes are counted, not guessed: the CNN rows' large batches cannot
        # tell them (a free scale went to 0.2 without BERT, 1.2 with it).
        prior_sd[idx[("U", t)]] = 0.3
        prior_sd[idx[("K", t)]] = SIGMA_BYTES_SCALE
    for tcc in tc_classes:
        geforce = tcc[0].endswith(GEFORCE_SUFFIX)
        prior_sd[idx[("e", tcc)]] = SIGMA_GEMM_GEFORCE if geforce else SIGMA_GEMM_CLASS
    prior_sd[iR] = SIGMA_RECURRENT

    def model(x: Vector) -> Vector:
        eff = np.exp(x[ic] + x[ig])
        eff_bw = np.exp(x[im] + x[ib])
        kappa = np.exp(x[iK] + x[ik] + sk) + np.exp(x[iU] + x[iu] + su) / batch
        gemm_eff = np.exp(x[iE] + x[ie] + x[ig])
        # Recurrent cells run on the GEMM units at a share of their efficiency of their own.
        gemm_time = gshare - rshare + rshare / np.exp(x[iR])
        compute = ((1.0 - gshare - cshare) / (peak * eff) + gemm_time / (peak * gemm_eff)
                   + cshare / np.minimum(cpeak * eff, ccap)) / util
        device = compute + 1.0 / (tdp * np.exp(x[ip])) + kappa / (bw * eff_bw)
        # Host time per sample (the data pipeline's work is per sample, not per flop), over the
        # row's flops per sample to stand beside the device's per-flop terms.
        host = np.exp(x[iH] + x[ih] - x[iw]) + np.exp(x[iV] + x[iv] + sv) / batch
        return np.asarray(x[iw] + np.log(device + host), dtype=float)

    def anchor_resid(x: Vector) -> Vector:
        rate = 1.0 / (1.0 / (apeak * np.exp(x[ac] + x[ag] + x[agen]))
                      + 1.0 / (atdp * np.exp(x[ap])))
        return np.asarray((np.log(rate) - ay) / SIGMA_ANCHOR, dtype=float)

    def range_resid(x: Vector) -> Vector:
        total = x[s1] + x[s2] + x[s3]
        outside = np.maximum(total - sum_hi, 0.0) + np.maximum(sum_lo - total, 0.0)
        return np.asarray(outside / SIGMA_RANGE, dtype=float)

    def resid(x: Vector) -> Vector:
        return np.asarray(np.concatenate([(model(x) - y) / SIGMA_DATA, anchor_resid(x),
                                          range_resid(x), (x - prior_mu) / prior_sd]),
                          dtype=float)

    lo = np.full(n, -np.inf)
    hi = np.full(n, np.inf)
    lo[iR], hi[iR] = math.log(0.02), 0.0  # a share of a GEMM's efficiency
    lo[zero] = hi[zero] = 0.0
    for c in classes:
        # Shares of the spec-sheet peak (the flops per sample are pinned): at most all of it.
        lo[idx[("c", c)]], hi[idx[("c", c)]] = math.log(0.02), math.log(1.0)
    for m in mclasses:
        lo[idx[("m", m)]], hi[idx[("m", m)]] = (math.log(b) for b in MEMORY_EFFICIENCY_BOUNDS)
    for gp, floor in power_floors(gens).items():
        lo[idx[("p", gp)]] = math.log(floor)
    na, nc = len(anc), len(bounded)
    sparsity = np.zeros((len(obs) + na + nc + n, n), dtype=bool)
    for col in (iw, ic, ig, im, ib, ik, ih, iu, iv, ip, iK, iH, iU, iV, iE, ie):
        sparsity[np.arange(len(obs)), col] = True
    sparsity[np.arange(len(obs)), iR] = True
    for col in (ac, ag, ap, agen):
        sparsity[len(obs) + np.arange(na), col] = True
    for col in (s1, s2, s3):
        sparsity[len(obs) + na + np.arange(nc), col] = True
    sparsity[len(obs) + na + nc + np.arange(n), np.arange(n)] = True
    x = least_squares(resid, x0, bounds=(lo, hi), sparsity=sparsity)
    res = model(x) - y
    by_version: dict[str, list[float]] = defaultdict(list)
    for o, r in zip(obs, res, strict=True):
        by_version[o.version].append(abs(math.expm1(r)) * 100)
    cls = {f"{c}|{p}": math.exp(x[idx[("c", (c, p))]]) for c, p in classes}
    defaults = {}
    for pc in ("fp32", "tf32", "fp16", "bf16"):
        vals = [v for k, v in cls.items() if k.endswith(f"|{pc}")]
        defaults[pc] = statistics.median(vals) if vals else statistics.median(cls.values())
    # Architectures older than any fitted class run on CUDA cores: they take the median over
    # fitted GPUs whose peak was a CUDA-core rate too, not one of tensor-core peaks.
    cuda_core = [math.exp(x[idx[("c", (device_class(spec(g)), p))]]) for g, p in gpus_p
                 if cuda_core_peak(spec(g), p)]
    mcls = {m: math.exp(x[idx[("m", m)]]) for m in mclasses}
    kap = _by_family(fams, lambda f: math.exp(x[idx[("K", f[1])]] + x[idx[("k", f)]]
                                              + sig_log_terms(*f)[0]))
    host_per_sample = _by_family(fams, lambda f: math.exp(x[idx[("H", f[1])]]
                                                          + x[idx[("h", f)]]))

    def family_flops(f: tuple[str, str]) -> float:  # fitted flops per sample, geometric mean
        logs = [x[idx[("w", w)]] for w in works if (w[1], PRECISION_CLASS[w[2]]) == f]
        return math.exp(statistics.mean(logs))
    host = _by_family(fams, lambda f: host_per_sample[f[0]][f[1]] / family_flops(f))
    flops_per_sample = _by_family(fams, family_flops)
    step_bytes = _by_family(fams, lambda f: math.exp(x[idx[("U", f[1])]] + x[idx[("u", f)]]
                                                     + sig_log_terms(*f)[1]))
    step_host = _by_family(fams, lambda f: math.exp(x[idx[("V", f[1])]] + x[idx[("v", f)]]
                                                    + sig_log_terms(*f)[2]))
    scale = {t: {"bytes": math.exp(x[idx[("K", t)]]), "step_bytes": math.exp(x[idx[("U", t)]]),
                 "host_s_per_launch": math.exp(x[idx[("V", t)]])} for t in tclasses}
    # Every catalog GPU made of a fitted chip takes the chip's efficiency, measured or not
    # (a V100 PCIe is a V100 SXM2's silicon at a lower power limit, which the model applies).
    siblings = [(e.spec, p) for e in all_entries() for p in sorted({*tc_units, "fp32", "tf32"})
                if (chip(e.spec), p) in fitted_chips and (device_class(e.spec), p) in classes]
    return SingleFit(
        fp32_matmul_reached=reached,
        compute_gpu={f"{sg.name}|{p}": math.exp(x[idx[("c", (device_class(sg), p))]]
                                                + x[idx[("g", (chip(sg), p))]])
                     for sg, p in siblings},
        compute_class=cls,
        compute_default=defaults,
        compute_default_cuda_core=statistics.median(cuda_core) if cuda_core else math.nan,
        power_flops_per_joule={f"{g}|{p}": math.exp(x[idx[("p", (g, p))]]) for g, p in gens},
        memory_gpu={g: math.exp(x[idx[("m", device_class(spec(g)))]] + x[idx[("b", g)]])
                    for g in gpus},
        memory_class=mcls,
        memory_default=statistics.median(mcls.values()),
        bytes_per_flop=kap,
        default_bytes_per_flop=_family_median(kap),
        host_s_per_flop=host,
        flops_per_sample=flops_per_sample,
        default_host_s_per_flop=_family_median(host),
        default_host_s_per_sample=_family_median(host_per_sample),
        step_bytes_per_flop=step_bytes,
        default_step_bytes_per_flop=_family_median(step_bytes),
        step_host_s_per_flop=step_host,
        default_step_host_s_per_flop=_family_median(step_host),
        signature_scale=scale,
        gemm_gpu={f"{sg.name}|{p}": math.exp(x[idx[("E", p)]] + x[idx[("e", (device_class(sg), p))]]
                                              + x[idx[("g", (chip(sg), p))]])
                  for sg, p in siblings if (device_class(sg), p) in tc_classes},
        gemm_class={f"{c}|{p}": math.exp(x[idx[("E", p)]] + x[idx[("e", (c, p))]])
                    for c, p in tc_classes},
        gemm_default={u: math.exp(x[idx[("E", u)]]) for u in tc_units},
        recurrent_efficiency=math.exp(x[iR]),
        residual_rms_log=float(np.sqrt(np.mean(res**2))),
        residuals_pct={v: round(statistics.mean(r), 2) for v, r in sorted(by_version.items())},
    )


def _by_family(fams: Iterable[tuple[str, str]], value: Callable[[tuple[str, str]], float]
               ) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for model_key, pc in fams:
        out[model_key][pc] = value((model_key, pc))
    return dict(out)


def _family_median(by_family: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Per precision class, the median over families (fp32/bf16 borrow tf32/fp16's when unseen)."""
    out = {}
    for pc, fallback in (("tf32", "fp16"), ("fp32", "tf32"), ("fp16", "tf32"), ("bf16", "fp16")):
        vals = [v[pc] for v in by_family.values() if pc in v]
        out[pc] = statistics.median(vals or [v[fallback] for v in by_family.values()
                                             if fallback in v])
    return out


def single_calibration(fit: SingleFit) -> dict[str, Any]:
    """The translation part of calibration.json from a fit."""
    return {
        "launch_floor_s": LAUNCH_FLOOR_S,
        "compute_efficiency_gpu": _rounded(fit.compute_gpu),
        "compute_efficiency_class": _rounded(fit.compute_class),
        "compute_efficiency_default": _rounded(fit.compute_default),
        "compute_efficiency_default_cuda_core": round(fit.compute_default_cuda_core, 4),
        "power_flops_per_joule": _sig(fit.power_flops_per_joule),
        "memory_efficiency_gpu": _rounded(fit.memory_gpu),
        "memory_efficiency_class": _rounded(fit.memory_class),
        "memory_efficiency_default": round(fit.memory_default, 4),
        "families": [
            {"key": key, "match": FAMILY_MATCH[key],
             "bytes_per_flop": _sig(fit.bytes_per_flop[key]),
             "host_s_per_flop": _sig(fit.host_s_per_flop[key]),
             "step_bytes_per_flop": _sig(fit.step_bytes_per_flop[key]),
             "step_host_s_per_flop": _sig(fit.step_host_s_per_flop[key]),
             "flops_per_sample": _sig(fit.flops_per_sample[key]),
             "params": FAMILY_PARAMS[key]}
            for key in FAMILY_MATCH if key in fit.bytes_per_flop
        ],
        "signature_scale": {t: _sig(v) for t, v in sorted(fit.signature_scale.items())},
        "class_efficiency": {**CLASS_EFFICIENCY,
                             "recurrent": round(fit.recurrent_efficiency, 4)},
        "gemm_efficiency_gpu": _rounded(fit.gemm_gpu),
        "gemm_efficiency_class": _rounded(fit.gemm_class),
        "gemm_efficiency_default": _rounded(fit.gemm_default),
        "default_bytes_per_flop": _sig(fit.default_bytes_per_flop),
        "default_host_s_per_flop": _sig(fit.default_host_s_per_flop),
        "default_host_s_per_sample": _sig(fit.default_host_s_per_sample),
        "default_step_bytes_per_flop": _sig(fit.default_step_bytes_per_flop),
        "default_step_host_s_per_flop": _sig(fit.default_step_host_s_per_flop),
        "fp32_matmul_reached": round(fit.fp32_matmul_reached, 4),
    }


# Efficiency of each compute class on tensor cores (CUDA-core units: 1 for every class),
# relative to a GEMM. GEMM-like classes run at their own fitted GEMM efficiency (the "E"/"e"
# parameters, anchored on measured matmul rates, see SIGMA_ANCHOR), convolutions at the fitted
# compute efficiency, every class at the step's tile utilisation (wave quantisation, from its
# signature's GEMM shapes and the GPU's SMs). Attention is a GEMM. Recurrent cells run one GEMM
# per time step, one after another: the dependency chain leaves the units idle between steps
# beyond what their few tiles already cost. Their share is fitted (on the Tacotron2 rows, the
# only recurrent family) around a stated prior of 0.25.
CLASS_EFFICIENCY = {"gemm": 1.0, "conv": 1.0, "attention": 1.0}
RECURRENT_EFFICIENCY_PRIOR = 0.25
SIGMA_RECURRENT = 0.5
GEMM_LIKE = ("gemm", "attention", "recurrent")
SIGMA_RANGE = 0.01  # how far (log) an efficiency may leave its physical range: barely
SIGMA_ANCHOR = 0.10  # log spread of a measured best-matmul rate around the model's GEMM rate
# cuBLAS reaches a similar share of the tensor-core peak on every GPU where cuDNN's convolutions
# do not (Ampere's GA100 convolutions reach far less of it than GA102's), so GEMMs get an
# efficiency of their own per device class and unit, shrunk by this much (log) towards the
# unit's global one, which a class without transformer rows or anchor takes. (Was a GEMM-over-
# convolution factor per generation: a held-out transformer inherited the CNN rows' convolution
# efficiency of its class, 1.5 of the peak on GA102 and 0.66 on GA100 when BERT was left out.)
# How similar: the measured best bf16 matmuls in the catalog (mamf_bf16_tflops) reach 0.80-0.87
# of the peak on A100 PCIe and SXM, H100 and H200 alike, a spread of 0.04 in log, part of it
# their power limits, which the power term holds. At 0.3 the classes wandered with whatever
# GEMMs the other families had: without BERT the V100's GEMMs fell to 0.57 of its peak and
# the RTX 6000 Ada's rose to 1.0.
SIGMA_GEMM_CLASS = 0.05
# GeForce cards list their fp32-accumulate rate, half the rate their tensor cores reach with
# fp16 accumulation; no measured matmul says where cuBLAS lands between the two (the fits put
# transformer GEMMs at 1.2-1.4 of the listed rate), so their classes keep a wide prior.
SIGMA_GEMM_GEFORCE = 0.3

# A kernel launch plus its synchronisation costs a few microseconds on any recent GPU; this
# floors tiny operators (not fitted: the benchmark tables have no operator data).
LAUNCH_FLOOR_S = 4e-6


def _sig(d: Mapping[str, float]) -> dict[str, float]:
    return {k: float(f"{v:.4g}") for k, v in sorted(d.items())}


def _rounded(d: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in sorted(d.items())}


# ------------------------------------------------------------------------------- scaling --
@dataclass(frozen=True)
class SiaRow:
    cluster: str
    model: str
    placement: tuple[int, ...]  # GPUs per node
    local_bsz: int
    step_s: float
    single_step_s: float  # 1-GPU step at the same local batch (the "profile")


def load_sia(path: Path) -> list[SiaRow]:
    """Multi-GPU rows joined with the 1-GPU step of the same job and local batch (medians)."""
    groups: dict[tuple[str, str, str, int], list[float]] = defaultdict(list)
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            key = (row["cluster"], row["model"], row["placement"], int(row["local_bsz"]))
            groups[key].append(float(row["step_time_s"]))
    med = {k: statistics.median(v) for k, v in groups.items()}
    out = []
    for (cluster, model, placement, bsz), step in sorted(med.items()):
        if placement == "1":
            continue
        single = med.get((cluster, model, "1", bsz))
        if single is None:
            continue
        out.append(SiaRow(cluster, model, tuple(int(c) for c in placement), bsz, step, single))
    return out


@dataclass(frozen=True)
class Cluster:
    gpu: str  # catalog name
    network_gbps: float  # per node, Gbit/s
    transport: str  # how NCCL crosses it: "tcp" (Ethernet sockets) or "rdma" (InfiniBand)


# The clusters of the traces, in catalog terms (cluster_desc of the data file). The Azure V100s
# are NVLink boards, but the traces' sync time grows linearly with GPUs per node, which a ring
# over NVLink does not do: their pods met over sockets through the host (PODS_INTRA_NODE_LINK).
# The per-cluster fit (fit_scaling) reads that path in PCIe's form, a link's rate and a host
# shared by the node's k GPUs, which is the shape of sockets through a host too.
SIA_CLUSTERS = {
    "aws": Cluster("T4", 50.0, "tcp"),
    "azure": Cluster("V100 SXM2 32GB", 100.0, "rdma"),  # EDR InfiniBand
}
# The traces' jobs' parameter counts as published (model papers and the AdaptDL examples the
# traces ran: ResNet-18 for CIFAR, YOLOv3 on Darknet-53, DeepSpeech2 with five 1024-wide
# recurrent layers; NeuMF-end over MovieLens-1M, as the Sia artifacts' benchmark/models/ncf
# config.py and main.py set it: 6,040 users and 3,706 items embedded in 32 (GMF) + 128 (MLP)
# dimensions, MLP 256-128-64-32: 1.6 M): a user's own figure for their model, not a fit.
SIA_PARAMS = {"BERT-base SQuAD fine-tune (seq 384)": 110e6, "ResNet-50 (ImageNet)": 25.6e6,
              "ResNet-18 (CIFAR-10)": 11.2e6, "YOLOv3 (PASCAL VOC)": 61.9e6,
              "DeepSpeech2 (LibriSpeech/AN4)": 38e6, "NeuMF/NCF (MovieLens)": 1.6e6}


# How the traces' jobs crossed the network, from how they ran, not fitted: AdaptDL's controller
# starts each replica in a Kubernetes pod of its own, without host networking, so NCCL does not
# see the instance's NIC and its socket transport opens one socket per connection (it opens 16
# only where it reads an AWS ENA vendor id); AWS caps one TCP stream between instances outside a
# cluster placement group at 5 Gbit/s (EC2 user guide). The Azure NDv2 jobs crossed nodes on the
# VMs' InfiniBand, as the cluster is listed, not on their Ethernet: with one GPU per node,
# BERT-base's 440 MB sync hid behind its 190 ms of compute (the trace's exposed sync: 19 ms),
# which needs some 8 GB/s, where the VMs' 24 Gbit/s Ethernet carries 3 GB/s at line rate. And
# as each pod is a host of its own to NCCL (its host hash is the pod's hostname and the boot
# id), neither the NDv2's NVLink nor PCIe peer copies nor shared memory join two pods: inside a
# node they meet through the host, gpucost's "socket" link.


@dataclass(frozen=True)
class PodNetwork:
    """How NCCL's TCP connections used a cluster's network between nodes, where its pods
    were held to less than the network's rate."""

    stream_gbps: float | None = None  # the network's cap on one TCP stream
    streams: int = 1  # TCP streams per NCCL connection


POD_NETWORKS = {"aws": PodNetwork(stream_gbps=5.0)}
# Every trace cluster ran a pod per GPU, so two GPUs of a node meet over sockets.
PODS_INTRA_NODE_LINK = "socket"


def pod_network(cluster: str) -> tuple[float, PodNetwork]:
    """(Gbit/s between nodes, how the cluster's pods' TCP connections used them)."""
    return SIA_CLUSTERS[cluster].network_gbps, POD_NETWORKS.get(cluster, PodNetwork())


def pod_step_s(row: SiaRow, batch: int, single_s: float,
               other: tuple[int, float] | None = None,
               intra_node_link: str = PODS_INTRA_NODE_LINK) -> float:
    """A trace row's step time as a user asks gpucost for it: from the job's 1-GPU step at
    ``batch`` (and, with ``other``, a second 1-GPU (batch, step seconds) measurement) through the
    public ``gpucost.predict`` to the row's placement and local batch, over the network as the
    cluster's pods reached it, at the job's published parameter count."""
    profile = gpucost.Profile.from_measurement(
        gpu=SIA_CLUSTERS[row.cluster].gpu, throughput=batch / single_s, batch_size=batch,
        precision="fp32", param_count=SIA_PARAMS[row.model], name=row.model,
        other_batches={other[0]: other[0] / other[1]} if other else None)
    network_gbps, pods = pod_network(row.cluster)
    return gpucost.predict(profile, gpus_per_node=row.placement[0], nodes=len(row.placement),
                           inter_node_gbps=network_gbps,
                           inter_node_transport=SIA_CLUSTERS[row.cluster].transport,
                           tcp_stream_gbps=pods.stream_gbps, tcp_streams=pods.streams,
                           intra_node_link=intra_node_link,
                           batch_size=row.local_bsz, fit_batch="keep").step_time_s


def fit_scaling_coefficient(name: str, ratios: Callable[[], Iterable[float]],
                            cal: Mapping[str, Any], bounds: tuple[float, float], *,
                            log_scale: bool = False, xatol: float) -> float:
    """The value of ``cal``'s scaling coefficient ``name`` that minimises the mean absolute log
    of ``ratios()`` (predicted over measured, through the public predict), every other
    coefficient as ``cal`` has it; searched within ``bounds`` (over its logarithm with
    ``log_scale``), which the fit must land inside."""
    from scipy.optimize import minimize_scalar

    def loss(x: float) -> float:
        value = math.exp(x) if log_scale else x
        with using_calibration({**cal, "scaling": {**cal["scaling"], name: value}}):
            return statistics.mean(abs(math.log(r)) for r in ratios())

    lo, hi = (math.log(bounds[0]), math.log(bounds[1])) if log_scale else bounds
    result = minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": xatol})
    return float(math.exp(result.x) if log_scale else result.x)


def fit_socket_host_busbw(rows: Sequence[SiaRow], cal: Mapping[str, Any]) -> float:
    """GB/s of bus bandwidth a host's kernel moves for its pods' sockets in all
    (``socket_host_busbw_gbs``): the value that brings ``rows``' uniform placements (one GPU
    count per node, as the model's groups are) closest to their measured step times, by mean
    absolute log error, each predicted by :func:`pod_step_s` from the 1-GPU step at the same
    local batch with every other coefficient as ``cal`` has it. One number for every cluster:
    a kernel's copy rate, not a link's."""
    uniform = [r for r in rows if len(set(r.placement)) == 1]
    if not uniform:
        raise ValueError("no uniform multi-GPU placements to fit the socket bandwidth on")
    # From a slow kernel copy to faster than any host's memory.
    return fit_scaling_coefficient(
        "socket_host_busbw_gbs",
        lambda: (pod_step_s(r, r.local_bsz, r.single_step_s) / r.step_s for r in uniform),
        cal, (0.1, 1000.0), log_scale=True, xatol=0.01)


# Link coefficients, fitted per cluster (each is its own hardware: PCIe generation, host, network).
SCALING_PARAMS = ("pcie_busbw_efficiency", "host_busbw_factor", "pcie_hop_latency_s",
                  "network_busbw_efficiency", "network_hop_latency_s", "two_node_network_factor")


@dataclass(frozen=True)
class JobFit:
    """What Pollux fits per job: the bytes its sync moves and how much of it backward hides."""

    grad_bytes: float
    overlap_gamma: float


def sia_links(cluster: str, p: Mapping[str, float], spec: GpuSpec) -> Links:
    net = SIA_CLUSTERS[cluster].network_gbps
    return Links(intra_busbw_Bps=spec.pcie_gbs * 1e9 * p["pcie_busbw_efficiency"],
                 inter_busbw_Bps=net * 1e9 / 8 * p["network_busbw_efficiency"],
                 intra_latency_s=p["pcie_hop_latency_s"],
                 inter_latency_s=p["network_hop_latency_s"], intra_kind="pcie",
                 host_busbw_Bps=p["host_busbw_factor"] * spec.pcie_gbs * 1e9,
                 two_node_network_factor=p["two_node_network_factor"])


def predict_sia_step(row: SiaRow, job: JobFit, p: Mapping[str, float], spec: GpuSpec) -> float:
    links = sia_links(row.cluster, p, spec)
    sync = allreduce_time_s(job.grad_bytes, max(row.placement), len(row.placement), links)
    return overlapped_s(row.single_step_s, sync, job.overlap_gamma)


def predict_sia_steps(rows: Sequence[SiaRow], grad_bytes: Vector, gamma: Vector,
                      p: Mapping[str, Vector | float], spec: Callable[[str], GpuSpec]) -> Vector:
    """:func:`predict_sia_step` over many rows at once (numpy), for fitting; ``p``'s values are
    scalars or one value per row."""
    k = np.array([max(r.placement) for r in rows], dtype=float)
    n = np.array([len(r.placement) for r in rows], dtype=float)
    pcie = np.array([spec(SIA_CLUSTERS[r.cluster].gpu).pcie_gbs for r in rows]) * 1e9
    net = np.array([SIA_CLUSTERS[r.cluster].network_gbps for r in rows]) * 1e9 / 8
    compute = np.array([r.single_step_s for r in rows])
    # allreduce_time_s's flat ring: the slowest link over all k * n ranks, hops per node.
    ranks = k * n
    intra_busbw = np.where(k > 1, np.minimum(pcie * p["pcie_busbw_efficiency"],
                                             p["host_busbw_factor"] * pcie / k), np.inf)
    net_busbw = np.where(n > 1, net * p["network_busbw_efficiency"]
                         / np.where(n == 2, p["two_node_network_factor"], 1.0), np.inf)
    latency = 2 * (k - 1) * p["pcie_hop_latency_s"] + 2 * (n - 1) * p["network_hop_latency_s"]
    sync = np.where(ranks > 1, 2 * (ranks - 1) / ranks * grad_bytes
                    / np.minimum(intra_busbw, net_busbw) + latency, 0.0)
    hi = np.maximum(compute, sync)
    lo = np.minimum(compute, sync)
    return np.asarray(hi * (1 + (lo / hi) ** gamma) ** (1 / gamma))


def median_overlap_gamma(jobs: Mapping[tuple[str, str], JobFit]) -> float:
    """The overlap exponent a profile that does not say its own takes: the median job's."""
    return round(statistics.median(j.overlap_gamma for j in jobs.values()), 3)


def fit_scaling(rows: Sequence[SiaRow], spec: Callable[[str], GpuSpec]
                ) -> tuple[dict[str, dict[str, float]], dict[tuple[str, str], JobFit]]:
    """Link coefficients per cluster, and each job's effective gradient bytes and overlap
    exponent (as Pollux fits them per job), jointly by least squares on log step time."""
    clusters = sorted({r.cluster for r in rows})
    jobs = sorted({(r.cluster, r.model) for r in rows})
    names = SCALING_PARAMS
    per = len(names)
    x0 = np.log(np.array([0.5, 1.0, 2e-5, 0.5, 5e-5, 1.0] * len(clusters)
                         + [2e8, 2.0] * len(jobs)))
    lo = np.log(np.array([0.01, 0.05, 1e-7, 0.005, 1e-7, 0.1] * len(clusters)
                         + [1e5, 1.0] * len(jobs)))
    hi = np.log(np.array([1.0, 50.0, 1e-2, 1.0, 1e-2, 10.0] * len(clusters)
                         + [5e10, 20.0] * len(jobs)))
    cidx = np.array([clusters.index(r.cluster) for r in rows])
    jidx = np.array([jobs.index((r.cluster, r.model)) for r in rows])
    y = np.log([r.step_s for r in rows])
    # A cluster without groups of three or more nodes cannot tell two-node groups apart: 1.
    for i, c in enumerate(clusters):
        if not any(len(r.placement) > 2 for r in rows if r.cluster == c):
            j = i * per + names.index("two_node_network_factor")
            x0[j] = lo[j] = hi[j] = 0.0

    def resid(x: Vector) -> Vector:
        e = np.exp(x)
        p = {name: e[cidx * per + i] for i, name in enumerate(names)}
        jx = len(clusters) * per + 2 * jidx
        pred = predict_sia_steps(rows, e[jx], e[jx + 1], p, spec)
        return robust(np.log(pred) - y)

    x = least_squares(resid, x0, bounds=(lo, hi))
    e = np.exp(x)
    params = {c: {name: float(e[i * per + j]) for j, name in enumerate(names)}
              for i, c in enumerate(clusters)}
    fits = {job: JobFit(float(e[len(clusters) * per + 2 * j]),
                        float(e[len(clusters) * per + 2 * j + 1])) for j, job in enumerate(jobs)}
    return params, fits


def nvlink_efficiency(path: Path, spec: Callable[[str], GpuSpec]) -> tuple[float, list[str]]:
    """Ring all-reduce busbw over the NVLink per-direction line rate, from measured anchors."""
    anchors = {"8x H100 SXM (1 node)": "H100 SXM5 80GB",
               "8x A100 SXM4 80GB (1 node)": "A100 SXM4 80GB",
               "A100 NVLink pair (NV12)": "A100 SXM4 80GB"}
    ratios = []
    used = []
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            gpu = anchors.get(row["setting"])
            if gpu is None or row["algo"].startswith("NVLS"):
                continue
            if "allreduce" not in row["collective"]:
                continue
            vals = [float(v) for v in re.findall(r"\d+(?:\.\d+)?", row["busbw_gbps"])]
            if not vals:
                continue
            ratios.append(statistics.mean(vals) / (spec(gpu).nvlink_gbs / 2))
            used.append(f"{row['setting']}: {row['busbw_gbps']} GB/s ({row['source_url']})")
    return statistics.median(ratios), used


# PCIe-only all-reduce measurements on current hosts: (setting in the file, catalog GPU, GPUs,
# busbw GB/s). The 4-GPU figure is in the 8x RTX 5090 row's notes.
PCIE_ANCHORS = (
    ("8x RTX 5090 (PCIe only)", "RTX 5090", 8, None),
    ("8x RTX 5090 (PCIe only)", "RTX 5090", 4, 35.0),
    ("5x RTX 4090 (P2P enabled by tinygrad patched driver)", "RTX 4090", 5, None),
)


def pcie_anchors(path: Path, spec: Callable[[str], GpuSpec]
                 ) -> tuple[float, float, float, list[str]]:
    """PCIe busbw efficiency and host factor fitted (grid, log error) to NCCL's PCIe-only
    measurements on current hosts; also the fit's mean absolute error."""
    with path.open(newline="") as fh:
        by_setting = {row["setting"]: row for row in csv.DictReader(fh)}
    points = []
    used = []
    for setting, gpu, k, value in PCIE_ANCHORS:
        row = by_setting[setting]
        busbw = value if value is not None else float(row["busbw_gbps"])
        points.append((spec(gpu).pcie_gbs, k, busbw))
        used.append(f"{setting}, {k} GPUs: {busbw:g} GB/s ({row['source_url']})")
    best = (math.inf, 0.0, 0.0)
    for eff in np.linspace(0.2, 1.0, 161):
        for host in np.linspace(0.5, 8.0, 301):
            err = sum(math.log(min(eff * pcie, host * pcie / k) / b) ** 2 for pcie, k, b in points)
            best = min(best, (err, float(eff), float(host)))
    _, eff, host = best
    mae = statistics.mean(abs(min(eff * pcie, host * pcie / k) / b - 1) for pcie, k, b in points)
    return eff, host, mae, used


# Inter-node all-reduce measurements: (setting in the file, the network's line rate in GB/s per
# node, from the interconnect named there).
NETWORK_ANCHORS = (
    ("1 node x 1 NIC 100 Gb/s", 100 / 8),
    ("3 nodes x 8 A100 SXM4 40GB, 4x HDR 200Gb per node", 4 * 200 / 8),
    ("NDR 400 Gb/s ConnectX-7 NIC", 400 / 8),
)


def network_anchors(path: Path) -> tuple[float, list[str]]:
    """Inter-node ring all-reduce bus bandwidth over the network's line rate (median over the
    anchors; a range or "avg / peak" counts as its mean)."""
    with path.open(newline="") as fh:
        by_setting = {row["setting"]: row for row in csv.DictReader(fh)}
    ratios = []
    used = []
    for setting, line_rate_gbs in NETWORK_ANCHORS:
        row = by_setting[setting]
        values = [float(v) for v in re.findall(r"\d+(?:\.\d+)?", row["busbw_gbps"])]
        ratios.append(statistics.mean(values) / line_rate_gbs)
        used.append(f"{setting}: {row['busbw_gbps']} GB/s over {line_rate_gbs:g} GB/s line rate "
                    f"({row['source_url']})")
    return statistics.median(ratios), used


# NCCL over TCP sockets (fabrics.csv transport "tcp"): published nccl-tests runs, not in the
# reference file. Bus bandwidth over line rate with several GPUs per node, the shape training
# runs in (one GPU per node reaches ~0.96 of 32 GbE in #209, which no 8-GPU node does).
TCP_BUSBW_ANCHORS = (
    ("4 nodes x 8 V100, 100 Gb/s TCP: all-reduce busbw 4-6 GB/s of 12.5 "
     "(https://github.com/NVIDIA/nccl/issues/450)", 5.0 / 12.5),
    ("GCP 2 nodes x 8 GPUs, 32 GbE: busbw 14.5-14.9 Gbit/s "
     "(https://github.com/NVIDIA/nccl/issues/209)", 14.7 / 32),
    ("GCP 4 nodes x 8 GPUs, 32 GbE: busbw 22.2-22.9 Gbit/s "
     "(https://github.com/NVIDIA/nccl/issues/209)", 22.5 / 32),
)
# One ring step over sockets: an 8-byte broadcast between 2 nodes (1 step; Simple protocol).
TCP_HOP_LATENCY = ("2 nodes x 1 V100 over TCP sockets: 8 B broadcast 38-46 us "
                   "(https://github.com/NVIDIA/nccl-tests/issues/82)", 42e-6)


def tcp_anchors() -> tuple[float, float, list[str]]:
    """(bus bandwidth over line rate, per-hop latency s, what was used) of NCCL's socket
    transport: the median of the bandwidth anchors and the one small-message step."""
    used = [text for text, _ in TCP_BUSBW_ANCHORS] + [TCP_HOP_LATENCY[0]]
    return statistics.median(r for _, r in TCP_BUSBW_ANCHORS), TCP_HOP_LATENCY[1], used


def latency_anchors(path: Path) -> tuple[float, float, list[str]]:
    """Per-hop all-reduce latency (s) inside an NVLink node and between nodes, from the
    small-message rows: a ring all-reduce takes 2(n-1) hops."""
    intra = inter = math.nan
    used = []
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            m = re.search(r"latency ~?(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))? us", row["busbw_gbps"])
            if m is None:
                continue
            lat_s = statistics.mean(float(v) for v in m.groups() if v) * 1e-6
            hops = 2 * (int(row["gpus"]) - 1)
            if "IB" in row["interconnect"]:
                inter = lat_s / hops
            else:
                intra = lat_s / hops
            used.append(f"{row['setting']}: {row['busbw_gbps']} ({row['source_url']})")
    return intra, inter, used


def main(argv: Iterable[str] | None = None) -> int:
    from gpucost.catalog import get_gpu

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=REPO / "gpucost" / "model" / "calibration.json")
    args = ap.parse_args(list(argv) if argv is not None else None)
    lams = lambda_paths(args.data)
    sia = args.data / "benchmarks" / "sia_step_times_calibration.csv"
    nccl = args.data / "nccl_busbw_reference.csv"
    obs, unresolved = load_lambda(lams, get_gpu)
    single = fit_single(obs, get_gpu)
    rows = load_sia(sia)
    scale, jobs = fit_scaling(rows, get_gpu)
    nv_eff, nv_used = nvlink_efficiency(nccl, get_gpu)
    nv_lat, net_lat, lat_used = latency_anchors(nccl)
    pcie_eff, host_factor, pcie_mae, pcie_used = pcie_anchors(nccl, get_gpu)
    net_eff, net_used = network_anchors(nccl)
    tcp_eff, tcp_lat, tcp_used = tcp_anchors()
    step_err = [abs(predict_sia_step(r, jobs[(r.cluster, r.model)], scale[r.cluster],
                                     get_gpu(SIA_CLUSTERS[r.cluster].gpu)) / r.step_s - 1)
                for r in rows]

    # Shipped PCIe hop latency: the AWS cluster's, the one with groups of 1-4 nodes x 1-4 GPUs
    # (Azure's fit runs to a bound).
    ref = scale["aws"]
    from gpucost.model.translate import calibration as shipped

    old = shipped().scaling
    cal: dict[str, Any] = {
        "provenance": {
            "written_by": "scripts/fit_calibration.py",
            "date": dt.date.today().isoformat(),
            "data": {
                **{str(lam.name): {"sha256_prefix": sha256_prefix(lam)} for lam in lams},
                "lambda 1-GPU medians used": {"rows": len(obs), "gpus_unresolved": unresolved},
                str(sia.name): {"sha256_prefix": sha256_prefix(sia), "rows_used": len(rows)},
                str(nccl.name): {"sha256_prefix": sha256_prefix(nccl),
                                 "anchors": nv_used + lat_used + pcie_used + net_used,
                                 "pcie_anchor_mean_abs_pct_error": round(100 * pcie_mae, 1)},
                "nccl socket transport (published runs)": {"anchors": tcp_used},
            },
            "method": "scipy.optimize.least_squares on log time; see the script's docstring",
            "single_gpu_in_sample": {"rms_log_residual": round(single.residual_rms_log, 4),
                                     "mean_abs_pct_error_by_version": single.residuals_pct},
            "scaling_in_sample_mean_abs_pct_error": round(100 * statistics.mean(step_err), 2),
            # The traces' 2019-era PCIe Gen3 hosts (g4dn, Azure VMs) reach less than current
            # ones; the shipped PCIe coefficients come from the NCCL anchors above.
            # AWS's 2-node groups sync at about half the network rate of its 3- and 4-node groups
            # (two_node_network_factor); Azure has no group of 3+ nodes to tell. Not shipped:
            # nothing shows it holds beyond that 2019 TCP cluster.
            "sia_link_fit_by_cluster": {c: {k: float(f"{v:.4g}") for k, v in p.items()}
                                        for c, p in scale.items()},
            "sia_jobs": {f"{c}/{m}": {"effective_gradient_bytes": float(f"{j.grad_bytes:.3g}"),
                                      "overlap_gamma": round(j.overlap_gamma, 3)}
                         for (c, m), j in jobs.items()},
        },
        **single_calibration(single),
        "scaling": {
            # Pollux fits the overlap per job; a profile that does not say takes the median job's.
            "overlap_gamma": median_overlap_gamma(jobs),
            "nvlink_busbw_efficiency": round(nv_eff, 3),
            "pcie_busbw_efficiency": round(pcie_eff, 4),
            "host_busbw_factor": round(host_factor, 3),
            "network_busbw_efficiency": round(net_eff, 3),
            "nvlink_hop_latency_s": float(f"{nv_lat:.3g}"),
            "pcie_hop_latency_s": float(f"{ref['pcie_hop_latency_s']:.3g}"),
            "network_hop_latency_s": float(f"{net_lat:.3g}"),
            # NCCL over TCP sockets (fabrics.csv transport "tcp"), from published runs; the Sia
            # AWS cluster ran that way too, but its fit trades bandwidth against gradient bytes
            "tcp_busbw_efficiency": round(tcp_eff, 3),
            "tcp_hop_latency_s": float(f"{tcp_lat:.3g}"),
            "two_node_network_factor": 1.0,  # see provenance: AWS-only, not shipped
            "default_network_gbps": old.default_network_gbps,
        },
    }
    # The wait for the slowest GPU, on Lambda's one-node NVLink runs (the link terms above
    # barely matter there; the socket bandwidth is not used), then the pods' sockets through
    # the host, each with every other coefficient as fitted before it.
    runs = nvlink_runs(load_one_node_runs(lams, get_gpu), get_gpu)
    cal["scaling"]["socket_host_busbw_gbs"] = old.socket_host_busbw_gbs
    cal["scaling"]["straggler_cv"] = round(fit_straggler_cv(runs, cal), 3)
    cal["provenance"]["data"]["lambda one-node NVLink runs of 2-8 GPUs used"] = {
        "runs": len(runs)}
    cal["scaling"]["socket_host_busbw_gbs"] = float(f"{fit_socket_host_busbw(rows, cal):.3g}")
    from gpucost._io import atomic_write_text

    atomic_write_text(args.out, json.dumps(cal, indent=2) + "\n")
    print(f"wrote {args.out}: single-GPU rms log residual {single.residual_rms_log:.3f}, "
          f"scaling in-sample error {100 * statistics.mean(step_err):.1f} %")
    if unresolved:
        print("GPUs in the benchmark table the catalog does not resolve: " + ", ".join(unresolved))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
