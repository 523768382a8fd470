"""Transformer layers compile to few kernels (issue 22): a linear layer's product, bias,
activation (GELU exact and tanh, ReLU) and residual add are one kernel whose weight is packed
into the micro-kernel's panels at compile time; a residual add and the layer norm after it are
one row-reduction kernel; the flatten / unflatten views PyTorch puts around ``nn.Linear`` cancel
(``SinkReshapes``). Every result is checked against PyTorch (float64 where rounding matters)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.codegen.vector_math import _libmvec
from workbench.relax import op as R
from workbench.relax.transform import LegalizeOps, SinkReshapes
from workbench.relax.transform.annotate_tir_op_pattern import is_row_normalization
from workbench.tir.functor import post_order_visit
from workbench.tir.stmt import Block
from workbench.tir.transform.remove_weight_layout_rewrite_block import PREPROC_ANNOTATION

torch = pytest.importorskip("torch")
from workbench.relax.frontend.torch import from_exported_program  # noqa: E402

nn, F = torch.nn, torch.nn.functional
TARGET = "llvm -num-cores=2"


def _compile(model, *shapes):  # noqa: ANN001, ANN202
    """(executable, VM outputs as numpy, PyTorch outputs) for ``model`` on random inputs."""
    torch.manual_seed(0)
    model = model.eval()
    args = tuple(torch.randn(*s) for s in shapes)
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)   # plain aten ops, not the fused layer
    try:
        ep = torch.export.export(model, args)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    exe = relax.build(from_exported_program(ep), TARGET)
    out = relax.VirtualMachine(exe, wb.cpu())["main"](*[wb.nd.array(a.numpy()) for a in args])
    got = out[0] if isinstance(out, (list, tuple)) else out
    with torch.no_grad():
        want = model(*args)
    return exe, got.numpy(), want.numpy(), args


def _kernels(exe) -> list[str]:  # noqa: ANN001
    return [k for k in exe.kernel_names if not k.startswith("shape_func")]


def _blocks(func) -> list[Block]:  # noqa: ANN001
    out: list[Block] = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, Block) else None)
    return out


def _assert_weight_prepacked(exe, kernel: str, k: int, n: int) -> None:  # noqa: ANN001
    """``kernel`` takes its (k, n) weight packed into panels [n / V, k, V] and has no block
    that packs it at run time."""
    func = exe.lowered_mod[kernel]
    rewrites = func.attrs.get("layout_rewrites")
    assert rewrites, f"{kernel}: no weight packed at compile time"
    assert tuple(getattr(d, "value", d) for d in rewrites[0][1]) == (k, n)
    packed = func.buffer_map[func.params[rewrites[0][0]]]
    dims = [getattr(d, "value", d) for d in packed.shape]
    assert len(dims) == 3 and dims[1] == k and dims[0] * dims[2] == n, dims
    assert not any(PREPROC_ANNOTATION in b.annotations for b in _blocks(func))


class _Linear(nn.Module):
    def __init__(self, k: int, n: int, act: str) -> None:
        super().__init__()
        self.fc, self.act = nn.Linear(k, n), act

    def forward(self, x):  # noqa: ANN001, ANN201
        y = self.fc(x)
        if self.act == "residual":
            return x + y
        return {"gelu": F.gelu, "relu": F.relu,
                "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[self.act](y)


@pytest.mark.parametrize("act, kernel, math", [("gelu", "fused_matmul_add_gelu", "erff"),
                                               ("gelu_tanh", "fused_matmul_add_gelu_tanh",
                                                "inline"),
                                               ("relu", "fused_matmul_add_relu", None)])
def test_linear_bias_activation_is_one_kernel_with_a_prepacked_weight(act, kernel, math):
    exe, got, want, _ = _compile(_Linear(64, 256, act), (2, 32, 64))
    assert _kernels(exe) == [kernel]
    _assert_weight_prepacked(exe, kernel, 64, 256)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
    ll = "".join(m.get_source("ll") for m in exe.imported_modules)
    if math == "inline":
        # tanh-GELU is x * sigmoid(2u): its exp inline on whole vectors, no math call at all
        assert "llvm.fmuladd.v" in ll and not re.search(r"tanhf|_ZGV|llvm\.exp", ll)
    elif math is not None and _libmvec() is not None:
        # the epilogue's erf runs on whole vectors (libmvec), not element by element
        assert re.search(rf'@"?_ZGV\w+_{math}"?\(<', ll), f"no vector {math} in {kernel}"
        assert not re.search(rf'@"?{math}"?\(float', ll), f"scalar {math} calls in {kernel}"


def test_linear_bias_residual_add_is_one_kernel():
    exe, got, want, _ = _compile(_Linear(96, 96, "residual"), (1, 48, 96))
    assert _kernels(exe) == ["fused_matmul_add_add1"]
    _assert_weight_prepacked(exe, "fused_matmul_add_add1", 96, 96)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


class _AddNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x, r):  # noqa: ANN001, ANN201
        return self.norm(x + r)


def test_residual_add_and_layer_norm_are_one_row_reduction_kernel():
    exe, got, want, _ = _compile(_AddNorm(768), (1, 128, 768), (1, 128, 768))
    assert _kernels(exe) == ["fused_add_layer_norm"]
    func = exe.lowered_mod["fused_add_layer_norm"]
    assert not any(b.name_hint == "T_add" for b in _blocks(func))   # the sum is inlined
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def test_layer_norm_keeps_the_variance_of_rows_with_a_large_mean():
    """Sum and sum of squares of raw float32 values lose a row's variance when its mean is 100
    times its spread (about 6e-3 off); the sums of values shifted by the row's first element
    do not."""
    model = _AddNorm(768).eval()
    torch.manual_seed(1)
    x, r = torch.randn(1, 64, 768) + 100.0, torch.randn(1, 64, 768)
    ep = torch.export.export(model, (x, r))
    exe = relax.build(from_exported_program(ep), TARGET)
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x.numpy()),
                                                      wb.nd.array(r.numpy()))[0].numpy()
    with torch.no_grad():
        want = F.layer_norm((x + r).double(), (768,), model.norm.weight.double(),
                            model.norm.bias.double()).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-5)


@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_transformer_encoder_layer_fuses_every_linear_epilogue(activation):
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0,
                                       activation=activation, batch_first=True)
    exe, got, want, _ = _compile(layer, (1, 16, 64))
    kernels = _kernels(exe)
    # the MLP's first product with bias and activation; the attention output projection and
    # the MLP's second product, each with bias and residual add: no standalone bias, GELU or
    # add kernel, no copy between a product and its epilogue
    assert any(k.startswith("fused_matmul") and k.endswith(f"_{activation}")
               for k in kernels), kernels
    assert sum(1 for k in kernels if k.startswith("fused_matmul") and
               k.count("_add") == 2) == 2, kernels
    assert not any(k.startswith(("add", "gelu", "relu")) for k in kernels), kernels
    assert sum(1 for k in kernels if "layer_norm" in k) == 1       # one kernel, called twice
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


# ---- SinkReshapes on Relax directly -------------------------------------------------------------

RNG = np.random.default_rng(0)


def _f32(*shape: int) -> relax.TensorStructInfo:
    return relax.TensorStructInfo(shape, "float32")


def _ops(mod) -> list[str]:  # noqa: ANN001
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and hasattr(b.value.op, "name")]


def _run(mod, *inputs: np.ndarray) -> np.ndarray:  # noqa: ANN001
    exe = relax.build(mod, TARGET)
    return relax.VirtualMachine(exe, wb.cpu())["main"](*[wb.nd.array(a) for a in inputs]).numpy()


def _flattened_linear(bias_shape: tuple[int, ...]):  # noqa: ANN202
    """``gelu(view(matmul(view(x, [12, 8]), W) + bias, [3, 4, 16]))`` and its numpy value."""
    w = RNG.standard_normal((8, 16)).astype("float32")
    bias = RNG.standard_normal(bias_shape).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", _f32(3, 4, 8))
    with bb.function("main", [x]):
        with bb.dataflow():
            flat = bb.emit(R.reshape(x, (12, 8)))
            y = bb.emit(R.add(bb.emit(R.matmul(flat, relax.const(w))), relax.const(bias)))
            out = bb.emit_output(R.nn.gelu(bb.emit(R.reshape(y, (3, 4, 16)))))
        bb.emit_func_output(out)

    def ref(xv: np.ndarray) -> np.ndarray:
        from math import erf
        z = (xv.reshape(12, 8) @ w + bias).reshape(3, 4, 16).astype("float64")
        return 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))
    return bb.get(), ref


def test_sink_reshapes_cancels_the_views_around_a_linear_layer():
    mod, ref = _flattened_linear((16,))
    p = SinkReshapes()
    out = p(mod)
    assert p.sunk >= 3
    from workbench.relax.transform import DeadCodeElimination
    assert "relax.reshape" not in _ops(DeadCodeElimination()(out))
    x = RNG.standard_normal((3, 4, 8)).astype("float32")
    np.testing.assert_allclose(_run(out, x), ref(x), rtol=0, atol=1e-4)
    exe = relax.build(mod, TARGET)
    assert _kernels(exe) == ["fused_matmul_add_gelu"]


def test_sink_reshapes_keeps_a_bias_that_broadcasts_across_reshaped_dims():
    """A (12, 1) bias is per flattened row: moved past the unflattening it would pair with the
    wrong rows, so the add stays before the view (and the result is unchanged)."""
    mod, ref = _flattened_linear((12, 1))
    out = SinkReshapes()(mod)
    ops = _ops(out)
    assert ops.index("relax.add") < max(i for i, o in enumerate(ops) if o == "relax.reshape")
    x = RNG.standard_normal((3, 4, 8)).astype("float32")
    np.testing.assert_allclose(_run(out, x), ref(x), rtol=0, atol=1e-4)


@pytest.mark.parametrize("shared", [None, "product", "view"])
def test_hoisting_a_view_never_computes_a_shared_product_twice(shared):
    """``x + view(p)`` moves the view up to the product's input only when neither ``p`` nor
    the view has another use; with a second use the product would be computed twice, so the
    graph keeps it."""
    w = RNG.standard_normal((8, 8)).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", _f32(1, 6, 8))
    t = relax.Var("t", _f32(6, 8))
    with bb.function("main", [x, t]):
        with bb.dataflow():
            p = bb.emit(R.matmul(t, relax.const(w)))
            view = bb.emit(R.reshape(p, (1, 6, 8)))
            s = bb.emit(R.add(x, view))
            other = {None: None, "product": p, "view": view}[shared]
            out = bb.emit_output(s if other is None else R.multiply(s, other))
        bb.emit_func_output(out)
    out = SinkReshapes()(bb.get())
    from workbench.relax.transform import DeadCodeElimination
    ops = _ops(DeadCodeElimination()(out))
    assert ops.count("relax.matmul") == 1
    if shared is None:      # hoisted: the add follows the product directly
        assert ops[-2:] == ["relax.matmul", "relax.add"]
    xv = RNG.standard_normal((1, 6, 8)).astype("float32")
    tv = RNG.standard_normal((6, 8)).astype("float32")
    want = xv + (tv @ w).reshape(1, 6, 8)
    if shared is not None:
        want = want * (tv @ w if shared == "product" else (tv @ w).reshape(1, 6, 8))
    np.testing.assert_allclose(_run(out, xv, tv), want, rtol=1e-5, atol=1e-4)


def test_only_plain_row_reductions_take_elementwise_producers():
    def func(body, *shapes):  # noqa: ANN001, ANN202
        bb = relax.BlockBuilder()
        params = [relax.Var(f"p{i}", _f32(*s)) for i, s in enumerate(shapes)]
        with bb.function("main", params):
            with bb.dataflow():
                out = bb.emit_output(body(*params))
            bb.emit_func_output(out)
        mod = LegalizeOps()(bb.get())
        return next(f for n, f in mod.items() if not isinstance(f, relax.Function))
    assert is_row_normalization(func(lambda x, g, b: R.nn.layer_norm(x, g, b, axes=[-1]),
                                     (4, 16), (16,), (16,)))
    assert is_row_normalization(func(lambda x: R.nn.softmax(x, axis=-1), (4, 16)))
    assert not is_row_normalization(func(lambda a, b: R.matmul(a, b), (4, 16), (16, 8)))
    assert not is_row_normalization(func(lambda a: R.sum(a, axis=[1]), (4, 16)))
