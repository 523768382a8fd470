"""LegalizeOps: every op becomes call_tir of a PrimFunc; compiled kernels match the numpy
evaluator binding by binding (via the test-only LegalizedRunner)."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import relax
from workbench.relax.op.base import is_call_tir
from workbench.relax.testing import evaluate_numpy
from workbench.tir.function import PrimFunc

from legalized_runner import LegalizedRunner
from relax_cases import OP_CASES, case_module


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def _assert_close(got, want, what):
    if isinstance(want, tuple):
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_close(g, w, f"{what}[{i}]")
        return
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=what)


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_legalized_op_matches_numpy_evaluator(name):
    mod, args = case_module(name)
    legal = relax.transform.LegalizeOps()(mod)
    # Every op call is gone; only call_tir (and tuple plumbing) remain.
    for b in _bindings(legal["main"]):
        v = b.value
        assert not (isinstance(v, relax.Call) and isinstance(v.op, relax.Op)) or is_call_tir(v), \
            f"{name}: {v} was not legalized"
    assert any(isinstance(f, PrimFunc) for _, f in legal.items())
    want_rec, got_rec = {}, {}
    want = evaluate_numpy(mod, "main", *args, record=want_rec)
    got = LegalizedRunner(legal).run("main", *args, record=got_rec)
    for var, value in want_rec.items():
        if var in got_rec:
            _assert_close(got_rec[var], value, f"{name}: binding {var.name_hint}")
    _assert_close(got, want, f"{name}: result")


def test_legalize_keeps_input_module_and_var_names():
    mod, _ = case_module("linear")
    before = mod.script()
    legal = relax.transform.LegalizeOps()(mod)
    assert mod.script() == before
    names = [b.var.name_hint for b in _bindings(legal["main"])]
    assert names == [b.var.name_hint for b in _bindings(mod["main"])]
    assert {"transpose", "matmul", "add"} <= set(legal)


def test_equal_kernels_are_shared():
    from relax_cases import one_op_module, tensor
    from workbench.relax import op as R
    mod = one_op_module([("x", tensor((2, 3))), ("y", tensor((2, 3)))],
                        lambda x, y: R.add(R.add(x, y), R.add(y, x)))
    legal = relax.transform.LegalizeOps()(mod)
    prims = [n for n, f in legal.items() if isinstance(f, PrimFunc)]
    assert prims == ["add"]


def test_symbolic_batch_runs_for_several_sizes():
    mod, _ = case_module("matmul_sym")
    legal = relax.transform.LegalizeOps()(mod)
    runner = LegalizedRunner(legal)
    rng = np.random.default_rng(1)
    for n in (1, 4, 7):
        x = rng.standard_normal((n, 4)).astype("float32")
        w = rng.standard_normal((4, 5)).astype("float32")
        np.testing.assert_allclose(runner.run("main", x, w), x @ w, rtol=1e-5, atol=1e-5)


def test_custom_legalize_map_wins_and_unknown_shapes_are_left():
    from relax_cases import one_op_module
    from workbench.relax import op as R
    calls = []

    def my_relu(bb, call):
        calls.append(call)
        return bb.call_te(lambda x: __import__("workbench").topi.nn.relu(x), call.args[0],
                          primfunc_name_hint="my_relu")
    mod = one_op_module([("x", relax.TensorStructInfo((4,), "float32"))], R.nn.relu)
    legal = relax.transform.LegalizeOps({"nn.relu": my_relu})(mod)
    assert calls and "my_relu" in legal
    unknown = one_op_module([("x", relax.TensorStructInfo(None, "float32", 2))], R.nn.relu)
    p = relax.transform.LegalizeOps()
    out = p(unknown)
    assert not any(isinstance(f, PrimFunc) for _, f in out.items())
    assert p.skipped and "unknown" in p.skipped[0]
