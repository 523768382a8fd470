"""BlockBuilder: scopes, naming, normalisation (A-normal form), call_te/emit_te, add_func, and
whole models (an MLP and a small CNN) checked against hand-written numpy."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import relax, te, tir
from workbench.relax import op as R
from workbench.relax.testing import evaluate_numpy
from workbench.tir.function import PrimFunc

from legalized_runner import LegalizedRunner

T = relax.TensorStructInfo


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def test_emit_names_and_var_kinds():
    x = relax.Var("x", T((2, 3)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.exp(x))
            b = bb.emit(R.exp(a), name_hint="e")
            c = bb.emit_output(R.add(a, b))
        d = bb.emit(R.nn.relu(c))
        gv = bb.emit_func_output(d)
    assert (a.name_hint, b.name_hint, c.name_hint, d.name_hint) == ("lv", "e", "gv", "gv1")
    assert type(a) is relax.DataflowVar and type(c) is relax.Var and type(d) is relax.Var
    func = bb.get()["main"]
    assert isinstance(func.body.blocks[0], relax.DataflowBlock)
    assert type(func.body.blocks[1]) is relax.BindingBlock
    assert gv.name_hint == "main" and func.attrs["global_symbol"] == "main"
    assert func.ret_struct_info is d.struct_info


def test_nested_calls_are_normalised_into_bindings():
    x = relax.Var("x", T((2, 3)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(R.nn.relu(R.add(R.exp(x), x)))
        bb.emit_func_output(y)
    bs = _bindings(bb.get()["main"])
    assert [b.value.op.name for b in bs] == ["relax.exp", "relax.add", "relax.nn.relu"]
    for b in bs:
        assert all(isinstance(a, (relax.Var, relax.Constant)) for a in b.value.args)
        assert b.value.struct_info is not None


def test_params_given_to_emit_func_output_and_tuple_output():
    x = relax.Var("x", T((4,)))
    bb = relax.BlockBuilder()
    with bb.function("f"):
        a = bb.emit(R.exp(x))
        bb.emit_func_output([a, x], params=[x])
    f = bb.get()["f"]
    assert isinstance(f.body.body, relax.Tuple)
    assert isinstance(f.ret_struct_info, relax.TupleStructInfo)


def test_scope_errors():
    x = relax.Var("x", T((4,)))
    bb = relax.BlockBuilder()
    with pytest.raises(RuntimeError, match="emit_func_output"):
        with bb.function("f", [x]):
            bb.emit(R.exp(x))
    with pytest.raises(RuntimeError, match="not inside a function"):
        relax.BlockBuilder().emit(R.exp(x))
    bb = relax.BlockBuilder()
    with pytest.raises(RuntimeError, match="after the dataflow block"):
        with bb.function("g", [x]):
            with bb.dataflow():
                bb.emit_func_output(bb.emit(R.exp(x)))
    with pytest.raises(ValueError, match="needs struct info"):
        with relax.BlockBuilder().function("h", [relax.Var("y")]):
            pass


def test_call_te_adds_primfunc_and_emits_call_tir():
    n = tir.SizeVar("n", "int64")
    x = relax.Var("x", T((n, 4)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_te(lambda a: te.compute(a.shape, lambda i, j: a[i, j] * 2.0,
                                                name="double"), x)
            z = bb.emit_output(bb.call_te(lambda a: te.compute(a.shape, lambda i, j: a[i, j] * 2.0,
                                                                 name="double"), y))
        bb.emit_func_output(z)
    mod = bb.get()
    assert [k for k, f in mod.items() if isinstance(f, PrimFunc)] == ["double"]  # shared
    call = _bindings(mod["main"])[0].value
    assert relax.op.base.is_call_tir(call) and call.args[0].name_hint == "double"
    prim = mod["double"]
    assert prim.attrs["global_symbol"] == "double"
    # the kernel has its own symbolic dim, not the function's n
    assert all(d is not n for b in prim.buffer_map.values() for d in b.shape)
    out = LegalizedRunner(mod).run("main", np.ones((3, 4), "float32"))
    np.testing.assert_array_equal(out, np.full((3, 4), 4.0, "float32"))


def test_call_te_passes_unbound_dims_as_tir_vars():
    n = tir.SizeVar("n", "int64")
    x = relax.Var("x", T((n * 2,)))
    y = relax.Var("y", T((n,)))  # defines n for the function
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        z = bb.emit_te(lambda a: te.compute((n * 2,), lambda i: a[i] + 1.0, name="inc"), x)
        bb.emit_func_output(z)
    call = _bindings(bb.get()["main"])[0].value
    assert len(call.args) == 3 and call.args[2].values[0] is n
    prim = bb.get()["inc"]
    # the compound dim n * 2 became a plain var; n itself arrives as an int64 scalar
    assert [p.dtype for p in prim.params] == ["handle", "handle", "int64"]
    assert all(isinstance(d, tir.Var) for b in prim.buffer_map.values() for d in b.shape)
    x_np, y_np = np.arange(6, dtype="float32"), np.zeros(3, "float32")
    np.testing.assert_array_equal(LegalizedRunner(bb.get()).run("main", x_np, y_np), x_np + 1)
    np.testing.assert_array_equal(evaluate_numpy(bb.get(), "main", x_np, y_np), x_np + 1)


def test_add_func_unique_names_and_update_func():
    bb = relax.BlockBuilder()
    a = te.placeholder((4,), name="A")
    f1 = te.create_prim_func([a, te.compute((4,), lambda i: a[i] + 1.0, name="B")])
    b = te.placeholder((4,), name="A")
    f2 = te.create_prim_func([b, te.compute((4,), lambda i: b[i] * 3.0, name="B")])
    g1 = bb.add_func(f1, "k")
    g2 = bb.add_func(f2, "k")
    g3 = bb.add_func(f1, "other")  # structurally equal: reused
    assert (g1.name_hint, g2.name_hint, g3.name_hint) == ("k", "k1", "k")
    bb.update_func(g2, f1)
    assert bb.get()["k1"] is f1


def test_match_cast_defines_new_dims():
    x = relax.Var("x", T(None, "float32", 2))
    m = tir.SizeVar("m", "int64")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.match_cast(x, T((m, 3)))
        z = bb.emit(R.sum(y, axis=1))
        bb.emit_func_output(z)
    mod = bb.get()
    assert z.struct_info.values[0] is m
    arr = np.arange(12, dtype="float32").reshape(4, 3)
    np.testing.assert_allclose(evaluate_numpy(mod, "main", arr), arr.sum(1))
    with pytest.raises(ValueError, match="dimension 1 should be 3"):
        evaluate_numpy(mod, "main", np.zeros((4, 5), "float32"))


def test_if_branches_are_normalised():
    c = relax.Var("c", T((), "bool"))
    x = relax.Var("x", T((3,)))
    bb = relax.BlockBuilder()
    with bb.function("main", [c, x]):
        y = bb.emit(relax.If(c, R.exp(R.exp(x)), R.negative(x)))
        bb.emit_func_output(y)
    mod = bb.get()
    v = np.array([0.1, 0.2, 0.3], "float32")
    np.testing.assert_allclose(evaluate_numpy(mod, "main", np.array(True), v), np.exp(np.exp(v)),
                               rtol=1e-6)
    np.testing.assert_allclose(evaluate_numpy(mod, "main", np.array(False), v), -v)


def test_calling_another_relax_function_substitutes_dims():
    n = tir.SizeVar("n", "int64")
    bb = relax.BlockBuilder()
    a = relax.Var("a", T((n, 2)))
    with bb.function("helper", [a]):
        bb.emit_func_output(bb.emit(R.concat([a, a], axis=0)))
    x = relax.Var("x", T((5, 2)))
    with bb.function("main", [x]):
        y = bb.emit(relax.Call(bb.get().get_global_var("helper"), [x]))
        bb.emit_func_output(y)
    assert [d.value for d in y.struct_info.values] == [10, 2]
    arr = np.arange(10, dtype="float32").reshape(5, 2)
    np.testing.assert_array_equal(evaluate_numpy(bb.get(), "main", arr),
                                  np.concatenate([arr, arr]))


# ---- whole models ------------------------------------------------------------------------------

def build_mlp():
    n = tir.SizeVar("n", "int64")
    x = relax.Var("x", T((n, 8)))
    w1, b1 = relax.Var("w1", T((16, 8))), relax.Var("b1", T((16,)))
    w2 = relax.Var("w2", T((16, 4)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w1, b1, w2]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(R.linear(x, w1, b1)))
            y = bb.emit_output(R.nn.softmax(R.matmul(h, w2)))
        bb.emit_func_output(y)
    return bb.get()


def build_cnn():
    x = relax.Var("x", T((2, 3, 8, 8)))
    w = relax.Var("w", T((4, 3, 3, 3)))
    g, b, mean, var = (relax.Var(k, T((4,))) for k in ("gamma", "beta", "mean", "var"))
    fw, fb = relax.Var("fw", T((5, 64))), relax.Var("fb", T((5,)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, g, b, mean, var, fw, fb]):
        with bb.dataflow():
            c = bb.emit(R.nn.conv2d(x, w, padding=1))
            bn = bb.emit(R.nn.batch_norm(c, g, b, mean, var, axis=1))
            r = bb.emit(R.nn.relu(bn[0]))
            p = bb.emit(R.nn.max_pool2d(r, pool_size=2, strides=2))
            f = bb.emit(R.reshape(p, (2, 64)))
            y = bb.emit_output(R.linear(f, fw, fb))
        bb.emit_func_output(y)
    return bb.get()


def _np_conv(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2], x.shape[3]))
    for i in range(x.shape[2]):
        for j in range(x.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + 3, j:j + 3], w)
    return out


def test_mlp_matches_numpy_and_legalized_kernels():
    mod = build_mlp()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8)).astype("float32")
    w1 = rng.standard_normal((16, 8)).astype("float32")
    b1 = rng.standard_normal(16).astype("float32")
    w2 = rng.standard_normal((16, 4)).astype("float32")
    logits = np.maximum(x @ w1.T + b1, 0) @ w2
    e = np.exp(logits - logits.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(evaluate_numpy(mod, "main", x, w1, b1, w2), want, rtol=1e-5,
                               atol=1e-6)
    legal = relax.transform.LegalizeOps()(mod)
    np.testing.assert_allclose(LegalizedRunner(legal).run("main", x, w1, b1, w2), want,
                               rtol=1e-4, atol=1e-6)


def test_cnn_matches_numpy_and_legalized_kernels():
    mod = build_cnn()
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(p.struct_info.values and [d.value for d in p.struct_info.values])
            .astype("float32") for p in mod["main"].params]
    args[5] = np.abs(args[5]) + 0.5  # variance
    x, w, g, b, mean, var, fw, fb = args
    c = _np_conv(x, w)
    bn = (c - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5) \
        * g[None, :, None, None] + b[None, :, None, None]
    r = np.maximum(bn, 0)
    p = r.reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5))
    want = p.reshape(2, 64) @ fw.T + fb
    np.testing.assert_allclose(evaluate_numpy(mod, "main", *args), want, rtol=1e-4, atol=1e-4)
    legal = relax.transform.LegalizeOps()(mod)
    runner = LegalizedRunner(legal)
    np.testing.assert_allclose(runner.run("main", *args), want, rtol=1e-4, atol=1e-4)
    assert {"conv2d", "batch_norm", "relu", "max_pool2d", "reshape", "matmul"} <= \
        set(runner.kernel_calls)


def test_dataflow_var_cannot_escape_its_block():
    x = relax.Var("x", T((2,)))
    bb = relax.BlockBuilder()
    with pytest.raises(ValueError, match=r"dataflow variable\(s\) \['lv'\]"):
        with bb.function("main", [x]):
            with bb.dataflow():
                lv = bb.emit(R.exp(x))
            bb.emit_func_output(lv)


def test_returning_an_exported_dataflow_var_returns_its_output_var():
    # TVM's tutorials ignore emit_output's result and return the DataflowVar itself; the
    # function must return the exported Var (well formed) and compute the same values.
    x = relax.Var("x", T((2, 3)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(R.exp(x))
            gv = bb.emit(R.nn.relu(R.subtract(lv, x)))
            out = bb.emit_output(gv)
        bb.emit_func_output(gv)
    func = bb.get()["main"]
    assert func.body.body is out and type(func.body.body) is relax.Var
    with bb.function("pair", [x]):
        with bb.dataflow():
            lv = bb.emit(R.exp(x))
            out_lv = bb.emit_output(lv)
            out_x = bb.emit_output(R.add(lv, x))
        bb.emit_func_output((lv, out_x))
    assert bb.get()["pair"].body.body.fields == (out_lv, out_x)
    xv = np.random.default_rng(2).standard_normal((2, 3)).astype("float32")
    np.testing.assert_allclose(evaluate_numpy(bb.get(), "main", xv),
                               np.maximum(np.exp(xv) - xv, 0), rtol=1e-6)


def test_a_dataflow_var_never_exported_still_cannot_escape():
    x = relax.Var("x", T((2,)))
    bb = relax.BlockBuilder()
    with pytest.raises(ValueError, match=r"dataflow variable\(s\) \['lv1'\]"):
        with bb.function("main", [x]):
            with bb.dataflow():
                lv = bb.emit(R.exp(x))
                lv1 = bb.emit(R.exp(lv))
                bb.emit_output(lv)
            bb.emit_func_output((lv, lv1))


def test_normalize_outside_a_function_fills_struct_info_without_emitting():
    x = relax.Var("x", T((2, 3)))
    bb = relax.BlockBuilder()
    call = bb.normalize(R.nn.relu(R.exp(x)))
    assert str(call.struct_info) == 'R.Tensor((2, 3), dtype="float32")'
    assert isinstance(call.args[0], relax.Call) and call.args[0].struct_info is not None
