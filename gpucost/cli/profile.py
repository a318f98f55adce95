"""`gpucost profile`: measure a training step, explain its bottleneck, write a profile.

    gpucost profile train.py [--steps N] [--out FILE] -- --lr 0.1   # an unmodified script
    gpucost profile --model vit --batch 64 [--probe-batch]          # a built-in workload

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
from gpucost.envelope import add_format_argument, print_document
from gpucost.errors import GpuCostError, InputError
from gpucost.model.perf import measured_fixed_share

MODELS = ("mlp", "cnn", "vit", "transformer")  # gpucost.profiler.models.MODEL_NAMES, torch-free


def register(sub: Any) -> None:
    p = add_command(
        sub, "profile",
        usage="gpucost profile [OPTIONS] SCRIPT.py [-- SCRIPT_ARGS]\n"
              "       gpucost profile --model NAME [--batch N] [OPTIONS]",
        description="Run a training script (unmodified, in this process) or a built-in model "
        "for warm-up, detail (FLOP count, operator trace) and --steps timed optimizer steps; "
        "write the profile (step time, breakdown, FLOPs, memory, operator table, verdict) to "
        "profiles/NAME.json for `gpucost compare --profile`. Options may also follow SCRIPT "
        "when the script's own arguments come after --.",
    )
    p.add_argument("script", nargs="?", metavar="SCRIPT.py", help="training script to run")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.add_argument("--model", choices=MODELS, help="profile a built-in workload instead")
    p.add_argument("--batch", type=int, help="batch size per device (--model: default 32, or "
                   "the probed maximum with --probe-batch; scripts: samples per step when no "
                   "DataLoader shows it)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20), after "
                   "--warmup steps and 3 detail steps")
    p.add_argument("--warmup", type=int, default=3, help="discarded warm-up steps (default 3)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="--model only: where to run (default: cuda when present)")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="precision the step runs at. --model: default fp32; amp autocasts, "
                   "fp16/bf16 cast the weights. Scripts: default detected from the dtypes "
                   "their matmuls run at")
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
                   help="data-parallel devices the probed batch is split over (default 1)")
    p.add_argument("--sample-unit", help="what a sample is (images, sequences...) for scripts")
    p.add_argument("--dataset-size", type=int, help="samples per epoch of the typical job, "
                   "recorded for `gpucost compare` (--model: the workload's dataset)")
    p.add_argument("--epochs", type=float, help="epochs of the typical job, recorded for "
                   "`gpucost compare`")
    p.add_argument("--name", help="profile name (default: the model or script name)")
    p.add_argument("--out", "-o", help="output file (default: profiles/NAME.json)")
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


def _check(args: argparse.Namespace) -> None:
    if args.script is None and args.model is None:
        raise InputError("nothing to profile", hint="pass a training script "
                         "(gpucost profile train.py -- ARGS) or --model " + "|".join(MODELS))
    if args.script is not None and args.model is not None:
        raise InputError("pass a script or --model, not both")
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


def run(args: argparse.Namespace) -> int:
    script_args = _split_script_args(args)
    _check(args)

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


def _with_job(args: argparse.Namespace, profile: Any) -> Any:
    changes = {k: v for k, v in (("dataset_size", args.dataset_size), ("epochs", args.epochs))
               if v is not None}
    return profile.with_changes(**changes) if changes else profile


def _out_path(args: argparse.Namespace, name: str) -> Path:
    return Path(args.out) if args.out else Path("profiles") / f"{name}.json"


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
