"""The te front end: placeholders, compute, reduce axes, reducers, and their errors."""
from __future__ import annotations

import pytest

from workbench import te, tir
from workbench.tir.expr import BufferLoad, Reduce
from workbench.tir.stmt import IterType

from te_text import fmt


def test_placeholder_properties():
    A = te.placeholder((3, 4), "float16", name="A")
    assert A.name == "A" and A.dtype == "float16" and A.ndim == 2
    assert [s.value for s in A.shape] == [3, 4]
    assert A.op.name == "A" and A.op.input_tensors == [] and A.op.num_outputs == 1
    assert A.op.output(0) is A and len(A) == 3
    assert fmt(A(1, 2)) == "A[1, 2]"
    assert "A" in repr(A)
    x = te.placeholder(5)
    assert x.name == "placeholder" and x.dtype == "float32" and x.ndim == 1


def test_indexing_gives_buffer_loads():
    A = te.placeholder((3, 4), name="A")
    i = te.var("i")
    e = A[i, 2]
    assert isinstance(e, BufferLoad) and e.buffer is A.buffer and e.dtype == "float32"
    assert fmt(e) == "A[i, 2]"


def test_compute_op_properties():
    A = te.placeholder((3, 4), name="A")
    B = te.placeholder((4,), name="B")
    C = te.compute((3, 4), lambda row, col: A[row, col] + B[col], name="C", tag="bcast",
                   attrs={"x": 1})
    op = C.op
    assert isinstance(op, te.ComputeOp)
    assert [iv.var.name for iv in op.axis] == ["row", "col"]
    assert all(iv.iter_type == IterType.DATA_PAR for iv in op.axis)
    assert op.reduce_axis == () and op.tag == "bcast" and op.attrs["x"] == 1
    assert op.input_tensors == [A, B]
    assert fmt(op.body[0]) == "(A[row, col] + B[col])"
    assert C.shape == (C.op.axis[0].dom.extent, C.op.axis[1].dom.extent)


def test_compute_varargs_names_and_default_name():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.compute(A.shape, lambda *idx: A[idx] * 2.0)
    assert B.name == "compute" and [iv.var.name for iv in B.op.axis] == ["i0", "i1", "i2"]
    C = te.compute((2, 3, 4), lambda i, *rest: A[(i,) + rest])
    assert [iv.var.name for iv in C.op.axis] == ["i", "i1", "i2"]


def test_compute_with_python_constant_and_int_shape_scalar():
    C = te.compute(4, lambda i: 1.5, name="C")
    assert C.ndim == 1 and C.dtype == "float32"
    D = te.compute((4,), lambda i: i * 2, name="D")
    assert D.dtype == "int32"


def test_reduce_axis_and_reducers():
    k = te.reduce_axis((1, 5), name="k")
    assert k.iter_type == IterType.COMM_REDUCE and fmt(k.dom) == "1:+4" and k.var.name == "k"
    assert k.dtype == "int32"
    A = te.placeholder((4, 5), name="A")
    r = te.sum(A[0, k] * k, axis=k)  # an axis acts as its variable on either side
    assert isinstance(r, Reduce) and r.dtype == "float32"
    assert fmt(r.source[0]) == "(A[0, k] * float32(k))"
    assert fmt(2 * k) == "(2 * k)" and fmt(k - 1) == "(k - 1)" and fmt(k < 3) == "(k < 3)"
    assert isinstance(r.combiner, te.CommReducer) and r.combiner.name == "sum"
    assert fmt(r.combiner.identity_element[0]) == "float32(0)"
    k2 = te.reduce_axis(tir.Range(tir.const(0), tir.const(3)), name="k2")
    assert fmt(k2.dom) == "0:+3"


def test_reducer_without_axis_combines_directly():
    x, y = te.var("x", "float32"), te.var("y", "float32")
    assert fmt(te.max(x, y)) == "max(x, y)"
    assert fmt(te.sum(x, y)) == "(x + y)"


