"""save_function, the stateful API (set_input / invoke_stateful / get_outputs) with TVM's
errors, and argument conversion."""
import numpy as np
import pytest

import workbench as wb
from workbench.runtime import register_func, remove_global_func
from workbench.runtime.relax_vm import ExecBuilder, InternalError, VirtualMachine


def nd(x):
    return wb.nd.array(x)


@pytest.fixture
def vm():
    """main(x, w) = x * w; nested() = ((x, (x,)), x) for its argument x; scalar(a) = a."""
    ib = ExecBuilder()
    with ib.function("main", num_inputs=2, param_names=["x", "w"]):
        ib.emit_call("test.vm.mul", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("nested", num_inputs=1, param_names=["x"]):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(2), ib.r(0)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    with ib.function("scalar", num_inputs=1):
        ib.emit_ret(ib.r(0))
    return VirtualMachine(ib.get(), wb.cpu())


A = np.arange(4, dtype="float32")
B = np.full(4, 3, dtype="float32")


def test_save_function_positional_and_kwargs(vm):
    vm.save_function("main", "saved_main", nd(A), nd(B))
    np.testing.assert_allclose(vm["saved_main"]().numpy(), A * B)
    vm.save_function("main", "saved_kw", x=nd(A), w=nd(B))
    np.testing.assert_allclose(vm["saved_kw"]().numpy(), A * B)
    vm.save_function("main", "saved_mixed", nd(A), w=B)  # numpy converted to NDArray
    np.testing.assert_allclose(vm["saved_mixed"]().numpy(), A * B)


def test_save_function_without_return(vm):
    vm.save_function("main", "saved_main", nd(A), nd(B), include_return=False)
    assert vm["saved_main"]() is None


def test_save_function_converts_numbers(vm):
    vm.save_function("scalar", "saved_int", 3)
    vm.save_function("scalar", "saved_float", 2.5)
    i, f = vm["saved_int"](), vm["saved_float"]()
    assert (i.dtype, i.shape, int(i.numpy())) == ("int32", (), 3)
    assert (f.dtype, float(f.numpy())) == ("float32", 2.5)
    with pytest.raises(TypeError, match="Unsupported type"):
        vm.save_function("scalar", "bad", None)


def test_save_function_shadows_and_unknown(vm):
    vm.save_function("scalar", "main", 1)   # saved closures are looked up before functions
    assert int(vm["main"]().numpy()) == 1
    with pytest.raises(ValueError, match="Unknown function: nope"):
        vm.save_function("nope", "x")


def test_save_function_unused_kwarg_warns(vm):
    with pytest.warns(UserWarning, match='Keyword argument "y" is unused in main'):
        vm.save_function("main", "s", nd(A), nd(B), y=1)


def test_stateful_roundtrip_positional_and_kwargs(vm):
    vm.set_input("main", nd(A), nd(B))
    vm.invoke_stateful("main")
    first = vm.get_outputs("main")
    vm.set_input("main", w=nd(B), x=nd(A))
    vm.invoke_stateful("main")
    np.testing.assert_allclose(vm.get_outputs("main").numpy(), first.numpy())
    np.testing.assert_allclose(first.numpy(), A * B)
    vm.invoke_stateful("main")  # inputs stay set


def test_stateful_nested_tuple_outputs(vm):
    x = nd(A)
    vm.set_input("nested", x)
    vm.invoke_stateful("nested")
    out = vm.get_outputs("nested")
    assert type(out) is tuple and len(out) == 2
    (a, (b,)), c = out
    assert a is x and b is x and c is x
    assert vm["get_output_arity"]("nested") == 2
    assert vm["get_output_arity"]("nested", 0, 1) == 1
    assert vm["get_output_arity"]("nested", 1) == -1
    with pytest.raises(ValueError, match="cannot return a tuple"):
        vm["get_output"]("nested", 0)
    with pytest.raises(IndexError, match=r"Invalid index \(2 >= 2\)"):
        vm["get_output"]("nested", 2)
    with pytest.raises(ValueError, match="cannot be indexed"):
        vm["get_output"]("nested", 1, 0)


def test_set_input_tuple_argument(vm):
    vm.set_input("scalar", (nd(A), nd(B)))
    vm.invoke_stateful("scalar")
    a, b = vm.get_outputs("scalar")
    np.testing.assert_array_equal(b.numpy(), B)


def test_stateful_errors(vm):
    with pytest.raises(ValueError, match="Unknown function: nope"):
        vm.set_input("nope", 1)
    with pytest.raises(InternalError, match="number of provided parameters doesn't match"):
        vm.set_input("main", nd(A))
    with pytest.raises(ValueError, match="No inputs set for stateful call of main; use "
                                         "`set_input` first."):
        vm.invoke_stateful("main")
    with pytest.raises(ValueError, match="Unknown function: nope"):
        vm.invoke_stateful("nope")
    vm.set_input("main", nd(A), nd(B))
    with pytest.raises(ValueError, match='No output saved for call of "main"; use '
                                         '`invoke_stateful` to call it first.'):
        vm.get_outputs("main")
    # after set_input, calling main directly without args fails the arity check
    with pytest.raises(RuntimeError, match=r"expects 2 arguments \(x, w\), but 0"):
        vm["main"]()


def test_set_input_shares_same_device_tensors():
    """Inputs already on the device are not copied: a kernel writing into an input (in-place)
    is visible to the caller, as TVM's in-place tests rely on."""
    register_func("test.vm_state.fill", lambda t: t.copyfrom(np.full(t.shape, 9, t.dtype)),
                  override=True)
    try:
        ib = ExecBuilder()
        with ib.function("main", num_inputs=1):
            ib.emit_call("test.vm_state.fill", args=[ib.r(0)])
            ib.emit_ret(ib.r(0))
        vm = VirtualMachine(ib.get(), wb.cpu())
        x = nd(np.zeros(3, "float32"))
        vm.set_input("main", x)
        vm.invoke_stateful("main")
        assert vm.get_outputs("main") is x and x.numpy().sum() == 27
    finally:
        remove_global_func("test.vm_state.fill")
