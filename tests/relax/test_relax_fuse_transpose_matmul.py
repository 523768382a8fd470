"""FuseTransposeMatmul (TVM's pass): ``matmul(x, permute_dims(w))`` becomes one NT_matmul
kernel reading ``w`` in place; results checked against numpy, and the cases it leaves alone."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax, tir
from workbench.relax import op
from workbench.transform import Sequential

T = relax.transform


def _linear(x_shape, w_shape, axes=None, keep_transpose=False):
    x = relax.Var("x", relax.TensorStructInfo(x_shape, "float32"))
    w = relax.Var("w", relax.TensorStructInfo(w_shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            wt = bb.emit(op.permute_dims(w, axes))
            y = bb.emit(op.nn.relu(op.matmul(x, wt)))
            out = bb.emit_output(bb.normalize(relax.Tuple([y, wt])) if keep_transpose else y)
        bb.emit_func_output(out)
    return bb.get()


def _calls(mod):
    return [b.value for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call)]


def test_fused_kernel_reads_the_weight_in_place_and_matches_numpy():
    n = tir.Var("n", "int64")
    mod = _linear((2, n, 16), (8, 16))
    p = T.FuseTransposeMatmul()
    fused = p(mod)
    assert p.fused == 1 and "NT_matmul" in [gv.name_hint for gv in fused.get_global_vars()]
    call = [c for c in _calls(fused) if c.op.name == "relax.call_tir"][0]
    assert call.args[1].fields[1] is mod["main"].params[1]        # w itself, not its transpose
    pipeline = Sequential([T.FuseTransposeMatmul(), T.DeadCodeElimination(),
                           relax.get_pipeline("zero")])
    exe = wb.compile(mod, "llvm", relax_pipeline=Sequential(
        [pipeline, relax.get_pipeline("default_build")]))
    assert not any("transpose" in k for k in exe.kernel_names), exe.kernel_names
    vm = relax.VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(4)
    w = rng.standard_normal((8, 16)).astype("float32")
    for rows in (1, 3):
        x = rng.standard_normal((2, rows, 16)).astype("float32")
        got = vm["main"](wb.nd.array(x), wb.nd.array(w)).numpy()
        np.testing.assert_allclose(got, np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-5)


def test_explicit_axes_and_a_transpose_used_elsewhere():
    mod = _linear((4, 16), (8, 16), axes=[1, 0], keep_transpose=True)
    fused = T.FuseTransposeMatmul()(mod)
    ops = [c.op.name for c in _calls(fused)]
    assert "relax.permute_dims" in ops and "relax.matmul" not in ops   # wT is still returned
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 16)).astype("float32")
    w = rng.standard_normal((8, 16)).astype("float32")
    exe = wb.compile(fused, "llvm")
    y, wt = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x), wb.nd.array(w))
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(wt.numpy(), w.T)


@pytest.mark.parametrize("x_shape, w_shape, axes", [
    ((4, 16), (16, 8), [0, 1]),            # not a transpose
    ((2, 4, 16), (2, 8, 16), [0, 2, 1]),   # a batched weight (TVM fuses it; not done here)
    ((16,), (8, 16), None),                # 1-d x
])
def test_other_products_are_left_unchanged(x_shape, w_shape, axes):
    mod = _linear(x_shape, w_shape, axes)
    p = T.FuseTransposeMatmul()
    assert p(mod) is mod and p.fused == 0
