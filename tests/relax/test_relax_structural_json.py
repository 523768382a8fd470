"""Structural equality / hashing and JSON round trips of Relax modules."""
from __future__ import annotations

import numpy as np

from workbench import relax, tir
from workbench.ir import load_json, save_json, structural_equal, structural_hash
from workbench.relax import op as R

T = relax.TensorStructInfo


def build(name_x="x", dim_name="n", scale=1.0, legalize=False):
    n = tir.SizeVar(dim_name, "int64")
    x = relax.Var(name_x, T((n, 4)))
    w = relax.Var("w", T((4, 3)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            h = bb.emit(R.matmul(x, w))
            c = bb.emit(R.multiply(h, relax.const(np.full((3,), scale, "float32"))))
            y = bb.emit_output(R.nn.softmax(c))
        bb.emit_func_output(y)
    mod = bb.get()
    return relax.transform.LegalizeOps()(mod) if legalize else mod


def test_renaming_vars_and_dims_keeps_modules_equal():
    a, b = build(), build(name_x="inp", dim_name="batch")
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)


def test_different_constants_or_ops_differ():
    assert not structural_equal(build(), build(scale=2.0))
    assert structural_hash(build()) != structural_hash(build(scale=2.0))


def test_symbolic_dims_must_map_consistently():
    n, m = tir.SizeVar("n", "int64"), tir.SizeVar("m", "int64")

    def func(d0, d1):
        x = relax.Var("x", T((d0, 2)))
        y = relax.Var("y", T((d1, 2)))
        bb = relax.BlockBuilder()
        with bb.function("f", [x, y]):
            bb.emit_func_output(bb.emit(R.concat([x, y])))
        return bb.get()["f"]
    assert structural_equal(func(n, n), func(m, m))
    assert not structural_equal(func(n, n), func(n, m))


def test_json_round_trip_of_relax_and_legalized_modules():
    for mod in (build(), build(legalize=True)):
        text = save_json(mod)
        back = load_json(text)
        assert structural_equal(mod, back)
        assert back.script() == mod.script()
        assert save_json(back) == text


def test_json_keeps_constant_values_and_var_sharing():
    mod = build(scale=0.25)
    back = load_json(save_json(mod))
    func = back["main"]
    bindings = [b for blk in func.body.blocks for b in blk.bindings]
    const = bindings[1].value.args[1]
    np.testing.assert_array_equal(const.data.numpy(), np.full((3,), 0.25, "float32"))
    # the var bound first is the very object used later
    assert bindings[1].value.args[0] is bindings[0].var
    assert func.params[0].struct_info.values[0] is bindings[0].var.struct_info.values[0]
