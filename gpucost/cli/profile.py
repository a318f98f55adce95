"""`gpucost profile`: measure a training step, explain its bottleneck, write a profile.

    gpucost profile train.py [--steps N] [--out FILE] -- --lr 0.1   # an unmodified script
    gpucost profile --model vit --batch 64 [--probe-batch]          # a built-in workload
    gpucost profile --measured 1200 --gpu V100 --batch 256 --params 25.6e6   # a throughput

A throughput measured by hand or published is written as a profile without running anything
(``Profile.from_measurement``), so every command that takes ``--profile`` can use it.

Exit codes: 0 a profile was written (complete, or partial when the script ended early);
2 bad arguments, or the script crashed (a partial profile is still written when enough steps
were timed); 130 interrupted (likewise).
"""

from __future__ import annotations

import argparse
import copy
import shlex
import sys
from pathlib import Path
from typing import Any

from gpucost._optional import require
from gpucost.catalog.spec import PRECISIONS
from gpucost.cli import add_command
from gpucost.cli.numbers import positive
from gpucost.cli.outputs import check_profile_output
from gpucost.envelope import add_format_argument, print_document
from gpucost.errors import GpuCostError, InputError
from gpucost.limits import MAX_GPU_MEMORY_GB, MAX_PARAM_COUNT, MAX_SAMPLES_PER_S
from gpucost.model.memory import total_gb
from gpucost.model.perf import measured_fixed_share, predict
from gpucost.model.translate import gpu_spec, workload_signature
from gpucost.profile import Profile, default_profile_path

MODELS = ("mlp", "cnn", "vit", "transformer")  # gpucost.profiler.models.MODEL_NAMES, torch-free


