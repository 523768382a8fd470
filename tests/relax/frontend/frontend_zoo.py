"""The models the importer tests run, built once per test session.

Every model is its real architecture with random weights (nothing is downloaded): torchvision's
ResNet-18/50, MobileNetV2, MobileNetV3 (small), EfficientNet-B0 and ViT-B/16, a BERT-style
encoder (``nn.TransformerEncoderLayer`` with a key padding mask) and a GPT-2-style decoder
(token + position embedding, causal attention with a ``tril`` buffer, LayerNorm, GELU, output
projection tied to the token embedding). Images are small (64x64; 32x32 for ViT, still 16x16
patches) to keep the untuned kernels quick.

Random weights are made realistic so outputs are O(1) and a wrong kernel shows: batch norm
statistics are calibrated on random batches in training mode, then affine parameters are
randomised, and classifier heads (zero- or 0.01-initialised in torchvision) get PyTorch's
default Linear init. ``exported(name)`` / ``onnx_model(name)`` / ``expected(name)`` are cached,
so the torch and ONNX tests share one export of each model.
"""
from __future__ import annotations

import functools
import io
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

torch = __import__("pytest").importorskip("torch")
nn = torch.nn
F = torch.nn.functional

IMAGE_MODELS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3", "efficientnet_b0",
                "vit_b_16")
MODELS = IMAGE_MODELS + ("bert", "gpt2")
RTOL = ATOL = 1e-4


class BertEncoder(nn.Module):
    """Token + position embeddings, LayerNorm, two ``nn.TransformerEncoderLayer`` s (GELU,
    batch first) run with ``src_key_padding_mask``."""

    def __init__(self, vocab: int = 1000, d: int = 64, heads: int = 4, layers: int = 2,
                 ff: int = 128, max_len: int = 32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, ids: Any, padding_mask: Any) -> Any:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.tok(ids) + self.pos(pos))
        return self.encoder(x, src_key_padding_mask=padding_mask)


class GPT2Block(nn.Module):
    def __init__(self, d: int, heads: int, max_len: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.heads = heads
        causal = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("bias", causal.view(1, 1, max_len, max_len), persistent=False)

    def forward(self, x: Any) -> Any:
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        hd = d // self.heads
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~self.bias[:, :, :t, :t], float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    """GPT-2's decoder at a small size: token + position embedding, causal blocks, final
    LayerNorm and an output projection tied to the token embedding."""

    def __init__(self, vocab: int = 1000, d: int = 64, heads: int = 4, layers: int = 2,
                 max_len: int = 32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_len, d)
        self.h = nn.ModuleList(GPT2Block(d, heads, max_len) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids: Any) -> Any:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


@dataclass
class Case:
    name: str
    model: Any
    args: tuple


def _realistic(model: Any, sample: Any, seed: int) -> Any:
    """Random batch-norm affine parameters, statistics calibrated to them (so activations
    stay well scaled through deep stacks), default-init heads."""
    g = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, nn.Linear) and name.split(".")[0] in ("fc", "classifier", "heads"):
                m.reset_parameters()
        for m in bns:
            m.weight.uniform_(0.8, 1.2, generator=g)
            m.bias.normal_(0.0, 0.1, generator=g)
            m.reset_running_stats()
            m.momentum = None  # a cumulative average over the calibration batches
        for m in model.modules():
            # Residual branches end small, as in trained ResNets (cf. zero_init_residual), so
            # the residual stream of 16 blocks does not grow until float32 rounding alone
            # (PyTorch vs onnxruntime) exceeds the 1e-4 tolerance.
            last = getattr(m, "bn3", None) if type(m).__name__ == "Bottleneck" else \
                getattr(m, "bn2", None) if type(m).__name__ == "BasicBlock" else None
            if last is not None:
                last.weight.uniform_(0.2, 0.4, generator=g)
        if bns:
            model.eval()
            for m in bns:
                m.train()  # only batch norm learns statistics (no dropout, no drop path)
            for _ in range(2):
                model(torch.randn(sample.shape, generator=g))
    return model.eval()


@functools.lru_cache(maxsize=None)
def case(name: str) -> Case:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if name == "bert":
        ids = torch.randint(0, 1000, (2, 16), generator=g)
        mask = torch.zeros(2, 16, dtype=torch.bool)
        mask[1, 11:] = True  # the second sequence has 5 padding tokens
        return Case(name, BertEncoder().eval(), (ids, mask))
    if name == "gpt2":
        return Case(name, GPT2().eval(), (torch.randint(0, 1000, (2, 16), generator=g),))
    import torchvision
    tv = torchvision.models
    if name == "vit_b_16":
        model, size = tv.vit_b_16(image_size=32), 32
    elif name == "mobilenet_v3":
        model, size = tv.mobilenet_v3_small(), 64
    else:
        model, size = getattr(tv, name)(), 64
    x = torch.randn(1, 3, size, size, generator=g)
    return Case(name, _realistic(model, torch.randn(4, 3, size, size), seed=2), (x,))


@functools.lru_cache(maxsize=None)
def exported(name: str) -> Any:
    c = case(name)
    with torch.no_grad():
        return torch.export.export(c.model, c.args)


@functools.lru_cache(maxsize=None)
def expected(name: str) -> list[np.ndarray]:
    c = case(name)
    with torch.no_grad():
        out = c.model(*c.args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.numpy() for o in outs]


@functools.lru_cache(maxsize=None)
def onnx_model(name: str) -> Any:
    """The model exported by ``torch.onnx.export`` (the dynamo exporter, from the same
    ExportedProgram the torch tests import)."""
    c = case(name)
    with warnings.catch_warnings(), _quiet():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(exported(name), c.args, dynamo=True, verbose=False)
    return program.model_proto


@functools.lru_cache(maxsize=None)
def onnx_model_legacy(name: str) -> Any:
    """The model exported by the TorchScript-based exporter (``dynamo=False``, opset 17):
    the graphs older ONNX files have (Identity weights, Shape/Gather/Concat shape arithmetic,
    folded batch norm)."""
    import onnx
    c = case(name)
    buf = io.BytesIO()
    with warnings.catch_warnings(), _quiet():
        warnings.simplefilter("ignore")
        torch.onnx.export(c.model, c.args, buf, dynamo=False, opset_version=17)
    return onnx.load_from_string(buf.getvalue())


class _quiet:
    """Silence the exporters' progress lines on stdout."""

    def __enter__(self) -> None:
        import contextlib
        self._cm = contextlib.redirect_stdout(io.StringIO())
        self._cm.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)


def onnxruntime_outputs(model: Any, args: tuple) -> list[np.ndarray]:
    """onnxruntime's outputs for ``model``: a ModelProto, or the path of a model file (one
    with external data: past protobuf's 2 GB a proto cannot be serialised)."""
    import onnxruntime as ort
    source = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    return sess.run(None, feeds)


def run_vm(exe: Any, args: tuple, params: list | None = None) -> list[np.ndarray]:
    import workbench as wb
    from workbench import relax
    vm = relax.VirtualMachine(exe, wb.cpu())
    inputs = [wb.nd.array(a.numpy() if hasattr(a, "numpy") else a) for a in args]
    out = vm["main"](*inputs, *(params or []))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.numpy() for o in outs]


def assert_close(got: np.ndarray, want: np.ndarray, what: str) -> float:
    """``got`` matches ``want`` to 1e-4 relative / 1e-4 absolute; returns the max abs error."""
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)
    return float(np.abs(got.astype("float64") - want).max()) if got.size else 0.0
