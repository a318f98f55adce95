"""Build the shipped workload signatures (gpucost/model/signatures.json) by profiling real
PyTorch model definitions on CPU.

    python scripts/build_signatures.py [--out gpucost/model/signatures.json] [--only NAME]

Each architecture below is a compact but faithful definition of a published model (layer
counts, widths and sequence lengths as published; random weights, nothing downloaded). One
training step (forward, backward, Adam) runs under the profiler's operator census
(gpucost.profiler.flops.OpCensus): flops per operator from torch's flop counter, bytes each
operator reads and writes, and kernel calls (operators that are not views). Operators are
grouped by class (gpucost.model.signature.op_class). Two corrections for what a CPU run does
not show as a GPU would:

- recurrent layers run as one fused oneDNN operator per layer on CPU and torch's flop counter
  does not count them: their flops are counted from the layer shapes (4 gates x 2 x (input +
  hidden) x hidden per time step for an LSTM, x3 for forward + backward), and their kernels as
  a GPU runs them, about one per time step forward and two backward (cuDNN's per-step GEMM and
  pointwise kernels are fused; the per-step loop is not; cuDNN starts them itself from one
  call per layer, so they are also recorded apart as ``library_launches_per_step``: a driver
  launch each, not the framework's per-operator dispatch), and each time step re-reads the
  layer's recurrent weights (4 x hidden x hidden, fp32 bytes, forward and twice backward: bytes
  per step whatever the batch; the fused CPU operators' own byte counts, mostly those weights,
  are left out of the per-sample bytes);
- what a step moves whatever its batch is told from what each sample adds by a second census
  step at twice the batch, class by class: the growth over the batch is per sample, the rest
  per step. Weight reads and gradient writes (paid once for each call of a layer: Tacotron2's
  decoder calls its layers, and sums their weight gradients, once a frame), the summing of a
  tied table's two gradients and the zero fill of each embedding's dense gradient table (the
  census's ``fixed_bytes``; its gathers and scatters count only the rows their indices name)
  move to the per-step bytes with the optimizer's;
- torch's flop counter does not count the CPU flash-attention kernel: attention flops are
  counted from the shapes (see Block._attend).

Two more facts per signature, from steps of their own and from the census step's forward pass:

- ``activation_bytes_per_sample``: the memory one sample adds to the step's peak: the CPU
  allocator's peak (the profiler's allocation events) through one forward and backward pass,
  above what was allocated before it, at the census batch b and at 2b, the growth over b (what
  does not grow with the batch, the model's states among it, cancels; the gradients exist
  before the step, as in every step after the first). That is what autograd keeps for the
  backward pass (the input batch where the first layer saves it, integer indices, the SDPA
  kernel's output and log-sum-exp, never the attention matrix, as flash attention on a GPU)
  plus what is live beside it at the peak, at the start of the backward pass: the loss's
  gradient and its transients. Language and translation models take the cross-entropy they
  train with (``TOKEN_OUTPUTS``: GPT-2's 50257 log-probabilities a token in fp32, and their
  gradient); the others a mean square of their output. LSTMs run the native path (oneDNN
  off): it keeps the input plus about 7 x hidden a time step, what cuDNN's reserve space and
  CUDA's fused LSTM cell keep, where the fused oneDNN layer keeps a workspace of 32 x hidden
  floats a step for each call (Tacotron2's decoder calls its LSTMs one frame at a time, so
  that would count 381 MB a sample, not 163). Measured twice: in fp32, and as CUDA's autocast
  runs a mixed-precision step (``activation_bytes_per_sample_amp``): CPU autocast in bfloat16
  (2 bytes, as fp16) for GEMMs and convolutions, with the operators CUDA's autocast runs in
  fp32 and CPU's does not (layer norm, softmax, log-softmax, exp, sums: ``_CUDA_FP32_OPS``)
  run in fp32, and the LSTMs in half precision (torch casts cuDNN's RNN under autocast).
  Models train with the dropout their published training sets: BERT's 0.1 on its explicitly
  computed attention probabilities (a kept softmax output, a 1-byte mask and the dropped
  probabilities per score: at sequence 384 most of what a sample keeps) and on each sub-layer's
  output; Transformer-XL's ``--dropout``/``--dropatt``; the Transformer's residual 0.1; GNMT's
  0.2 on every LSTM layer's input. Dropout runs as CUDA's fused kernel (``dropout``). GPT-2 and
  ViT train as today's code runs them (fused attention, no dropout: nanoGPT's and Llama's
  pre-training, timm's defaults). Tacotron2's (0.5 after its convolutions and prenet layers,
  0.1 on its LSTM cells' outputs each frame: about a fifth more than it keeps now) is not
  counted: with its 1,740 more operators a step the profiler's events outgrow 24 GB.
  Checkpointing or offload is the user's, not here. The profiler keeps every event of the
  step: Tacotron2's (870 decoder frames) holds about 14 GB while it runs.
- ``gemm_shapes``: the shapes of the GEMM-like work, for a wave-quantisation model. A dispatch
  mode records every forward mm/addmm/bmm/baddbmm/_scaled_mm (linear and matmul reach it as
  these) as rows M x cols N, a bmm of [B, m, k] x [B, k, n] as B x m rows (its B matrices
  tile as one GEMM), and every convolution as its implicit GEMM: rows batch x output
  positions, cols C_out / groups, depth C_in / groups x kernel volume (a transposed one as
  rows batch x input positions, cols C_out / groups x kernel volume, then a scatter-add).
  LSTM layers add, from their shapes, one input-projection GEMM over all time steps (rows
  batch x steps) and one recurrent GEMM per time step (rows batch), both 4 x hidden cols.
  Each is weighted by its forward flops: the backward's two GEMMs per forward one have the
  same shapes transposed. Attention kernels are not in it (their own class). Buckets, at most
  8: grouped by rows per sample (M / batch) and cols, each rounded to the nearest power of 2
  in log; a bucket's rows and cols are its GEMMs' flops-weighted geometric means, so one
  bucket may mix two widths (Transformer-base's 1536 and 2048 columns read 1810); the kept
  buckets' shares are renormalised to 1 (``profiled.gemm_shapes_cover`` says what share of
  the GEMM flops they hold). Rows per sample scale with the batch in the forward and
  data-gradient GEMMs; the weight-gradient one (a third of the flops) has the batch in its
  depth and the weight's shape as its output, so at a small batch it fills more tiles than
  its forward's shape says.

Torchvision and torchaudio are not importable beside this torch, hence the own definitions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import itertools
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from gpucost.model.signature import COMPUTE_CLASSES, by_class  # noqa: E402
from gpucost.profiler.flops import OpCensus  # noqa: E402

# ------------------------------------------------------------------------ building blocks --
ATTENTION_FLOPS = [0.0]  # counted by Block._attend during the census step


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Dropout as CUDA runs it: one fused kernel keeping a 1-byte mask (``native_dropout``),
    where CPU's ``F.dropout`` multiplies by a mask of the input's own dtype."""
    return torch.native_dropout(x, p, training)[0] if p and training else x


class Dropout(nn.Module):
    """:func:`dropout` as a layer (``nn.Dropout`` takes CPU's unfused path)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)


class FrozenBatchNorm2d(nn.Module):
    """Batch norm with fixed statistics and affine terms, as detection models fine-tune an
    ImageNet backbone (maskrcnn-benchmark's and torchvision's FrozenBatchNorm2d): a per-channel
    scale and shift, nothing trained, no input kept for the backward pass. In the input's
    precision, as NVIDIA's maskrcnn code casts them under mixed precision (an fp32 scale would
    promote a half-precision activation to fp32 and keep both)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(channels))
        self.register_buffer("shift", torch.zeros(channels))

    def forward(self, x: Tensor) -> Tensor:
        return (x * self.scale.to(x.dtype).view(1, -1, 1, 1)
                + self.shift.to(x.dtype).view(1, -1, 1, 1))


Norm = Callable[[int], nn.Module]


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int, norm: Norm = nn.BatchNorm2d) -> None:
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), norm(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), norm(width),
            nn.ReLU(inplace=True), nn.Conv2d(width, cout, 1, bias=False), norm(cout))
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), norm(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.body(x) + self.down(x))


