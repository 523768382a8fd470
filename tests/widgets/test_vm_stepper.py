"""VMStepper and its core, driven without a browser: the same methods the buttons call, then
the widget state (labels, HTML tables) and the records are checked against numpy and against
the order a plain instrument sees."""
import threading

import numpy as np
import pytest

pytest.importorskip("ipywidgets")

import workbench as wb  # noqa: E402
from workbench import te  # noqa: E402
from workbench.ir import IRModule  # noqa: E402
from workbench.runtime import register_func, remove_global_func  # noqa: E402
from workbench.runtime.relax_vm import (  # noqa: E402
    DataType, ExecBuilder, VirtualMachine, VMFuncKind)
from workbench.widgets import VMStepper  # noqa: E402
from workbench.widgets._call_records import describe  # noqa: E402
from workbench.widgets._stepping import Stepper, trace  # noqa: E402

N = 8
F32 = DataType("float32")
WAIT = 10.0   # seconds; only reached when something is broken
# main(x) = scale(vlog(negate(add1(x)))): log of a negative number plants a NaN at "vlog".
CHAIN = ["add1", "negate", "vlog", "scale"]
CHAIN_CALLS = ["vm.builtin.alloc_storage"] + [
    s for k in CHAIN for s in ("vm.builtin.alloc_tensor", k)]


def _unary(name, fn):
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: fn(A[i]), name="B")
    return te.create_prim_func([A, B]).with_attr("global_symbol", name)


@pytest.fixture(scope="module")
def lib():
    return wb.build(IRModule({
        "add1": _unary("add1", lambda a: a + 1.0), "negate": _unary("negate", lambda a: -a),
        "vlog": _unary("vlog", te.log), "scale": _unary("scale", lambda a: a * 2.0)}))


def _emit_chain(ib, src, kernels, first_reg):
    """alloc_storage, then per kernel: alloc_tensor + DPS call; returns the last output reg."""
    ib.emit_call("vm.builtin.alloc_storage", args=[
        ib.vm_state(), (64 * len(kernels),), ib.imm(0), DataType("uint8"),
        ib.convert_constant("global")], dst=ib.r(first_reg))
    prev = src
    for k, kernel in enumerate(kernels):
        out = first_reg + 1 + k
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(first_reg), ib.imm(64 * k), (N,),
                                                      F32], dst=ib.r(out))
        ib.emit_call(kernel, args=[ib.r(prev), ib.r(out)])
        prev = out
    return prev


@pytest.fixture
def vm(lib):
    ib = ExecBuilder()
    with ib.function("main", num_inputs=1, param_names=["x"]):
        ib.emit_ret(ib.r(_emit_chain(ib, 0, CHAIN, 10)))
    exe = ib.get()
    exe.import_module(lib)
    return VirtualMachine(exe, wb.cpu())


@pytest.fixture
def nested_vm(lib):
    """main(x) = scale(inner(x)), inner(x) = vlog(negate(x)): the NaN appears inside inner."""
    ib = ExecBuilder()
    ib.declare_function("inner", VMFuncKind.VM_FUNC)
    with ib.function("main", num_inputs=1, param_names=["x"]):
        ib.emit_call("inner", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(_emit_chain(ib, 1, ["scale"], 10)))
    with ib.function("inner", num_inputs=1, param_names=["x"]):
        ib.emit_ret(ib.r(_emit_chain(ib, 0, ["negate", "vlog"], 10)))
    exe = ib.get()
    exe.import_module(lib)
    return VirtualMachine(exe, wb.cpu())


def reference(x):
    with np.errstate(invalid="ignore"):
        return 2 * np.log(-(x + 1))


def positive(seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.0, N).astype("float32")


def stepper_threads():
    return [t for t in threading.enumerate() if t.name.startswith("vm-stepper") and t.is_alive()]


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    yield
    assert stepper_threads() == []


def close(stepper):
    assert stepper.close(WAIT)
    assert stepper_threads() == []


# ---- stepping ------------------------------------------------------------------------------------

