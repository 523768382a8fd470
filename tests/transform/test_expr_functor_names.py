"""TVM's visitor / mutator names: ``visit_call_``, ``visit_var_``, ``visit_var_binding_``,
``visit_dataflow_block_``, ... dispatch (Workbench's ``visit_Call_`` spelling still does), the
``@mutator`` / ``@visitor`` decorators on ``PyExprMutator`` / ``PyExprVisitor``, and a
misspelt override is a TypeError when the class is made (it would silently never run)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import workbench as wb
from workbench import IRModule, relax
from workbench.relax import op
from workbench.relax.expr_functor import PyExprMutator, PyExprVisitor, mutator, visitor


def _relu_mlp():
    x = relax.Var("x", relax.TensorStructInfo((4, 8), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((8, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(op.matmul(x, w))
            z = bb.emit(op.nn.relu(y))
            out = bb.emit_output(op.add(z, x))
        bb.emit_func_output(out)
    return bb.get()


# The relax_transformation tutorial's rewrite, written our own way: a mutator overriding TVM's
# visit_call_, driven by a module pass made with the class form of module_pass.
@mutator
class ReluToGeluRewriter(PyExprMutator):
    def __init__(self, mod):
        super().__init__(mod)

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        if isinstance(call.op, relax.Op) and call.op.name == "relax.nn.relu":
            return op.nn.gelu(self.visit_expr(call.args[0]))
        return super().visit_call_(call)


@wb.transform.module_pass(opt_level=0, name="ReluToGelu")
class ReluToGelu:
    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        rewriter = ReluToGeluRewriter(mod)
        for gv, func in mod.functions.items():
            if isinstance(func, relax.Function):
                rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
        return rewriter.builder_.get()


def _gelu(v):
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


def test_relu_to_gelu_rewrite_changes_the_module_and_the_result():
    mod = _relu_mlp()
    out = ReluToGelu()(mod)
    text = out["main"].script()
    assert "R.nn.gelu" in text and "R.nn.relu" not in text
    assert "R.nn.relu" in mod["main"].script()  # the input is not changed
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8)).astype("float32")
    w = rng.standard_normal((8, 8)).astype("float32")
    vm = relax.VirtualMachine(wb.compile(out, "llvm"), wb.cpu())
    got = vm["main"](wb.nd.array(x), wb.nd.array(w)).numpy()
    np.testing.assert_allclose(got, _gelu(x @ w) + x, rtol=1e-4, atol=1e-5)


def test_workbench_spelling_still_dispatches():
    class OldStyle(relax.ExprMutator):
        def visit_Call_(self, call):
            if isinstance(call.op, relax.Op) and call.op.name == "relax.nn.relu":
                return op.nn.gelu(call.args[0])
            return super().visit_Call_(call)

    out = OldStyle(_relu_mlp()).visit_expr(_relu_mlp()["main"])
    assert "R.nn.gelu" in out.script()
    # the two spellings are one method: overriding either replaces both
    assert OldStyle.visit_call_ is OldStyle.visit_Call_
    assert ReluToGeluRewriter.visit_Call_ is ReluToGeluRewriter.visit_call_


@pytest.mark.parametrize("name, closest", [("visit_Cal_", "visit_Call_"),
                                           ("visit_calls_", "visit_call_"),
                                           ("visit_var_bindings_", "visit_var_binding_"),
                                           ("visit_bindng", "visit_binding")])
def test_misspelt_override_raises_naming_the_closest_name(name, closest):
    body = {name: lambda self, node: node}
    with pytest.raises(TypeError, match=f"{name} looks like a visitor override.*"
                                        f"did you mean '{closest}'"):
        type("Misspelt", (PyExprMutator,), body)
    with pytest.raises(TypeError, match=name):
        type("MisspeltVisitor", (PyExprVisitor,), body)


def test_helper_methods_not_named_like_overrides_are_allowed():
    class Helper(PyExprVisitor):
        def visit_all(self, funcs):  # no trailing underscore, not close to a dispatched name
            for f in funcs:
                self.visit_expr(f)

    Helper().visit_all([_relu_mlp()["main"]])


def test_visitor_names_for_vars_bindings_and_blocks():
    seen = {"var": 0, "dataflow_var": 0, "binding": [], "blocks": [], "defs": []}

    @visitor
    class Counter(PyExprVisitor):
        def visit_var_(self, v):
            seen["var"] += 1

        def visit_dataflow_var_(self, v):
            seen["dataflow_var"] += 1

        def visit_var_binding_(self, b):
            seen["binding"].append(b.var.name_hint)
            super().visit_var_binding_(b)

        def visit_dataflow_block_(self, block):
            seen["blocks"].append(type(block).__name__)
            super().visit_dataflow_block_(block)

        def visit_var_def_(self, v):
            seen["defs"].append(v.name_hint)

    func = _relu_mlp()["main"]
    Counter().visit_expr(func)
    # x, w read by matmul and add (3 uses) and gv as the body; lv, lv1 are dataflow vars
    assert seen["var"] == 4 and seen["dataflow_var"] == 2
    assert seen["binding"] == [b.var.name_hint for b in func.body.blocks[0].bindings]
    assert seen["blocks"] == ["DataflowBlock"]
    # visit_dataflow_var_def_ falls back to visit_var_def_: every definition is seen
    assert seen["defs"] == ["x", "w"] + seen["binding"]


def test_mutator_helpers_lookup_binding_and_var_remap():
    func = _relu_mlp()["main"]
    found = {}

    class Lookup(PyExprMutator):
        def visit_call_(self, call):
            if isinstance(call.op, relax.Op) and call.op.name == "relax.nn.relu":
                found["arg"] = self.lookup_binding(call.args[0])
            return super().visit_call_(call)

    Lookup().visit_expr(func)
    assert isinstance(found["arg"], relax.Call) and found["arg"].op.name == "relax.matmul"


def test_decorators_check_the_base_class():
    with pytest.raises(TypeError, match="subclass of PyExprMutator"):
        mutator(type("NotAMutator", (), {}))
    with pytest.raises(TypeError, match="subclass of PyExprVisitor"):
        visitor(ReluToGeluRewriter)
    assert relax.PyExprMutator is relax.ExprMutator