RESNET50_STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))  # (blocks, width) per stage


def resnet50_trunk(stages: int = 4, last_stride: int = 2,
                   norm: Norm = nn.BatchNorm2d) -> tuple[nn.Sequential, int]:
    """ResNet-50 v1.5 (stride in the 3x3), the first ``stages`` stages, the last one entered
    at ``last_stride``; (module, channels): the stem's 4 layers, then each stage's blocks."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), norm(64),
                               nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for i, (blocks, width) in enumerate(RESNET50_STAGES[:stages]):
        for b in range(blocks):
            stride = (last_stride if i == stages - 1 else 2) if b == 0 and i > 0 else 1
            layers.append(Bottleneck(cin, width, stride, norm))
            cin = width * 4
    return nn.Sequential(*layers), cin


class ResNet50(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk, c = resnet50_trunk()
        self.fc = nn.Linear(c, 1000)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.trunk(x).mean((2, 3)))


class Block(nn.Module):
    """Pre- or post-norm transformer block (optionally causal / cross). Attention runs as
    PyTorch's fused SDPA kernel (``explicit_attention=False``: no attention matrix kept, as flash
    attention on a GPU) or as the score matrix, softmax, dropout and product that BERT's
    published code computes (Google's, Hugging Face's and NVIDIA's ``BertSelfAttention``).
    ``dropout`` is the published residual dropout: on each sub-layer's output before the
    residual sum (a mask and an output kept per element while it trains)."""

    def __init__(self, d: int, heads: int, ff: int, *, cross: bool = False,
                 pre_norm: bool = True, dropout: float = 0.0,
                 explicit_attention: bool = False, attention_dropout: float = 0.0) -> None:
        super().__init__()
        self.heads, self.pre = heads, pre_norm
        self.dropout, self.attention_dropout = dropout, attention_dropout
        self.explicit = explicit_attention
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.cross = cross
        if cross:
            self.q2, self.kv2, self.proj2 = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
            self.n3 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def _split(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
        q, k, v = self._split(q), self._split(k), self._split(v)
        if self.explicit:  # torch's flop counter counts these two products itself
            if causal:
                raise ValueError("explicit attention is BERT's: bidirectional only")
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            scores = scores + scores.new_zeros(q.shape[0], 1, 1, k.shape[2])  # padding mask
            probs = dropout(scores.softmax(-1), self.attention_dropout, self.training)
            o = probs @ v
        else:
            # torch's flop counter does not count the CPU flash-attention kernel: QK^T and AV
            # are 2 x 2 x b x h x tq x tk x e flops forward, x3 with backward, half if causal.
            b, h, tq, e = q.shape
            ATTENTION_FLOPS[0] += 3 * 4 * b * tq * k.shape[2] * h * e * (0.5 if causal else 1.0)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        b, h, t, e = o.shape
        return o.transpose(1, 2).reshape(b, t, h * e)

    def _sub(self, x: Tensor, norm: nn.Module, fn: Callable[[Tensor], Tensor]) -> Tensor:
        def dropped(h: Tensor) -> Tensor:
            return dropout(fn(h), self.dropout, self.training)

        return x + dropped(norm(x)) if self.pre else norm(x + dropped(x))

    def forward(self, x: Tensor, memory: Tensor | None = None, causal: bool = False) -> Tensor:
        def self_attn(h: Tensor) -> Tensor:
            q, k, v = self.qkv(h).chunk(3, dim=-1)
            return self.proj(self._attend(q, k, v, causal))

        x = self._sub(x, self.n1, self_attn)
        if self.cross and memory is not None:
            def cross_attn(h: Tensor) -> Tensor:
                k, v = self.kv2(memory).chunk(2, dim=-1)
                return self.proj2(self._attend(self.q2(h), k, v, False))

            x = self._sub(x, self.n3, cross_attn)
        return self._sub(x, self.n2, self.ff)


class Bert(nn.Module):
    """BERT encoder (post-norm) with token/position embeddings and a SQuAD span head, trained as
    published (Devlin et al. 2019; bert_config.json: hidden_dropout_prob and
    attention_probs_dropout_prob 0.1): dropout on the embeddings, on each sub-layer's output
    and on the attention probabilities, which its code computes explicitly (at sequence 384 the
    kept softmax output, mask and dropped probabilities are most of what a sample keeps)."""

    DROPOUT = 0.1

    def __init__(self, layers: int = 12, d: int = 768, heads: int = 12, vocab: int = 30522,
                 seq: int = 384) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.norm = nn.LayerNorm(d)
        self.blocks = nn.ModuleList(
            Block(d, heads, 4 * d, pre_norm=False, dropout=self.DROPOUT, explicit_attention=True,
                  attention_dropout=self.DROPOUT) for _ in range(layers))
        self.head = nn.Linear(d, 2)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.norm(self.tok(ids) + self.pos(torch.arange(ids.shape[1])))
        x = dropout(x, self.DROPOUT, self.training)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


class Gpt(nn.Module):
    """GPT-2 decoder-only LM (pre-norm, causal attention, tied LM head)."""

    def __init__(self, layers: int = 12, d: int = 768, heads: int = 12, vocab: int = 50257,
                 seq: int = 1024) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, 4 * d) for _ in range(layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for blk in self.blocks:
            x = blk(x, causal=True)
        return self.norm(x) @ self.tok.weight.t()


class Vit(nn.Module):
    """ViT-B/16 at 224x224: patch-embedding convolution, 12 pre-norm blocks, class token."""

    def __init__(self, layers: int = 12, d: int = 768, heads: int = 12) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, 197, d))
        self.blocks = nn.ModuleList(Block(d, heads, 4 * d) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

    def forward(self, x: Tensor) -> Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x[:, 0]))


class EncoderDecoder(nn.Module):
    """Transformer-base translation model (6 + 6 layers, d 512, 8 heads, shared 32k vocab),
    with the published residual dropout (Vaswani et al. 2017, P_drop 0.1: each sub-layer's
    output and the embeddings; attention dropout 0, as fairseq's transformer_wmt_en_de)."""

    DROPOUT = 0.1

    def __init__(self, layers: int = 6, d: int = 512, heads: int = 8, vocab: int = 32000) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.enc = nn.ModuleList(Block(d, heads, 4 * d, pre_norm=False, dropout=self.DROPOUT)
                                 for _ in range(layers))
        self.dec = nn.ModuleList(Block(d, heads, 4 * d, cross=True, pre_norm=False,
                                       dropout=self.DROPOUT) for _ in range(layers))

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        m = dropout(self.emb(src), self.DROPOUT, self.training)
        for blk in self.enc:
            m = blk(m)
        x = dropout(self.emb(tgt), self.DROPOUT, self.training)
        for blk in self.dec:
            x = blk(x, memory=m, causal=True)
        return x @ self.emb.weight.t()


def _rel_shift(x: Tensor) -> Tensor:
    """Transformer-XL's relative shift of [batch, heads, query, key] position scores: pad a
    zero column, reread the buffer one row on, so that query i's scores line up with key
    distances i + memory - j."""
    b, h, q, k = x.shape
    padded = torch.cat([x.new_zeros(b, h, q, 1), x], -1).view(b, h, k + 1, q)
    return padded[:, :, 1:].reshape(b, h, q, k)


class RelativeBlock(nn.Module):
    """A Transformer-XL layer (post-norm): relative-position attention over the segment and the
    cached memory, computed as its published code does (score matrices, the relative shift and
    a softmax, which a fused attention kernel cannot run), then the feed-forward net, with its
    published dropouts: ``dropatt`` on the attention probabilities, ``dropout`` on the
    attention's output and on the feed-forward net's hidden layer and output."""

    def __init__(self, d: int, heads: int, d_head: int, ff: int, *, dropout: float,
                 dropatt: float) -> None:
        super().__init__()
        self.heads, self.d_head = heads, d_head
        self.drop, self.dropatt = Dropout(dropout), Dropout(dropatt)
        self.qkv = nn.Linear(d, 3 * heads * d_head, bias=False)  # over memory and segment
        self.pos = nn.Linear(d, heads * d_head, bias=False)
        self.out = nn.Linear(heads * d_head, d, bias=False)
        self.u, self.v = (nn.Parameter(torch.zeros(heads, d_head)) for _ in range(2))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.ReLU(), Dropout(dropout),
                                nn.Linear(ff, d), Dropout(dropout))

    def forward(self, x: Tensor, memory: Tensor, positions: Tensor) -> Tensor:
        b, q, _ = x.shape
        both = torch.cat([memory, x], 1)
        k = both.shape[1]
        q_all, key, value = self.qkv(both).view(b, k, 3, self.heads, self.d_head).unbind(2)
        query = q_all[:, -q:]
        rel = self.pos(positions).view(k, self.heads, self.d_head)
        content = torch.einsum("bqhd,bkhd->bhqk", query + self.u, key)
        position = _rel_shift(torch.einsum("bqhd,khd->bhqk", query + self.v, rel))
        # a query sees the memory and the segment up to itself
        future = torch.ones(q, k, dtype=torch.bool).triu(k - q + 1)
        scores = ((content + position) * self.d_head ** -0.5).masked_fill(future, -1e30)
        attended = torch.einsum("bhqk,bkhd->bqhd", self.dropatt(scores.softmax(-1)), value)
        x = self.n1(x + self.drop(self.out(attended.reshape(b, q, -1))))
        return self.n2(x + self.ff(x))


class TransformerXL(nn.Module):
    """Transformer-XL on WikiText-103 (Dai et al. 2019; NVIDIA DeepLearningExamples'
    configurations): ``layers`` of width ``d`` (heads of 64, feed-forward ``ff``), segments
    with as many cached hidden states per layer, sinusoidal relative positions, and an adaptive
    input and softmax over the 267,735-token vocabulary (clusters cut at 20k, 40k and 200k,
    each ``div`` times narrower than the one before, projected to d), the output tied to the
    input's tables and projections. The loss is computed as the adaptive softmax computes it:
    the head (20k words and 3 cluster logits) for every token, each tail only for the tokens
    whose target is in it. Large (18 x 1024, 384 + 384 tokens, div 4, 283 M parameters) and
    base (16 x 512, 192 + 192 tokens, div 1, 192 M) are profiled apart: base's parameters are
    mostly its embedding tables, which keep no activations, so neither's activations follow
    from the other's by parameter count (scaled from large, base would keep 0.71 GB a sample
    at fp32 where it keeps 0.19)."""

    CUTOFFS = (20_000, 40_000, 200_000, 267_735)

    def __init__(self, layers: int, d: int, ff: int, div: int, dropout: float,
                 dropatt: float) -> None:
        super().__init__()
        self.d, self.dropout = d, dropout
        spans = list(itertools.pairwise((0, *self.CUTOFFS)))
        widths = [d // div ** i for i in range(len(spans))]
        heads = d // 64
        self.tables = nn.ModuleList(nn.Embedding(hi - lo, w)
                                    for (lo, hi), w in zip(spans, widths, strict=True))
        # cluster 0 is d wide: no projection (nor any cluster at div 1)
        self.projs = nn.ParameterList(nn.Parameter(torch.randn(d, w) * w ** -0.5)
                                      for w in widths[1:] if div > 1)
        self.blocks = nn.ModuleList(RelativeBlock(d, heads, d // heads, ff, dropout=dropout,
                                                  dropatt=dropatt) for _ in range(layers))
        self.clusters = nn.Linear(d, len(self.CUTOFFS) - 1)

    def _embed(self, ids: Tensor) -> Tensor:
        flat = ids.reshape(-1)
        out = torch.zeros(len(flat), self.d)
        for i, (lo, hi) in enumerate(itertools.pairwise((0, *self.CUTOFFS))):
            rows = ((flat >= lo) & (flat < hi)).nonzero().squeeze(1)
            vectors = self.tables[i](flat[rows] - lo)
            if i and self.projs:
                vectors = F.linear(vectors, self.projs[i - 1])
            out = out.index_copy(0, rows, vectors)
        return out.view(*ids.shape, self.d) * self.d ** 0.5

    def forward(self, ids: Tensor, target: Tensor, memory: Tensor) -> Tensor:
        b, q = ids.shape
        k = q + memory.shape[2]
        distance = torch.arange(k - 1, -1, -1.0)
        inverse = 1.0 / 10_000 ** (torch.arange(0, self.d, 2.0) / self.d)
        angles = distance[:, None] * inverse[None]
        positions = torch.cat([angles.sin(), angles.cos()], -1)
        x = dropout(self._embed(ids), self.dropout, self.training)
        positions = dropout(positions, self.dropout, self.training)
        for blk, mem in zip(self.blocks, memory, strict=True):
            x = blk(x, mem, positions)
        x = dropout(x, self.dropout, self.training)
        hidden, target = x.reshape(b * q, self.d), target.reshape(-1)
        head = F.log_softmax(torch.cat([F.linear(hidden, self.tables[0].weight),
                                        self.clusters(hidden)], -1), -1)
        in_head = target < self.CUTOFFS[0]
        nll = -head[in_head].gather(1, target[in_head, None]).sum()
        for i, (lo, hi) in enumerate(itertools.pairwise(self.CUTOFFS)):
            rows = ((target >= lo) & (target < hi)).nonzero().squeeze(1)
            narrow = (F.linear(hidden[rows], self.projs[i].t()) if self.projs
                      else hidden[rows])
            tail = F.log_softmax(F.linear(narrow, self.tables[i + 1].weight), -1)
            picked = tail.gather(1, (target[rows] - lo)[:, None]).squeeze(1)
            nll = nll - (head[rows, self.CUTOFFS[0] + i] + picked).sum()
        return nll / (b * q)


def _zipf_ids(vocab: int, b: int, t: int) -> Tensor:
    """Word ids by frequency rank under Zipf's law (P(rank r) ~ 1/r, as word frequencies in
    text follow): log-uniform ranks, so the adaptive softmax's clusters see text's shares
    (about 80 % of tokens in the 20k most frequent words of 267,735)."""
    return ((vocab + 1.0) ** torch.rand(b, t)).floor().long().sub(1).clamp(0, vocab - 1)


class Gnmt(nn.Module):
    """GNMT v2: 4-layer LSTM encoder (first bidirectional), 4-layer LSTM decoder with additive
    attention fed to every layer, hidden 1024, 32k vocabulary; residual connections from the
    third layer on and dropout 0.2 on every LSTM layer's input, as NVIDIA DeepLearningExamples'
    GNMT v2 trains it (seq2seq/models/encoder.py and decoder.py)."""

    DROPOUT = 0.2

    def __init__(self, hidden: int = 1024, vocab: int = 32000) -> None:
        super().__init__()
        self.emb_src, self.emb_tgt = nn.Embedding(vocab, hidden), nn.Embedding(vocab, hidden)
        self.enc0 = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.enc = nn.ModuleList(nn.LSTM(hidden, hidden, batch_first=True) for _ in range(3))
        self.dec0 = nn.LSTM(hidden, hidden, batch_first=True)
        self.att_q, self.att_k = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.att_v = nn.Linear(hidden, 1)
        self.dec = nn.ModuleList(nn.LSTM(2 * hidden, hidden, batch_first=True) for _ in range(3))
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        p = self.DROPOUT
        m, _ = self.enc0(dropout(self.emb_src(src), p, self.training))
        for i, layer in enumerate(self.enc):
            y, _ = layer(dropout(m, p, self.training))
            m = y if i == 0 else m + y
        x, _ = self.dec0(dropout(self.emb_tgt(tgt), p, self.training))
        scores = self.att_v(torch.tanh(self.att_q(x).unsqueeze(2) + self.att_k(m).unsqueeze(1)))
        ctx = torch.softmax(scores.squeeze(-1), dim=-1) @ m
        for i, layer in enumerate(self.dec):
            y, _ = layer(dropout(torch.cat([x, ctx], dim=-1), p, self.training))
            x = y if i == 0 else x + y
        return self.out(x)


class Tacotron2(nn.Module):
    """Tacotron 2: character embedding, 3 conv + BiLSTM encoder, autoregressive decoder (prenet,
    2 LSTM cells of 1024 stepped per frame, location-sensitive attention), 5-conv postnet."""

    def __init__(self, chars: int = 148, d: int = 512, mels: int = 80) -> None:
        super().__init__()
        self.emb = nn.Embedding(chars, d)
        self.convs = nn.Sequential(*[nn.Sequential(nn.Conv1d(d, d, 5, padding=2),
                                                   nn.BatchNorm1d(d), nn.ReLU())
                                     for _ in range(3)])
        self.blstm = nn.LSTM(d, d // 2, batch_first=True, bidirectional=True)
        self.prenet = nn.Sequential(nn.Linear(mels, 256), nn.ReLU(), nn.Linear(256, 256),
                                    nn.ReLU())
        self.att_rnn = nn.LSTM(256 + d, 1024, batch_first=True)
        self.dec_rnn = nn.LSTM(1024 + d, 1024, batch_first=True)
        self.query, self.memory = nn.Linear(1024, 128), nn.Linear(d, 128)
        self.loc = nn.Conv1d(2, 32, 31, padding=15)
        self.loc_proj, self.v = nn.Linear(32, 128), nn.Linear(128, 1)
        self.proj = nn.Linear(1024 + d, mels + 1)
        post: list[nn.Module] = []
        for i in range(5):
            post += [nn.Conv1d(mels if i == 0 else d, d if i < 4 else mels, 5, padding=2),
                     nn.BatchNorm1d(d if i < 4 else mels)]
        self.postnet = nn.Sequential(*post)

    def forward(self, text: Tensor, mel: Tensor) -> Tensor:
        m = self.convs(self.emb(text).transpose(1, 2)).transpose(1, 2)
        m, _ = self.blstm(m)
        keys = self.memory(m)
        b, t_in, _ = m.shape
        ctx = m.new_zeros(b, 1, m.shape[-1])
        weights = m.new_zeros(b, 2, t_in)
        state1 = state2 = None
        frames = []
        pre = self.prenet(mel)
        for t in range(mel.shape[1]):
            h1, state1 = self.att_rnn(torch.cat([pre[:, t:t + 1], ctx], -1), state1)
            loc = self.loc_proj(self.loc(weights).transpose(1, 2))
            energy = self.v(torch.tanh(self.query(h1) + keys + loc)).squeeze(-1)
            w = torch.softmax(energy, dim=-1)
            weights = torch.stack([w, weights[:, 1] + w], dim=1)
            ctx = w.unsqueeze(1) @ m
            h2, state2 = self.dec_rnn(torch.cat([h1, ctx], -1), state2)
            frames.append(self.proj(torch.cat([h2, ctx], -1)))
        out = torch.cat(frames, 1)[..., :-1]
        return out + self.postnet(out.transpose(1, 2)).transpose(1, 2)


class WaveGlow(nn.Module):
    """WaveGlow: 12 flows of invertible 1x1 convolution + affine coupling whose WaveNet has 8
    dilated-conv layers of 256 channels conditioned on upsampled mels; audio squeezed by 8.

    256 channels is NVIDIA's published model (87.9 M parameters). DeepLearningExamples, which
    Lambda's benchmark runs, trains 512 by default (271 M): refitted with that, the calibration
    has to give one convolution efficiency to image CNNs and to WaveGlow's wide 1-D
    convolutions, moves the rest of every family's step to host time, and workloads never fitted
    came out worse (leave-one-workload-out 14.9 -> 17.6 %), so the signature stays the published
    model until convolutions are told apart by their shapes."""

    def __init__(self, flows: int = 12, layers: int = 8, ch: int = 256, mels: int = 80) -> None:
        super().__init__()
        self.up = nn.ConvTranspose1d(mels, mels, 1024, stride=256)
        self.inv = nn.ModuleList(nn.Conv1d(8, 8, 1, bias=False) for _ in range(flows))
        self.start = nn.ModuleList(nn.Conv1d(4, ch, 1) for _ in range(flows))
        self.dil = nn.ModuleList(nn.ModuleList(nn.Conv1d(ch, 2 * ch, 3, dilation=2**i,
                                                         padding=2**i) for i in range(layers))
                                 for _ in range(flows))
        self.cond = nn.ModuleList(nn.Conv1d(8 * mels, 2 * ch * layers, 1) for _ in range(flows))
        self.res = nn.ModuleList(nn.ModuleList(nn.Conv1d(ch, 2 * ch, 1) for _ in range(layers))
                                 for _ in range(flows))
        self.end = nn.ModuleList(nn.Conv1d(ch, 8, 1) for _ in range(flows))
        self.layers, self.ch = layers, ch

    def forward(self, mel: Tensor, audio: Tensor) -> Tensor:
        c = self.up(mel)[..., :audio.shape[1]]
        b = audio.shape[0]
        c = c.unfold(2, 8, 8).permute(0, 2, 1, 3).reshape(b, -1, 8 * c.shape[1]).transpose(1, 2)
        x = audio.unfold(1, 8, 8).transpose(1, 2)
        log_det = audio.new_zeros(())
        for f in range(len(self.inv)):
            x = self.inv[f](x)
            xa, xb = x.chunk(2, 1)
            h = self.start[f](xa)
            cond = self.cond[f](c).chunk(self.layers, 1)
            skip = torch.zeros_like(h)
            for i in range(self.layers):
                z = self.dil[f][i](h) + cond[i]
                z = torch.tanh(z[:, :self.ch]) * torch.sigmoid(z[:, self.ch:])
                r, s = self.res[f][i](z).chunk(2, 1)
                h, skip = h + r, skip + s
            log_s, t = self.end[f](skip).chunk(2, 1)
            x = torch.cat([xa, torch.exp(log_s) * xb + t], 1)
            log_det = log_det + log_s.sum()
        return (x * x).sum() / 2 - log_det


class Ssd300(nn.Module):
    """SSD300 on a ResNet-50 backbone (NVIDIA's: stages 1-3, extra feature layers, 6 heads of
    box regressions and 81-class scores)."""

    def __init__(self, classes: int = 81) -> None:
        super().__init__()
        self.trunk, c = resnet50_trunk(3, last_stride=1)  # 38x38 features at 300x300
        chans = [c, 512, 512, 256, 256, 256]
        extras: list[nn.Module] = []
        # 38x38 -> 19 -> 10 -> 5 (stride 2), -> 3 -> 1 (unpadded 3x3)
        for i, (cin, cout) in enumerate(itertools.pairwise(chans)):
            stride, pad = (2, 1) if i < 3 else (1, 0)
            extras.append(nn.Sequential(nn.Conv2d(cin, 256, 1, bias=False), nn.BatchNorm2d(256),
                                        nn.ReLU(), nn.Conv2d(256, cout, 3, stride, pad,
                                                             bias=False),
                                        nn.BatchNorm2d(cout), nn.ReLU()))
        self.extras = nn.ModuleList(extras)
        boxes = [4, 6, 6, 6, 4, 4]
        self.loc = nn.ModuleList(nn.Conv2d(ch, n * 4, 3, padding=1)
                                 for ch, n in zip(chans, boxes, strict=True))
        self.conf = nn.ModuleList(nn.Conv2d(ch, n * classes, 3, padding=1)
                                  for ch, n in zip(chans, boxes, strict=True))

    def forward(self, x: Tensor) -> Tensor:
        feats = [self.trunk(x)]
        for layer in self.extras:
            feats.append(layer(feats[-1]))
        total = x.new_zeros(())
        for f, loc, conf in zip(feats, self.loc, self.conf, strict=True):
            total = total + loc(f).abs().mean() + F.log_softmax(
                conf(f).flatten(2), dim=1).mean()
        return total


def _roi_align(feature: Tensor, boxes: Tensor, size: int, sampling: int = 2) -> Tensor:
    """RoIAlign (He et al. 2017) of one image's ``boxes`` ([n, 4] as x0, y0, x1, y1 in the
    feature map's normalised [-1, 1] coordinates) on ``feature`` [1, C, H, W]: ``sampling`` x
    ``sampling`` bilinear samples per output cell, averaged; [n, C, size, size]. One
    grid_sample over every box's points (torchvision's roi_align is not importable here)."""
    n, points = boxes.shape[0], size * sampling
    steps = (torch.arange(points, dtype=feature.dtype) + 0.5) / points
    xs = boxes[:, 0:1] + (boxes[:, 2:3] - boxes[:, 0:1]) * steps  # [n, points]
    ys = boxes[:, 1:2] + (boxes[:, 3:4] - boxes[:, 1:2]) * steps
    grid = torch.stack(torch.broadcast_tensors(xs[:, None, :], ys[:, :, None]), -1)
    sampled = F.grid_sample(feature, grid.reshape(1, n * points, points, 2), align_corners=False)
    c = feature.shape[1]
    return (sampled.reshape(c, n, size, sampling, size, sampling).mean((3, 5))
            .permute(1, 0, 2, 3))


class MaskRcnn(nn.Module):
    """Mask R-CNN on ResNet-50-FPN as NVIDIA's DeepLearningExamples trains it (the
    maskrcnn-benchmark code Lambda's benchmark runs, e2e_mask_rcnn_R_50_FPN_1x): the backbone's
    batch norms frozen and its stem and first stage not trained (FREEZE_CONV_BODY_AT 2); an FPN
    of 256 channels over stages 2-5 and a max-pooled P6; an RPN head (3x3 conv, 3 anchors a
    position) on P2-P6; 512 sampled proposals an image (ROI_HEADS.BATCH_SIZE_PER_IMAGE) pooled
    7x7 from their FPN level into two 1024-wide layers, 81 class scores and per-class boxes; the
    positive quarter of them (POSITIVE_FRACTION 0.25: 128) pooled 14x14 into four 3x3 convs, a
    2x deconvolution and 81 28x28 mask logits. Proposals are boxes of log-uniform sizes over the
    image (the anchors' 32-512 pixels), each pooled from the level the FPN assigns it; what NMS
    and matching cost is left out (small tensors, host-side sorting)."""

    ROIS, POSITIVES, CLASSES = 512, 128, 81

    def __init__(self) -> None:
        super().__init__()
        trunk, _ = resnet50_trunk(norm=FrozenBatchNorm2d)
        ends = list(itertools.accumulate((4, *(blocks for blocks, _ in RESNET50_STAGES))))
        self.stages = nn.ModuleList(trunk[a:b] for a, b in itertools.pairwise([0, *ends[1:]]))
        for p in self.stages[0].parameters():  # the stem and stage 2 (res2) stay frozen
            p.requires_grad_(False)
        chans = [256, 512, 1024, 2048]
        self.lateral = nn.ModuleList(nn.Conv2d(c, 256, 1) for c in chans)
        self.smooth = nn.ModuleList(nn.Conv2d(256, 256, 3, padding=1) for _ in chans)
        self.rpn = nn.Conv2d(256, 256, 3, padding=1)
        self.objectness, self.deltas = nn.Conv2d(256, 3, 1), nn.Conv2d(256, 12, 1)
        self.fc6, self.fc7 = nn.Linear(256 * 7 * 7, 1024), nn.Linear(1024, 1024)
        self.cls, self.box = nn.Linear(1024, self.CLASSES), nn.Linear(1024, 4 * self.CLASSES)
        self.mask_convs = nn.Sequential(*itertools.chain.from_iterable(
            (nn.Conv2d(256, 256, 3, padding=1), nn.ReLU()) for _ in range(4)))
        self.mask_up = nn.ConvTranspose2d(256, 256, 2, 2)
        self.mask_logits = nn.Conv2d(256, self.CLASSES, 1)

    def _pool(self, levels: list[Tensor], boxes: Tensor, assigned: Tensor, image: int,
              size: int) -> Tensor:
        parts: list[Tensor] = []
        order: list[Tensor] = []
        for k, feature in enumerate(levels):
            on_level = (assigned == k).nonzero().squeeze(1)
            if on_level.numel():
                parts.append(_roi_align(feature[image:image + 1], boxes[on_level], size))
                order.append(on_level)
        return torch.cat(parts)[torch.argsort(torch.cat(order))]

    def forward(self, images: Tensor) -> Tensor:
        b, _, height, width = images.shape
        feats, x = [], images
        for stage in self.stages:  # C2-C5 (the first slice is the stem and stage 2)
            x = stage(x)
            feats.append(x)
        inner = self.lateral[3](feats[3])
        levels = [self.smooth[3](inner)]
        for k in (2, 1, 0):
            inner = self.lateral[k](feats[k]) + F.interpolate(inner, size=feats[k].shape[-2:],
                                                              mode="nearest")
            levels.insert(0, self.smooth[k](inner))
        p6 = F.max_pool2d(levels[-1], 1, 2)
        loss = images.new_zeros(())
        for level in [*levels, p6]:
            h = F.relu(self.rpn(level))
            score = self.objectness(h)
            loss = loss + F.binary_cross_entropy_with_logits(
                score, (score.detach() > 0).float()) + self.deltas(h).abs().mean()
        gen = torch.Generator().manual_seed(0)
        box_feats: list[Tensor] = []
        mask_feats: list[Tensor] = []
        for image in range(b):
            side = torch.exp(torch.empty(self.ROIS).uniform_(math.log(32), math.log(512),
                                                             generator=gen))
            cx = torch.rand(self.ROIS, generator=gen) * width
            cy = torch.rand(self.ROIS, generator=gen) * height
            px = torch.stack([cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2], 1)
            scale = torch.tensor([width, height, width, height], dtype=images.dtype)
            boxes = (px / scale) * 2 - 1
            # FPN level k0 + log2(sqrt(area) / 224) with k0 = 4, on P2-P5
            assigned = (torch.floor(4 + torch.log2(side / 224)).clamp(2, 5) - 2).long()
            box_feats.append(self._pool(levels[:4], boxes, assigned, image, 7))
            mask_feats.append(self._pool(levels[:4], boxes[:self.POSITIVES],
                                         assigned[:self.POSITIVES], image, 14))
        h = F.relu(self.fc7(F.relu(self.fc6(torch.cat(box_feats).flatten(1)))))
        labels = torch.randint(1, self.CLASSES, (b * self.ROIS,), generator=gen)
        loss = loss + F.cross_entropy(self.cls(h), labels) + self.box(h).abs().mean()
        m = self.mask_logits(F.relu(self.mask_up(self.mask_convs(torch.cat(mask_feats)))))
        positive = labels.reshape(b, self.ROIS)[:, :self.POSITIVES].reshape(-1)
        chosen = m[torch.arange(m.shape[0]), positive]
        return loss + F.binary_cross_entropy_with_logits(chosen, (chosen.detach() > 0).float())


class UNet(nn.Module):
    """U-Net (Ronneberger et al.): 4 down/up levels, 64 base channels, double 3x3 convs."""

    def __init__(self, base: int = 64, cin: int = 3, cout: int = 2) -> None:
        super().__init__()

        def double(a: int, b: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(),
                                 nn.Conv2d(b, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU())

        widths = [base * 2**i for i in range(5)]
        self.down = nn.ModuleList([double(cin, widths[0])] + [double(widths[i], widths[i + 1])
                                                              for i in range(4)])
        self.up = nn.ModuleList(nn.ConvTranspose2d(widths[i + 1], widths[i], 2, 2)
                                for i in reversed(range(4)))
        self.merge = nn.ModuleList(double(2 * widths[i], widths[i]) for i in reversed(range(4)))
        self.out = nn.Conv2d(base, cout, 1)

    def forward(self, x: Tensor) -> Tensor:
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        x = skips.pop()
        for up, merge in zip(self.up, self.merge, strict=True):
            x = merge(torch.cat([up(x), skips.pop()], 1))
        return self.out(x)


class Dlrm(nn.Module):
    """DLRM (MLPerf Criteo shape, tables cut to 100k rows for a CPU run: a gather's cost is
    per looked-up row, not per table row): 13 dense features through a 512-256-128 MLP, 26
    embedding tables of dimension 128, pairwise dot interactions, a 1024-1024-512-256-1 MLP."""

    def __init__(self, tables: int = 26, rows: int = 100_000, dim: int = 128) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(13, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                    nn.Linear(256, dim), nn.ReLU())
        self.emb = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        n = tables + 1
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 1024), nn.ReLU(),
                                 nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 512),
                                 nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense: Tensor, sparse: Tensor) -> Tensor:
        x = self.bottom(dense)
        feats = torch.stack([x] + [e(sparse[:, i:i + 1]) for i, e in enumerate(self.emb)], 1)
        inter = feats @ feats.transpose(1, 2)
        i, j = torch.triu_indices(feats.shape[1], feats.shape[1], 1)
        return self.top(torch.cat([x, inter[:, i, j]], 1)).sigmoid().mean()


# ------------------------------------------------------------------------------ catalogue --
def _ids(vocab: int, b: int, t: int) -> Tensor:
    return torch.randint(0, vocab, (b, t))


# Transformer-XL's spellings; both sizes answer to them (a tie the parameter count breaks), and
# a size after one ("transformer-xl base", "transformerxl_large") picks that size.
_TXL_NAMES = ("transformer-xl", "transformerxl", "transformer_xl", "txl")


def _transformer_xl(size: str, *, layers: int, d: int, ff: int, div: int, tokens: int,
                    batch: int, dropout: float, dropatt: float) -> tuple[Callable[[], nn.Module],
                                         Callable[[int], tuple[Tensor, ...]], int, str, list[str]]:
    """A Transformer-XL size's catalogue entry: segments of ``tokens`` with as many cached."""
    names = [*_TXL_NAMES, *(f"{n}{gap}{size}" for n in _TXL_NAMES for gap in ("", " ", "-", "_"))]
    return (functools.partial(TransformerXL, layers=layers, d=d, ff=ff, div=div,
                              dropout=dropout, dropatt=dropatt),
            lambda b: (_zipf_ids(267_735, b, tokens), _zipf_ids(267_735, b, tokens),
                       torch.randn(layers, b, tokens, d)), batch,
            f"Transformer-XL {size} (WikiText-103): {layers} layers of {d}, {tokens}-token "
            f"segments with {tokens} cached, explicit relative attention, adaptive input and "
            "softmax", names)


# name -> (model factory, batch maker, batch, what it is, match tokens)
ARCHITECTURES: dict[str, tuple[Callable[[], nn.Module], Callable[[int], tuple[Tensor, ...]],
                               int, str, list[str]]] = {
    "cnn-classifier": (ResNet50, lambda b: (torch.randn(b, 3, 224, 224),), 2,
                       "ResNet-50 v1.5, 224x224 images",
                       ["resnet", "resnext", "vgg", "efficientnet", "mobilenet", "densenet",
                        "inception", "convnext", "regnet", "alexnet", "cnn", "image class"]),
    "vit": (Vit, lambda b: (torch.randn(b, 3, 224, 224),), 1, "ViT-B/16, 224x224 images",
            ["vit", "deit", "swin", "vision transformer", "beit"]),
    "encoder-only": (Bert, lambda b: (_ids(30522, b, 384),), 1,
                     "BERT-base, sequence 384 (SQuAD fine-tuning shape)",
                     ["bert", "electra", "encoder-only", "xlm-r"]),
    "decoder-only": (Gpt, lambda b: (_ids(50257, b, 1024),), 1,
                     "GPT-2 small (124M), sequence 1024",
                     ["gpt", "llama", "opt-", "mistral", "qwen", "gemma", "phi-", "falcon",
                      "decoder-only", "causal lm", "language model"]),
    "encoder-decoder": (EncoderDecoder, lambda b: (_ids(32000, b, 128), _ids(32000, b, 128)), 2,
                        "Transformer-base translation model, 128 source and target tokens",
                        ["t5", "bart", "marian", "transformer", "encoder-decoder", "pegasus",
                         "whisper"]),
    # dropouts as the published training scripts set them (kimiyoung/transformer-xl's and
    # NVIDIA's run_wt103_{large,base}.sh: --dropout 0.2 --dropatt 0.2; --dropout 0.1 --dropatt 0)
    "transformer-xl": _transformer_xl("large", layers=18, d=1024, ff=4096, div=4, tokens=384,
                                      batch=2, dropout=0.2, dropatt=0.2),
    "transformer-xl-base": _transformer_xl("base", layers=16, d=512, ff=2048, div=1,
                                           tokens=192, batch=4, dropout=0.1, dropatt=0.0),
    "seq2seq-rnn": (Gnmt, lambda b: (_ids(32000, b, 50), _ids(32000, b, 50)), 8,
                    "GNMT v2 (8 LSTM layers of 1024), 50 source and target tokens",
                    ["gnmt", "lstm", "gru", "rnn", "seq2seq"]),
    # A batch of LJSpeech clips as Tacotron 2 trains on it: its collate pads every clip to the
    # batch's longest (NVIDIA DeepLearningExamples' TextMelCollate), and a batch of tens of
    # clips holds one close to the data set's longest, 10.10 s (keithito.com/LJ-Speech-Dataset
    # statistics): 870 mel frames at 22,050 Hz and hop 256, and 154 characters at the data
    # set's 15.2 a second (1,308,674 over 23:55:17). The decoder steps once per padded frame
    # whatever the batch, so those frames set the launches a step pays once; a clip is counted
    # by its own frames (566 on average, fit_calibration.FRAMES_PER_UTTERANCE).
    "conv-tts": (Tacotron2, lambda b: (_ids(148, b, 154), torch.randn(b, 870, 80)), 2,
                 "Tacotron 2, LJSpeech clips padded to the longest: 154 characters, 870 mel "
                 "frames (teacher-forced)",
                 ["tacotron", "tts", "text-to-speech", "fastspeech", "speech synth"]),
    # The segment NVIDIA's training scripts and Lambda's benchmark pass (--segment-length 8000:
    # DeepLearningExamples scripts/train_waveglow.sh, deeplearning-benchmark's config files),
    # with the 32 mel frames (hop 256) its upsampling covers.
    "flow-audio": (WaveGlow, lambda b: (torch.randn(b, 80, 32), torch.randn(b, 8000)), 1,
                   "WaveGlow (12 flows, 8-layer WaveNet couplings), 8000-sample segments",
                   ["waveglow", "wavenet", "waveflow", "vocoder", "flow"]),
    "detection": (Ssd300, lambda b: (torch.randn(b, 3, 300, 300),), 2,
                  "SSD300 on a ResNet-50 backbone, 300x300 images",
                  ["ssd", "yolo", "retinanet", "detr", "detection", "segmentation", "fcos",
                   "detector"]),
    # The largest image batch the loader builds: shorter side 800, longer at most 1333
    # (INPUT.MIN_SIZE_TRAIN, MAX_SIZE_TRAIN), padded to a multiple of 32 (SIZE_DIVISIBILITY);
    # what a batch must fit in.
    "two-stage-detection": (MaskRcnn, lambda b: (torch.randn(b, 3, 800, 1344),), 2,
                            "Mask R-CNN on ResNet-50-FPN, 800x1333 images (512 proposals, "
                            "128 masks an image)",
                            ["rcnn", "r-cnn"]),  # Mask, Faster, Cascade R-CNN
    "unet": (UNet, lambda b: (torch.randn(b, 3, 256, 256),), 1, "U-Net, 256x256 images",
             ["unet", "u-net", "diffusion", "ddpm"]),
    "mlp-recommender": (Dlrm, lambda b: (torch.randn(b, 13), torch.randint(0, 100_000, (b, 26))),
                        256, "DLRM (26 tables of dimension 128, Criteo-shaped MLPs)",
                        ["dlrm", "ncf", "neumf", "recommend", "wide-and-deep", "wide & deep",
                         "mlp", "deepfm"]),
}

# Architectures whose training data is a table read a whole batch per loader call (DLRM's
# Criteo loaders, facebookresearch/dlrm and NVIDIA's DeepLearningExamples: CriteoBinDataset
# reads bytes_per_feature x features x batch_size per item): no Python runs per sample, where
# image, text and audio datasets return one item per call and collate them.
BATCH_LOADED = frozenset({"mlp-recommender"})

# Kernels a GPU runs per recurrent layer, direction and time step (forward 1 + backward 2).
RECURRENT_KERNELS_PER_STEP = 3
GEMM_BUCKETS = 8  # (rows per sample, cols) classes kept in "gemm_shapes"

GemmShape = tuple[int, int, float]  # (rows M, cols N, forward flops) of one GEMM


def _recurrent_counter(model: nn.Module) -> tuple[dict[str, float], list[GemmShape], list[Any]]:
    """Hooks that count LSTM flops (forward + backward), GPU kernels and forward GEMM shapes
    from the layer shapes."""
    counts = {"flops": 0.0, "kernels": 0.0, "cpu_calls": 0.0, "weight_bytes": 0.0}
    gemms: list[GemmShape] = []

    def hook(mod: nn.Module, args: tuple[Tensor, ...], _out: Any) -> None:
        assert isinstance(mod, nn.LSTM)
        x = args[0]
        b, t = (x.shape[0], x.shape[1]) if mod.batch_first else (x.shape[1], x.shape[0])
        dirs = 2 if mod.bidirectional else 1
        h = mod.hidden_size
        for layer in range(mod.num_layers):
            cin = mod.input_size if layer == 0 else h * dirs
            macs = 4 * (cin + h) * h * b * t * dirs
            counts["flops"] += 3 * 2 * macs
            counts["kernels"] += RECURRENT_KERNELS_PER_STEP * t * dirs
            counts["cpu_calls"] += 2 * dirs  # one fused oneDNN layer forward, one backward
            # Each time step's GEMM re-reads the layer's recurrent weights (forward, and twice
            # backward): bytes a step pays whatever its batch.
            counts["weight_bytes"] += 3 * 4 * h * h * 4 * t * dirs
            # As cuDNN runs a layer: the input projection of all time steps in one GEMM (it
            # does not wait on the recurrence), then one GEMM per time step on the hidden
            # state, batch rows by the four gates.
            gemms.append((b * t, 4 * h, 2.0 * 4 * cin * h * b * t * dirs))
            gemms.append((b, 4 * h, 2.0 * 4 * h * h * b * t * dirs))

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, nn.LSTM)]
    return counts, gemms, handles