def register(sub: Any) -> None:
    p = add_command(
        sub, "profile",
        usage="gpucost profile [OPTIONS] SCRIPT.py [-- SCRIPT_ARGS]\n"
              "       gpucost profile --model NAME [--batch N] [OPTIONS]\n"
              "       gpucost profile --measured SAMPLES_PER_S --gpu GPU --batch N --params N "
              "[OPTIONS]",
        description="Run a training script (unmodified, in this process) or a built-in model "
        "for warm-up, detail (FLOP count, operator trace) and --steps timed optimizer steps; "
        "write the profile (step time, breakdown, FLOPs, memory, operator table, verdict) to "
        "profiles/NAME.json for `gpucost compare --profile`. Options may also follow SCRIPT "
        "when the script's own arguments come after --. A throughput you measured yourself, or "
        "a published one, is written as a profile with --measured, running nothing.",
    )
    p.add_argument("script", nargs="?", metavar="SCRIPT.py", help="training script to run")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.add_argument("--model", choices=MODELS, help="profile a built-in workload instead")
    p.add_argument("--batch", type=int, help="batch size per device (--model: default 32, or "
                   "the probed maximum with --probe-batch; scripts: samples per step when no "
                   "DataLoader shows it; --measured: the batch it ran at)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20), after "
                   "--warmup steps and 3 detail steps")
    p.add_argument("--warmup", type=int, default=3, help="discarded warm-up steps (default 3)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="--model only: where to run (default: cuda when present)")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="precision the step runs at. --model: default fp32; amp autocasts, "
                   "fp16/bf16 cast the weights. Scripts: default detected from the dtypes "
                   "their matmuls run at. --measured: what it ran at, default fp32")
    p.add_argument("--probe-batch", action="store_true",
                   help="--model only: first find the largest power-of-two batch that fits")
    p.add_argument("--also-batch", type=int, action="append", metavar="N",
                   help="--model only: time the step at batch N too (repeatable); predictions "
                   "at other batches then use the measured fixed and per-sample parts")
    p.add_argument("--probe-max", type=int, default=4096,
                   help="largest batch the probe tries (default 4096)")
    p.add_argument("--memory-limit-gb", type=float,
                   help="CPU probe: memory limit in GB (default 80%% of available memory)")
    p.add_argument("--devices", type=int, default=1,
                   help="data-parallel devices the probed batch is split over, or --measured's "
                   "throughput was reached on (default 1)")
    p.add_argument("--sample-unit", help="what a sample is (images, sequences...) for scripts "
                   "and --measured")
    p.add_argument("--dataset-size", type=int, help="samples per epoch of the typical job, "
                   "recorded for `gpucost compare` (--model: the workload's dataset)")
    p.add_argument("--epochs", type=float, help="epochs of the typical job, recorded for "
                   "`gpucost compare`")
    p.add_argument("--name", help="profile name (default: the model or script name)")
    p.add_argument("--out", "-o", help="output file (default: profiles/NAME.json)")
    p.add_argument("--force", action="store_true",
                   help="let the profile replace an existing file that is not a gpucost profile")
    measured = p.add_argument_group(
        "a throughput you measured (runs nothing; --batch, --precision, --devices, --name, "
        "--sample-unit, --dataset-size and --epochs apply too)")
    measured.add_argument("--measured", type=positive(MAX_SAMPLES_PER_S), metavar="SAMPLES_PER_S",
                          help="samples/s a training run reached over all --devices, measured "
                          "or published: write it as a profile (needs --gpu, --batch and "
                          "--params; --precision defaults to fp32)")
    measured.add_argument("--gpu", help="the GPU it was measured on, any common spelling")
    measured.add_argument("--params", type=positive(MAX_PARAM_COUNT), metavar="N",
                          help="the model's parameter count, e.g. 110e6: it sets the optimizer "
                          "update, the weights' memory and the gradients each step syncs")
    measured.add_argument("--workload", help="what the step is made of, a built-in "
                          "architecture such as encoder-only or seq2seq-rnn (default: matched "
                          "from --name, e.g. 'GNMT v2'); it sets how each part of the step moves "
                          "to another GPU and batch, and the activation memory estimate")
    measured.add_argument("--peak-memory-gb", type=positive(MAX_GPU_MEMORY_GB), metavar="GB",
                          help="the most GPU memory one device held during the run "
                          "(torch.cuda.max_memory_allocated() / 1e9): what a sample keeps is "
                          "then measured, not estimated from the workload")
    measured.add_argument("--also-measured", action="append", metavar="BATCH=SAMPLES_PER_S",
                          help="the throughput at another per-device batch on the same GPUs "
                          "(repeatable): predictions at other batches then use the measured "
                          "fixed and per-sample parts of a step")
    add_format_argument(p, ("text", "json"))
    p.set_defaults(handler=run, _parser=p)


def _split_script_args(args: argparse.Namespace) -> list[str]:
    """Separate gpucost options written after SCRIPT from the script's own arguments."""
    rest: list[str] = list(args.script_args)
    parser: argparse.ArgumentParser = args._parser
    if "--" in rest:
        cut = rest.index("--")
        head, tail = rest[:cut], rest[cut + 1:]
    else:
        head, tail = rest, []
        trial, unknown = parser.parse_known_args(head, namespace=copy.copy(args))
        if unknown or trial.script is not None:  # not ours: all of it belongs to the script
            return rest
    if head:
        before = args.script
        parser.parse_args(head, namespace=args)
        if args.script is not None and args.script != before:
            parser.error(f"unexpected argument {args.script!r} before --")
        args.script = before
    return tail


MEASURED_ONLY = ("--gpu", "--params", "--workload", "--peak-memory-gb", "--also-measured")