def test_custom_reducer_and_combiner_call():
    prod = te.comm_reducer(lambda a, b: a * b, lambda t: te.const(1, t), name="prod")
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((4,), lambda i: prod(A[i, k], axis=k), name="B")
    comb = B.op.body[0].combiner
    assert comb.name == "prod" and fmt(comb.result[0]) == "(a * b)"
    assert fmt(comb([tir.const(2.0)], [tir.const(3.0)])[0]) == "(float32(2) * float32(3))"


def test_tensors_are_not_arithmetic_operands():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="index it"):
        A + 1
    with pytest.raises(TypeError, match="index it"):
        2.0 * A


def test_wrong_number_of_indices():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(IndexError, match="'A' has 2 dimension"):
        te.compute((4,), lambda i: A[i], name="B")
    with pytest.raises(IndexError, match="slices"):
        A[0:2, 1]


def test_non_integer_shapes_and_indices():
    with pytest.raises(TypeError, match=r"shape\[1\]"):
        te.placeholder((4, 2.5), name="A")
    with pytest.raises(TypeError, match=r"shape\[0\]"):
        te.placeholder((te.var("x", "float32"),), name="A")
    with pytest.raises(ValueError, match="negative"):
        te.compute((-1,), lambda i: 1.0)
    with pytest.raises(TypeError, match="shape"):
        te.placeholder("abc")
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="index 0"):
        A[1.5]


def test_fcompute_arity_and_bodies():
    A = te.placeholder((4,), name="A")
    with pytest.raises(ValueError, match="2 dimension"):
        te.compute((4, 4), lambda i: A[i])
    with pytest.raises(TypeError, match="returned the tensor 'A'"):
        te.compute((4,), lambda i: A)
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="whole body"):
        te.compute((4,), lambda i: te.sum(A[k], axis=k) * 2.0)
    with pytest.raises(TypeError, match="all reductions or none"):
        te.compute((4,), lambda i: (te.sum(A[k], axis=k), A[i]))


def test_reducer_argument_errors():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="axis="):
        te.sum(A[0])
    with pytest.raises(TypeError, match="reduce_axis"):
        te.sum(A[0], axis=[te.compute((4,), lambda j: A[j]).op.axis[0]])
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(TypeError, match="boolean"):
        te.sum(A[k], axis=k, where=k + 1)
    with pytest.raises(TypeError, match="not the tensor"):
        te.sum(A, axis=k)
    with pytest.raises(TypeError, match="bounds must be integers"):
        te.reduce_axis((0, 2.5))


def test_reading_a_non_te_buffer_is_rejected():
    buf = tir.decl_buffer((4,), name="raw")
    with pytest.raises(ValueError, match="'raw'"):
        te.compute((4,), lambda i: buf[i])


def test_math_reexports_build_intrinsic_calls():
    x = te.var("x", "float32")
    for name in ("exp", "log", "sqrt", "tanh", "sigmoid", "erf", "rsqrt", "log2", "fabs"):
        assert fmt(getattr(te, name)(x)) == f"{name}(x)"
    assert fmt(te.if_then_else(x > 0, x, 0.0)) == "if_then_else((x > float32(0)), x, float32(0))"
    assert te.const(3).dtype == "int32" and te.const(2, "int64").dtype == "int64"
    assert te.var().name == "tindex" and isinstance(te.size_var("n"), tir.SizeVar)


def test_numpy_integer_shapes_are_accepted():
    import numpy as np
    A = te.placeholder(tuple(np.array([3, 4])), name="A")
    assert [s.value for s in A.shape] == [3, 4] and A.shape[0].dtype == "int32"
    with pytest.raises(TypeError, match=r"shape\[0\]"):
        te.placeholder((np.float64(2.0),))


def test_multi_value_reduction_must_return_every_value():
    argmax = te.comm_reducer(
        lambda x, y: (te.select(x[1] >= y[1], x[0], y[0]), te.max(x[1], y[1])),
        lambda t0, t1: (te.const(-1, t0), te.min_value(t1)), name="argmax")
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    with pytest.raises(ValueError, match="produces 2 values"):
        te.compute((4,), lambda i: argmax((k.var, A[i, k]), axis=k)[0])
    idx, val = te.compute((4,), lambda i: argmax((k.var, A[i, k]), axis=k))
    assert idx.op.reduce_axis == (k,)