class _GemmShapes(TorchDispatchMode):  # type: ignore[misc]
    """(rows, cols, flops) of every matrix multiply and convolution run inside it, the
    convolutions as the implicit GEMM a GPU runs them as."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[GemmShape] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        shape = _gemm_shape(func.overloadpacket, args, out)
        if shape is not None:
            self.shapes.append(shape)
        return out


def _gemm_shape(op: Any, args: Any, out: Any) -> GemmShape | None:
    aten = torch.ops.aten
    if op in (aten.mm, aten._scaled_mm):
        a, w = args[0], args[1]
        return a.shape[0], w.shape[1], 2.0 * a.shape[0] * w.shape[1] * a.shape[1]
    if op is aten.addmm:
        a, w = args[1], args[2]
        return a.shape[0], w.shape[1], 2.0 * a.shape[0] * w.shape[1] * a.shape[1]
    if op in (aten.bmm, aten.baddbmm):
        # [B, m, k] x [B, k, n]: the B matrices tile as one GEMM of B x m rows
        a, w = (args[0], args[1]) if op is aten.bmm else (args[1], args[2])
        rows = a.shape[0] * a.shape[1]
        return rows, w.shape[2], 2.0 * rows * w.shape[2] * a.shape[2]
    if op is aten.convolution:
        x, w, transposed, groups = args[0], args[1], args[6], args[8]
        kernel = math.prod(w.shape[2:])
        if transposed:
            # weight [C_in, C_out / groups, k...]: one GEMM per input position (rows) onto
            # C_out / groups x kernel outputs (cols), then a scatter-add (col2im): the flops
            # torch's counter counts, and for U-Net's 2x2 stride-2 up-convolution exactly so
            rows = x.shape[0] * math.prod(x.shape[2:])
            cols, depth = w.shape[1] * kernel, w.shape[0] // groups
        else:
            rows = out.shape[0] * math.prod(out.shape[2:])
            cols, depth = w.shape[0] // groups, w.shape[1] * kernel
        return rows, cols, 2.0 * rows * cols * depth * groups
    return None


# Architectures whose output scores each token over a vocabulary: their memory step takes the
# cross-entropy they train with (fp32 log-probabilities and their gradient at the peak).
TOKEN_OUTPUTS = frozenset({"decoder-only", "encoder-decoder", "seq2seq-rnn"})

# What CUDA's autocast runs in fp32 (its fp32 and "fp32 unless a dtype is given" lists, those
# these definitions call). CPU's autocast runs most of them in bfloat16 or leaves them to their
# input's dtype; the losses it runs in fp32 too, listed so that the list is CUDA's.
_CUDA_FP32_OPS = frozenset({
    F.layer_norm, F.group_norm, F.softmax, F.log_softmax, F.softplus, F.mse_loss, F.nll_loss,
    F.cross_entropy, torch.softmax, torch.log_softmax, torch.exp, torch.log, torch.sum,
    torch.logsumexp, torch.rsqrt, torch.pow, torch.cumsum, Tensor.softmax, Tensor.log_softmax,
    Tensor.exp, Tensor.log, Tensor.sum, Tensor.logsumexp, Tensor.rsqrt, Tensor.pow,
    Tensor.__pow__, Tensor.cumsum})


def _cast_floats(x: Any, dtype: torch.dtype) -> Any:
    if isinstance(x, Tensor):
        return x.to(dtype) if x.is_floating_point() else x
    if isinstance(x, tuple):
        return tuple(_cast_floats(v, dtype) for v in x)
    return x


class _CudaAutocastFp32(TorchFunctionMode):  # type: ignore[misc]
    """Under CPU autocast, run ``_CUDA_FP32_OPS`` on fp32 inputs with autocast off, as CUDA's
    autocast casts them (a layer norm's output is then fp32 until the next GEMM casts it)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _CUDA_FP32_OPS and torch.is_autocast_enabled("cpu"):
            with torch.autocast("cpu", enabled=False):
                return func(*_cast_floats(tuple(args), torch.float32),
                            **{k: _cast_floats(v, torch.float32) for k, v in kwargs.items()})
        return func(*args, **kwargs)


def _native_recurrence(model: nn.Module, half: bool) -> None:
    """Each LSTM on the native path (oneDNN off while it runs forward); under ``half`` in
    bfloat16, weights and inputs (CPU autocast leaves the native path in fp32)."""
    def enter(mod: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        torch.backends.mkldnn.enabled = False
        return _cast_floats(args, torch.bfloat16) if half else args

    def leave(*_: Any) -> None:
        torch.backends.mkldnn.enabled = True

    for mod in model.modules():
        if isinstance(mod, nn.LSTM):
            if half:
                mod.to(torch.bfloat16)
            mod.register_forward_pre_hook(enter)
            mod.register_forward_hook(leave)


def _output_loss(out: Tensor) -> Tensor:
    """The census's loss: the model's own when it returns one, else a mean square of its output."""
    return out.float().square().mean() if out.dim() > 0 else out


def _memory_loss(name: str, out: Tensor) -> Tensor:
    if out.dim() > 0 and name in TOKEN_OUTPUTS:
        targets = torch.randint(0, out.shape[-1], out.shape[:-1],
                                generator=torch.Generator().manual_seed(0))
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1))
    return _output_loss(out)