def test_step_order_matches_instrument_order(vm):
    x = wb.nd.array(np.linspace(-3, -1.5, N).astype("float32"))   # log stays finite
    seen = []
    vm.set_instrument(lambda f, name, before, ret, *a: seen.append(
        (name, tuple(vm.instrument_position))) if before else None)
    vm["main"](x)
    vm.set_instrument(None)
    assert [s for s, _ in seen] == CHAIN_CALLS
    assert [p for _, p in seen] == [("main", i, i) for i in range(len(CHAIN_CALLS))]

    stepper = VMStepper(vm, "main", x)
    stepped = []
    while stepper.wait_paused(WAIT):
        stepped.append((stepper.pending.symbol, tuple(stepper.pending.site)))
        assert stepper.pending.status == "pending"
        stepper.step()
    assert stepped == seen
    assert stepper.status == "finished"
    np.testing.assert_allclose(stepper.result.numpy(), reference(x.numpy()), rtol=1e-5)
    assert [r.status for r in stepper.history] == ["done"] * len(CHAIN_CALLS)
    assert [r.completed for r in stepper.history] == list(range(len(CHAIN_CALLS)))
    close(stepper)


def test_breakpoints_continue_and_run_to(vm):
    x = wb.nd.array(positive())
    stepper = VMStepper(vm, "main", x, breakpoints=["vlog", "scale"])
    assert stepper.wait_paused(WAIT) and stepper.pending.index == 0   # paused at the start
    stepper.continue_()
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "vlog"
    assert "(breakpoint)" in stepper.status_html.value
    stepper.continue_()
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "scale"
    stepper.continue_()
    assert not stepper.wait_paused(WAIT) and stepper.status == "finished"
    close(stepper)

    stepper = VMStepper(vm, "main", x, breakpoints="scale")
    stepper.wait_paused(WAIT)
    stepper.run_to("negate")                     # stops there before the breakpoint
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "negate"
    stepper.run_to("alloc_*")                    # no match: patterns use fnmatch
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "scale"
    stepper.remove_breakpoint("scale")
    stepper.add_breakpoint("vm.builtin.alloc_*")
    assert stepper.breakpoints == {"vm.builtin.alloc_*"}
    assert stepper.breakpoints_input.value == ["vm.builtin.alloc_*"]
    stepper.run_to("nothing-matches")
    assert not stepper.wait_paused(WAIT)         # no alloc after "scale": runs to the end
    np.testing.assert_allclose(stepper.result.numpy(), reference(x.numpy()), rtol=1e-5)
    with pytest.raises(RuntimeError, match="not paused"):
        stepper.step()
    close(stepper)


def test_continue_ignoring_breakpoints_and_pause_request(vm):
    stepper = VMStepper(vm, "main", wb.nd.array(positive()), breakpoints=["*"])
    stepper.wait_paused(WAIT)
    stepper.continue_(ignore_breakpoints=True)
    assert not stepper.wait_paused(WAIT)
    assert len(stepper.history) == len(CHAIN_CALLS)
    stepper.pause()                                # ended: no effect, no error
    close(stepper)


def test_skip_leaves_the_output_unchanged(vm):
    x = wb.nd.array(positive())
    stepper = VMStepper(vm, "main", x)
    stepper.run_to("vlog")
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "vlog"
    src, out = stepper.pending_values
    np.testing.assert_allclose(src.numpy(), -(x.numpy() + 1), rtol=1e-6)
    out.copyfrom(np.full(N, 7.0, dtype="float32"))   # what the skipped call must leave alone
    stepper.skip()
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "vm.builtin.alloc_tensor"
    np.testing.assert_array_equal(out.numpy(), np.full(N, 7.0))
    skipped = stepper.history[-2]
    assert skipped.symbol == "vlog" and skipped.status == "skipped"
    assert skipped.args_after is None and skipped.completed is None
    stepper.continue_()
    assert not stepper.wait_paused(WAIT)
    np.testing.assert_array_equal(stepper.result.numpy(), np.full(N, 14.0))  # scale(7)
    assert stepper.first_nonfinite() is None        # the NaN-making call never ran
    assert "skipped" in stepper.history_html.value
    close(stepper)


