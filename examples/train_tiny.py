"""A small, real training run for trying the executor: an MLP on a synthetic regression task.

    python train_tiny.py --epochs 3                       # alone
    python -m torch.distributed.run --standalone --nproc-per-node=2 train_tiny.py   # 2 processes
    gpucost launch plan.toml                              # supervised by gpucost

It checkpoints every epoch to --checkpoint-dir (default: $GPUCOST_CHECKPOINT_DIR, else
./checkpoints), resumes from $GPUCOST_RESUME_FROM or the newest checkpoint there, and reports
each epoch with gpucost.report (a no-op outside gpucost runs). Under torchrun it uses gloo on CPU
and NCCL on GPU, with DistributedDataParallel; rank 0 saves and reports.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

import gpucost


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples-per-epoch", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=64, help="per process")
    p.add_argument("--width", type=int, default=256, help="hidden units")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--checkpoint-dir", type=Path,
                   default=Path(os.environ.get("GPUCOST_CHECKPOINT_DIR", "checkpoints")))
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def latest_checkpoint(folder: Path) -> Path | None:
    found = [p for p in folder.glob("epoch-*.pt") if p.stem[6:].isdigit()]
    return max(found, key=lambda p: int(p.stem[6:])) if found else None


def main() -> None:
    args = parse_args()
    distributed = "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1
    device = torch.device("cpu")
    if distributed:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
        if backend == "nccl":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1

    torch.manual_seed(args.seed)
    features = 32
    teacher = torch.randn(features, 1)
    x_all = torch.randn(args.samples_per_epoch, features)
    y_all = torch.tanh(x_all @ teacher) + 0.01 * torch.randn(args.samples_per_epoch, 1)
    # Each process takes every world-th sample, like DistributedSampler without shuffling.
    x, y = x_all[rank::world].to(device), y_all[rank::world].to(device)

    model: nn.Module = nn.Sequential(nn.Linear(features, args.width), nn.ReLU(),
                                      nn.Linear(args.width, args.width), nn.ReLU(),
                                      nn.Linear(args.width, 1)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    start_epoch = 1
    resume = os.environ.get("GPUCOST_RESUME_FROM")
    source = Path(resume) if resume else latest_checkpoint(args.checkpoint_dir)
    if source is not None and source.exists():
        state = torch.load(source, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = int(state["epoch"]) + 1
        if rank == 0:
            print(f"resumed from {source} (epoch {state['epoch']})", flush=True)
    if start_epoch > args.epochs and rank == 0:
        print(f"nothing to do: the checkpoint is at epoch {start_epoch - 1} of {args.epochs}; "
              "raise --epochs or delete the checkpoints to train again", flush=True)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    loss_fn = nn.MSELoss()
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)

    for epoch in range(start_epoch, args.epochs + 1):
        t0 = time.perf_counter()
        total, batches = 0.0, 0
        for i in range(0, len(x), args.batch_size):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[i:i + args.batch_size]), y[i:i + args.batch_size])
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            batches += 1
        seconds = time.perf_counter() - t0
        if distributed:
            dist.barrier()
        if rank == 0:
            inner = model.module if distributed else model
            path = args.checkpoint_dir / f"epoch-{epoch:06d}.pt"
            tmp = path.with_suffix(".tmp")
            torch.save({"model": inner.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch}, tmp)
            os.replace(tmp, path)  # a kill mid-save never leaves a truncated checkpoint
            throughput = args.samples_per_epoch / seconds
            print(f"epoch {epoch}/{args.epochs} loss {total / batches:.5f} "
                  f"{throughput:.0f} samples/s", flush=True)
            gpucost.report(epoch=epoch, metrics={"loss": total / batches},
                           throughput=throughput, checkpoint=path)
    if distributed:
        # Every rank waits for rank 0's last save, then the DDP wrapper (which holds the
        # process group) goes before the group does: left to the interpreter's exit, gloo's
        # threads were torn down during finalization and one rank aborted ("terminate called
        # without an active exception") after a finished run.
        dist.barrier()
        del model, optimizer
        gc.collect()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