def _allocation_peak(step: Callable[[], None]) -> int:
    """Peak bytes the CPU allocator holds while ``step`` runs, above what it held before."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events: list[tuple[int, int, int]] = []  # (time, total allocated after, this allocation)
    pending = list(prof.profiler.kineto_results.experimental_event_tree())
    while pending:
        event = pending.pop()
        if event.tag == torch._C._profiler._EventType.Allocation:
            fields = event.extra_fields
            events.append((event.start_time_ns, fields.total_allocated, fields.alloc_size))
        pending.extend(event.children)
    events.sort()
    _, first_total, first_size = events[0]
    return max(total for _, total, _ in events) - (first_total - first_size)


def _step_peak(name: str, batch: int, half: bool) -> int:
    """Allocation peak of one training step (forward and backward) at ``batch``."""
    factory, make, *_ = ARCHITECTURES[name]
    torch.manual_seed(0)
    model = factory()
    _native_recurrence(model, half)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    inputs = make(batch)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=half), _CudaAutocastFp32():
            loss = _memory_loss(name, model(*inputs))
        loss.backward()

    step()
    opt.step()
    opt.zero_grad(set_to_none=False)  # gradients exist before the step, as after the first
    return _allocation_peak(step)


def activation_peak_per_sample(name: str, *, half: bool) -> float:
    """Bytes one sample adds to a training step's peak (see the module docstring)."""
    batch = ARCHITECTURES[name][2]
    return (_step_peak(name, 2 * batch, half) - _step_peak(name, batch, half)) / batch


