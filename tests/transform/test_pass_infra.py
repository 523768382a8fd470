"""The pass infrastructure (``workbench.transform`` / ``workbench.instrument``) with TVM's
semantics: opt-level gating in a Sequential, required / disabled passes, instruments that see
every pass (nested Sequentials included) in TVM's call order, ``should_run``, the three forms
of each pass decorator, PassContext nesting and config checks."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax, tir
from workbench.instrument import (
    PassInstrument, PassTimingInstrument, PrintAfterAll, PrintBeforeAll, pass_instrument,
)
from workbench.ir.module import IRModule
from workbench.relax import op
from workbench.transform import (
    ApplyPassToFunction, ModulePass, Pass, PassContext, PassInfo, PrintIR, Sequential,
    module_pass,
)


def _tagging_pass(tag: str, opt_level: int = 0, required=None) -> Pass:
    """A module pass appending ``tag`` to the module attribute ``trail`` (what ran, in
    order)."""
    def f(mod: IRModule, ctx: PassContext) -> IRModule:
        return mod.with_attr("trail", mod.attrs.get("trail", ()) + (tag,))
    return module_pass(f, opt_level=opt_level, name=tag, required=required)


def _trail(mod: IRModule) -> tuple:
    return tuple(mod.attrs.get("trail", ()))


def _relax_mod():
    x = relax.Var("x", relax.TensorStructInfo((4, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(op.nn.relu(x))
            out = bb.emit_output(op.add(y, y))
        bb.emit_func_output(out)
    return bb.get()


@pass_instrument
class _Recorder:
    """Every hook call, in order, as (hook, pass name)."""

    def __init__(self, skip=()):
        self.events = []
        self.skip = set(skip)

    def enter_pass_ctx(self):
        self.events.append(("enter", None))

    def exit_pass_ctx(self):
        self.events.append(("exit", None))

    def should_run(self, mod, info):
        self.events.append(("should_run", info.name))
        return info.name not in self.skip

    def run_before_pass(self, mod, info):
        self.events.append(("before", info.name))

    def run_after_pass(self, mod, info):
        self.events.append(("after", info.name))


# ---- opt levels, required and disabled passes ----------------------------------------------

def test_sequential_runs_passes_up_to_the_context_opt_level():
    seq = Sequential([_tagging_pass("a", 1), _tagging_pass("b", 2), _tagging_pass("c", 3)])
    mod = IRModule()
    assert _trail(seq(mod)) == ("a", "b")  # the default context: opt_level 2
    with PassContext(opt_level=3):
        assert _trail(seq(mod)) == ("a", "b", "c")
    with PassContext(opt_level=0):
        assert _trail(seq(mod)) == ()


def test_required_pass_runs_above_the_level_and_disabled_never():
    seq = Sequential([_tagging_pass("a", 1), _tagging_pass("b", 4), _tagging_pass("c", 0)])
    with PassContext(opt_level=1, required_pass=["b"]):
        assert _trail(seq(IRModule())) == ("a", "b", "c")
    with PassContext(opt_level=3, disabled_pass=["a"]):
        assert _trail(seq(IRModule())) == ("c",)
    # disabled wins over required, as in TVM
    with PassContext(opt_level=3, required_pass=["a"], disabled_pass=["a"]):
        assert _trail(seq(IRModule())) == ("c",)


def test_a_pass_called_alone_is_not_gated_by_its_level():
    with PassContext(opt_level=0):
        assert _trail(_tagging_pass("x", 3)(IRModule())) == ("x",)


def test_a_pass_required_list_runs_the_named_pass_first():
    dce_first = _tagging_pass("after_dce", 0, required=["DeadCodeElimination"])
    seen = []

    @pass_instrument
    class Names:
        def run_before_pass(self, mod, info):
            seen.append(info.name)

    with PassContext(instruments=[Names()]):
        Sequential([dce_first])(_relax_mod())
    assert seen == ["sequential", "DeadCodeElimination", "after_dce"]
    with pytest.raises(ValueError, match="'NoSuchPass' is not registered"):
        Sequential([_tagging_pass("t", 0, required=["NoSuchPass"])])(IRModule())


def test_relax_passes_carry_tvm_levels_and_are_gated_in_a_sequential():
    assert relax.transform.LegalizeOps().info == PassInfo(0, "LegalizeOps")
    assert relax.transform.DeadCodeElimination().info.opt_level == 1
    mod = relax.transform.LegalizeOps()(_relax_mod())
    seq = Sequential([relax.transform.DeadCodeElimination()])
    with PassContext(opt_level=0):
        assert seq(mod) is mod  # DCE (level 1) skipped


# ---- instruments ---------------------------------------------------------------------------

def test_instruments_see_every_pass_in_order_including_nested_sequentials():
    inner = Sequential([_tagging_pass("b"), _tagging_pass("c")], name="inner")
    outer = Sequential([_tagging_pass("a"), inner, _tagging_pass("d")], name="outer")
    rec = _Recorder()
    with PassContext(instruments=[rec]):
        # (make test-roundtrip appends its own instrument after the test's)
        assert PassContext.current().instruments[0] is rec
        out = outer(IRModule())
    assert _trail(out) == ("a", "b", "c", "d")
    expected = [("enter", None)]
    for name in ("outer", "a"):
        expected += [("should_run", name), ("before", name)]
    expected += [("after", "a"), ("should_run", "inner"), ("before", "inner")]
    for name in ("b", "c"):
        expected += [("should_run", name), ("before", name), ("after", name)]
    expected += [("after", "inner"), ("should_run", "d"), ("before", "d"), ("after", "d"),
                 ("after", "outer"), ("exit", None)]
    assert rec.events == expected


def test_every_instrument_is_asked_and_should_run_false_skips_unless_required():
    first, second = _Recorder(skip=["b"]), _Recorder()
    seq = Sequential([_tagging_pass("a"), _tagging_pass("b")])
    with PassContext(instruments=[first, second]):
        assert _trail(seq(IRModule())) == ("a",)
    # the skipped pass was asked of both instruments and seen by neither before / after
    for rec in (first, second):
        assert ("should_run", "b") in rec.events and ("before", "b") not in rec.events
    required = _Recorder(skip=["b"])
    with PassContext(instruments=[required], required_pass=["b"]):
        assert _trail(seq(IRModule())) == ("a", "b")
    assert ("should_run", "b") not in required.events and ("before", "b") in required.events


def test_relax_build_passes_are_seen_by_the_context_instruments():
    rec = _Recorder()
    with PassContext(instruments=[rec]):
        exe = wb.compile(_relax_mod(), "llvm")
    before = [n for kind, n in rec.events if kind == "before"]
    assert before[0] == "default" and "LegalizeOps" in before and "FuseTIR" in before
    # then the kernels' TIR lowering, once the graph is in VM form
    assert before.index("AttachGlobalSymbol") < len(before) - 1 - before[::-1].index(
        "tir.lowering")
    assert before[-1] == "VerifyLowered"
    x = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    out = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x)).numpy()
    np.testing.assert_allclose(out, 2 * np.maximum(x, 0), rtol=1e-6)


def test_instrument_that_fails_to_enter_disables_instrumentation():
    entered = []

    class Good(PassInstrument):
        def enter_pass_ctx(self):
            entered.append("good")

        def exit_pass_ctx(self):
            entered.append("good-exit")

    class Bad(PassInstrument):
        def enter_pass_ctx(self):
            raise RuntimeError("cannot enter")

    ctx = PassContext(instruments=[Good(), Bad()])
    with pytest.raises(RuntimeError, match="cannot enter"):
        with ctx:
            pass
    assert entered == ["good", "good-exit"] and ctx.instruments == []


def test_pass_timing_instrument_renders_nested_passes():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        Sequential([_tagging_pass("a"), Sequential([_tagging_pass("b")], name="inner")])(
            IRModule())
        text = timing.render()
    lines = text.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["sequential", "  a", "  inner", "    b"]
    assert all("us [" in ln and "%)" in ln for ln in lines)
    assert PassTimingInstrument.render() == ""  # leaving the context clears them, as TVM


def test_print_instruments_and_print_ir_print_the_module(capsys):
    with PassContext(instruments=[PrintBeforeAll(), PrintAfterAll()]):
        Sequential([PrintIR("here")])(_relax_mod())
    out = capsys.readouterr().out
    assert "Before Running Pass" in out and "After Running Pass" in out
    assert "PrintIR(here)" in out and out.count("R.nn.relu") == 5  # 2 before, 2 after, 1 IR


def test_pass_context_nests_and_checks_its_arguments():
    assert PassContext.current().opt_level == 2
    with PassContext(opt_level=3) as outer:
        with PassContext(opt_level=1) as inner:
            assert PassContext.current() is inner
        assert PassContext.current() is outer
    with pytest.raises(AttributeError, match="invalid config option 'no.such.key'"):
        PassContext(config={"no.such.key": 1})
    assert PassContext(config={"tir.disable_vectorize": True}).config == {
        "tir.disable_vectorize": True}
    with pytest.raises(TypeError, match="instruments\\[0\\] is a object"):
        PassContext(instruments=[object()])
    with pytest.raises(TypeError, match="required_pass must be a list"):
        PassContext(required_pass="FuseOps")


def test_sequential_and_pass_argument_errors_name_the_culprit():
    with pytest.raises(TypeError, match=r"passes\[1\] is a function"):
        Sequential([_tagging_pass("a"), lambda m: m])
    bad = module_pass(lambda mod, ctx: None, opt_level=0, name="returns_none")
    with pytest.raises(TypeError, match="pass returns_none returned a NoneType"):
        bad(IRModule())
    with pytest.raises(TypeError, match="returns_none expects an IRModule, got str"):
        bad("not a module")


# ---- decorators ----------------------------------------------------------------------------

def test_module_pass_decorates_functions_and_classes_and_is_a_function():
    @module_pass(opt_level=2)
    def add_tag(mod, ctx):
        return mod.with_attr("tag", ctx.opt_level)

    assert isinstance(add_tag, ModulePass) and add_tag.info == PassInfo(2, "add_tag")
    with PassContext(opt_level=3):
        assert add_tag(IRModule()).attrs["tag"] == 3

    @module_pass(opt_level=1, name="Tagger")
    class Tagger:
        def __init__(self, value):
            self.value = value

        def transform_module(self, mod, ctx):
            return mod.with_attr("tag", self.value)

    p = Tagger(7)
    assert isinstance(p, Pass) and p.info.name == "Tagger" and p.value == 7
    assert p(IRModule()).attrs["tag"] == 7
    plain = module_pass(lambda mod, ctx: mod.with_attr("tag", 1), opt_level=0, name="plain")
    assert plain(IRModule()).attrs["tag"] == 1
    with pytest.raises(ValueError, match="opt_level is required"):
        module_pass(lambda mod, ctx: mod)
    with pytest.raises(TypeError, match="has no method transform_module"):
        module_pass(opt_level=0)(type("NoMethod", (), {}))


def test_function_pass_rewrites_each_relax_function():
    mod = _relax_mod()

    @relax.transform.function_pass(opt_level=0)
    def legalize_each(func, m, ctx):
        return relax.transform.LegalizeOps()(IRModule({"main": func}))["main"]

    assert isinstance(legalize_each, relax.transform.FunctionPass)
    assert "R.call_tir" in legalize_each(mod)["main"].script()

    @relax.transform.function_pass(opt_level=0, name="Replace")
    class Replace:
        def __init__(self, new_func):
            self.new_func = new_func

        def transform_function(self, func, m, ctx):
            return self.new_func

    other = _relax_mod()["main"]
    out = Replace(other)(mod)
    assert out["main"] is other and Replace(other).info.name == "Replace"
    plain = relax.transform.function_pass(lambda f, m, c: f, opt_level=0, name="same")
    assert plain(mod)["main"] is mod["main"]


def test_prim_func_pass_rewrites_or_removes_prim_funcs():
    mod = relax.transform.LegalizeOps()(_relax_mod())
    kernels = [n for n, f in mod.items() if isinstance(f, tir.PrimFunc)]

    @tir.transform.prim_func_pass(opt_level=0)
    def mark(func, m, ctx):
        return func.with_attr("marked", True)

    marked = mark(mod)
    assert all(marked[n].attrs["marked"] for n in kernels)
    drop = tir.transform.prim_func_pass(lambda f, m, c: None, opt_level=0, name="drop")
    assert not any(isinstance(f, tir.PrimFunc) for _, f in drop(mod).items())


def test_apply_pass_to_function_touches_only_the_matching_functions():
    mod = relax.transform.LegalizeOps()(_relax_mod())
    mark = tir.transform.prim_func_pass(lambda f, m, c: f.with_attr("marked", True),
                                        opt_level=0, name="mark")
    out = ApplyPassToFunction(mark, "relu")(mod)
    assert out["relu"].attrs.get("marked") and not out["add"].attrs.get("marked")
    assert ApplyPassToFunction(mark, "nothing")(mod) is mod
    with pytest.raises(ValueError, match="no function of the module matches"):
        ApplyPassToFunction(mark, "nothing", True)(mod)


def test_tvm_module_paths_reach_the_same_objects():
    assert wb.ir.transform.PassContext is PassContext is wb.transform.PassContext
    assert wb.ir.instrument.PassInstrument is PassInstrument
    assert relax.transform.Sequential is Sequential


def test_tir_lowering_passes_are_seen_by_instruments_and_compute_the_same():
    from workbench import te
    a = te.placeholder((32,), "float32", name="a")
    b = te.compute((32,), lambda i: a[i] + 1.0, name="b")
    func = te.create_prim_func([a, b])
    rec = _Recorder()
    with PassContext(instruments=[rec]):
        rt = wb.build(func, "llvm")
    before = [n for kind, n in rec.events if kind == "before"]
    assert before[:3] == ["tir.lowering", "VerifyInput", "PlanBufferAllocation"]
    assert before[-1] == "VerifyLowered"
    assert isinstance(tir.transform.LOWERING_PIPELINE[0], Pass)
    x = np.arange(32, dtype="float32")
    y = wb.nd.empty((32,), "float32")
    rt["main"](wb.nd.array(x), y)
    np.testing.assert_allclose(y.numpy(), x + 1)
