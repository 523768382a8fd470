"""Running programs: compiled te kernels in an MLP chain, control flow, closures, nested VM
calls, argument checks naming the parameter, and the builtins' contracts."""
import numpy as np
import pytest

import workbench as wb
from workbench.runtime import register_func, remove_global_func
from workbench.runtime.relax_vm import (DataType, ExecBuilder, InternalError, ShapeTuple,
                                        VirtualMachine, VMClosure, VMFuncKind)
from workbench.runtime.relax_vm import builtins as B
from workbench.runtime.relax_vm.testing import check_saved_func
from vm_programs import mlp_inputs, mlp_program, mlp_reference


def nd(x):
    return wb.nd.array(x)


# -- MLP on compiled kernels ---------------------------------------------------------------------

def test_mlp_matches_numpy(mlp_lib):
    x, w1, w2, bias = mlp_inputs()
    vm = VirtualMachine(mlp_program(mlp_lib, bias), wb.cpu())
    out = vm["main"](nd(x), nd(w1), nd(w2))
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)
    # a second call reuses nothing from the first (fresh storage per invocation)
    x2 = x * 2
    out2 = vm["main"](nd(x2), nd(w1), nd(w2))
    np.testing.assert_allclose(out2.numpy(), mlp_reference(x2, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("args, error, message", [
    (lambda x, w1, w2: (x, w1), InternalError,
     r"Invoking function main expects 3 arguments \(x, w1, w2\), but 2 arguments"),
    (lambda x, w1, w2: (x[:2], w1, w2), RuntimeError,
     r"param=x.*shape\[0\] mismatch to specified constant: expected 4, got 2"),
    (lambda x, w1, w2: (x, w1.astype("float64"), w2), ValueError,
     r"param=w1.*expect Tensor with dtype float32 but get float64"),
    (lambda x, w1, w2: (x, w1, w2[0]), ValueError,
     r"param=w2.*expect Tensor with ndim 2 but get 1"),
    (lambda x, w1, w2: (x, w1, 3), TypeError, r"param=w2.*expect a Tensor but get int"),
])
def test_wrong_inputs_name_the_parameter(mlp_lib, args, error, message):
    x, w1, w2, bias = mlp_inputs()
    vm = VirtualMachine(mlp_program(mlp_lib, bias), wb.cpu())
    converted = [nd(a) if isinstance(a, np.ndarray) else a for a in args(x, w1, w2)]
    with pytest.raises(error, match=message):
        vm["main"](*converted)
    # the VM stays usable after a failed call
    out = vm["main"](nd(x), nd(w1), nd(w2))
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)


def test_missing_kernel_is_reported_at_construction():
    _, _, _, bias = mlp_inputs()
    with pytest.raises(RuntimeError, match="Cannot find PackedFunc matmul"):
        VirtualMachine(mlp_program(None, bias), wb.cpu())


def test_kernel_library_wins_over_registry(mlp_lib):
    register_func("relu", lambda a, b: b.copyfrom(np.zeros(b.shape, "float32")), override=True)
    try:
        x, w1, w2, bias = mlp_inputs()
        out = VirtualMachine(mlp_program(mlp_lib, bias), wb.cpu())["main"](nd(x), nd(w1), nd(w2))
        assert np.abs(out.numpy()).sum() > 0
    finally:
        remove_global_func("relu")


def test_python_global_function_calls():
    calls = []
    register_func("test.vm_exec.record", lambda *a: calls.append(a) or len(calls), override=True)
    try:
        ib = ExecBuilder()
        with ib.function("main", num_inputs=1):
            ib.emit_call("test.vm_exec.record", args=[ib.r(0), ib.imm(5),
                                                      ib.convert_constant("s")], dst=ib.r(1))
            ib.emit_ret(ib.r(1))
        vm = VirtualMachine(ib.get(), wb.cpu())
        assert vm["main"]("arg") == 1
        assert calls == [("arg", 5, "s")]
    finally:
        remove_global_func("test.vm_exec.record")


# -- control flow ----------------------------------------------------------------------------------

def test_goto_skips():
    ib = ExecBuilder()
    with ib.function("main", num_inputs=2):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_goto(2)
        ib.emit_call("test.vm.mul", args=[ib.r(2), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = VirtualMachine(ib.get(), wb.cpu())
    a, b = nd(np.random.rand(4)), nd(np.random.rand(4))
    np.testing.assert_allclose(check_saved_func(vm, "main", a, b).numpy(),
                               a.numpy() + b.numpy())


def test_if_branches():
    ib = ExecBuilder()
    with ib.function("main", num_inputs=3):
        ib.emit_if(ib.r(0), 3)
        ib.emit_call("test.vm.add", args=[ib.r(1), ib.r(2)], dst=ib.r(3))
        ib.emit_goto(2)
        ib.emit_call("test.vm.mul", args=[ib.r(1), ib.r(2)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    vm = VirtualMachine(ib.get(), wb.cpu())
    a, b = nd(np.random.rand(4)), nd(np.random.rand(4))
    np.testing.assert_allclose(vm["main"](0, a, b).numpy(), a.numpy() * b.numpy())
    np.testing.assert_allclose(vm["main"](1, a, b).numpy(), a.numpy() + b.numpy())


@pytest.mark.parametrize("cond, expected", [
    (nd(np.array(1, "int32")), True), (nd(np.array(0, "int64")), False),
    (nd(np.array(True)), True), (nd(np.array(False)), False), (1, True), (0, False),
    (True, True), (False, False)])
def test_read_if_cond(cond, expected):
    assert B.read_if_cond(cond) is expected


def test_recursion_through_if():
    """pow2(n) = n == 0 ? 1 : 2 * pow2(n - 1), written with If, nested calls and Ret."""
    register_func("test.vm_exec.is_zero", lambda n: n == 0, override=True)
    register_func("test.vm_exec.dec", lambda n: n - 1, override=True)
    register_func("test.vm_exec.double", lambda n: 2 * n, override=True)
    try:
        ib = ExecBuilder()
        ib.declare_function("pow2", VMFuncKind.VM_FUNC)
        with ib.function("pow2", num_inputs=1, param_names=["n"]):
            ib.emit_call("test.vm_exec.is_zero", args=[ib.r(0)], dst=ib.r(1))
            ib.emit_if(ib.r(1), 3)
            ib.emit_call("vm.builtin.copy", args=[ib.imm(1)], dst=ib.r(2))
            ib.emit_goto(4)
            ib.emit_call("test.vm_exec.dec", args=[ib.r(0)], dst=ib.r(3))
            ib.emit_call("pow2", args=[ib.r(3)], dst=ib.r(4))
            ib.emit_call("test.vm_exec.double", args=[ib.r(4)], dst=ib.r(2))
            ib.emit_ret(ib.r(2))
        vm = VirtualMachine(ib.get(), wb.cpu())
        assert [vm["pow2"](n) for n in range(6)] == [1, 2, 4, 8, 16, 32]
    finally:
        for name in ("is_zero", "dec", "double"):
            remove_global_func(f"test.vm_exec.{name}")


def test_invoke_closure_appends_captured_args():
    ib = ExecBuilder()
    with ib.function("lifted_func_1", num_inputs=4):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(4))
        ib.emit_call("test.vm.add", args=[ib.r(2), ib.r(4)], dst=ib.r(5))
        ib.emit_call("test.vm.add", args=[ib.r(3), ib.r(5)], dst=ib.r(6))
        ib.emit_ret(ib.r(6))
    with ib.function("main", num_inputs=2):
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("lifted_func_1"), ib.r(0), ib.r(1)],
                     dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("digits", num_inputs=1):
        ib.declare_function("abc", VMFuncKind.PACKED_FUNC)
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("abc"), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    register_func("abc", lambda a, b, c: 100 * a + 10 * b + c, override=True)
    try:
        vm = VirtualMachine(ib.get(), wb.cpu())
        w, x, y, z = (nd(np.random.rand(2, 3)) for _ in range(4))
        clo = vm["main"](w, x)
        assert isinstance(clo, VMClosure)
        res = vm.invoke_closure(clo, y, z)
        np.testing.assert_allclose(res.numpy(), w.numpy() + x.numpy() + y.numpy() + z.numpy())
        assert vm.invoke_closure(vm["digits"](7), 1, 2) == 127
    finally:
        remove_global_func("abc")


def test_packed_function_name_is_not_a_vm_function():
    ib = ExecBuilder()
    with ib.function("main", num_inputs=2):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = VirtualMachine(ib.get(), wb.cpu())
    with pytest.raises(InternalError, match="function kind 0"):
        vm["test.vm.add"]
    with pytest.raises(AttributeError, match="Module has no function 'nope'"):
        vm["nope"]


def test_constructor_arguments():
    ib = ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_ret(ib.r(0))
    exe = ib.get()
    with pytest.raises(ValueError, match="rt_mod"):
        VirtualMachine("not an executable", wb.cpu())
    with pytest.raises(TypeError, match="device"):
        VirtualMachine(exe, "cpu")
    with pytest.raises(ValueError, match="memory_cfg"):
        VirtualMachine(exe, wb.cpu(), memory_cfg="fancy")
    with pytest.raises(TypeError, match="memory_cfg"):
        VirtualMachine(exe, wb.cpu(), memory_cfg=3)
    vm = VirtualMachine(exe, [wb.cpu()], memory_cfg={wb.cpu(): "naive"})
    assert vm.allocators == [VirtualMachine.NAIVE_ALLOCATOR]
    cuda = wb.runtime.Device(2, 0)
    assert VirtualMachine(exe, [cuda]).devices == [cuda, wb.cpu()]  # host appended


# -- builtins ------------------------------------------------------------------------------------

class _Ctx:
    devices = [wb.cpu()]


def test_alloc_tensor_offsets_share_storage():
    st = B.alloc_storage(_Ctx(), ShapeTuple([256]), 0, DataType("uint8"), "global")
    a = B.alloc_tensor(st, 0, ShapeTuple([4, 4]), DataType("float32"))
    b = B.alloc_tensor(st, 128, ShapeTuple([32]), DataType("float32"))
    assert a.data_ptr % 64 == 0 and b.data_ptr == a.data_ptr + 128
    a.copyfrom(np.ones((4, 4), "float32"))
    b.copyfrom(np.full(32, 2, "float32"))
    raw = st.raw[st.base:st.base + 256].view("float32")
    assert raw[:16].sum() == 16 and raw[32:].sum() == 64
    with pytest.raises(InternalError, match="attempted to allocate 132 at offset 128 in "
                                            "region that is 256 bytes"):
        B.alloc_tensor(st, 128, ShapeTuple([33]), DataType("float32"))
    with pytest.raises(ValueError, match="multiple of 64"):
        B.alloc_tensor(st, 4, ShapeTuple([2]), DataType("float32"))


def test_match_shape_codes_and_make_shape():
    heap = B.alloc_shape_heap(_Ctx(), 2)
    x = nd(np.zeros((3, 5), "float32"))
    B.match_shape(x, heap, 2, B.STORE_TO_HEAP, 0, B.STORE_TO_HEAP, 1, "ctx")
    assert list(heap.numpy()) == [3, 5]
    B.match_shape(ShapeTuple([3, 7]), heap, 2, B.ASSERT_EQUAL_TO_LOAD, 0, B.NO_OP, 0, "ctx")
    with pytest.raises(RuntimeError, match=r"ctx match_cast error, shape\[1\] mismatch to a "
                                           r"previous populated value"):
        B.match_shape(ShapeTuple([3, 7]), heap, 2, B.NO_OP, 0, B.ASSERT_EQUAL_TO_LOAD, 1, "ctx")
    with pytest.raises(RuntimeError, match="ctx match_cast shape size mismatch"):
        B.match_shape(x, heap, 3, 2, 0, 2, 0, 2, 0, "ctx")
    shape = B.make_shape(heap, 3, B.LOAD_SHAPE, 1, B.USE_IMM, 4, B.LOAD_SHAPE, 0)
    assert isinstance(shape, ShapeTuple) and tuple(shape) == (5, 4, 3)
    assert B.make_prim_value(heap, B.LOAD_SHAPE, 0) == 3


def test_make_shape_follows_the_heap():
    """make_shape remembers the shapes it built (a symbolic-length model rebuilds the same
    ones every call): a changed heap value must still give the new shape, of Python ints."""
    heap = B.alloc_shape_heap(_Ctx(), 2)
    for n in (3, 9, 3, 1):
        B.match_shape(ShapeTuple([1, n]), heap, 2, B.NO_OP, 0, B.STORE_TO_HEAP, 0, "ctx")
        shape = B.make_shape(heap, 3, B.USE_IMM, 1, B.LOAD_SHAPE, 0, B.USE_IMM, 768)
        assert isinstance(shape, ShapeTuple) and tuple(shape) == (1, n, 768)
        assert all(type(d) is int for d in shape)
    assert B.make_shape([4, 2], 2, B.LOAD_SHAPE, 1, B.LOAD_SHAPE, 0) == (2, 4)


def test_shape_heap_is_an_aligned_host_int64_tensor():
    heap = B.alloc_shape_heap(_Ctx(), 3)
    assert isinstance(heap, wb.nd.NDArray) and heap.shape == (3,) and heap.dtype == "int64"
    assert heap._ptr % 64 == 0 and heap.device == _Ctx().devices[-1]
    heap.numpy(copy=False)[:] = [5, 6, 7]
    assert heap.numpy().tolist() == [5, 6, 7]


def test_check_builtins():
    B.check_shape_info(ShapeTuple([1, 2]), 2, "c")
    with pytest.raises(TypeError, match="c expect a Shape but get Tensor"):
        B.check_shape_info(nd(np.zeros(2)), 2, "c")
    with pytest.raises(ValueError, match="c expect Shape with ndim 3 but get 2"):
        B.check_shape_info(ShapeTuple([1, 2]), 3, "c")
    B.check_tuple_info((1, 2), 2, "c")
    with pytest.raises(TypeError, match="expect a Tuple"):
        B.check_tuple_info(ShapeTuple([1]), 1, "c")
    with pytest.raises(ValueError, match="with 3 elements"):
        B.check_tuple_info((1, 2), 3, "c")
    B.check_tensor_info(nd(np.zeros((2, 2), "float32")), -1, DataType("void"), "c")
    B.check_tensor_info(nd(np.zeros((2, 2), "int8")), 2, "c")  # dtype omitted
    with pytest.raises(TypeError, match="expect a Function"):
        B.check_func_info(3, "c")
    with pytest.raises(TypeError, match="expect a PrimValue"):
        B.check_prim_value_info(nd(np.zeros(1)), DataType("int64"), "c")


def test_tuple_and_view_builtins():
    x = nd(np.arange(6, dtype="float32"))
    tup = B.make_tuple(x, ShapeTuple([2, 3]))
    assert type(tup) is tuple and B.tuple_getitem(tup, 0) is x
    r = B.reshape(x, ShapeTuple([2, 3]))
    assert r.shape == (2, 3) and r.data_ptr == x.data_ptr
    np.testing.assert_array_equal(r.numpy(), np.arange(6).reshape(2, 3))
    assert tuple(B.tensor_to_shape(nd(np.array([4, 5], "int64")))) == (4, 5)
    assert tuple(B.shape_of(x)) == (6,)
    assert B.null_value() is None and B.copy(x) is x
