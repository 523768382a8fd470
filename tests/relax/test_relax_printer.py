"""Golden text of Relax functions (TVMScript-like) before and after legalization."""
from __future__ import annotations

from workbench import relax, tir
from workbench.relax import op as R

T = relax.TensorStructInfo


def small_module():
    n = tir.SizeVar("n", "int64")
    x = relax.Var("x", T((n, 4)))
    w = relax.Var("w", T((4, 4)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(R.matmul(x, w))
            lv1 = bb.emit(R.add(lv, relax.const(1.0)))
            t = bb.emit(R.split(lv1, 2, axis=1))
            gv = bb.emit_output(relax.Tuple([t[0], R.sum(lv1, axis=[1], keepdims=True)]))
        bb.emit_func_output(gv)
    return bb.get()


GOLDEN = '''\
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), dtype="float32"), w: R.Tensor((4, 4), dtype="float32")) -> R.Tuple(R.Tensor((n, 2), dtype="float32"), R.Tensor((n, 1), dtype="float32")):
        n = T.int64(is_size_var=True)
        with R.dataflow():
            lv: R.Tensor((n, 4), dtype="float32") = R.matmul(x, w, out_dtype="void")
            lv1: R.Tensor((n, 4), dtype="float32") = R.add(lv, R.const(1.0, "float32"))
            lv2: R.Tuple(R.Tensor((n, 2), dtype="float32"), R.Tensor((n, 2), dtype="float32")) = R.split(lv1, indices_or_sections=2, axis=1)
            lv3: R.Tensor((n, 2), dtype="float32") = lv2[0]
            lv4: R.Tensor((n, 1), dtype="float32") = R.sum(lv1, axis=[1], keepdims=True)
            gv: R.Tuple(R.Tensor((n, 2), dtype="float32"), R.Tensor((n, 1), dtype="float32")) = (lv3, lv4)
            R.output(gv)
        return gv'''

GOLDEN_LEGAL_MAIN = '''\
@R.function
def main(x: R.Tensor((n, 4), dtype="float32"), w: R.Tensor((4, 4), dtype="float32")) -> R.Tuple(R.Tensor((n, 2), dtype="float32"), R.Tensor((n, 1), dtype="float32")):
    n = T.int64(is_size_var=True)
    with R.dataflow():
        lv: R.Tensor((n, 4), dtype="float32") = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((n, 4), dtype="float32"))
        lv1: R.Tensor((n, 4), dtype="float32") = R.call_tir(cls.add, (lv, R.const(1.0, "float32")), out_sinfo=R.Tensor((n, 4), dtype="float32"))
        lv2: R.Tuple(R.Tensor((n, 2), dtype="float32"), R.Tensor((n, 2), dtype="float32")) = R.call_tir(cls.split, (lv1,), out_sinfo=[R.Tensor((n, 2), dtype="float32"), R.Tensor((n, 2), dtype="float32")])
        lv3: R.Tensor((n, 2), dtype="float32") = lv2[0]
        lv4: R.Tensor((n, 1), dtype="float32") = R.call_tir(cls.sum, (lv1,), out_sinfo=R.Tensor((n, 1), dtype="float32"))
        gv: R.Tuple(R.Tensor((n, 2), dtype="float32"), R.Tensor((n, 1), dtype="float32")) = (lv3, lv4)
        R.output(gv)
    return gv'''


def test_module_golden_text():
    assert small_module().script() == GOLDEN


def test_legalized_function_golden_text():
    legal = relax.transform.LegalizeOps()(small_module())
    assert legal["main"].script() == GOLDEN_LEGAL_MAIN
    assert list(legal) == ["main", "matmul", "add", "split", "sum"]
    assert "@T.prim_func" in legal.script()


def test_struct_info_and_leaf_texts():
    from workbench.relax.printer import expr_text, sinfo_text
    assert sinfo_text(T(None, "float32", 3)) == 'R.Tensor(dtype="float32", ndim=3)'
    assert sinfo_text(T(None, "", -1)) == "R.Tensor"
    assert sinfo_text(relax.ShapeStructInfo((2, 3))) == "R.Shape([2, 3])"
    assert sinfo_text(relax.ShapeStructInfo(ndim=2)) == "R.Shape(ndim=2)"
    assert sinfo_text(relax.ObjectStructInfo()) == "R.Object"
    assert sinfo_text(relax.PrimStructInfo("int64")) == 'R.Prim("int64")'
    assert sinfo_text(relax.FuncStructInfo([T((2,))], T((2,)))) == \
        'R.Callable((R.Tensor((2,), dtype="float32"),), R.Tensor((2,), dtype="float32"))'
    assert expr_text(relax.ShapeExpr([1, 2])) == "R.shape([1, 2])"
    assert expr_text(relax.const([[1, 2], [3, 4]], "int32")) == 'R.const([[1, 2], [3, 4]], "int32")'
    import numpy as np
    assert expr_text(relax.const(np.zeros((4, 4), "float32"))) == \
        'metadata["relax.expr.Constant"][0]'


def test_private_impure_function_and_attrs_are_shown():
    x = relax.Var("x", T((2,)))
    bb = relax.BlockBuilder()
    with bb.function("helper", [x], attrs={"num_input": 1}, pure=False, private=True):
        bb.emit_func_output(x)
    text = bb.get().script()
    assert "@R.function(private=True, pure=False)" in text
    assert 'R.func_attr({"num_input": 1})' in text


def test_repr_and_html():
    mod = small_module()
    main = mod["main"]
    assert repr(main.params[0]) == '<relax.Var x: R.Tensor((n, 4), dtype="float32")>'
    assert "<pre" in main._repr_html_() and "R.dataflow" in mod._repr_html_()