def _check(args: argparse.Namespace) -> None:
    modes = [what for what, given in (("a script", args.script is not None),
                                      ("--model", args.model is not None),
                                      ("--measured", args.measured is not None)) if given]
    if not modes:
        raise InputError("nothing to profile", hint="pass a training script "
                         "(gpucost profile train.py -- ARGS), --model " + "|".join(MODELS)
                         + ", or a throughput you measured (--measured SAMPLES_PER_S --gpu GPU "
                         "--batch N --params N)")
    if len(modes) > 1:
        raise InputError(f"pass one of a script, --model or --measured, not {' and '.join(modes)}")
    if args.measured is not None:
        _check_measured(args)
    else:
        given = [flag for flag in MEASURED_ONLY
                 if getattr(args, flag[2:].replace("-", "_")) is not None]
        if given:
            raise InputError(f"{given[0]} works with --measured only",
                             hint="--measured SAMPLES_PER_S --gpu GPU --batch N --params N "
                             "writes a throughput you measured as a profile")
    for flag, value, low in (("--steps", args.steps, 2), ("--warmup", args.warmup, 0),
                             ("--batch", args.batch, 1), ("--probe-max", args.probe_max, 1),
                             ("--devices", args.devices, 1)):
        if value is not None and value < low:
            raise InputError(f"{flag} must be at least {low}, got {value}")
    for flag, number in (("--dataset-size", args.dataset_size), ("--epochs", args.epochs)):
        if number is not None and number <= 0:
            raise InputError(f"{flag} must be positive, got {number}")
    if args.memory_limit_gb is not None and args.memory_limit_gb <= 0:
        raise InputError(f"--memory-limit-gb must be positive, got {args.memory_limit_gb}")
    if args.script is not None and args.probe_batch:
        raise InputError("--probe-batch works with --model only",
                         hint="profile your model with the library: gpucost.profiler.probe_batch")
    if args.also_batch and args.script is not None:
        raise InputError("--also-batch works with --model only",
                         hint="profile the script at each batch and list the others' step times "
                         "in the profile's other_batches ([[batch, seconds], ...])")
    for batch in args.also_batch or ():
        if batch < 1 or batch == args.batch:
            raise InputError(f"--also-batch {batch}: give a positive batch other than --batch")


def _check_measured(args: argparse.Namespace) -> None:
    missing = [flag for flag, value in (("--gpu", args.gpu), ("--batch", args.batch),
                                        ("--params", args.params)) if value is None]
    if missing:
        raise InputError(f"--measured needs {', '.join(missing)}",
                         hint="e.g. gpucost profile --measured 1200 --gpu V100 --batch 256 "
                         "--params 25.6e6 --precision amp --name resnet50")
    for flag, given in (("--probe-batch", args.probe_batch), ("--also-batch", args.also_batch),
                        ("--memory-limit-gb", args.memory_limit_gb is not None)):
        if given:
            raise InputError(f"{flag} runs the profiler: it does not go with --measured",
                             hint="--also-measured BATCH=SAMPLES_PER_S gives a throughput "
                             "measured at another batch")


def _also_measured(args: argparse.Namespace) -> dict[int, float]:
    """--also-measured BATCH=SAMPLES_PER_S, each checked, by batch."""
    rates: dict[int, float] = {}
    for text in args.also_measured or ():
        batch_text, sep, rate_text = text.partition("=")
        try:
            batch, rate = int(batch_text), float(rate_text)
        except ValueError:
            batch, rate = 0, 0.0
        if not sep or batch < 1 or not 0 < rate <= MAX_SAMPLES_PER_S:
            raise InputError(f"--also-measured {text!r}: give BATCH=SAMPLES_PER_S, a positive "
                             "whole batch and a positive throughput", hint="e.g. 64=700")
        if batch == args.batch or batch in rates:
            raise InputError(f"--also-measured {text!r}: batch {batch} is measured already",
                             hint="give each batch once, --batch's included")
        rates[batch] = rate
    return rates


def run(args: argparse.Namespace) -> int:
    script_args = _split_script_args(args)
    _check(args)
    if args.out:  # before any work: a run of minutes must not end on a path it cannot write
        check_profile_output(Path(args.out), force=args.force)
    if args.measured is not None:
        return _write_measured(args)

    torch = require("torch", needed_for="the profiler")
    if args.model is not None:
        return _run_model(args, torch)
    return _run_script(args, script_args)


