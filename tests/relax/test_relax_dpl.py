"""relax.dpl: dataflow patterns matched against Relax bindings (TVM's pattern language)."""
from __future__ import annotations

import pytest

from workbench import relax
from workbench.relax.dpl import (
    ConstantPattern, extract_matched_expr, has_dtype, is_const, is_dfv, is_op, is_shape,
    is_tuple, is_tuple_get_item, is_var, reject, wildcard,
)
from workbench.script import from_source

SOURCE = '''
@R.function
def main(x: R.Tensor((2, 8), dtype="float32"), w: R.Tensor((4, 8), dtype="float32"),
         b: R.Tensor((4,), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
    with R.dataflow():
        wt: R.Tensor((8, 4), dtype="float32") = R.permute_dims(w)
        mm: R.Tensor((2, 4), dtype="float32") = R.matmul(x, wt)
        biased: R.Tensor((2, 4), dtype="float32") = R.add(b, mm)
        act: R.Tensor((2, 4), dtype="float32") = R.nn.relu(biased)
        same: R.Tensor((2, 4), dtype="float32") = R.multiply(act, act)
        half: R.Tensor((2, 4), dtype="float16") = R.astype(same, dtype="float16")
        c: R.Tensor((4,), dtype="float32") = R.const([1.0, 2.0, 3.0, 4.0], "float32")
        plus: R.Tensor((2, 4), dtype="float32") = R.add(act, c)
        pair: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = (act, plus)
        first: R.Tensor((2, 4), dtype="float32") = pair[0]
        gv: R.Tensor((2, 4), dtype="float32") = R.add(first, same)
        R.output(gv)
    return gv
'''


@pytest.fixture(scope="module")
def func():
    return from_source(SOURCE)


@pytest.fixture(scope="module")
def var2val(func):
    return relax.analysis.get_var2val(func)


def value_of(func, name):
    for b in func.body.blocks[0].bindings:
        if b.var.name_hint == name:
            return b.var, b.value
    raise KeyError(name)


def linear_relu():
    lhs, rhs, bias = wildcard(), wildcard(), wildcard()
    root = is_op("relax.matmul")(lhs, is_op("relax.permute_dims")(rhs))
    out = is_op("relax.nn.relu")(is_op("relax.add")(root, bias))
    return out, {"lhs": lhs, "rhs": rhs, "bias": bias, "root": root}


def test_a_pattern_follows_variables_to_their_bindings(func, var2val):
    pattern, ann = linear_relu()
    _, act = value_of(func, "act")
    assert not pattern.match(act)  # without var2val, the argument is just a variable
    matched = pattern.extract_matched_expr(act, var2val)
    assert matched is not None
    x, w, b = func.params
    assert matched[ann["lhs"]] is x and matched[ann["rhs"]] is w
    assert matched[ann["bias"]] is b
    # The call patterns record the bound values, not the variables.
    assert matched[ann["root"]] is value_of(func, "mm")[1]
    assert matched[pattern] is act


def test_add_matches_with_its_arguments_swapped(func, var2val):
    # The module writes R.add(b, mm); the pattern says add(matmul, bias).
    pattern, _ = linear_relu()
    assert pattern.match(value_of(func, "act")[1], var2val)
    non_commutative = is_op("relax.subtract")(is_op("relax.matmul")(wildcard(), wildcard()),
                                              wildcard())
    assert not non_commutative.match(value_of(func, "biased")[1], var2val)


def test_patterns_that_do_not_match(func, var2val):
    pattern, _ = linear_relu()
    _, plus = value_of(func, "plus")
    assert not pattern.match(plus, var2val)
    gelu = is_op("relax.nn.gelu")(wildcard())
    assert not gelu.match(value_of(func, "act")[1], var2val)
    # A matmul whose rhs is not transposed does not match a transposed-rhs pattern.
    assert not is_op("relax.matmul")(wildcard(), is_op("relax.permute_dims")(wildcard())) \
        .match(value_of(func, "same")[1], var2val)