def test_inspect_stats_match_numpy(vm):
    xs = np.random.default_rng(3).standard_normal(N).astype("float32") * 5
    x = wb.nd.array(xs)
    stepper = VMStepper(vm, "main", x)
    stepper.run_to("add1")
    assert stepper.wait_paused(WAIT)
    arg = stepper.pending.args[0]
    assert (arg.kind, arg.shape, arg.dtype, arg.text) == ("tensor", (N,), "float32",
                                                          "float32[8]")
    assert arg.min == pytest.approx(xs.min()) and arg.max == pytest.approx(xs.max())
    assert arg.mean == pytest.approx(xs.astype("float64").mean(), rel=1e-6)
    assert arg.preview == pytest.approx(tuple(xs[:6]))
    stepper.step()
    stepper.wait_paused(WAIT)
    done = stepper.history[-2]
    assert done.symbol == "add1" and done.result.kind == "none"
    out = done.args_after[1]
    assert done.output is out
    expect = xs + np.float32(1)
    assert (out.min, out.max) == pytest.approx((expect.min(), expect.max()))
    assert out.mean == pytest.approx(expect.astype("float64").mean(), rel=1e-6)
    assert out.nan == out.inf == 0 and done.duration > 0
    # the widget shows the same numbers
    assert f"{expect.max():.4g}" in stepper.call_html.value
    assert "Last completed call #2" in stepper.call_html.value
    close(stepper)


def test_describe_non_finite_and_other_values():
    arr = np.array([1.0, np.nan, -np.inf, 3.0, np.inf, 5.0, 6.0, 7.0], dtype="float32")
    info = describe(wb.nd.array(arr))
    finite = arr[np.isfinite(arr)]
    assert (info.nan, info.inf, info.nonfinite) == (1, 2, 3)
    assert (info.min, info.max, info.mean) == (finite.min(), finite.max(), finite.mean())
    assert info.preview[:1] == (1.0,) and np.isnan(info.preview[1]) and len(info.preview) == 6
    nans = describe(wb.nd.array(np.full(3, np.nan, dtype="float64")))
    assert nans.nan == 3 and nans.min is nans.max is nans.mean is None
    ints = describe(wb.nd.array(np.array([[3, -2], [7, 0]], dtype="int32")))
    assert (ints.min, ints.max, ints.mean, ints.shape) == (-2, 7, 2.0, (2, 2))
    flags = describe(wb.nd.array(np.array([True, False, True])))
    assert (flags.min, flags.max, flags.dtype) == (0, 1, "bool")
    assert describe(None).kind == "none" and describe(3).text == "3"
    assert describe("float32").kind == "str"


# ---- trace mode ------------------------------------------------------------------------------------

def test_trace_dataframe(vm):
    xs = np.linspace(-4, -2, N).astype("float32")          # finite all the way
    tr = VMStepper.trace(vm, "main", wb.nd.array(xs))
    assert tr.status == "finished" and tr.error is None
    np.testing.assert_allclose(tr.result.numpy(), reference(xs), rtol=1e-5)
    frame = tr.frame
    assert frame["symbol"].tolist() == CHAIN_CALLS
    assert frame["call"].tolist() == list(range(len(CHAIN_CALLS)))
    assert frame["pc"].tolist() == list(range(len(CHAIN_CALLS)))
    assert set(frame["function"]) == {"main"} and set(frame["depth"]) == {0}
    for column in ("arg_shapes", "arg_dtypes", "out_min", "out_max", "out_mean", "nan", "inf",
                   "duration_us", "status"):
        assert column in frame.columns
    add1 = frame[frame["symbol"] == "add1"].iloc[0]
    assert add1["arg_shapes"] == ((N,), (N,)) and add1["arg_dtypes"] == ("float32", "float32")
    assert add1["out_shape"] == (N,) and add1["out_dtype"] == "float32"
    assert add1["out_mean"] == pytest.approx((xs + 1).astype("float64").mean(), rel=1e-6)
    scale = frame[frame["symbol"] == "scale"].iloc[0]
    assert scale["out_min"] == pytest.approx(reference(xs).min(), rel=1e-5)
    assert (frame["duration_us"] > 0).all() and (frame["nan"] == 0).all()
    assert tr.first_nonfinite() is None
    assert "VM trace" in tr._repr_html_() and len(tr) == len(CHAIN_CALLS)
    assert vm["main"](wb.nd.array(xs)) is not None    # instrument removed afterwards