def _size(x: float) -> float:
    """Whole rows/cols from 100 up (GPT-2's 50257 columns, not 50260), else 4 digits."""
    return float(round(x)) if x >= 100 else float(f"{x:.4g}")


def _gemm_buckets(shapes: list[GemmShape], batch: int) -> tuple[list[list[float]], float]:
    """At most GEMM_BUCKETS [rows per sample, cols, share of the flops], largest share first:
    the GEMMs grouped by (rows per sample, cols) each rounded to the nearest power of 2 (in
    log), a group's rows and cols its GEMMs' flops-weighted geometric means (ResNet-50's 14x14
    stage keeps its 196 rows, GPT-2's head its 50257 columns), the shares of the groups kept
    renormalised to 1 (4 significant digits: a classifier head's share stays above 0); and the
    share of all GEMM flops those groups hold."""
    groups: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for rows, cols, n in shapes:
        group = groups[(round(math.log2(rows / batch)), round(math.log2(cols)))]
        group[0] += n
        group[1] += n * math.log(rows / batch)
        group[2] += n * math.log(cols)
    kept = sorted(groups.values(), key=lambda g: -g[0])[:GEMM_BUCKETS]
    total = sum(g[0] for g in kept)
    buckets = [[_size(math.exp(lr / n)), _size(math.exp(lc / n)), float(f"{n / total:.4g}")]
               for n, lr, lc in kept]
    return buckets, total / sum(g[0] for g in groups.values())


