"""Default schedules inside ``relax.build``: every kernel family compiles to a scheduled kernel
(the expected rule, no rule failure) and the VM's results match the numpy evaluator."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import workbench as wb
from workbench import options, relax
from workbench.relax.pipeline import get_default_pipeline
from workbench.relax.testing import evaluate_numpy, random_inputs
from workbench.tir.function import PrimFunc

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "relax"))
from dlight_cases import CASES, DTYPES, make_module  # noqa: E402
from relax_cases import OP_CASES, case_module  # noqa: E402

def _build(mod, params=None, **kwargs):
    """relax.build with the default pipeline, returning the executable and the
    ApplyDefaultSchedule pass (to look at what it did)."""
    pipeline = get_default_pipeline(**kwargs)
    ds = next(p for p in pipeline if p.name == "ApplyDefaultSchedule")
    exe = relax.build(mod, params=params, relax_pipeline=pipeline)
    return exe, ds


def _run(exe, args):
    vm = relax.VirtualMachine(exe, wb.cpu())
    out = vm["main"](*[wb.nd.array(a) for a in args])
    return tuple(o.numpy() for o in out) if isinstance(out, (tuple, list)) else out.numpy()


def _assert_close(got, want, what):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _assert_close(g, w, what)
        return
    assert got.shape == want.shape, what
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _check_all_scheduled(exe, ds, what):
    assert ds.failures == {}, f"{what}: a rule raised: {ds.failures}"
    kernels = [n for n, f in exe.lowered_mod.items() if isinstance(f, PrimFunc)
               and not n.startswith("shape_func")]
    assert kernels and set(kernels) <= set(ds.applied) | set(ds.skipped), \
        f"{what}: unscheduled kernels {set(kernels) - set(ds.applied)}"
    for name in kernels:
        assert exe.lowered_mod[name].attrs.get("tir.is_scheduled"), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_family_matches_numpy_with_expected_rule(name):
    params, body, dims, rules = CASES[name]
    mod = make_module(params, body, DTYPES.get(name))
    args = random_inputs(mod["main"], dims, seed=3)
    exe, ds = _build(mod)
    _check_all_scheduled(exe, ds, name)
    assert set(ds.applied.values()) == rules, ds.applied
    _assert_close(_run(exe, args), evaluate_numpy(mod, "main", *args), name)


@pytest.mark.parametrize("name", ["conv_nchw_s2", "conv_nhwc", "dense_bias_gelu",
                                  "depthwise_nchw", "conv_nchw_1x1_sym"])
def test_constant_weights_are_packed_at_compile_time(name):
    """With the weights bound as constants, a kernel whose default schedule re-lays out its
    weight takes it pre-packed (no packing loop left in the compiled kernel)."""
    params, body, dims, rules = CASES[name]
    mod = make_module(params, body)
    args = random_inputs(mod["main"], dims, seed=4)
    bound = {p: a for (p, _), a in zip(params, args) if p in ("w", "b")}
    inputs = [a for (p, _), a in zip(params, args) if p not in bound]
    exe, ds = _build(mod, params=bound)
    _check_all_scheduled(exe, ds, name)
    for kernel in exe.kernel_names:
        func = exe.lowered_mod[kernel]
        assert "meta_schedule.layout_rewrite_preproc" not in func.script(), kernel
    _assert_close(_run(exe, inputs), evaluate_numpy(mod, "main", *args), name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_every_legalized_op_matches_numpy(name):
    mod, args = case_module(name)
    exe, ds = _build(mod)
    _check_all_scheduled(exe, ds, name)
    _assert_close(_run(exe, args), evaluate_numpy(mod, "main", *args), name)


@pytest.mark.parametrize("name", ["split_sections", "split_indices"])
def test_split_fused_and_unfused_matches_numpy(name):
    """One output of a multi-output kernel (``split(x)[1]``): FuseTIR once left the fused
    kernel writing a local buffer of the output's name, so the output stayed unset."""
    mod, args = case_module(name)
    exe, ds = _build(mod)
    _check_all_scheduled(exe, ds, name)
    _assert_close(_run(exe, args), evaluate_numpy(mod, "main", *args), name)
    mod, args = case_module(name)
    exe, ds = _build(mod, fuse=False)
    _check_all_scheduled(exe, ds, name)
    _assert_close(_run(exe, args), evaluate_numpy(mod, "main", *args), name)


def _models():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "relax"))
    import relax_compile_models
    return relax_compile_models


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mlp", "cnn", "transformer"])
def test_models_with_symbolic_batch(kind):
    """Every kernel gets its rule with a symbolic batch. (The transformer's attention with a
    symbolic batch was the staged te kernel, which the Chain rule refused -- a predicated
    reduction over a symbolic extent --; it is the fused kernel since issue 22's dynamic
    sequence length.)"""
    models = _models()
    make, _ = models.MODELS[kind]
    mod, names, params, reference = make("n")
    exe, ds = _build(mod)
    _check_all_scheduled(exe, ds, kind)
    vm = relax.VirtualMachine(exe, wb.cpu())
    for batch in (1, 3):
        x = models.input_for(kind, batch)
        out = vm["forward"](wb.nd.array(x), *[wb.nd.array(p) for p in params])
        np.testing.assert_allclose(out.numpy(), reference(x, params), rtol=1e-4, atol=1e-4)


def test_default_schedule_can_be_turned_off():
    params, body, dims, _ = CASES["matmul_nn"]
    mod = make_module(params, body)
    on = relax.build(mod)
    off = relax.build(mod, default_schedule=False)
    assert on.lowered_mod["matmul"].attrs.get("tir.is_scheduled")
    assert not off.lowered_mod["matmul"].attrs.get("tir.is_scheduled")
    with options.override(default_schedule=False):
        assert "ApplyDefaultSchedule" not in get_default_pipeline().pass_names
        assert not relax.build(mod).lowered_mod["matmul"].attrs.get("tir.is_scheduled")
    assert "ApplyDefaultSchedule" in get_default_pipeline().pass_names
    args = random_inputs(mod["main"], {}, seed=1)
    _assert_close(_run(on, args), _run(off, args), "on vs off")
    _assert_close(_run(off, args), args[0] @ args[1], "off vs numpy")
