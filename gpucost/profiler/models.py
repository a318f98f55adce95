"""Built-in reference workloads for ``gpucost profile --model NAME``.

Each is a real model, optimizer and loss on synthetic data generated on the device once (so the
data loader costs nothing and the step measures the model):

- ``mlp``: 784-512-512-10 classifier on flattened 28x28 images (MNIST-shaped), SGD;
- ``cnn``: two conv blocks + linear head on 3x32x32 images (CIFAR-shaped), SGD with momentum;
- ``vit``: a small vision transformer for 28x28 single-channel images (patch 7, width 128,
  6 layers, 4 heads), the MNIST ViT people take for a first cloud run, AdamW;
- ``transformer``: a small causal language model (vocab 8192, width 256, 4 layers, 4 heads,
  context 128), AdamW; its samples are sequences of 128 tokens.

Each carries a typical job for ``gpucost compare``: MNIST (60,000 images) x 10 epochs for
mlp and vit, CIFAR-10 (50,000 images) x 30 epochs for cnn, 100M tokens (781,250 sequences)
x 1 epoch for the language model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gpucost.errors import InputError

MODEL_NAMES = ("mlp", "cnn", "vit", "transformer")


class _ViT(nn.Module):
    def __init__(self, *, image: int = 28, patch: int = 7, channels: int = 1, width: int = 128,
                 depth: int = 6, heads: int = 4, classes: int = 10) -> None:
        super().__init__()
        patches = (image // patch) ** 2
        self.embed = nn.Conv2d(channels, width, kernel_size=patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.randn(1, patches + 1, width) * 0.02)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True,
                                       norm_first=True) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], dim=1) + self.pos
        for block in self.blocks:
            tokens = block(tokens)
        out: torch.Tensor = self.head(self.norm(tokens[:, 0]))
        return out


class _TinyLM(nn.Module):
    def __init__(self, *, vocab: int = 8192, width: int = 256, depth: int = 4, heads: int = 4,
                 context: int = 128) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(1, context, width) * 0.02)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                       norm_first=True) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(context),
                             persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.tok(ids) + self.pos[:, : ids.shape[1]]
        mask: torch.Tensor = self.mask  # type: ignore[assignment]
        mask = mask[: ids.shape[1], : ids.shape[1]]
        for block in self.blocks:
            h = block(h, src_mask=mask, is_causal=True)
        out: torch.Tensor = self.head(self.norm(h))
        return out.flatten(0, 1)


@dataclass
class Workload:
    """A model ready to train: ``train_step(batch)`` runs forward, backward, optimizer step."""

    name: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    make_batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]]
    device: torch.device
    precision: str
    sample_unit: str
    description: str
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    dataset_size: int  # samples per epoch of the typical job
    epochs: float

    def autocast(self) -> AbstractContextManager[Any]:
        if self.precision != "amp":
            return nullcontext()
        dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        return torch.autocast(self.device.type, dtype=dtype)

    def forward_backward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            loss = self.loss_fn(self.model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        return loss

    def train_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        loss = self.forward_backward(*batch)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The same synthetic batch forever: no loader cost, so the step measures the model."""
        batch = self.make_batch(batch_size)
        while True:
            yield batch


def _param_dtype(precision: str) -> torch.dtype:
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


def build(name: str, *, device: str | torch.device = "cpu", precision: str = "fp32",
          seed: int = 0) -> Workload:
    """A built-in workload on ``device``: fp16/bf16 cast the weights, amp autocasts."""
    if name not in MODEL_NAMES:
        raise InputError(f"unknown model {name!r}",
                         hint="built-in models: " + ", ".join(MODEL_NAMES))
    dev = torch.device(device)
    torch.manual_seed(seed)
    if precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = _param_dtype(precision)
    model: nn.Module
    shape: tuple[int, ...]
    dataset_size, epochs = 60_000, 10.0
    if name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                              nn.ReLU(), nn.Linear(512, 10))
        shape, classes, unit = (1, 28, 28), 10, "images"
        desc = "MLP 784-512-512-10 on 28x28 images"
    elif name == "cnn":
        model = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10))
        shape, classes, unit = (3, 32, 32), 10, "images"
        desc = "small CNN (2 conv blocks) on 3x32x32 images"
        dataset_size, epochs = 50_000, 30.0
    elif name == "vit":
        model = _ViT()
        shape, classes, unit = (1, 28, 28), 10, "images"
        desc = "small ViT (patch 7, width 128, 6 layers) on 28x28 images"
    else:
        model = _TinyLM()
        shape, classes, unit = (), 8192, "sequences"
        desc = "small causal transformer LM (width 256, 4 layers), 128-token sequences"
        dataset_size, epochs = 781_250, 1.0
    model = model.to(device=dev, dtype=dtype)
    if name in ("vit", "transformer"):
        optimizer: torch.optim.Optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def make_batch(batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator(device=dev).manual_seed(seed)
        if name == "transformer":
            ids = torch.randint(0, classes, (batch_size, 129), device=dev, generator=gen)
            return ids[:, :-1].contiguous(), ids[:, 1:].reshape(-1)
        x = torch.randn(batch_size, *shape, device=dev, dtype=dtype, generator=gen)
        y = torch.randint(0, classes, (batch_size,), device=dev, generator=gen)
        return x, y

    return Workload(name=name, model=model, optimizer=optimizer, make_batch=make_batch,
                    device=dev, precision=precision, sample_unit=unit, description=desc,
                    loss_fn=nn.functional.cross_entropy, dataset_size=dataset_size,
                    epochs=epochs)
