"""relax.transform.FuseOpsByPattern and the cuBLAS pattern table (relax.backend): which
bindings a pattern groups, the layout of the functions it makes (TVM's), the check function,
annotate_codegen, and that partitioned modules compute what the original computes (numpy)."""
from __future__ import annotations

import numpy as np
import pytest
from byoc_tutorial import tutorial_case

import workbench
from workbench import relax
from workbench.ir.module import GlobalVar
from workbench.relax.backend import patterns as backend_patterns
from workbench.relax.backend.cuda import cublas
from workbench.relax.dpl import is_const, is_op, wildcard
from workbench.relax.frontend import nn
from workbench.relax.testing import evaluate_numpy
from workbench.relax.transform import FusionPattern, FuseOpsByPattern
from workbench.script import from_source
from workbench.script.roundtrip import check_roundtrip

FUSED_LINEAR = "fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu"


@pytest.fixture(scope="module")
def tutorial():
    return tutorial_case()


def bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def ops_of(func):
    return [b.value.op.name for b in bindings(func)]


def test_cublas_patterns_are_registered_with_tvms_names():
    names = {p.name for p in relax.backend.get_patterns_with_prefix("cublas")}
    for suffix in ("matmul", "matmul_bias", "matmul_bias_relu", "matmul_bias_gelu",
                   "matmul_transposed", "matmul_transposed_bias",
                   "matmul_transposed_bias_relu", "matmul_transposed_bias_gelu"):
        assert f"cublas.{suffix}" in names
    fp = relax.backend.get_pattern("cublas.matmul_transposed_bias_relu")
    assert isinstance(fp, FusionPattern) and fp.check is not None
    assert set(fp.annotation_patterns) == {"lhs", "rhs", "root", "bias"}
    assert relax.backend.get_pattern("cublas.no_such_pattern") is None
    # Highest priority first: the later-registered, longer patterns come before plain matmul.
    order = [p.name for p in relax.backend.get_patterns_with_prefix("cublas")]
    assert order.index("cublas.matmul_transposed_bias_relu") < \
        order.index("cublas.matmul_transposed_bias") < order.index("cublas.matmul")


def test_one_pattern_groups_the_first_linear_layer(tutorial):
    mod, args, expected = tutorial
    fp = relax.backend.get_pattern("cublas.matmul_transposed_bias_relu")
    out = FuseOpsByPattern([fp])(mod)
    assert sorted(out) == sorted(["forward", FUSED_LINEAR])
    fused = out[FUSED_LINEAR]
    assert dict(fused.attrs) == {"Composite": "cublas.matmul_transposed_bias_relu",
                                 "Primitive": True}
    assert "global_symbol" not in fused.attrs  # private, as TVM makes it
    assert ops_of(fused) == ["relax.permute_dims", "relax.matmul", "relax.add", "relax.nn.relu"]
    assert [p.name_hint for p in fused.params] == ["fc1.weight", "x", "fc1.bias"]
    caller = bindings(out["forward"])
    call = caller[0].value
    assert isinstance(call.op, GlobalVar) and call.op.name_hint == FUSED_LINEAR
    x, w1, b1, _ = out["forward"].params
    assert call.args == (w1, x, b1)
    # The second layer is not this pattern's: it stays as it was.
    assert [b.value.op.name for b in caller[1:3]] == ["relax.permute_dims", "relax.matmul"]
    assert check_roundtrip(out) is None
    np.testing.assert_allclose(evaluate_numpy(out, "forward", *args), expected, rtol=1e-5,
                               atol=1e-5)


