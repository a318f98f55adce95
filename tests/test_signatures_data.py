"""The shipped signatures' memory and GEMM-shape facts (scripts/build_signatures.py) are
physical: positive, normalised, and ResNet-50's activations match a count from its layers."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from gpucost.model.signature import SIGNATURES_PATH, builtin


def _entries() -> dict[str, Any]:
    entries: dict[str, Any] = json.loads(SIGNATURES_PATH.read_text(encoding="utf-8"))["signatures"]
    return entries


@pytest.mark.parametrize("name", sorted(builtin()))
def test_every_builtin_has_activations_and_normalised_gemm_shapes(name: str) -> None:
    entry = _entries()[name]
    assert entry["activation_bytes_per_sample"] > 0
    shapes = entry["gemm_shapes"]
    assert 1 <= len(shapes) <= 8
    assert all(rows > 0 and cols > 0 and share > 0 for rows, cols, share in shapes)
    assert math.isclose(sum(share for *_, share in shapes), 1.0, abs_tol=1e-3)
    assert [s[2] for s in shapes] == sorted((s[2] for s in shapes), reverse=True)


def _resnet50_kept_bytes() -> float:
    """fp32 bytes per 224x224 sample autograd keeps in ResNet-50 v1.5, from its layers: the
    image, every convolution's output and its batch norm's output (the in-place ReLU's too)
    but the last of a block, whose sum with the shortcut is kept as the ReLU's output (the
    next block's input), and the max-pool's output."""
    kept = 3 * 224 * 224 + 2 * 64 * 112 * 112 + 64 * 56 * 56
    side = 56
    for stage, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512))):
        for block in range(blocks):
            out = side // 2 if block == 0 and stage > 0 else side
            kept += 2 * width * side * side  # 1x1 conv and its norm, at the block's input size
            kept += 2 * width * out * out  # 3x3 conv (stride here in v1.5) and its norm
            kept += 4 * width * out * out * (3 if block == 0 else 2)  # 1x1 up, output, shortcut
            side = out
    return 4.0 * kept


def test_resnet50_activations_match_a_count_from_its_layers() -> None:
    measured = _entries()["cnn-classifier"]["activation_bytes_per_sample"]
    analytic = _resnet50_kept_bytes()  # 84 MB
    assert analytic / 2 < measured < analytic * 2


def test_activations_follow_the_layer_shapes() -> None:
    entries = _entries()
    per_sample = {k: e["activation_bytes_per_sample"] for k, e in entries.items()}
    # BERT-base and ViT-B/16: 12 blocks of width 768 (ff 3072) each, and SDPA keeps no
    # attention matrix, so what a block keeps is per token: 384 tokens against 197.
    assert per_sample["encoder-only"] / per_sample["vit"] == pytest.approx(384 / 197, rel=0.1)
    # Per flop: ResNet-50 keeps two tensors (convolution and batch norm outputs) per
    # convolution output made at ~390 multiply-adds each (its early stages are 64 channels
    # wide); a width-768 transformer block keeps ~1.8 tensors per GEMM output made at
    # 4/3 x 768 (~1000). The CNN keeps ~3x more per flop than each transformer.
    per_flop = {k: per_sample[k] / e["flops_per_sample"] for k, e in entries.items()}
    for transformer in ("vit", "encoder-only", "decoder-only"):
        assert per_flop["cnn-classifier"] > 2 * per_flop[transformer], transformer


# (signature, embedding lookups per sample, dimension): the tokens or sparse features each
# sample looks up in its embedding tables (scripts/build_signatures.py's inputs)
_LOOKUPS = [("mlp-recommender", 26, 128), ("seq2seq-rnn", 50 + 50, 1024),
            ("encoder-only", 384, 768), ("encoder-decoder", 128 + 128, 512)]


@pytest.mark.parametrize(("name", "lookups", "dim"), _LOOKUPS, ids=[n for n, *_ in _LOOKUPS])
def test_embedding_bytes_per_sample_are_the_rows_looked_up(name: str, lookups: int,
                                                           dim: int) -> None:
    # Per sample, an embedding moves its looked-up rows: read and written out forward, read and
    # scattered backward, plus the indices (BERT's position and type lookups add as many). The
    # tables themselves are per step (zero-filled gradients, Adam): DLRM's 26 tables of
    # 100,000 rows charged per sample were 10.4 MB a sample, 190x this.
    rows = lookups * dim * 4
    embedding = _entries()[name]["profiled"]["bytes_by_class_per_sample"]["embedding"]
    assert 4 * rows <= embedding <= 3 * 4 * rows + 16 * lookups


def test_transformer_xl_has_its_own_signature_with_explicit_attention() -> None:
    from gpucost.model.signature import matched

    for name, params, size in [
            ("Transformer-XL base", None, "transformer-xl-base"),
            ("transformerxl_base", 285e6, "transformer-xl-base"),  # the name says the size
            ("transformer-xl large", None, "transformer-xl"),
            ("TransformerXL", None, "transformer-xl"),  # no size: the larger's memory
            ("TransformerXL", 192e6, "transformer-xl-base"),
            ("TransformerXL", 280e6, "transformer-xl"),
            ("txl", 151e6, "transformer-xl-base")]:
        found = matched(name, params)
        assert found is not None and found.name == size, (name, params)
    entries = _entries()
    base, large = entries["transformer-xl-base"], entries["transformer-xl"]
    # Base is half as wide on half the tokens: what it keeps per sample is a fraction of
    # large's, its parameters mostly tables; its smaller GEMMs move more bytes per flop.
    assert base["activation_bytes_per_sample"] < 0.3 * large["activation_bytes_per_sample"]
    assert 150e6 < base["profiled"]["params"] < 0.75 * large["profiled"]["params"]
    assert base["bytes_per_flop"] > large["bytes_per_flop"]
    # Its relative attention keeps score matrices in memory (softmax, shift, mask: read and
    # written whole, forward and backward), which GPT-2's fused attention never writes.
    assert entries["transformer-xl"]["bytes_per_flop"] > 2 * entries["decoder-only"][
        "bytes_per_flop"]
    assert "attention" not in entries["transformer-xl"]["flops_share"]


class _TiedLm:
    """A table of 20,000 words of 64 tied to the output layer, around one linear layer: at
    batch 2 the table (5 MB) outweighs what a sample moves."""

    @staticmethod
    def factory() -> Any:
        import torch
        from torch import nn

        class Tied(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.emb, self.mid = nn.Embedding(20_000, 64), nn.Linear(64, 64)

            def forward(self, ids: torch.Tensor) -> torch.Tensor:
                return (self.mid(self.emb(ids)) @ self.emb.weight.t()).logsumexp(-1).mean()

        return Tied()

    @staticmethod
    def make(b: int) -> tuple[Any, ...]:
        import torch

        return (torch.randint(0, 20_000, (b, 16)),)


def test_a_tied_output_layer_reads_its_table_once_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # The output GEMM reads the tied table whole, forward and backward, and writes its whole
    # gradient: once a step, as any weight, so a sample's bytes do not depend on the batch the
    # signature was profiled at. Counted per sample, batch 2 would say 3x batch 8's.
    pytest.importorskip("torch")
    import sys

    sys.path.insert(0, str(SIGNATURES_PATH.parents[2] / "scripts"))
    import build_signatures

    def per_sample_bytes(batch: int) -> float:
        monkeypatch.setitem(build_signatures.ARCHITECTURES, "tied", (
            _TiedLm.factory, _TiedLm.make, batch, "tied LM", ["tied"]))
        entry = build_signatures.profile_architecture("tied")
        return float(entry["bytes_per_flop"] * entry["flops_per_sample"])

    small, large = per_sample_bytes(2), per_sample_bytes(8)
    assert small == pytest.approx(large, rel=0.1)
