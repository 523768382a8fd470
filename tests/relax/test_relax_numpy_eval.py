"""The numpy reference evaluator against hand-written numpy, and its checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

from workbench import relax, tir
from workbench.relax import op as R
from workbench.relax.testing import evaluate_numpy, random_inputs

from relax_cases import one_op_module, tensor

rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype("float32")


HAND = [
    ("add", [tensor((2, 3)), tensor((3,))], R.add, lambda a, b: a + b),
    ("divide_int_truncates", [tensor((4,), "int32"), tensor((4,), "int32")], R.divide,
     lambda a, b: np.array([-3, 3, -1, 2], "int32")),
    ("matmul_batched", [tensor((2, 3, 4)), tensor((4, 5))], R.matmul, lambda a, b: a @ b),
    ("gelu", [tensor((5,))], R.nn.gelu,
     lambda x: np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x], "float32")),
    ("softmax", [tensor((2, 4))], R.nn.softmax,
     lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    ("layer_norm", [tensor((2, 5)), tensor((5,)), tensor((5,))],
     lambda x, g, b: R.nn.layer_norm(x, g, b, -1),
     lambda x, g, b: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
     * g + b),
    ("rms_norm", [tensor((2, 5)), tensor((5,))], lambda x, w: R.nn.rms_norm(x, w),
     lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w),
    ("avg_pool_no_pad_count", [tensor((1, 1, 3, 3))],
     lambda x: R.nn.avg_pool2d(x, 2, 1, padding=1),
     lambda x: _avg_pool_ref(x)),
    ("strided_slice_neg", [tensor((6,))], lambda x: R.strided_slice(x, [0], [-1], [0], [-2]),
     lambda x: x[-1:0:-2]),
    ("argmax", [tensor((3, 4))], lambda x: R.argmax(x, axis=0),
     lambda x: x.argmax(0).astype("int64")),
    ("attention", [tensor((1, 2, 1, 3)), tensor((1, 4, 1, 3)), tensor((1, 4, 1, 2))],
     R.nn.attention, lambda q, k, v: _attention_ref(q[0, :, 0], k[0, :, 0], v[0, :, 0])
     [None, :, None]),
]


def _avg_pool_ref(x):
    xp = np.pad(x[0, 0], 1)
    valid = np.pad(np.ones((3, 3)), 1)
    out = np.zeros((4, 4), "float32")
    for i in range(4):
        for j in range(4):
            out[i, j] = xp[i:i + 2, j:j + 2].sum() / valid[i:i + 2, j:j + 2].sum()
    return out[None, None]


def _attention_ref(q, k, v):
    s = q @ k.T / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("name,params,body,ref", HAND, ids=[h[0] for h in HAND])
def test_evaluator_matches_hand_written_numpy(name, params, body, ref):
    mod = one_op_module([(f"a{i}", p) for i, p in enumerate(params)], body)
    if name == "divide_int_truncates":
        args = [np.array([-7, 7, -2, 5], "int32"), np.array([2, 2, 2, 2], "int32")]
    else:
        args = random_inputs(mod["main"], seed=3)
    got = evaluate_numpy(mod, "main", *args)
    np.testing.assert_allclose(got, ref(*args), rtol=1e-5, atol=1e-6)


def test_evaluator_checks_argument_shapes_and_binds_dims():
    n = tir.SizeVar("n", "int64")
    mod = one_op_module([("x", tensor((n, 2))), ("y", tensor((n, 2)))], R.add)
    out = evaluate_numpy(mod, "main", np.ones((3, 2), "float32"), np.ones((3, 2), "float32"))
    assert out.shape == (3, 2)
    with pytest.raises(ValueError, match="argument 'y': dimension 0 should be n = 3, got 4"):
        evaluate_numpy(mod, "main", np.ones((3, 2), "float32"), np.ones((4, 2), "float32"))
    with pytest.raises(ValueError, match="expected dtype float32, got int32"):
        evaluate_numpy(mod, "main", np.ones((3, 2), "int32"), np.ones((3, 2), "float32"))
    with pytest.raises(TypeError, match="expects 2 arguments"):
        evaluate_numpy(mod, "main", np.ones((3, 2), "float32"))


def test_evaluator_records_every_binding_and_runs_call_tir():
    mod = one_op_module([("x", tensor((2, 3)))], lambda x: R.nn.relu(R.exp(x)))
    x = f32(2, 3)
    rec = {}
    evaluate_numpy(mod, "main", x, record=rec)
    assert [v.name_hint for v in rec] == ["lv", "gv"]
    legal = relax.transform.LegalizeOps()(mod)
    # call_tir goes through the TIR interpreter: same answer
    np.testing.assert_allclose(evaluate_numpy(legal, "main", x), np.exp(x), rtol=1e-6)


def test_nd_arrays_are_accepted():
    import workbench as wb
    mod = one_op_module([("x", tensor((2,)))], R.negative)
    out = evaluate_numpy(mod, "main", wb.nd.array(np.array([1, 2], "float32")))
    np.testing.assert_array_equal(out, [-1, -2])
