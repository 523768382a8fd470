"""Struct info inference per op: shapes, dtypes, symbolic dims, and the error messages."""
from __future__ import annotations

import pytest

from workbench import relax, tir
from workbench.relax import op as R
from workbench.relax.op.registry import INFER_RULES, LEGALIZE_RULES, NUMPY_RULES, list_ops

T = relax.TensorStructInfo
n = tir.SizeVar("n", "int64")
m = tir.SizeVar("m", "int64")


def infer(params, body):
    """The struct info the BlockBuilder gives ``body(*params)``."""
    vs = [relax.Var(f"x{i}", s) for i, s in enumerate(params)]
    bb = relax.BlockBuilder()
    with bb.function("f", vs):
        v = bb.emit(body(*vs))
        bb.emit_func_output(v)
    return v.struct_info


def s(si):
    from workbench.relax.printer import sinfo_text
    return sinfo_text(si)


CASES = [
    ([T((2, 3)), T((3,))], R.add, 'R.Tensor((2, 3), dtype="float32")'),
    ([T((n, 1, 4)), T((5, 1))], R.multiply, 'R.Tensor((n, 5, 4), dtype="float32")'),
    ([T((2, 3)), T((2, 3))], R.less, 'R.Tensor((2, 3), dtype="bool")'),
    ([T((n, 3), "int32"), T((1,), "int32")], R.floor_divide, 'R.Tensor((n, 3), dtype="int32")'),
    ([T((n, 4))], R.exp, 'R.Tensor((n, 4), dtype="float32")'),
    ([T((n, 4)), T((4, 7))], R.matmul, 'R.Tensor((n, 7), dtype="float32")'),
    ([T((3, 1, n, 4)), T((5, 4, 2))], R.matmul, 'R.Tensor((3, 5, n, 2), dtype="float32")'),
    ([T((4,)), T((4,))], R.matmul, 'R.Tensor((), dtype="float32")'),
    ([T((2, 4), "int8"), T((4, 3), "int8")], lambda a, b: R.matmul(a, b, "int32"),
     'R.Tensor((2, 3), dtype="int32")'),
    ([T((n, 8)), T((16, 8)), T((16,))], R.linear, 'R.Tensor((n, 16), dtype="float32")'),
    ([T((n, 6))], lambda x: R.reshape(x, (-1, 2)), 'R.Tensor((n * 3, 2), dtype="float32")'),
    ([T((n, 2, 3))], R.flatten, 'R.Tensor((n * 6,), dtype="float32")'),
    ([T((n, 2, 3))], lambda x: R.permute_dims(x, [2, 0, 1]),
     'R.Tensor((3, n, 2), dtype="float32")'),
    ([T((n, 3))], lambda x: R.expand_dims(x, -1), 'R.Tensor((n, 3, 1), dtype="float32")'),
    ([T((1, n, 1))], R.squeeze, 'R.Tensor((n,), dtype="float32")'),
    ([T((n, 6))], lambda x: R.split(x, 3, axis=1),
     'R.Tuple(R.Tensor((n, 2), dtype="float32"), R.Tensor((n, 2), dtype="float32"), '
     'R.Tensor((n, 2), dtype="float32"))'),
    ([T((5, 6))], lambda x: R.strided_slice(x, [1], [1], [-1], [2]),
     'R.Tensor((5, 2), dtype="float32")'),
    ([T((10, 4)), T((n, 2), "int64")], lambda x, i: R.take(x, i, axis=0),
     'R.Tensor((n, 2, 4), dtype="float32")'),
    ([T((3, 1))], lambda x: R.broadcast_to(x, (n, 3, 4)), 'R.Tensor((n, 3, 4), dtype="float32")'),
    ([T((n, 3))], lambda x: R.astype(x, "float16"), 'R.Tensor((n, 3), dtype="float16")'),
    ([T((n, 3, 4))], lambda x: R.sum(x, axis=[1, 2]), 'R.Tensor((n,), dtype="float32")'),
    ([T((n, 3, 4))], lambda x: R.mean(x, axis=1, keepdims=True),
     'R.Tensor((n, 1, 4), dtype="float32")'),
    ([T((n, 3))], lambda x: R.argmax(x, axis=1), 'R.Tensor((n,), dtype="int64")'),
    ([T((n, 3), "bool"), T((n, 3)), T((3,))], R.where, 'R.Tensor((n, 3), dtype="float32")'),
    ([T((n, 5))], R.nn.softmax, 'R.Tensor((n, 5), dtype="float32")'),
    ([T((n, 3, 8)), T((8,)), T((8,))], lambda x, g, b: R.nn.layer_norm(x, g, b, -1),
     'R.Tensor((n, 3, 8), dtype="float32")'),
    ([T((n, 8)), T((8,))], lambda x, w: R.nn.rms_norm(x, w), 'R.Tensor((n, 8), dtype="float32")'),
    ([T((n, 4, 8, 8)), T((4,)), T((4,)), T((4,)), T((4,))],
     lambda x, g, b, mm, v: R.nn.batch_norm(x, g, b, mm, v, 1),
     'R.Tuple(R.Tensor((n, 4, 8, 8), dtype="float32"), R.Tensor((4,), dtype="float32"), '
     'R.Tensor((4,), dtype="float32"))'),
    ([T((n, 3, 32, 32)), T((16, 3, 5, 5))], lambda x, w: R.nn.conv2d(x, w, strides=2, padding=2),
     'R.Tensor((n, 16, 16, 16), dtype="float32")'),
    ([T((n, 32, 32, 8)), T((3, 3, 4, 16))],
     lambda x, w: R.nn.conv2d(x, w, groups=2, dilation=2, data_layout="NHWC"),
     'R.Tensor((n, 28, 28, 16), dtype="float32")'),
    ([T((n, 3, 7, 7))], lambda x: R.nn.max_pool2d(x, 2, 2, ceil_mode=True),
     'R.Tensor((n, 3, 4, 4), dtype="float32")'),
    ([T((n, 3, 7, 7))], lambda x: R.nn.adaptive_avg_pool2d(x, 1),
     'R.Tensor((n, 3, 1, 1), dtype="float32")'),
    ([T((2, n, 8, 16)), T((2, m, 2, 16)), T((2, m, 2, 32))], R.nn.attention,
     'R.Tensor((2, n, 8, 32), dtype="float32")'),
]