def test_first_nonfinite_finds_the_planted_nan(vm):
    tr = trace(vm, "main", wb.nd.array(positive()))     # log(-(x + 1)) is NaN
    row = tr.first_nonfinite()
    assert row["symbol"] == "vlog" and row["call"] == CHAIN_CALLS.index("vlog")
    assert row["nan"] == N and row["inf"] == 0 and np.isnan(row["out_mean"])
    assert tr.frame["nan"].tolist() == [0] * 6 + [N, 0, 2 * N]  # scale: NaN in and out
    np.testing.assert_array_equal(np.isnan(tr.result.numpy()), True)


def test_nested_vm_function_depth_and_first_nonfinite(nested_vm):
    tr = trace(nested_vm, "main", wb.nd.array(positive()))
    frame = tr.frame
    assert frame["symbol"].tolist()[:3] == ["inner", "vm.builtin.alloc_storage",
                                            "vm.builtin.alloc_tensor"]
    inner = frame.iloc[0]
    assert inner["depth"] == 0 and inner["function"] == "main" and inner["index"] == 0
    vlog = frame[frame["symbol"] == "vlog"].iloc[0]
    assert vlog["depth"] == 1 and vlog["function"] == "inner"
    assert vlog["completed"] < inner["completed"]      # inner calls finish first
    row = tr.first_nonfinite()
    assert row["symbol"] == "vlog"                   # not the enclosing "inner" call
    assert frame["pc"].is_unique


def test_run_trace_after_stepping(vm):
    stepper = VMStepper(vm, "main", wb.nd.array(positive()), breakpoints=["scale"])
    stepper.wait_paused(WAIT)
    stepper.step()
    stepper.wait_paused(WAIT)
    tr = stepper.run_trace(WAIT)                        # breakpoints ignored
    assert tr.status == "finished" and tr.frame["symbol"].tolist() == CHAIN_CALLS
    assert tr.first_nonfinite()["symbol"] == "vlog"
    assert stepper.frame["symbol"].tolist() == CHAIN_CALLS
    close(stepper)


# ---- errors, stopping, threads -------------------------------------------------------------------

