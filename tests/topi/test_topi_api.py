"""topi's contract without compiling: output shapes, stage names/tags (TVM's), and errors."""
from __future__ import annotations

import pytest

from workbench import te, topi
from workbench.topi.utils import get_const_tuple


def _names(t) -> list[str]:
    """Stage names from the inputs up to ``t`` (depth-first, producers first)."""
    seen, out = set(), []

    def visit(x):
        if x.op in seen:
            return
        seen.add(x.op)
        for i in x.op.input_tensors:
            visit(i)
        out.append(x.op.name)
    visit(t)
    return out


def test_broadcast_shapes_names_and_tags():
    A, B = te.placeholder((4, 1, 3), name="A"), te.placeholder((5, 1), name="B")
    C = topi.add(A, B)
    assert get_const_tuple(C.shape) == (4, 5, 3)
    assert (C.op.name, C.op.tag) == ("T_add", "broadcast")
    assert topi.multiply(A, 2.0).dtype == "float32"
    assert topi.add(te.placeholder((3,), "int8", "I"), 1).dtype == "int8"


def test_broadcast_mismatch_names_the_dimension():
    A, B = te.placeholder((4, 3), name="A"), te.placeholder((2, 3), name="B")
    with pytest.raises(ValueError, match=r"add: shapes \(4, 3\), \(2, 3\) cannot be broadcast"):
        topi.add(A, B)


def test_reduction_shapes_and_axis_errors():
    A = te.placeholder((2, 3, 4), name="A")
    assert get_const_tuple(topi.sum(A, (0, 2)).shape) == (3,)
    assert get_const_tuple(topi.max(A, -1, keepdims=True).shape) == (2, 3, 1)
    assert get_const_tuple(topi.sum(A).shape) == ()
    am = topi.argmax(A, 1)
    assert am.dtype == "int32" and _names(am)[-2:] == ["A_red_temp", "A_red"]
    with pytest.raises(ValueError, match="sum: axis 3 is out of range for a 3-d tensor"):
        topi.sum(A, 3)
    with pytest.raises(ValueError, match="repeats an axis"):
        topi.sum(A, (1, -2))


def test_softmax_is_tvms_four_stages():
    X = te.placeholder((4, 8), name="X")
    assert _names(topi.nn.softmax(X)) == ["X", "T_softmax_maxelem", "T_softmax_exp",
                                          "T_softmax_expsum", "T_softmax_norm"]
    assert topi.nn.softmax(X).op.attrs["axis"] == 1


def test_conv2d_pads_in_its_own_stage_and_checks_channels():
    X, W = te.placeholder((1, 3, 8, 8), name="X"), te.placeholder((4, 3, 3, 3), name="W")
    Y = topi.nn.conv2d_nchw(X, W, stride=2, padding=1, dilation=1)
    assert get_const_tuple(Y.shape) == (1, 4, 4, 4)
    assert _names(Y) == ["X", "pad_temp", "W", "conv2d_nchw"]
    assert Y.op.tag == "conv2d_nchw"
    with pytest.raises(ValueError, match="do not fit groups=1"):
        topi.nn.conv2d_nchw(X, te.placeholder((4, 2, 3, 3), name="W2"), 1, 0, 1)
    assert topi.nn.get_pad_tuple("SAME", (3, 3)) == (1, 1, 1, 1)
    assert topi.nn.get_pad_tuple((1, 2), (3, 3)) == (1, 2, 1, 2)


def test_matmul_family_names():
    A, B = te.placeholder((4, 5), name="A"), te.placeholder((6, 5), name="B")
    assert topi.nn.dense(A, B).op.name == "T_matmul_NT"
    assert topi.nn.matmul(A, B, transpose_b=True).op.tag == "matmul"
    X, Y = te.placeholder((2, 4, 5), name="X"), te.placeholder((1, 6, 5), name="Y")
    Z = topi.nn.batch_matmul(X, Y)
    assert (Z.op.name, get_const_tuple(Z.shape)) == ("T_batch_matmul_NT", (2, 4, 6))
    with pytest.raises(ValueError, match="reduction extents differ"):
        topi.nn.matmul(A, B)


def test_pool_and_layout_shapes():
    X = te.placeholder((1, 3, 9, 8), name="X")
    assert get_const_tuple(topi.nn.pool2d(X, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max").shape) \
        == (1, 3, 5, 4)
    assert get_const_tuple(topi.nn.pool2d(X, (2, 2), (2, 2), (1, 1), 0, "avg", ceil_mode=True)
                           .shape) == (1, 3, 5, 4)
    assert get_const_tuple(topi.nn.adaptive_avg_pool2d(X, (2, 3)).shape) == (1, 3, 2, 3)
    assert get_const_tuple(topi.transpose(X, (0, 2, 3, 1)).shape) == (1, 9, 8, 3)
    assert get_const_tuple(topi.reshape(X, (3, -1)).shape) == (3, 72)
    assert get_const_tuple(topi.strided_slice(X, [0, 0, 8], [1, 3, 0], [1, 1, -3]).shape) \
        == (1, 3, 3, 8)
    with pytest.raises(ValueError, match="cannot reshape"):
        topi.reshape(X, (5, 5))
    with pytest.raises(ValueError, match="not a permutation"):
        topi.transpose(X, (0, 1, 1, 2))