def profile_architecture(name: str) -> dict[str, Any]:
    factory, make, batch, what, match = ARCHITECTURES[name]
    torch.manual_seed(0)
    model = factory()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    inputs = make(batch)

    def loss(batch_inputs: tuple[Tensor, ...]) -> Tensor:
        return _output_loss(model(*batch_inputs))

    loss(inputs).backward()  # warm-up: lazy initialisation, optimizer state
    opt.step()
    opt.zero_grad(set_to_none=True)
    recurrent, recurrent_gemms, handles = _recurrent_counter(model)
    ATTENTION_FLOPS[0] = 0.0
    with OpCensus() as step:
        with _GemmShapes() as gemms:
            out = loss(inputs)
        out.backward()
        del out
    for h in handles:
        h.remove()
    attention_flops = ATTENTION_FLOPS[0]  # of this step (the next adds its own)
    opt.zero_grad(set_to_none=True)  # as before the first census step
    with OpCensus() as double:
        loss(make(2 * batch)).backward()
    with OpCensus() as optim:
        opt.step()
    flops = by_class(step.flops_by_op)
    flops["recurrent"] += recurrent["flops"]
    flops["attention"] += attention_flops
    compute = {c: flops.get(c, 0.0) for c in COMPUTE_CLASSES}
    total = sum(compute.values())
    at_batch, at_double = by_class(step.bytes_moved), by_class(double.bytes_moved)
    # The fused CPU recurrent operators' bytes are mostly their weights (counted per time step
    # in weight_bytes): left out. Every other class grows with the batch or is paid per step.
    classes = sorted((set(at_batch) | set(at_double)) - {"recurrent"})
    per_sample_by_class = {c: max(at_double.get(c, 0.0) - at_batch.get(c, 0.0), 0.0) / batch
                           for c in classes}
    per_step = sum(max(at_batch.get(c, 0.0) - batch * per_sample_by_class[c], 0.0)
                   for c in classes)
    step_bytes = optim.total_bytes + recurrent["weight_bytes"] + per_step + step.fixed_bytes
    sample_bytes = sum(per_sample_by_class.values())
    kernels = (sum(step.kernel_calls.values()) - recurrent["cpu_calls"] + recurrent["kernels"]
               + sum(optim.kernel_calls.values()))
    per_sample = total / batch
    shapes = gemms.shapes + recurrent_gemms
    buckets, covered = _gemm_buckets(shapes, batch)
    # The forward GEMMs' flops x3 (backward: two GEMMs of each's shape, transposed) against
    # what the census counted: a shape the dispatch mode missed would show here.
    gemm_counted = sum(flops.get(c, 0.0) for c in ("gemm", "conv", "recurrent"))
    print(f"{name:16s} forward GEMM shapes hold {3 * sum(n for *_, n in shapes) / gemm_counted:.3f}"
          " of the counted GEMM, conv and recurrent flops", flush=True)
    return {
        "description": what,
        "match": match,
        "flops_share": {c: round(v / total, 4) for c, v in compute.items() if v > 0.0},
        "flops_per_sample": float(f"{per_sample:.4g}"),
        "bytes_per_flop": float(f"{sample_bytes / per_sample:.4g}"),
        "step_bytes_per_flop": float(f"{step_bytes / per_sample:.4g}"),
        "launches_per_step": round(kernels),
        # cuDNN starts a layer's per-time-step kernels itself, from one dispatched call
        "library_launches_per_step": round(recurrent["kernels"] - recurrent["cpu_calls"]),
        "activation_bytes_per_sample": float(
            f"{activation_peak_per_sample(name, half=False):.4g}"),
        "activation_bytes_per_sample_amp": float(
            f"{activation_peak_per_sample(name, half=True):.4g}"),
        "gemm_shapes": buckets,
        **({"batch_loaded": True} if name in BATCH_LOADED else {}),
        "profiled": {"batch_size": batch, "params": sum(p.numel() for p in model.parameters()),
                     "gemm_shapes_cover": round(covered, 4),
                     "bytes_by_class_per_sample": {c: float(f"{v:.4g}")
                                                   for c, v in per_sample_by_class.items()}},
    }