def test_all_cublas_patterns_group_both_layers_and_the_result_still_compiles(tutorial):
    mod, args, expected = tutorial
    out = FuseOpsByPattern(relax.backend.get_patterns_with_prefix("cublas"))(mod)
    composites = {name: f.attrs["Composite"] for name, f in out.items() if name != "forward"}
    assert composites == {FUSED_LINEAR: "cublas.matmul_transposed_bias_relu",
                          "fused_relax_permute_dims_relax_matmul": "cublas.matmul_transposed"}
    vm = relax.VirtualMachine(workbench.compile(out, target="llvm"), workbench.cpu())
    got = vm["forward"](*[workbench.nd.array(a) for a in args]).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_annotate_codegen_wraps_each_composite_for_its_backend(tutorial):
    mod, args, expected = tutorial
    out = cublas.partition_for_cublas(mod)
    outer_name = FUSED_LINEAR + "_cublas"
    assert FUSED_LINEAR not in out and outer_name in out
    outer = out[outer_name]
    assert dict(outer.attrs) == {"Codegen": "cublas", "global_symbol": outer_name}
    local_binding, call_binding = bindings(outer)
    inner = local_binding.value
    assert isinstance(inner, relax.Function)
    assert dict(inner.attrs) == {"Composite": "cublas.matmul_transposed_bias_relu"}
    assert call_binding.value.op is local_binding.var
    assert call_binding.value.args == outer.params
    assert outer.body.body is call_binding.var
    first = bindings(out["forward"])[0].value
    assert first.op.name_hint == outer_name
    assert check_roundtrip(out) is None
    np.testing.assert_allclose(evaluate_numpy(out, "forward", *args), expected, rtol=1e-5,
                               atol=1e-5)


def test_the_check_function_is_honoured_and_sees_the_match(tutorial):
    mod, _, _ = tutorial
    pattern, annotations = backend_patterns.make_matmul_pattern(
        with_bias=True, activation="relax.nn.relu", transposed_rhs=True)
    contexts = []

    def record(ctx):
        contexts.append(ctx)
        return False

    out = FuseOpsByPattern([("test.linear", pattern, annotations, record)])(mod)
    assert sorted(out) == ["forward"]  # rejected: nothing fused
    (ctx,) = contexts
    relu_var = bindings(mod["forward"])[3].var
    assert ctx.value_to_bound_var[ctx.matched_expr] is relu_var
    assert set(ctx.annotated_expr) == {"lhs", "rhs", "bias", "root"}
    assert ctx.annotated_expr["lhs"] is mod["forward"].params[0]
    assert sorted(v.name_hint for v in ctx.matched_bindings) == \
        ["add", "matmul", "permute_dims", "relu"]
    matmul_var = bindings(mod["forward"])[1].var
    assert [v.name_hint for v in ctx.var_usages[matmul_var]] == ["add"]
    accepted = FuseOpsByPattern([("test.linear", pattern, annotations, lambda c: True)])(mod)
    assert "fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu" in accepted


LEAKY = '''
@R.function
def main(x: R.Tensor((2, 8), dtype="float32"), w: R.Tensor((4, 8), dtype="float32"),
         b: R.Tensor((4,), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
    with R.dataflow():
        wt: R.Tensor((8, 4), dtype="float32") = R.permute_dims(w)
        mm: R.Tensor((2, 4), dtype="float32") = R.matmul(x, wt)
        biased: R.Tensor((2, 4), dtype="float32") = R.add(mm, b)
        act: R.Tensor((2, 4), dtype="float32") = R.nn.relu(biased)
        gv: R.Tensor((2, 4), dtype="float32") = R.add(act, biased)
        R.output(gv)
    return gv
'''


def leaky_module():
    return workbench.IRModule({"main": from_source(LEAKY)})


def test_cublas_check_refuses_a_match_whose_intermediate_is_used_outside():
    # `biased` feeds both the relu and the final add: fusing matmul+bias+relu would lose it,
    # so cuBLAS's check refuses that match and the matmul+bias pattern takes the region.
    out = cublas.partition_for_cublas(leaky_module())
    composites = sorted(f.attrs.get("Composite") for f in _inner_functions(out))
    assert composites == ["cublas.matmul_transposed_bias"]
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") for s in ((2, 8), (4, 8), (4,))]
    x, w, b = args
    biased = x @ w.T + b
    np.testing.assert_allclose(evaluate_numpy(out, "main", *args),
                               np.maximum(biased, 0) + biased, rtol=1e-5, atol=1e-5)


