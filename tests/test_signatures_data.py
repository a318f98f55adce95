"""The shipped signatures' memory and GEMM-shape facts (scripts/build_signatures.py) are
physical: positive, normalised, and ResNet-50's activations match a count from its layers."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from census_models import frame_loop, frames, recurrent

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


def test_mask_rcnn_counts_its_published_flops_and_outkeeps_ssd300() -> None:
    """The two-stage detector's definition against what is published of it: about 260 GMAC a
    forward pass at 800x1333 (detectron2's and mmdetection's model-zoo complexity tables), 44.4 M
    parameters. Its FPN keeps 256 channels at a quarter of an image 12x SSD300's 300x300, so an
    image keeps several times what SSD300's does."""
    entries = _entries()
    two_stage, ssd = entries["two-stage-detection"], entries["detection"]
    assert two_stage["flops_per_sample"] == pytest.approx(3 * 2 * 260e9, rel=0.1)
    assert two_stage["profiled"]["params"] == pytest.approx(44.4e6, rel=0.02)
    assert two_stage["activation_bytes_per_sample"] > 4 * ssd["activation_bytes_per_sample"]
    assert (two_stage["activation_bytes_per_sample_amp"]
            < two_stage["activation_bytes_per_sample"])


def test_resnet50_activations_match_a_count_from_its_layers() -> None:
    measured = _entries()["cnn-classifier"]["activation_bytes_per_sample"]
    analytic = _resnet50_kept_bytes()  # 84 MB
    assert analytic / 2 < measured < analytic * 2


def test_activations_follow_the_layer_shapes() -> None:
    entries = _entries()
    per_sample = {k: e["activation_bytes_per_sample"] for k, e in entries.items()}
    # BERT-base and ViT-B/16: 12 blocks of width 768 (ff 3072) each. ViT's fused attention
    # keeps no attention matrix, so what its block keeps is per token (197 of them); BERT's
    # keeps that per token (384), and per layer its 12 heads' 384 x 384 probabilities three
    # ways (softmax output and dropped copy in fp32, 1-byte dropout mask), and two dropped
    # sub-layer outputs per token (fp32 and mask).
    layers, heads, tokens, width = 12, 12, 384, 768
    dropped = layers * (heads * tokens**2 * (4 + 4 + 1) + 2 * tokens * width * (4 + 1))
    assert per_sample["encoder-only"] == pytest.approx(
        per_sample["vit"] * tokens / 197 + dropped, rel=0.1)
    # Per flop: ResNet-50 keeps two tensors (convolution and batch norm outputs) per
    # convolution output made at ~390 multiply-adds each (its early stages are 64 channels
    # wide); a width-768 transformer block with fused attention keeps ~1.8 tensors per GEMM
    # output made at 4/3 x 768 (~1000). The CNN keeps ~3x more per flop than those.
    per_flop = {k: per_sample[k] / e["flops_per_sample"] for k, e in entries.items()}
    for transformer in ("vit", "decoder-only"):
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


def _build_signatures() -> Any:
    pytest.importorskip("torch")
    import sys

    sys.path.insert(0, str(SIGNATURES_PATH.parents[2] / "scripts"))
    import build_signatures

    return build_signatures


_STEPS, _INPUT, _HIDDEN = 20, 64, 128