@pytest.mark.parametrize("params,body,expected", CASES)
def test_inferred_struct_info(params, body, expected):
    assert s(infer(params, body)) == expected


ERRORS = [
    ([T((2, 3)), T((4, 3))], R.add,
     "add: cannot broadcast x1 (2, 3) with x2 (4, 3): dimension 0 of the result is 2 in x1 "
     "but 4 in x2"),
    ([T((2, 3)), T((2, 3), "int32")], R.add,
     "add: dtypes must match: x1 is float32 but x2 is int32"),
    ([T((2, 3)), T((4, 5))], R.matmul,
     "matmul: reduction dimensions differ: x1 (2, 3) has 3 columns but x2 (4, 5) has 4 rows"),
    ([T((2, 3, 4)), T((5, 4, 2))], R.matmul, "matmul: batch dimensions of x1 (2, 3, 4)"),
    ([T((2, 3))], lambda x: R.reshape(x, (4, 2)),
     "reshape: cannot reshape x (2, 3) (6 elements) to (4, 2) (8 elements)"),
    ([T((1, 3, 6, 6)), T((4, 2, 3, 3))], R.nn.conv2d,
     "nn.conv2d: data (1, 3, 6, 6) (NCHW) has 3 input channels but weight (4, 2, 3, 3)"),
    ([T((1, 3, 2, 2)), T((4, 3, 3, 3))], R.nn.conv2d, "nn.conv2d: the output height is 0"),
    ([T((2, 3))], lambda x: R.sum(x, axis=3),
     "sum: axis=3 is out of range for a tensor of rank 2 (valid: -2..1)"),
    ([T((2, 3), "int32")], R.exp, "exp: requires a float tensor, got x of dtype int32"),
    ([T((1, 3, 2, 4)), T((1, 5, 2, 8)), T((1, 5, 2, 4))], R.nn.attention,
     "nn.attention: query and key head dims differ"),
    ([T((1, 3, 6, 4)), T((1, 5, 4, 4)), T((1, 5, 4, 4))], R.nn.attention,
     "nn.attention: query heads (6) must be a multiple of key heads (4)"),
    ([T((2, 3)), T((2, 4))], lambda a, b: R.concat([a, b]),
     "concat: tensors[1] (2, 4) does not match tensors[0] (2, 3) in dimension 1"),
    ([T((2, 3)), T((4,)), T((3,))], lambda x, g, b: R.nn.layer_norm(x, g, b, -1),
     "nn.layer_norm: gamma (4,) must have shape (3,)"),
    ([T((2, 3)), T((2,), "float32")], lambda x, i: R.take(x, i),
     "take: indices must be an integer tensor"),
    ([T((6, 4))], lambda x: R.split(x, 4), "split: cannot split a dimension of 6 into 4"),
    ([T((2, 3))], lambda x: R.permute_dims(x, [0, 0]), "permute_dims: axes [0, 0] is not a"),
    ([T((2, 3)), T((2, 3))], lambda x, y: R.where(x, x, y),
     "where: condition must be a bool tensor"),
    ([relax.ShapeStructInfo((2, 3))], R.exp, "exp: argument 'x' must be a tensor, got R.Shape"),
]


