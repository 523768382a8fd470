"""relax.transform.RunCodegen: functions partitioned for a backend are handed to the codegen
registered as ``relax.ext.<name>`` and called through call_dps_packed; end to end on the model
of TVM's customize_opt tutorial with codegens written in Python, checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from byoc_tutorial import tutorial_case

import workbench
from workbench import relax, te, tir
from workbench.relax.backend import patterns as backend_patterns
from workbench.relax.backend.cuda import cublas
from workbench.relax.transform import FuseOpsByPattern, RunCodegen
from workbench.runtime import remove_global_func
from workbench.script import from_source
from workbench.script.roundtrip import check_roundtrip

SYMBOL = "fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_pyblas"


@pytest.fixture(scope="module")
def tutorial():
    return tutorial_case()


def partition(mod):
    """The tutorial's CublasDispatch, for a backend named "pyblas"."""
    pattern, annotations = backend_patterns.make_matmul_pattern(
        with_bias=True, activation="relax.nn.relu", transposed_rhs=True)
    return FuseOpsByPattern([("pyblas.matmul_transposed_bias_relu", pattern, annotations)],
                            annotate_codegen=True)(mod)


@pytest.fixture
def codegen_name():
    yield "relax.ext.pyblas"
    remove_global_func("relax.ext.pyblas")
    remove_global_func(SYMBOL)


def run(mod, args):
    vm = relax.VirtualMachine(workbench.compile(mod, target="llvm"), workbench.cpu())
    return vm["forward"](*[workbench.nd.array(a) for a in args]).numpy()


def param_order(func):
    """How the composite function's parameters feed the linear layer: its codegen reads
    which one is transposed (the weight), multiplied (the input) and added (the bias)."""
    inner = func.body.blocks[0].bindings[0].value
    roles = {}
    for b in inner.body.blocks[0].bindings:
        name = b.value.op.name
        for a in b.value.args:
            if a in inner.params:
                roles.setdefault(inner.params.index(a), {"relax.permute_dims": "w",
                                                         "relax.matmul": "x",
                                                         "relax.add": "b"}[name])
    return [roles[i] for i in range(len(inner.params))]


def test_a_missing_codegen_is_named(tutorial):
    mod, _, _ = tutorial
    partitioned = cublas.partition_for_cublas(mod)
    if workbench.get_global_func("relax.ext.cublas", True) is not None:
        pytest.skip("a cuBLAS codegen is registered in this process")
    with pytest.raises(RuntimeError, match="Codegen is not found: relax.ext.cublas"):
        RunCodegen()(partitioned)


def test_a_python_codegen_registering_numpy_kernels_runs_end_to_end(tutorial, codegen_name):
    mod, args, expected = tutorial
    received = []

    @workbench.register_func(codegen_name)
    def codegen(functions, options, constant_names):
        received.append((functions, options))
        for func in functions:
            order = param_order(func)

            def kernel(*tensors, order=order):
                a = dict(zip(order, (t.numpy() for t in tensors[:-1])))
                tensors[-1].copyfrom(np.maximum(a["x"] @ a["w"].T + a["b"], 0))
            workbench.register_func(func.attrs["global_symbol"], kernel, override=True)
        return []

    out = RunCodegen({"pyblas": {"mode": "numpy"}})(partition(mod))
    ((functions, options),) = received
    assert [f.attrs["global_symbol"] for f in functions] == [SYMBOL]
    assert functions[0].attrs["Codegen"] == "pyblas" and options == {"mode": "numpy"}
    assert sorted(out) == ["forward"]  # the annotated function is gone
    call = out["forward"].body.blocks[0].bindings[0].value
    assert call.op.name == "relax.call_dps_packed"
    assert isinstance(call.args[0], relax.ExternFunc) and call.args[0].global_symbol == SYMBOL
    assert f'R.call_dps_packed("{SYMBOL}", (fc1_weight, x, fc1_bias)' in out.script()
    assert "external_mods" not in out.attrs
    assert check_roundtrip(out) is None
    np.testing.assert_allclose(run(out, args), expected, rtol=1e-4, atol=1e-4)


def linear_relu_kernel(func, symbol):
    """A compiled kernel for one partition: te, built with workbench.build."""
    inner = func.body.blocks[0].bindings[0].value
    shapes = [tuple(d.value for d in p.struct_info.shape) for p in inner.params]
    order = param_order(func)
    ph = {role: te.placeholder(shape, "float32", role) for role, shape in zip(order, shapes)}
    x, w, b = ph["x"], ph["w"], ph["b"]
    k = te.reduce_axis((0, x.shape[1]), "k")
    mm = te.compute((x.shape[0], w.shape[0]),
                    lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="mm")
    out = te.compute(mm.shape, lambda i, j: tir.max(mm[i, j] + b[j], tir.const(0, "float32")),
                     name="out")
    prim = te.create_prim_func([ph[r] for r in order] + [out]).with_attr("global_symbol",
                                                                         symbol)
    return workbench.build(workbench.IRModule({symbol: prim}), target="llvm")


def test_a_codegen_returning_compiled_modules(tutorial, codegen_name):
    mod, args, expected = tutorial
    workbench.register_func(
        codegen_name,
        lambda functions, options, consts: [linear_relu_kernel(f, f.attrs["global_symbol"])
                                            for f in functions])
    out = RunCodegen()(partition(mod))
    (lib,) = out.attrs["external_mods"]
    assert SYMBOL in lib
    assert workbench.get_global_func(SYMBOL, True) is None  # found in the executable's library
    np.testing.assert_allclose(run(out, args), expected, rtol=1e-4, atol=1e-4)


def test_a_codegen_must_return_runtime_modules(tutorial, codegen_name):
    mod, _, _ = tutorial
    workbench.register_func(codegen_name, lambda functions, options, consts: ["not a module"])
    with pytest.raises(TypeError, match="list of runtime Modules"):
        RunCodegen()(partition(mod))


def test_a_module_without_partitions_is_returned_unchanged(tutorial):
    mod, _, _ = tutorial
    assert RunCodegen()(mod) is mod
    with pytest.raises(TypeError, match="target_options"):
        RunCodegen(target_options=["pyblas"])


def test_external_modules_print_and_save_with_the_executable(tutorial, codegen_name, tmp_path):
    mod, args, expected = tutorial
    workbench.register_func(
        codegen_name,
        lambda functions, options, consts: [linear_relu_kernel(f, f.attrs["global_symbol"])
                                            for f in functions])
    out = RunCodegen()(partition(mod))
    # TVM's form: the module is a metadata reference; show_meta writes its code, which the
    # parser loads again (so the module reads back equal, and runs).
    assert 'I.module_attrs({"external_mods": (metadata["runtime.Module"][0],)})' in \
        out.script()
    assert check_roundtrip(out) is None
    again = from_source(out.script(show_meta=True))
    np.testing.assert_allclose(run(again, args), expected, rtol=1e-4, atol=1e-4)
    exe = workbench.compile(out, target="llvm")
    path = str(tmp_path / "exe.wbx")
    exe.save(path)
    loaded = relax.VirtualMachine(relax.Executable.load(path), workbench.cpu())
    got = loaded["forward"](*[workbench.nd.array(a) for a in args]).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
