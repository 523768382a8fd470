"""relax.transform.MergeCompositeFunctions: composite calls of one backend merge into one
function per region unless that would make a cycle (TVM's Diamond cases), and the result
runs through RunCodegen with Python codegens, checked against the numpy evaluator."""
from __future__ import annotations

import numpy as np
import pytest

import workbench
from workbench import relax
from workbench.ir.module import IRModule
from workbench.relax.testing import evaluate_numpy
from workbench.relax.transform import MergeCompositeFunctions, RunCodegen
from workbench.runtime import remove_global_func
from workbench.script import from_source
from workbench.script.roundtrip import check_roundtrip

T = 'R.Tensor((2, 4), dtype="float32")'


def diamond(relu_codegen="compiler_A", gelu_codegen="compiler_A"):
    """matmul -> (relu, gelu) -> add, each op a composite function (TVM's Diamond test)."""
    return from_source(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: {T}, w: R.Tensor((4, 4), dtype="float32")) -> {T}:
        cls = Module
        with R.dataflow():
            lv2: {T} = cls.fused_relax_matmul(x, w)
            lv3: {T} = cls.fused_relax_nn_relu(lv2)
            lv4: {T} = cls.fused_relax_nn_gelu(lv2)
            gv2: {T} = cls.fused_relax_add(lv3, lv4)
            R.output(gv2)
        return gv2

    @R.function(private=True)
    def fused_relax_nn_gelu(lv: {T}) -> {T}:
        R.func_attr({{"Primitive": True, "Composite": "{gelu_codegen}.gelu"}})
        with R.dataflow():
            gv: {T} = R.nn.gelu(lv)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_relax_nn_relu(lv1: {T}) -> {T}:
        R.func_attr({{"Primitive": True, "Composite": "{relu_codegen}.relu"}})
        with R.dataflow():
            gv1: {T} = R.nn.relu(lv1)
            R.output(gv1)
        return gv1

    @R.function(private=True)
    def fused_relax_add(lv5: {T}, gelu1: {T}) -> {T}:
        R.func_attr({{"Primitive": True, "Composite": "compiler_A.add"}})
        with R.dataflow():
            gv3: {T} = R.add(lv5, gelu1)
            R.output(gv3)
        return gv3

    @R.function(private=True)
    def fused_relax_matmul(x1: {T}, w1: R.Tensor((4, 4), dtype="float32")) -> {T}:
        R.func_attr({{"Primitive": True, "Composite": "compiler_A.matmul"}})
        with R.dataflow():
            gv4: {T} = R.matmul(x1, w1)
            R.output(gv4)
        return gv4
''')


def codegens(mod):
    return {name: f.attrs["Codegen"] for name, f in mod.items()
            if isinstance(f, relax.Function) and "Codegen" in f.attrs}


def composites_inside(func):
    return [b.value.attrs["Composite"] for block in func.body.blocks for b in block.bindings
            if isinstance(b.value, relax.Function)]


def args():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((2, 4)).astype("float32"),
            rng.standard_normal((4, 4)).astype("float32")]


def test_one_backend_merges_the_whole_diamond():
    mod = diamond()
    out = MergeCompositeFunctions()(mod)
    name = "fused_relax_matmul_relax_nn_relu_relax_nn_gelu_relax_add_compiler_A"
    assert codegens(out) == {name: "compiler_A"}
    assert sorted(out) == sorted(["main", name])  # the composite functions are gone
    merged = out[name]
    assert merged.attrs["global_symbol"] == name and "Primitive" not in merged.attrs
    assert composites_inside(merged) == ["compiler_A.matmul", "compiler_A.relu",
                                         "compiler_A.gelu", "compiler_A.add"]
    assert not any(isinstance(b, relax.DataflowBlock) for b in merged.body.blocks)
    assert check_roundtrip(out) is None
    np.testing.assert_allclose(evaluate_numpy(out, "main", *args()),
                               evaluate_numpy(mod, "main", *args()), rtol=1e-6)


def test_a_region_that_would_make_a_cycle_is_not_merged():
    # gelu goes to compiler_B: add (compiler_A) reads it, and gelu reads the matmul region,
    # so add merging into that region would make a cycle through compiler_B.
    mod = diamond(gelu_codegen="compiler_B")
    out = MergeCompositeFunctions()(mod)
    assert codegens(out) == {
        "fused_relax_matmul_relax_nn_relu_compiler_A": "compiler_A",
        "fused_relax_nn_gelu1_compiler_B": "compiler_B",
        "fused_relax_add1_compiler_A": "compiler_A",
    }
    assert check_roundtrip(out) is None
    np.testing.assert_allclose(evaluate_numpy(out, "main", *args()),
                               evaluate_numpy(mod, "main", *args()), rtol=1e-6)


@pytest.fixture
def python_codegens():
    """relax.ext.compiler_A / compiler_B: each function runs in the numpy evaluator."""
    names = []

    def codegen(functions, options, constant_names):
        for func in functions:
            symbol = func.attrs["global_symbol"]
            single = IRModule({"f": func.without_attr("Codegen")})

            n_out = len(func.ret_struct_info.fields) \
                if isinstance(func.ret_struct_info, relax.TupleStructInfo) else 1

            def kernel(*tensors, single=single, n_out=n_out):
                ins, outs = tensors[:-n_out], tensors[-n_out:]
                result = evaluate_numpy(single, "f", *[t.numpy() for t in ins])
                for o, r in zip(outs, result if n_out > 1 else [result]):
                    o.copyfrom(r)
            workbench.register_func(symbol, kernel, override=True)
            names.append(symbol)
        return []

    for backend in ("compiler_A", "compiler_B"):
        workbench.register_func(f"relax.ext.{backend}", codegen, override=True)
    yield names
    for name in names + ["relax.ext.compiler_A", "relax.ext.compiler_B"]:
        remove_global_func(name)


def test_merged_regions_run_through_run_codegen(python_codegens):
    mod = diamond(gelu_codegen="compiler_B")
    out = RunCodegen()(MergeCompositeFunctions()(mod))
    assert sorted(out) == ["main"]
    assert len(python_codegens) == 3
    vm = relax.VirtualMachine(workbench.compile(out, target="llvm"), workbench.cpu())
    got = vm["main"](*[workbench.nd.array(a) for a in args()]).numpy()
    np.testing.assert_allclose(got, evaluate_numpy(mod, "main", *args()), rtol=1e-5, atol=1e-6)


def test_main_is_required():
    with pytest.raises(ValueError, match="'main'"):
        MergeCompositeFunctions()(IRModule({}))
