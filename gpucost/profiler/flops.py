"""Counting one training step: FLOPs (torch's flop counter), operator calls, bytes moved, memory.

``OpCensus`` is a context manager entered around one dedicated step, never around the timed
ones: it runs every ATen operator through a Python dispatch mode, which costs tens of
microseconds per operator.

- FLOPs come from ``torch.utils.flop_counter.FlopCounterMode`` (matmul, conv, attention).
- Bytes moved per operator = bytes of its tensor inputs + bytes of its tensor outputs, with
  each tensor's real dtype; view operators (``t``, ``view``, ``expand``...) move nothing.
  Embedding lookups are the exception: a gather reads only the table rows its indices name,
  and its dense backward scatters into those rows of a gradient table it first zero-fills. The
  rows count as the operator's bytes; the zero fill, a table's worth whatever the batch, counts
  in ``fixed_bytes`` (a step's bytes that do not grow with its batch).
- Given the parameters' shapes (``step_shapes``), the bytes of every tensor of one of those
  shapes (or a 2-D one's transpose), whatever operator moves it, count in ``weight_bytes``:
  weights read, weight gradients written and summed, optimizer states. Their size does not
  grow with the batch, and a layer called once a frame or a time step pays them each call.
- Memory: a caching-allocator-like ledger of the storages created during the census. A new
  output storage is added when an operator returns it and removed once it has been freed;
  ``peak_bytes`` is the high-water mark on top of ``baseline_bytes`` (what was alive before),
  to within ``PEAK_TOLERANCE`` below it. With ``limit_bytes`` set, an allocation that
  crosses it raises :class:`MemoryLimitExceeded` at that operator, mid forward or backward:
  the CPU stand-in for ``torch.cuda.OutOfMemoryError`` that the batch probe recovers from.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from gpucost.model.signature import COMPUTE_CLASSES, by_class, op_class

# How far below the ledger's true high-water mark ``peak_bytes`` may read: a sweep (asking every
# storage counted whether it is still alive) runs only when the live bytes could have passed the
# peak by more, so a step's sweeps are about ln(peak / first allocation) / tolerance plus its
# allocated bytes / (tolerance x peak), not one per allocation. One per allocation made the
# census quadratic in a step's live storages: 5 minutes for an LSTM of 2,000 time steps.
PEAK_TOLERANCE = 0.01


# Not in errors.py: the CPU stand-in for torch's out-of-memory error (a RuntimeError, as
# torch's is), caught by the batch probe; it needs torch to be raised at all.
class MemoryLimitExceeded(RuntimeError):
    """An allocation pushed the accounted memory over the imposed limit (CPU out of memory)."""

    def __init__(self, needed_bytes: int, limit_bytes: int) -> None:
        self.needed_bytes = needed_bytes
        self.limit_bytes = limit_bytes
        super().__init__(f"out of memory: {needed_bytes / 1e9:.3f} GB needed, "
                         f"limit {limit_bytes / 1e9:.3f} GB")


def _tensors(tree: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _dense_parts(t: torch.Tensor) -> list[torch.Tensor]:
    """What holds ``t``'s data: itself, or a sparse COO tensor's indices and values (a sparse
    gradient, ``nn.Embedding(sparse=True)``, has no storage of its own)."""
    return [t._indices(), t._values()] if t.is_sparse else [t]


def _nbytes(t: torch.Tensor) -> int:
    return sum(part.numel() * part.element_size() for part in _dense_parts(t))


# the operators whose input dtype says which precision the step's math runs at
_MATMULS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                      "aten::convolution", "aten::_scaled_dot_product_flash_attention",
                      "aten::_scaled_dot_product_efficient_attention",
                      "aten::_scaled_dot_product_cudnn_attention"})


# Embedding gathers (forward) and their dense backwards: operator -> the table's position among
# the tensor inputs (forward), or None (backward: the table is the output). Both touch one table
# row per index.
_GATHERS = {"aten::embedding": 0, "aten::_embedding_bag": 0,
            "aten::embedding_dense_backward": None, "aten::_embedding_bag_backward": None,
            "aten::_embedding_bag_dense_backward": None}


def _gather_bytes(name: str, inputs: list[torch.Tensor],
                  outputs: list[torch.Tensor]) -> tuple[float, float] | None:
    """(the operator's bytes, its zero fill's bytes) for an embedding gather or its dense
    backward, None for any other operator: the table's rows named by the indices (the first
    integer input) replace the whole table; a backward's zero-filled table is paid once a step.
    A sparse gradient (``sparse=True``) fills no table: counted as any operator."""
    if name not in _GATHERS:
        return None
    table_at = _GATHERS[name]
    table = inputs[table_at] if table_at is not None else outputs[0]
    indices = next((t for t in inputs if not t.is_floating_point()), None)
    if table.dim() != 2 or table.is_sparse or indices is None:
        return None
    rows = float(indices.numel() * table.shape[1] * table.element_size())
    others = sum(_nbytes(t) for t in inputs + outputs if t is not table)
    if table_at is not None:
        return others + rows, 0.0
    return others + rows, float(_nbytes(table))


def op_name(func: Any) -> str:
    """``aten::addmm`` for the overload ``aten.addmm.default`` (torch.profiler's spelling)."""
    return str(func._schema.name)


class _CensusMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self, census: OpCensus) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._census = census

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self._census.record(func, args, kwargs or {}, out)
        return out


