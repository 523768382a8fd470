"""``R.call_tir_inplace`` and the in-place key/value cache write kernels
(``workbench.topi.nn.kv_cache``): results against numpy, the cache written where it lies."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.relax import BlockBuilder
from workbench.relax.struct_info import TensorStructInfo
from workbench.topi.nn.kv_cache import kv_cache_write

NEW = (1, 3, 2, 4)


def _cache_shape(layout: str) -> tuple[int, ...]:
    return (1, 8, 2, 4) if layout == "BSNH" else (1, 2, 4, 8)


def _module(layout: str) -> wb.IRModule:
    cs = _cache_shape(layout)
    bb = BlockBuilder()
    c = relax.Var("c", TensorStructInfo(cs, "float32"))
    x = relax.Var("x", TensorStructInfo(NEW, "float32"))
    p = relax.Var("p", TensorStructInfo((1,), "int64"))
    with bb.function("main", [c, x, p]):
        with bb.dataflow():
            gv = bb.add_func(kv_cache_write(cs, NEW, layout), "write")
            y = bb.emit(relax.call_tir_inplace(gv, [c, x, p], 0, TensorStructInfo(cs, "float32")))
            z = bb.emit(relax.op.multiply(y, relax.const(2.0, "float32")))
            out = bb.emit_output(relax.Tuple((y, z)))
        bb.emit_func_output(out)
    return bb.get()


def _expected(cache: np.ndarray, new: np.ndarray, pos: int, layout: str) -> np.ndarray:
    ref = cache.copy()
    t = ref.shape[1] if layout == "BSNH" else ref.shape[3]
    rows = [s for s in range(new.shape[1]) if 0 <= pos + s < t]
    for s in rows:
        if layout == "BSNH":
            ref[:, pos + s] = new[:, s]
        else:
            ref[:, :, :, pos + s] = new[:, s]
    return ref


@pytest.mark.parametrize("layout", ["BSNH", "BNHT"])
def test_cache_written_in_place_on_the_vm(layout):
    vm = relax.VirtualMachine(relax.build(_module(layout), "llvm"), wb.cpu())
    rng = np.random.default_rng(0)
    cache_np = rng.standard_normal(_cache_shape(layout)).astype("float32")
    cache = wb.nd.array(cache_np)
    ref = cache_np
    # pos 6: the row past the capacity (8) is dropped, nothing written outside the cache
    for pos in (0, 3, 6):
        new = rng.standard_normal(NEW).astype("float32")
        y, z = vm["main"](cache, wb.nd.array(new), wb.nd.array(np.array([pos], "int64")))
        ref = _expected(ref, new, pos, layout)
        assert y is cache, "the in-place output must be the caller's cache itself"
        np.testing.assert_array_equal(cache.numpy(), ref)
        np.testing.assert_array_equal(z.numpy(), 2 * ref)


def test_rewrite_allocates_nothing_for_the_inplace_output():
    lowered = relax.build(_module("BSNH"), "llvm").lowered_mod["main"]
    text = str(lowered)
    assert "cls.write(c, x, p)" in text
    assert "lv: R.Tensor((1, 8, 2, 4), dtype=\"float32\") = c" in text
    assert text.count("alloc_tensor") == 1  # the multiply's output only


def test_printer_and_numpy_evaluator():
    mod = _module("BNHT")
    assert "R.call_tir_inplace(cls.write, (c, x, p), inplace_indices=0, out_sinfo=" in str(mod)
    rng = np.random.default_rng(1)
    cache = rng.standard_normal(_cache_shape("BNHT")).astype("float32")
    new = rng.standard_normal(NEW).astype("float32")
    y, z = relax.testing.evaluate_numpy(mod, "main", cache.copy(), new, np.array([2], "int64"))
    np.testing.assert_array_equal(y, _expected(cache, new, 2, "BNHT"))


def test_argument_errors():
    cs = _cache_shape("BSNH")
    bb = BlockBuilder()
    gv = bb.add_func(kv_cache_write(cs, NEW, "BSNH"), "write")
    c = relax.Var("c", TensorStructInfo(cs, "float32"))
    x = relax.Var("x", TensorStructInfo(NEW, "float32"))
    out = TensorStructInfo(cs, "float32")
    with pytest.raises(ValueError, match="inplace index 5"):
        relax.call_tir_inplace(gv, [c, x], 5, out)
    with pytest.raises(ValueError, match="2 inplace_indices for 1 outputs"):
        relax.call_tir_inplace(gv, [c, x], [0, 1], out)
    with pytest.raises(ValueError, match="use call_tir"):
        relax.call_tir_inplace(gv, [c, x], -1, out)
    with pytest.raises(ValueError, match="a BNHT cache for new rows"):
        kv_cache_write(cs, NEW, "BNHT")
    with pytest.raises(ValueError, match="layout must be one of"):
        kv_cache_write(cs, NEW, "BHSD")