def _inner_functions(mod):
    for func in mod.functions.values():
        if isinstance(func, relax.Function) and "Codegen" in func.attrs:
            yield bindings(func)[0].value


def test_without_a_check_a_group_returns_every_value_used_outside():
    # relu(add(mm, b)) with `biased` also used later: the group returns (biased, act).
    pattern = is_op("relax.nn.relu")(is_op("relax.add")(wildcard(), wildcard()))
    out = FuseOpsByPattern([("demo.add_relu", pattern)])(leaky_module())
    fused = out["fused_relax_add_relax_nn_relu"]
    assert isinstance(fused.ret_struct_info, relax.TupleStructInfo)
    assert len(fused.ret_struct_info.fields) == 2
    main = bindings(out["main"])
    assert [type(b.value).__name__ for b in main] == [
        "Call", "Call", "Call", "TupleGetItem", "TupleGetItem", "Call"]
    assert check_roundtrip(out) is None
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s).astype("float32") for s in ((2, 8), (4, 8), (4,))]
    np.testing.assert_allclose(evaluate_numpy(out, "main", *args),
                               evaluate_numpy(leaky_module(), "main", *args), rtol=1e-6)


CONST_BIAS = '''
@R.function
def main(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((3, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
    with R.dataflow():
        mm: R.Tensor((2, 3), dtype="float32") = R.matmul(x, w)
        gv: R.Tensor((2, 3), dtype="float32") = R.add(mm, R.const([1.0, 2.0, 3.0], "float32"))
        R.output(gv)
    return gv
'''


@pytest.mark.parametrize("bind_constants", [True, False])
def test_bind_constants_keeps_constants_inside_or_makes_them_parameters(bind_constants):
    mod = workbench.IRModule({"main": from_source(CONST_BIAS)})
    pattern = is_op("relax.add")(is_op("relax.matmul")(wildcard(), wildcard()), is_const())
    out = FuseOpsByPattern([("demo.matmul_bias", pattern)], bind_constants=bind_constants)(mod)
    fused = out["fused_relax_matmul_relax_add"]
    assert len(fused.params) == (2 if bind_constants else 3)
    call = bindings(out["main"])[0].value
    assert len(call.args) == len(fused.params)
    assert check_roundtrip(out) is None
    x = np.arange(6, dtype="float32").reshape(2, 3)
    w = np.eye(3, dtype="float32") * 2
    np.testing.assert_allclose(evaluate_numpy(out, "main", x, w), x @ w + [1.0, 2.0, 3.0])


def test_entry_functions_limit_where_the_pass_looks():
    mod = workbench.IRModule({"main": from_source(CONST_BIAS),
                              "other": from_source(CONST_BIAS.replace("def main", "def other"))})
    pattern = is_op("relax.matmul")(wildcard(), wildcard())
    out = FuseOpsByPattern([("demo.matmul", pattern)], entry_functions=["other"])(mod)
    assert out["main"] is mod["main"]
    assert bindings(out["other"])[0].value.op.name_hint == "fused_relax_matmul"
    assert out["fused_relax_matmul"].attrs["Composite"] == "demo.matmul"
    with pytest.raises(ValueError, match="'nope'"):
        FuseOpsByPattern([("demo.matmul", pattern)], entry_functions=["nope"])(mod)


def test_invalid_patterns_are_reported():
    with pytest.raises(ValueError, match="Invalid pattern"):
        FuseOpsByPattern(["cublas.matmul"])
    with pytest.raises(TypeError, match="DFPattern"):
        FusionPattern("demo.bad", "relax.matmul")
    with pytest.raises(TypeError, match="non-empty str"):
        FusionPattern("", wildcard())


class DynamicModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 8)
        self.fc2 = nn.Linear(8, 4, bias=False)

    def forward(self, x):
        return self.fc2(nn.gelu(self.fc1(x)))