class OpCensus:
    """FLOPs, calls, bytes and memory of everything run inside ``with OpCensus() as c:``."""

    def __init__(self, *, baseline_bytes: int = 0, limit_bytes: int | None = None,
                 step_shapes: Iterable[tuple[int, ...]] = ()) -> None:
        self.baseline_bytes = baseline_bytes
        self.limit_bytes = limit_bytes
        self._step_shapes = frozenset(
            itertools.chain.from_iterable(
                (tuple(s), tuple(reversed(s))) if len(s) == 2 else (tuple(s),)
                for s in step_shapes))
        self.weight_bytes = 0.0  # bytes of tensors shaped as a parameter (see the docstring)
        self.calls: dict[str, int] = defaultdict(int)
        self.kernel_calls: dict[str, int] = defaultdict(int)  # calls that are not views
        self.bytes_moved: dict[str, float] = defaultdict(float)
        self.fixed_bytes = 0.0  # zero-filled embedding-gradient tables: per step, any batch
        # At least what is alive: storages freed since the last sweep still count (_allocated).
        self.live_bytes = 0
        self.peak_live_bytes = 0
        self._live: dict[int, tuple[int, StorageWeakRef]] = {}  # data_ptr -> (bytes, ref)
        self._flops = FlopCounterMode(display=False)
        self._mode = _CensusMode(self)
        self._flops_by_op: dict[str, float] = {}
        self.matmul_dtypes: dict[torch.dtype, float] = defaultdict(float)  # dtype -> FLOPs

    # ---- results ------------------------------------------------------------------------
    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops_by_op.values()))

    @property
    def flops_by_op(self) -> dict[str, float]:
        if not self._flops_by_op:
            counts = self._flops.get_flop_counts().get("Global", {})
            self._flops_by_op = {f"aten::{packet._qualified_op_name.split('::')[-1]}": float(n)
                                 for packet, n in counts.items()}
        return self._flops_by_op

    def workload_mix(self) -> dict[str, float] | None:
        """The step's op-class mix for ``Profile.workload``: flops shares per compute class
        (gpucost.model.signature), bytes per flop and kernels per step; None when it cannot be
        told from the census (no counted flops, or recurrent layers, whose fused kernels torch's
        flop counter does not count: the profile's name then picks a built-in)."""
        if any(op_class(name) == "recurrent" for name in self.kernel_calls):
            return None
        flops = by_class(self.flops_by_op)
        total = sum(flops[c] for c in COMPUTE_CLASSES)
        if total <= 0.0:
            return None
        mix = {c: round(flops[c] / total, 6) for c in COMPUTE_CLASSES if flops[c] > 0.0}
        largest = max(mix, key=lambda c: mix[c])
        mix[largest] = round(1.0 - sum(v for c, v in mix.items() if c != largest), 6)
        mix["bytes_per_flop"] = self.total_bytes / total
        mix["launches_per_step"] = float(sum(self.kernel_calls.values()))
        return mix

    @property
    def total_bytes(self) -> float:
        """Every byte the step moved: the operators' and the per-step zero fills."""
        return float(sum(self.bytes_moved.values())) + self.fixed_bytes

    @property
    def step_bytes(self) -> float:
        """The bytes of ``total_bytes`` that do not grow with the batch: parameter-shaped
        tensors' and the per-step zero fills."""
        return self.weight_bytes + self.fixed_bytes

    @property
    def peak_bytes(self) -> int:
        """Baseline plus the high-water mark of storages created inside the census."""
        return self.baseline_bytes + self.peak_live_bytes

    # ---- accounting ---------------------------------------------------------------------
    def record(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        name = op_name(func)
        self.calls[name] += 1
        if getattr(func, "is_view", False):
            return
        self.kernel_calls[name] += 1
        inputs = _tensors((args, kwargs))
        outputs = _tensors(out)
        if name in _MATMULS and inputs:
            self.matmul_dtypes[inputs[-1].dtype] += float(inputs[-1].numel())
        gathered = _gather_bytes(name, inputs, outputs)
        if gathered is None:
            self.bytes_moved[name] += float(sum(_nbytes(t) for t in inputs)
                                            + sum(_nbytes(t) for t in outputs))
            if self._step_shapes:
                self.weight_bytes += float(sum(_nbytes(t) for t in inputs + outputs
                                               if tuple(t.shape) in self._step_shapes))
        else:
            self.bytes_moved[name] += gathered[0]
            self.fixed_bytes += gathered[1]
        seen = {part.untyped_storage().data_ptr() for t in inputs for part in _dense_parts(t)}
        for storage in (part.untyped_storage() for t in outputs for part in _dense_parts(t)):
            ptr = storage.data_ptr()
            size = storage.nbytes()
            if size == 0 or ptr in seen:
                continue
            seen.add(ptr)
            self._allocated(ptr, size, StorageWeakRef(storage))  # type: ignore[no-untyped-call]

    def _allocated(self, ptr: int, size: int, ref: StorageWeakRef) -> None:
        known = self._live.get(ptr)
        if known is not None:
            if not known[1].expired():  # type: ignore[no-untyped-call]
                return  # a storage already counted
            # A storage freed since the last sweep, whose address the allocator reused.
            self.live_bytes -= self._live.pop(ptr)[0]
        self._live[ptr] = (size, ref)
        # Storages freed since the last sweep still count: live_bytes is an upper bound, and
        # the true figure is asked of the storages (a sweep) only when the bound passes the
        # peak by more than PEAK_TOLERANCE or crosses the limit.
        self.live_bytes += size
        over_limit = (self.limit_bytes is not None
                      and self.baseline_bytes + self.live_bytes > self.limit_bytes)
        if over_limit or self.live_bytes > self.peak_live_bytes * (1.0 + PEAK_TOLERANCE):
            self._sweep()
            self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
            if self.limit_bytes is not None and self.peak_bytes > self.limit_bytes:
                raise MemoryLimitExceeded(self.peak_bytes, self.limit_bytes)

    def _sweep(self) -> None:
        """Drop the storages freed since the last sweep. Storages outlive the tensors that
        created them (autograd saves outputs through fresh tensors sharing the storage), so
        what is alive is asked of the storages themselves."""
        for key in [k for k, (_, r) in self._live.items()
                    if r.expired()]:  # type: ignore[no-untyped-call]
            self.live_bytes -= self._live.pop(key)[0]

    # ---- context manager ----------------------------------------------------------------
    def __enter__(self) -> OpCensus:
        self._flops.__enter__()  # type: ignore[no-untyped-call]
        self._mode.__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._mode.__exit__(exc_type, exc, tb)  # type: ignore[no-untyped-call]
        finally:
            self._flops.__exit__(exc_type, exc, tb)  # type: ignore[no-untyped-call]