def _run_model(args: argparse.Namespace, torch: Any) -> int:
    # gpucost.profiler imports torch (an extra): its modules load once the command runs, never
    # for `gpucost profile --help` or build_parser()
    from gpucost.profiler.reference import profile_model

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is visible to torch",
                         hint="use --device cpu, or install a CUDA build of torch")
    if device == "cuda":  # an uncatalogued GPU fails now, not after the run
        from gpucost.profiler.core import gpu_name

        gpu_name(torch.device("cuda"))
    limit = int(args.memory_limit_gb * 1e9) if args.memory_limit_gb else None
    profile, found = profile_model(
        args.model, batch_size=args.batch if args.batch else (None if args.probe_batch else 32),
        steps=args.steps, warmup=args.warmup, device=device,
        precision=args.precision or "fp32",
        probe=args.probe_batch, probe_max=args.probe_max, memory_limit_bytes=limit,
        device_count=args.devices, profile_name=args.name)
    others = []
    for batch in sorted(set(args.also_batch or ())):
        if profile.partial or batch == profile.batch_size:
            continue
        other, _ = profile_model(args.model, batch_size=batch, steps=args.steps,
                                 warmup=args.warmup, device=device,
                                 precision=args.precision or "fp32",
                                 device_count=args.devices, profile_name=args.name)
        if other.partial:  # interrupted: keep the main profile, say so below
            profile = profile.with_changes(partial=True)
            break
        others.append((batch, other.step_time_s))
    if others:
        profile = profile.with_changes(other_batches=tuple(others))
    profile = _with_job(args, profile)
    path = profile.save(_out_path(args, profile.name))
    note = f"partial profile: interrupted after {profile.steps_measured} timed steps"
    _report(args, profile, path, note=note if profile.partial else None)
    if others and args.format == "text":
        print("also timed: " + ", ".join(f"batch {b}: {t * 1e3:,.3g} ms" for b, t in others)
              + ("" if profile.gpu == "CPU" else
                 f" (the step's fixed part at batch {profile.batch_size}: "
                 f"{100 * (measured_fixed_share(profile) or 0.0):.0f} %)"))
    if found is not None and args.format == "text":
        more = " (the probe's cap; raise --probe-max)" if found.capped else ""
        print(f"max batch: {found.local_batch} per device, {found.global_batch} global over "
              f"{args.devices} device(s){more}")
    return 130 if profile.partial else 0


def _run_script(args: argparse.Namespace, script_args: list[str]) -> int:
    from gpucost.profiler.runner import run_script

    run = run_script(args.script, script_args, name=args.name, steps=args.steps,
                     warmup=args.warmup, precision=args.precision, batch_size=args.batch,
                     sample_unit=args.sample_unit or "samples")
    code = {"complete": 0, "ended": 0, "crashed": 2, "interrupted": 130}[run.outcome]
    if run.traceback:
        sys.stderr.write(run.traceback)
    prof = run.profiler
    failure = (f"exited with status {run.error.code}" if isinstance(run.error, SystemExit)
               else f"raised {type(run.error).__name__}")
    what = {"complete": None,
            "ended": f"the script ended after {prof.steps_timed} of {args.steps} timed steps",
            "crashed": f"the script {failure} after {prof.steps_timed} timed steps",
            "interrupted": f"interrupted after {prof.steps_timed} timed steps"}[run.outcome]
    try:
        profile = prof.result()
    except GpuCostError as err:
        if code == 0:
            raise
        print(f"gpucost: error: {what}; no profile written: {err}", file=sys.stderr)
        return code
    profile = _with_job(args, profile)
    path = profile.save(_out_path(args, profile.name))
    _report(args, profile, path, note=f"partial profile: {what}" if what else None)
    return code


