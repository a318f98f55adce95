"""Small models whose census facts are known by hand: a decoder's per-frame layer and a
recurrent layer (tests of the signature builder's and the profiler's byte counts)."""

from __future__ import annotations

from typing import Any


def frame_loop() -> Any:
    """A decoder's per-frame layer: one linear layer of 256 applied to each of 50 frames in
    turn, its weight read and its gradient summed once a frame whatever the batch."""
    import torch
    from torch import nn

    class Loop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(256, 256)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stack([self.layer(x[:, t]) for t in range(x.shape[1])], 1)

    return Loop()


def recurrent() -> Any:
    """A translation model's recurrent layer: an LSTM of 256 over 50 steps, then a linear one."""
    from torch import nn

    class Rnn(nn.Sequential):
        def forward(self, x: Any) -> Any:
            return self[1](self[0](x)[0])

    return Rnn(nn.LSTM(256, 256, batch_first=True), nn.Linear(256, 256))


def frames(b: int) -> tuple[Any, ...]:
    import torch

    return (torch.randn(b, 50, 256),)