@pytest.mark.parametrize("params,body,message", ERRORS)
def test_inference_errors_name_op_argument_and_shapes(params, body, message):
    with pytest.raises(relax.OpError) as info:
        infer(params, body)
    assert message in str(info.value)


def test_symbolic_dims_that_cannot_be_compared_give_unknown_shape():
    si = infer([T((n, 3)), T((m, 3))], R.add)
    assert si.shape is None and si.ndim == 2 and si.dtype == "float32"


def test_same_symbolic_var_broadcasts_and_matches():
    si = infer([T((n, 3)), T((n, 1))], R.subtract)
    assert si.values[0] is n


def test_concat_of_symbolic_lengths_adds_them():
    from workbench.tir.arith.analyzer import Analyzer
    si = infer([T((n, 2)), T((m, 2))], lambda a, b: R.concat([a, b]))
    assert Analyzer().can_prove_equal(si.values[0], n + m)
    assert si.values[1].value == 2


def test_unknown_shapes_propagate_rank():
    assert s(infer([T(None, "float32", 3)], R.nn.relu)) == 'R.Tensor(dtype="float32", ndim=3)'
    assert s(infer([T(None, "float32", 3)], lambda x: R.sum(x, axis=0))) == \
        'R.Tensor(dtype="float32", ndim=2)'


def test_every_high_level_op_has_all_three_rules():
    # Later passes register lowered ops (relax.memory.*, relax.builtin.*) with inference only.
    high_level = [o for o in list_ops() if o in LEGALIZE_RULES or o in NUMPY_RULES]
    high_level.remove("relax.call_tir")
    assert len(high_level) >= 60
    for name in high_level:
        assert name in INFER_RULES, name
        assert name in LEGALIZE_RULES, name
        assert name in NUMPY_RULES, name


def test_op_get_and_close_match_hint():
    assert relax.Op.get("relax.nn.relu") is R.nn.relu(relax.Var("x", T((1,)))).op
    with pytest.raises(KeyError, match="did you mean relax.nn.relu"):
        relax.Op.get("relax.nn.rel")
