"""``PadMatmulColumns``: products with a constant weight whose columns are not whole vector
registers compute zero-padded columns and slice them off, in one fused kernel."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.relax import op as R
from workbench.relax.transform import PadMatmulColumns

RNG = np.random.default_rng(0)


def _linear(shape: tuple, n: int, transposed: bool = True, runtime_weight: bool = False):  # noqa: ANN202
    k = shape[-1]
    w = RNG.standard_normal((n, k) if transposed else (k, n)).astype("float32")
    b = RNG.standard_normal(n).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
    params = [x]
    if runtime_weight:
        wv = relax.Var("w", relax.TensorStructInfo(w.shape, "float32"))
        params.append(wv)
    with bb.function("main", params):
        with bb.dataflow():
            wexpr = params[1] if runtime_weight else relax.const(w)
            rhs = R.permute_dims(wexpr, [1, 0]) if transposed else wexpr
            y = bb.emit(R.matmul(x, rhs))
            y = bb.emit(R.nn.relu(R.add(y, relax.const(b))))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    wt = w.T if transposed else w
    return bb.get(), lambda xv: np.maximum(xv @ wt + b, 0.0), w


def _ops(mod: relax.IRModule) -> list[str]:
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and hasattr(b.value.op, "name")]


@pytest.mark.parametrize("shape, n, transposed", [((1, 1280), 1000, True),
                                                  ((2, 5, 96), 100, False)])
def test_padded_product_matches_numpy_in_one_kernel(shape, n, transposed):
    mod, ref, _ = _linear(shape, n, transposed)
    p = PadMatmulColumns(lanes=16)
    out = p(mod)
    assert p.padded == 1
    assert _ops(out).count("relax.strided_slice") == 1
    padded = next(b.value for blk in out["main"].body.blocks for b in blk.bindings
                  if isinstance(b.value, relax.Call) and b.value.op.name == "relax.matmul")
    assert padded.struct_info.values[-1].value == -(-n // 16) * 16
    exe = relax.build(mod, "llvm -mcpu=znver4")
    assert len(exe.kernel_names) == 1, exe.kernel_names      # product, slice and epilogue
    if not wb.Target("llvm").has_feature("avx512f"):
        pytest.skip("this host cannot run -mcpu=znver4 code (the pass and the build checked)")
    x = RNG.standard_normal(shape).astype("float32")
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x)).numpy()
    np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=1e-4)


def test_rows_4k_apart_are_left_alone_the_schedule_packs_them():
    """1,024 float32 columns put every row of the weight 4 KiB from the next; the default
    schedule packs a constant weight into panels whatever the rows (AnnotateConstantParams),
    so the product is not padded, and its weight is packed at compile time."""
    for shape in ((1, 64), (32, 64), (1, 64, 64)):
        mod, _, _ = _linear(shape, 1024)
        p = PadMatmulColumns(lanes=16)
        p(mod)
        assert p.padded == 0, shape
    mod, ref, _ = _linear((1, 64), 1024)
    exe = relax.build(mod, "llvm")
    packed = [f for _, f in exe.lowered_mod.items() if "layout_rewrites" in
              getattr(f, "attrs", {})]
    assert len(packed) == 1
    x = RNG.standard_normal((1, 64)).astype("float32")
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x)).numpy()
    np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=1e-4)


def test_whole_registers_narrow_products_and_runtime_weights_are_left_alone():
    for shape, n, lanes, kw in (((1, 64), 1008, 16, {}), ((1, 64), 40, 16, {}),
                                ((1, 64), 1000, 8, {}), ((1, 64), 1000, 16,
                                                          {"runtime_weight": True})):
        mod, _, _ = _linear(shape, n, **kw)
        p = PadMatmulColumns(lanes=lanes)
        p(mod)
        assert p.padded == 0, (n, lanes, kw)
    mod, _, _ = _linear((1, 64), 1001)
    p = PadMatmulColumns("llvm -mcpu=haswell")           # AVX2: 8 lanes
    assert "relax.strided_slice" in _ops(p(mod)) and p.padded == 1
    with pytest.raises(ValueError, match="lanes"):
        PadMatmulColumns(lanes=0)