def test_symbolic_batch_each_function_owns_its_symbolic_vars():
    mod, params = DynamicModel().export_tvm({"forward": {"x": nn.spec.Tensor(("n", 16),
                                                                             "float32")}})
    annotated = cublas.partition_for_cublas(mod)
    composites = sorted(f.attrs["Composite"] for f in _inner_functions(annotated))
    assert composites == ["cublas.matmul_transposed", "cublas.matmul_transposed_bias_gelu"]
    plain = FuseOpsByPattern(relax.backend.get_patterns_with_prefix("cublas"))(mod)
    assert check_roundtrip(annotated) is None and check_roundtrip(plain) is None
    vm = relax.VirtualMachine(workbench.compile(plain, target="llvm"), workbench.cpu())
    rng = np.random.default_rng(3)
    weights = [rng.standard_normal(p.shape).astype("float32") for _, p in params]
    for batch in (3, 5):
        x = rng.standard_normal((batch, 16)).astype("float32")
        expected = evaluate_numpy(mod, "forward", x, *weights)
        np.testing.assert_allclose(evaluate_numpy(annotated, "forward", x, *weights), expected,
                                   rtol=1e-6)
        got = vm["forward"](*[workbench.nd.array(a) for a in (x, *weights)]).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


# TVM's layout of an annotate_codegen partition, written as TVM's tests write it (a local
# @R.function without private=True has no global_symbol).
EXPECTED_ANNOTATED = '''
@I.ir_module
class Expected:
    @R.function
    def forward(x: R.Tensor((1, 784), dtype="float32"), fc1_weight: R.Tensor((256, 784), dtype="float32"), fc1_bias: R.Tensor((256,), dtype="float32"), fc2_weight: R.Tensor((10, 256), dtype="float32")) -> R.Tensor((1, 10), dtype="float32"):
        R.func_attr({"num_input": 1})
        cls = Expected
        with R.dataflow():
            lv: R.Tensor((1, 256), dtype="float32") = cls.fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_cublas(fc1_weight, x, fc1_bias)
            permute_dims1: R.Tensor((256, 10), dtype="float32") = R.permute_dims(fc2_weight, axes=None)
            matmul1: R.Tensor((1, 10), dtype="float32") = R.matmul(lv, permute_dims1, out_dtype="void")
            gv: R.Tensor((1, 10), dtype="float32") = matmul1
            R.output(gv)
        return gv

    @R.function
    def fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_cublas(fc1_weight1: R.Tensor((256, 784), dtype="float32"), x1: R.Tensor((1, 784), dtype="float32"), fc1_bias1: R.Tensor((256,), dtype="float32")) -> R.Tensor((1, 256), dtype="float32"):
        R.func_attr({"Codegen": "cublas"})

        @R.function
        def gv1(fc1_weight2: R.Tensor((256, 784), dtype="float32"), x2: R.Tensor((1, 784), dtype="float32"), fc1_bias2: R.Tensor((256,), dtype="float32")) -> R.Tensor((1, 256), dtype="float32"):
            R.func_attr({"Composite": "cublas.matmul_transposed_bias_relu"})
            with R.dataflow():
                permute_dims: R.Tensor((784, 256), dtype="float32") = R.permute_dims(fc1_weight2, axes=None)
                matmul: R.Tensor((1, 256), dtype="float32") = R.matmul(x2, permute_dims, out_dtype="void")
                add: R.Tensor((1, 256), dtype="float32") = R.add(matmul, fc1_bias2)
                gv2: R.Tensor((1, 256), dtype="float32") = R.nn.relu(add)
                R.output(gv2)
            return gv2

        gv11: R.Tensor((1, 256), dtype="float32") = gv1(fc1_weight1, x1, fc1_bias1)
        return gv11
'''


def test_the_partition_has_tvms_layout(tutorial):
    mod, _, _ = tutorial
    fp = relax.backend.get_pattern("cublas.matmul_transposed_bias_relu")
    out = FuseOpsByPattern([fp], annotate_codegen=True)(mod)
    workbench.ir.assert_structural_equal(out, from_source(EXPECTED_ANNOTATED))