class _SteppedLstm:
    """An LSTM called one time step at a time, as Tacotron2's decoder calls its two."""

    @staticmethod
    def factory() -> Any:
        import torch
        from torch import nn

        class Stepped(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.cell, self.out = nn.LSTM(_INPUT, _HIDDEN, batch_first=True), nn.Linear(
                    _HIDDEN, 8)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                state, outputs = None, []
                for t in range(x.shape[1]):
                    y, state = self.cell(x[:, t:t + 1], state)
                    outputs.append(y)
                return self.out(torch.cat(outputs, 1))

        return Stepped()

    @staticmethod
    def make(b: int) -> tuple[Any, ...]:
        import torch

        return (torch.randn(b, _STEPS, _INPUT),)


def test_an_lstm_stepped_a_frame_at_a_time_keeps_what_a_gpu_lstm_keeps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A CUDA LSTM cell (and cuDNN's reserve space) keeps a step's input, its four gates and the
    # cell and hidden states: the input plus about 7 x hidden floats a step. The CPU's fused
    # oneDNN layer keeps a workspace of 32 x hidden a step for each call, which made the
    # frame-by-frame Tacotron2 decoder 2.3x too large (its rows "did not fit" where they ran).
    build = _build_signatures()
    monkeypatch.setitem(build.ARCHITECTURES, "stepped", (
        _SteppedLstm.factory, _SteppedLstm.make, 8, "stepped LSTM", ["stepped"]))
    fp32 = build.activation_peak_per_sample("stepped", half=False) / (4 * _STEPS)
    assert _INPUT + 6 * _HIDDEN <= fp32 <= _INPUT + 9 * _HIDDEN
    # Under autocast cuDNN runs the layer in half precision: 2 bytes a float.
    amp = build.activation_peak_per_sample("stepped", half=True) / (4 * _STEPS)
    assert amp == pytest.approx(fp32 / 2, rel=0.15)


def test_what_cuda_autocast_runs_in_fp32_runs_in_fp32_in_the_memory_step() -> None:
    build = _build_signatures()
    import torch
    import torch.nn.functional as F

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = F.linear(x, w)
        # CPU's autocast keeps a layer norm's output in bfloat16; CUDA's runs it in fp32.
        assert F.layer_norm(h, (8,)).dtype == torch.bfloat16
        with build._CudaAutocastFp32():
            assert F.linear(x, w).dtype == torch.bfloat16
            assert F.layer_norm(h, (8,)).dtype == torch.float32
            assert h.softmax(-1).dtype == torch.float32
            assert F.log_softmax(h, -1).dtype == torch.float32
            assert F.gelu(h).dtype == torch.bfloat16  # elementwise: the input's dtype


@pytest.mark.parametrize("name", sorted(builtin()))
def test_a_mixed_precision_step_keeps_between_half_and_all_of_fp32s_bytes(name: str) -> None:
    entry = _entries()[name]
    fp32, amp = entry["activation_bytes_per_sample"], entry["activation_bytes_per_sample_amp"]
    assert 0.45 * fp32 <= amp <= fp32


def test_what_stays_fp32_under_autocast_is_what_keeps_mixed_precision_above_half() -> None:
    ratio = {k: e["activation_bytes_per_sample_amp"] / e["activation_bytes_per_sample"]
             for k, e in _entries().items()}
    # ResNet-50 keeps convolution and batch-norm outputs: all half precision under autocast.
    assert ratio["cnn-classifier"] == pytest.approx(0.5, abs=0.05)
    # GPT-2 ends in 50257 log-probabilities a token, fp32 under autocast with their gradient;
    # Transformer-XL's attention scores go through an fp32 softmax.
    assert ratio["decoder-only"] > 0.6 and ratio["transformer-xl"] > 0.6


def _per_sample_bytes(monkeypatch: pytest.MonkeyPatch, factory: Any, batch: int) -> float:
    build = _build_signatures()
    monkeypatch.setitem(build.ARCHITECTURES, "probe", (factory, frames, batch, "probe",
                                                       ["probe"]))
    entry = build.profile_architecture("probe")
    return float(entry["bytes_per_flop"] * entry["flops_per_sample"])


def test_a_layer_called_every_frame_pays_its_weights_per_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 50 calls a step read the 256 KB weight and sum a 256 KB gradient each: a step's cost,
    # not a sample's. Counted per sample, batch 2 said ~20x batch 8's bytes (Tacotron2's
    # decoder: 100 GB a sample, its per-frame layers' weights).
    small = _per_sample_bytes(monkeypatch, frame_loop, 2)
    large = _per_sample_bytes(monkeypatch, frame_loop, 8)
    assert small == pytest.approx(large, rel=0.1)
    # What a sample moves: its frames in and out of the layer, forward and backward, and the
    # gradient of each frame's slice, which autograd builds as a zero-filled tensor of all 50
    # frames and sums into the input's: O(frames^2), as on a GPU.
    assert 50 * 256 * 4 * 2 < large < 50 * 50 * 256 * 4 * 4


def test_a_recurrent_layers_weights_leave_the_per_sample_bytes_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The LSTM's weights are counted per time step with the step's bytes; they were also taken
    # out of the per-sample bytes twice (once as the fused operator's bytes, once as weights
    # read and written once a step), so a sample's bytes shrank as the batch did (GNMT's were
    # 44 % low at its census batch).
    small = _per_sample_bytes(monkeypatch, recurrent, 2)
    large = _per_sample_bytes(monkeypatch, recurrent, 8)
    assert small == pytest.approx(large, rel=0.1)
    # at least the layer's 50 outputs and their gradients, fp32
    assert large > 50 * 256 * 4 * 2


def test_every_shipped_signature_answers_to_the_names_its_builder_gives_it() -> None:
    # A build of one architecture (--only) keeps the others' entries as they were written: a
    # name list changed in the builder reaches the file only when that entry is rebuilt, and a
    # stale one decides which signature a profile's name picks.
    pytest.importorskip("torch")
    import sys

    sys.path.insert(0, str(SIGNATURES_PATH.parents[2] / "scripts"))
    import build_signatures

    for name, entry in _entries().items():
        assert entry["match"] == build_signatures.ARCHITECTURES[name][4], name
