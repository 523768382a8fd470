"""``AnnotateConstantParams``: which kernel parameters are constants at every call, and what
the default schedule does with them (a one-row product packs a constant weight, not a run-time
one)."""
from __future__ import annotations

import numpy as np

import workbench as wb
from workbench import relax
from workbench.dlight.analysis import CONSTANT_PARAMS_ATTR
from workbench.relax import BlockBuilder
from workbench.relax.struct_info import TensorStructInfo
from workbench.relax.transform.annotate_constant_params import AnnotateConstantParams
from workbench.topi.nn.kv_cache import kv_cache_write

RNG = np.random.default_rng(0)


def _sinfo(*shape):
    return TensorStructInfo(shape, "float32")


def test_constant_at_every_site_directly_or_through_a_var():
    bb = BlockBuilder()
    x = relax.Var("x", _sinfo(1, 8, 2, 4))
    y = relax.Var("y", _sinfo(1, 8, 2, 4))
    new = relax.const(RNG.standard_normal((1, 3, 2, 4)).astype("float32"))
    pos = relax.const(np.array([1], "int64"))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            f = bb.add_func(kv_cache_write((1, 8, 2, 4), (1, 3, 2, 4)), "write")
            bound = bb.emit(new)                      # a Var bound to a constant
            a = bb.emit(relax.call_tir_inplace(f, [x, bound, pos], 0, _sinfo(1, 8, 2, 4)))
            b = bb.emit(relax.call_tir_inplace(f, [y, new, pos], 0, _sinfo(1, 8, 2, 4)))
            out = bb.emit_output(relax.Tuple((a, b)))
        bb.emit_func_output(out)
    mod = bb.get()
    out = AnnotateConstantParams()(mod)
    assert out["write"].attrs[CONSTANT_PARAMS_ATTR] == (1, 2)
    assert CONSTANT_PARAMS_ATTR not in mod["write"].attrs      # the input is not modified


def test_a_runtime_argument_at_one_site_is_not_constant():
    bb = BlockBuilder()
    x = relax.Var("x", _sinfo(1, 8, 2, 4))
    r = relax.Var("r", _sinfo(1, 3, 2, 4))
    new = relax.const(RNG.standard_normal((1, 3, 2, 4)).astype("float32"))
    pos = relax.const(np.array([0], "int64"))
    with bb.function("main", [x, r]):
        with bb.dataflow():
            f = bb.add_func(kv_cache_write((1, 8, 2, 4), (1, 3, 2, 4)), "write")
            a = bb.emit(relax.call_tir_inplace(f, [x, new, pos], 0, _sinfo(1, 8, 2, 4)))
            b = bb.emit(relax.call_tir_inplace(f, [a, r, pos], 0, _sinfo(1, 8, 2, 4)))
            out = bb.emit_output(b)
        bb.emit_func_output(out)
    out = AnnotateConstantParams()(bb.get())
    assert out["write"].attrs[CONSTANT_PARAMS_ATTR] == (2,)


def _one_row_linear(constant: bool):
    w = RNG.standard_normal((256, 64)).astype("float32")
    bb = BlockBuilder()
    x = relax.Var("x", _sinfo(1, 64))
    params = [x] if constant else [x, relax.Var("w", _sinfo(256, 64))]
    with bb.function("main", params):
        with bb.dataflow():
            weight = relax.const(w) if constant else params[1]
            out = bb.emit_output(relax.op.matmul(x, relax.op.permute_dims(weight)))
        bb.emit_func_output(out)
    return bb.get(), w


def test_one_row_product_packs_a_constant_weight_only():
    for constant in (True, False):
        mod, w = _one_row_linear(constant)
        exe = relax.build(mod, "llvm")
        packed = [n for n, f in exe.lowered_mod.items() if "layout_rewrites" in
                  getattr(f, "attrs", {})]
        assert len(packed) == (1 if constant else 0), (constant, packed)
        x = RNG.standard_normal((1, 64)).astype("float32")
        args = [wb.nd.array(x)] + ([] if constant else [wb.nd.array(w)])
        got = relax.VirtualMachine(exe, wb.cpu())["main"](*args).numpy()
        np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-5)