@pytest.fixture
def failing_vm():
    def fail(x):
        raise ValueError("planted failure in test.vm_stepper.fail")

    register_func("test.vm_stepper.fail", fail, override=True)
    register_func("test.vm_stepper.inc", lambda x: x + 1, override=True)
    ib = ExecBuilder()
    with ib.function("main", num_inputs=1, param_names=["x"]):
        ib.emit_call("test.vm_stepper.inc", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_call("test.vm_stepper.fail", args=[ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    yield VirtualMachine(ib.get(), wb.cpu())
    remove_global_func("test.vm_stepper.fail")
    remove_global_func("test.vm_stepper.inc")


def test_exception_in_vm_thread_is_reported(failing_vm):
    stepper = VMStepper(failing_vm, "main", 1)
    stepper.wait_paused(WAIT)
    stepper.continue_()                               # does not raise here
    assert not stepper.wait_paused(WAIT)
    assert stepper.status == "error" and isinstance(stepper.error, ValueError)
    assert stepper.result is None
    assert [r.status for r in stepper.history] == ["done", "error"]
    assert stepper.history[0].result.text == "2"
    assert "Error" in stepper.status_html.value and "planted failure" in stepper.status_html.value
    assert "Traceback" in stepper.error_html.value
    assert stepper.step_button.disabled and stepper.stop_button.disabled
    stepper.step_button.click()                       # a click on a dead run: message, no raise
    assert "not paused" in stepper.status_html.value
    close(stepper)
    tr = trace(failing_vm, "main", 1)                  # trace mode records it the same way
    assert tr.status == "error" and "planted failure" in tr.error_traceback
    assert tr.frame["status"].tolist() == ["done", "error"]
    with pytest.raises(ValueError, match="planted"):   # the VM is usable and uninstrumented
        failing_vm["main"](1)


@pytest.fixture
def gated_vm():
    """main(x) = inc(inc(gate(inc(x)))): ``gate`` blocks until the test opens it, so the test
    can act while a call is running."""
    entered, release = threading.Event(), threading.Event()

    def gate(x):
        entered.set()
        assert release.wait(WAIT)
        return x

    register_func("test.vm_stepper.gate", gate, override=True)
    register_func("test.vm_stepper.inc", lambda x: x + 1, override=True)
    ib = ExecBuilder()
    with ib.function("main", num_inputs=1, param_names=["x"]):
        for i, name in enumerate(["inc", "gate", "inc", "inc"]):
            ib.emit_call(f"test.vm_stepper.{name}", args=[ib.r(i)], dst=ib.r(i + 1))
        ib.emit_ret(ib.r(4))
    yield VirtualMachine(ib.get(), wb.cpu()), entered, release
    release.set()
    remove_global_func("test.vm_stepper.gate")
    remove_global_func("test.vm_stepper.inc")


def test_pause_and_stop_while_a_call_runs(gated_vm):
    vm, entered, release = gated_vm
    stepper = VMStepper(vm, "main", 1)
    stepper.wait_paused(WAIT)
    stepper.continue_()
    assert entered.wait(WAIT) and stepper.status == "running"
    assert "Running" in stepper.status_html.value and stepper.step_button.disabled
    stepper.pause()                                  # takes effect before the next call
    release.set()
    assert stepper.wait_paused(WAIT) and stepper.pending.index == 2
    assert stepper.history[1].result.text == "2"
    stepper.continue_()
    assert not stepper.wait_paused(WAIT) and stepper.result == 4
    close(stepper)

    entered.clear()
    release.clear()
    stepper = VMStepper(vm, "main", 1)
    stepper.wait_paused(WAIT)
    stepper.continue_()
    assert entered.wait(WAIT)
    stepper.stop()                                   # aborts at the next call boundary
    release.set()
    assert not stepper.wait_paused(WAIT) and stepper.status == "stopped"
    assert [r.symbol for r in stepper.history] == ["test.vm_stepper.inc",
                                                   "test.vm_stepper.gate"]
    assert stepper.history[1].status == "done" and stepper.result is None
    close(stepper)


def test_close_paused_run_ends_the_thread(vm):
    x = wb.nd.array(positive())
    stepper = VMStepper(vm, "main", x)
    assert stepper.wait_paused(WAIT) and len(stepper_threads()) == 1
    stepper.step()
    stepper.wait_paused(WAIT)
    assert stepper.close(WAIT)
    assert stepper_threads() == []
    assert stepper.status == "stopped" and stepper.result is None
    assert [r.status for r in stepper.history] == ["done", "stopped"]
    assert "Stopped" in stepper.status_html.value
    out = vm["main"](x)                               # instrument gone: a normal run
    np.testing.assert_allclose(out.numpy(), reference(x.numpy()), rtol=1e-5)
    assert stepper.close(WAIT)                        # idempotent


def test_stop_button_and_core_without_widgets(vm):
    core = Stepper(vm, "main", wb.nd.array(positive())).start()
    assert core.wait_paused(WAIT)
    core.stop()
    assert not core.wait_paused(WAIT) and core.status == "stopped"
    assert core.wait_done(WAIT)
    stepper = VMStepper(vm, "main", wb.nd.array(positive()))
    stepper.wait_paused(WAIT)
    stepper.stop_button.click()
    assert not stepper.wait_paused(WAIT) and stepper.status == "stopped"
    close(stepper)


def test_new_stepper_on_the_same_vm_closes_the_old_one(vm):
    x = wb.nd.array(positive())
    first = VMStepper(vm, "main", x)
    first.wait_paused(WAIT)
    second = VMStepper(vm, "main", x)
    assert first.status == "stopped"
    second.continue_()
    assert not second.wait_paused(WAIT) and second.status == "finished"
    close(second)
    close(first)


def test_other_threads_pass_through_while_paused(vm):
    x = wb.nd.array(np.linspace(-3, -2, N).astype("float32"))
    stepper = VMStepper(vm, "main", x, breakpoints=["vlog"])
    stepper.continue_()
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "vlog"
    # a plain call from this thread is neither blocked nor recorded
    calls = len(stepper.history)
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x.numpy()), rtol=1e-5)
    assert len(stepper.history) == calls
    close(stepper)


# ---- widget state ------------------------------------------------------------------------------

def test_widget_state_and_buttons(vm):
    stepper = VMStepper(vm, "main", wb.nd.array(positive()), history_rows=3)
    assert stepper.wait_paused(WAIT)
    status = stepper.status_html.value
    assert "Paused" in status and "call #0" in status and "vm.builtin.alloc_storage" in status
    assert "instruction 0" in status and "(pc 0)" in status
    assert not stepper.step_button.disabled and not stepper.stop_button.disabled
    assert "=>    0  call  vm.builtin.alloc_storage" in stepper.code_html.value
    assert "Pending call #0" in stepper.call_html.value and "%vm" in stepper.call_html.value
    assert "vm.builtin.alloc_storage" in stepper.run_to_dropdown.options
    stepper.step_button.click()
    assert stepper.wait_paused(WAIT) and stepper.pending.index == 1
    assert "=>    1  call  vm.builtin.alloc_tensor" in stepper.code_html.value
    stepper.run_to_dropdown.value = "vlog"
    stepper.run_to_button.click()
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "vlog"
    history = stepper.history_html.value
    assert "last 3 of 7 calls" in history and "<td class='l'>negate</td>" in history
    assert "wb-cur" in history
    stepper.breakpoints_input.value = ["scale"]           # edited in the browser
    assert stepper.breakpoints == {"scale"}
    stepper.continue_button.click()
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == "scale"
    assert "wb-bad" in stepper.history_html.value       # the NaN row is flagged
    stepper.skip_button.click()
    assert not stepper.wait_paused(WAIT)
    assert "Finished" in stepper.status_html.value and "float32[8]" in stepper.status_html.value
    assert stepper.step_button.disabled and stepper.stop_button.disabled
    bundle = stepper._repr_mimebundle_()
    assert "Finished" in bundle["text/html"] and "finished" in bundle["text/plain"]
    close(stepper)


def test_bad_arguments():
    with pytest.raises(TypeError, match="VirtualMachine"):
        Stepper(object(), "main")


def test_unknown_function_and_history_rows(vm):
    with pytest.raises(AttributeError):
        VMStepper(vm, "nope")
    with pytest.raises(ValueError, match="history_rows"):
        VMStepper(vm, "main", history_rows=0)


# ---- with the graph compiler ---------------------------------------------------------------------

def _compile_relax():
    """The graph compiler's entry point, or None until it has landed."""
    import importlib.util

    from workbench import relax

    build = getattr(relax, "build", None)
    if build is None and importlib.util.find_spec("workbench.relax.vm_build") is not None:
        build = wb.compile
    return build


def test_compiled_nn_mlp():
    build = _compile_relax()
    if build is None:
        pytest.skip("workbench.relax.build (the graph compiler) has not landed yet")
    from workbench.relax.frontend import nn

    class MLP(nn.Module):
        def __init__(self):
            self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(nn.relu(self.fc1(x)))

    mod, params = MLP().export_tvm(spec={"forward": {"x": nn.spec.Tensor((2, 8), "float32")}})
    vm = VirtualMachine(build(mod, "llvm"), wb.cpu())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8)).astype("float32")
    weights = [rng.standard_normal(tuple(p.shape)).astype("float32") for _, p in params]
    w1, b1, w2, b2 = weights
    expect = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    args = [wb.nd.array(a) for a in (x, *weights)]

    tr = VMStepper.trace(vm, "forward", *args)
    assert tr.status == "finished", tr.error_traceback
    np.testing.assert_allclose(tr.result.numpy(), expect, rtol=1e-4, atol=1e-5)
    kernels = [s for s in tr.frame["symbol"] if not s.startswith("vm.builtin.")]
    assert kernels and tr.first_nonfinite() is None
    assert tr.frame["pc"].notna().all() and set(tr.frame["function"]) == {"forward"}

    stepper = VMStepper(vm, "forward", *args, breakpoints=[kernels[0]])
    stepper.wait_paused(WAIT)
    stepper.continue_()
    assert stepper.wait_paused(WAIT) and stepper.pending.symbol == kernels[0]
    stepper.continue_(ignore_breakpoints=True)
    assert not stepper.wait_paused(WAIT)
    assert stepper.frame["symbol"].tolist() == tr.frame["symbol"].tolist()
    np.testing.assert_allclose(stepper.result.numpy(), expect, rtol=1e-4, atol=1e-5)
    close(stepper)

    x_nan = x.copy()
    x_nan[1, 3] = np.nan                     # a NaN in the input is seen at its first use
    tr = VMStepper.trace(vm, "forward", wb.nd.array(x_nan), *args[1:])
    row = tr.first_nonfinite()
    assert row is not None and row["call"] <= tr.frame["symbol"].tolist().index(kernels[0])