def test_one_pattern_used_twice_must_match_the_same_expression(func, var2val):
    x = wildcard()
    square = is_op("relax.multiply")(x, x)
    assert square.match(value_of(func, "same")[1], var2val)          # act * act
    add_twice = is_op("relax.add")(x, x)
    assert not add_twice.match(value_of(func, "plus")[1], var2val)   # act + c


def test_dtype_shape_and_attr_constraints(func, var2val):
    _, act = value_of(func, "act")
    relu = is_op("relax.nn.relu")(wildcard())
    assert relu.has_dtype("float32").match(act, var2val)
    assert not relu.has_dtype("float16").match(act, var2val)
    assert relu.has_shape([2, 4]).match(act, var2val)
    assert not relu.has_shape([4, 2]).match(act, var2val)
    assert not relu.has_shape([2, 4, 1]).match(act, var2val)
    _, half = value_of(func, "half")
    cast = is_op("relax.astype")(wildcard())
    assert cast.has_attr({"dtype": "float16"}).match(half, var2val)
    assert not cast.has_attr({"dtype": "int8"}).match(half, var2val)
    assert has_dtype("float16").match(half, var2val)
    with pytest.raises(ValueError, match="list or tuple"):
        relu.has_shape(4)


def test_or_and_not(func, var2val):
    _, act = value_of(func, "act")
    relu_or_gelu = is_op("relax.nn.relu")(wildcard()) | is_op("relax.nn.gelu")(wildcard())
    assert relu_or_gelu.match(act, var2val)
    either_order = is_op("relax.nn.gelu")(wildcard()) | is_op("relax.nn.relu")(wildcard())
    assert either_order.match(act, var2val)
    both = is_op("relax.nn.relu")(wildcard()) & has_dtype("float32")
    assert both.match(act, var2val)
    assert not (is_op("relax.nn.relu")(wildcard()) & has_dtype("int32")).match(act, var2val)
    not_relu = reject(is_op("relax.nn.relu")(wildcard()))
    assert not not_relu.match(act, var2val)
    assert (~is_op("relax.nn.gelu")(wildcard())).match(act, var2val)


def test_failed_alternative_leaves_nothing_behind(func, var2val):
    # The left alternative matches `relu` before failing on the dtype; what it recorded must
    # be rolled back, or the memo would reject the right alternative.
    inner = wildcard()
    left = is_op("relax.nn.relu")(inner).has_dtype("float16")
    right = is_op("relax.nn.relu")(inner)
    matched = extract_matched_expr(left | right, value_of(func, "act")[1], var2val)
    assert matched is not None and left not in matched and right in matched


def test_constants_tuples_and_vars(func, var2val):
    _, plus = value_of(func, "plus")
    # `c` is a variable bound to a constant: is_const sees through it.
    assert is_op("relax.add")(wildcard(), is_const()).match(plus, var2val)
    assert not is_op("relax.add")(wildcard(), is_const()).match(plus)
    assert isinstance(is_const(), ConstantPattern)
    _, first = value_of(func, "first")
    item = is_tuple_get_item(is_tuple([wildcard(), wildcard()]), 0)
    assert item.match(first, var2val)
    assert not is_tuple_get_item(wildcard(), 1).match(first, var2val)
    assert not is_tuple_get_item(is_tuple([wildcard()]), 0).match(first, var2val)
    assert is_tuple([wildcard(), wildcard()], unordered=True).match(value_of(func, "pair")[1])
    x = func.params[0]
    assert is_var("x").match(x) and not is_var("w").match(x) and is_var().match(x)
    act_var, _ = value_of(func, "act")
    assert is_dfv().match(act_var) and not is_dfv().match(x)
    assert not is_shape([2, 4]).match(x)


def test_bad_arguments_are_reported():
    with pytest.raises(KeyError, match="relax.nn.rleu"):
        is_op("relax.nn.rleu")
    with pytest.raises(TypeError, match="DFPattern"):
        is_op("relax.add")(wildcard(), "x")
    with pytest.raises(TypeError, match="DFPattern"):
        extract_matched_expr("relax.add", relax.const(1.0))