def _fix_shares(entry: dict[str, Any]) -> None:
    """Rounded shares summing to exactly 1 (the largest absorbs the rounding)."""
    shares = entry["flops_share"]
    top = max(shares, key=shares.get)
    shares[top] = round(1.0 - sum(v for k, v in shares.items() if k != top), 4)
    assert math.isclose(sum(shares.values()), 1.0, abs_tol=1e-6)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=REPO / "gpucost" / "model" / "signatures.json")
    ap.add_argument("--only", action="append", help="profile these architectures only")
    args = ap.parse_args(argv)
    torch.backends.mkldnn.enabled = True  # LSTMs as one fused operator per layer (see above)
    from gpucost._io import atomic_write_text

    signatures: dict[str, Any] = {}
    if args.only and args.out.exists():  # keep the others
        signatures = json.loads(args.out.read_text(encoding="utf-8"))["signatures"]
    for name in args.only or list(ARCHITECTURES):
        entry = profile_architecture(name)
        _fix_shares(entry)
        signatures[name] = entry
        print(f"{name:16s} {entry['flops_per_sample']:.3g} flops/sample  shares "
              f"{entry['flops_share']}  bytes/flop {entry['bytes_per_flop']:.3g}  "
              f"launches {entry['launches_per_step']}  activations "
              f"{entry['activation_bytes_per_sample'] / 1e6:.1f} MB/sample (amp "
              f"{entry['activation_bytes_per_sample_amp'] / 1e6:.1f})  GEMM shapes "
              f"{entry['gemm_shapes'][:3]}", flush=True)
        doc = {  # written after each architecture: a long run keeps what it has profiled
            "provenance": {
                "written_by": "scripts/build_signatures.py",
                "date": dt.date.today().isoformat(),
                "torch": torch.__version__,
                "method": "one training step (forward, backward, Adam) of each model definition "
                          "on CPU under gpucost.profiler.flops.OpCensus, and a second at twice "
                          "the batch (bytes per sample and per step); activations from the "
                          "allocator's peak of a step at two batches, in fp32 and under "
                          "autocast; see the script's docstring",
            },
            "signatures": {k: signatures[k] for k in ARCHITECTURES if k in signatures},
        }
        atomic_write_text(args.out, json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