def _write_measured(args: argparse.Namespace) -> int:
    profile = Profile.from_measurement(
        gpu=args.gpu, throughput=args.measured, batch_size=args.batch,
        precision=args.precision or "fp32", param_count=args.params, device_count=args.devices,
        name=args.name or "measurement", sample_unit=args.sample_unit or "samples",
        workload=args.workload, peak_memory_gb=args.peak_memory_gb,
        other_batches=_also_measured(args) or None)
    held_gb = total_gb(gpu_spec(profile.gpu))
    if args.peak_memory_gb is not None and args.peak_memory_gb > held_gb:
        raise InputError(f"--peak-memory-gb {args.peak_memory_gb:g} is more than a {profile.gpu} "
                         f"holds ({held_gb:.1f} GB)",
                         hint="give the peak of one device, in GB of 1e9 bytes")
    profile = _with_job(args, profile)
    path = profile.save(_out_path(args, profile.name))
    if args.format == "json":
        print_document("profile-run", {"path": str(path), "profile": profile.to_dict()})
        return 0
    for line in measured_lines(profile):
        print(line)
    print(f"wrote {path}  (next: {next_command(profile, path)})")
    return 0


# A published or hand-timed "fp32" is often TF32 underneath: NVIDIA's NGC PyTorch containers set
# TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1, and such a run moves to an A100 or newer several times
# faster than PyTorch's default fp32 (matmuls on CUDA cores) would.
FP32_NOTE = ("precision: fp32 is PyTorch's default, matmuls on CUDA cores at the plain FP32 "
             "rate; a run with TF32 matmuls (NVIDIA's NGC containers, "
             "torch.backends.cuda.matmul.allow_tf32 = True) is --precision tf32, which an A100 "
             "or newer runs on its tensor cores")


def measured_lines(profile: Profile) -> list[str]:
    """What gpucost will make of a measured throughput: the step it implies, the workload its
    parts are translated by, and whether its batch fits the GPU it was measured on."""
    lines = [f"profile {profile.name}: {profile.device_count} x {profile.gpu}, "
             f"{profile.precision}, batch {profile.batch_size}/device: "
             f"{profile.throughput:,.1f} {profile.sample_unit}/s measured "
             f"(a step of {profile.step_time_s * 1e3:,.4g} ms)"]
    if profile.other_batches:
        share = measured_fixed_share(profile)
        lines.append("also measured: " + ", ".join(
            f"batch {b}: {profile.device_count * b / t:,.1f} {profile.sample_unit}/s"
            for b, t in profile.other_batches)
            + ("" if share is None else f" (the step's fixed part at batch "
               f"{profile.batch_size}: {100 * share:.0f} %)"))
    if profile.precision == "fp32":
        lines.append(FP32_NOTE)
    sig = workload_signature(profile)
    lines.append(f"workload: {sig.name}: {sig.description}" if sig is not None else
                 "workload: none matched: each part of the step moves as the built-ins' median "
                 "does (name one with --workload)")
    # "fits: ...", "does not fit: ..." or "memory: unknown (...)"
    lines.append("memory: " + predict(profile).memory.advice.removeprefix("memory: "))
    return lines


def _with_job(args: argparse.Namespace, profile: Any) -> Any:
    changes = {k: v for k, v in (("dataset_size", args.dataset_size), ("epochs", args.epochs))
               if v is not None}
    return profile.with_changes(**changes) if changes else profile


def _out_path(args: argparse.Namespace, name: str) -> Path:
    if args.out:
        return check_profile_output(Path(args.out), force=args.force)
    return check_profile_output(default_profile_path(name), force=args.force, made_folder=True)


def _report(args: argparse.Namespace, profile: Any, path: Path, note: str | None) -> None:
    if args.format == "json":
        print_document("profile-run", {"path": str(path), "profile": profile.to_dict()})
        return
    from gpucost.profiler.summary import summary_lines

    for line in summary_lines(profile):
        print(line)
    if note:
        print(note)
    print(f"wrote {path}  (next: {next_command(profile, path)})")


def next_command(profile: Any, path: Path) -> str:
    """The `gpucost compare` to run on a new profile; it needs a job size if the profile has
    no typical job (dataset size and epochs) recorded."""
    command = f"gpucost compare --profile {shlex.quote(str(path))}"
    if profile.dataset_size and profile.epochs:
        return command
    if profile.dataset_size:
        return f"{command} --epochs N (or record --epochs when profiling)"
    return (f"{command} --samples N, or --epochs N --dataset-size M (or record --dataset-size "
            "and --epochs when profiling)")
