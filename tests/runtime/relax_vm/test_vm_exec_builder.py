"""ExecBuilder, bytecode encoding and the Executable's text forms (TVM's test_vm_execbuilder
behaviours, plus golden as_text / as_python / stats written from the reference layout)."""
import numpy as np
import pytest

import workbench as wb
from workbench.runtime.relax_vm import (Arg, ArgKind, DataType, ExecBuilder, InternalError,
                                        ShapeTuple, VirtualMachine, VMFuncKind)
from workbench.runtime.relax_vm.bytecode import (VM_REG, VOID_REG, Call, Goto, If, Ret,
                                                 decode_instruction, encode_instruction)
from workbench.runtime.relax_vm.testing import check_saved_func


def rand(*shape):
    return wb.nd.array(np.random.rand(*shape))


# -- bytecode ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, value", [
    (ArgKind.Register, 0), (ArgKind.Register, VOID_REG), (ArgKind.Register, VM_REG),
    (ArgKind.Immediate, -3), (ArgKind.Immediate, (1 << 55) - 1),
    (ArgKind.Immediate, -(1 << 55) + 1),
    (ArgKind.ConstIdx, 7), (ArgKind.FuncIdx, 2)])
def test_arg_word_roundtrip(kind, value):
    arg = Arg.make(kind, value)
    assert isinstance(arg, int)
    assert (arg.kind, arg.value) == (kind, value)
    assert Arg(int(arg)).value == value  # a plain int word decodes the same


def test_immediate_out_of_range():
    with pytest.raises(ValueError, match="56-bit"):
        Arg.immediate(1 << 60)


@pytest.mark.parametrize("instr", [
    Call(3, (Arg.register(0), Arg.immediate(-1), Arg.const_idx(2)), 5), Ret(4), Goto(-2),
    If(1, 3)])
def test_instruction_words_roundtrip(instr):
    words = encode_instruction(instr)
    assert decode_instruction(words, 0) == instr


# -- builder behaviours ---------------------------------------------------------------------------

def test_vm_execute_and_multiple_funcs():
    ib = ExecBuilder()
    with ib.function("func0", num_inputs=2):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("func1", num_inputs=2):
        ib.emit_call("test.vm.mul", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = VirtualMachine(ib.get(), wb.cpu())
    a, b = rand(4), rand(4)
    np.testing.assert_allclose(check_saved_func(vm, "func0", a, b).numpy(),
                               a.numpy() + b.numpy())
    np.testing.assert_allclose(check_saved_func(vm, "func1", a, b).numpy(),
                               a.numpy() * b.numpy())


def test_checker_rejects_undefined_register():
    ib = ExecBuilder()
    with ib.function("func0", num_inputs=2):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(2)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with pytest.raises(InternalError, match=r"r\(2\).*never defined as a destination"):
        ib.get()


@pytest.mark.parametrize("emit, message", [
    (lambda ib: ib.emit_goto(0), "Goto offset"),
    (lambda ib: ib.emit_if(ib.r(0), 1), "false_offset must be > 1"),
    (lambda ib: ib.emit_call("f", args=[ib.c(5)]), "Constant index 5"),
])
def test_checker_rejects_bad_code(emit, message):
    ib = ExecBuilder()
    with ib.function("main", num_inputs=1):
        emit(ib)
        ib.emit_ret(ib.r(0))
    with pytest.raises(InternalError, match=message):
        ib.get()


def test_emit_outside_function_and_redefinition():
    ib = ExecBuilder()
    with pytest.raises(ValueError, match="emit should happen in a function scope"):
        ib.emit_ret(ib.r(0))
    with ib.function("main", num_inputs=1):
        ib.emit_ret(ib.r(0))
    with pytest.raises(InternalError, match="already defined"):
        with ib.function("main", num_inputs=1):
            pass
    with pytest.raises(InternalError, match="parameter names"):
        with ib.function("other", num_inputs=2, param_names=["x"]):
            pass


def test_neg_imm_and_operands():
    ib = ExecBuilder()
    with ib.function("func0", num_inputs=1):
        ib.emit_call("test.vm.add_scalar", args=[ib.imm(-3), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("func1", num_inputs=1):
        ib.emit_call("test.vm.get_device_id", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = VirtualMachine(ib.get(), wb.cpu())
    assert vm["func0"](1) == -2
    assert vm["func0"](-3) == -6
    assert vm["func1"](wb.runtime.Device(1, 3)) == 3  # a Device passes through a register


def test_emit_cache():
    ib = ExecBuilder()
    with ib.function("func0", num_inputs=1):
        assert ib.convert_constant("str0") == ib.convert_constant("str0")
        s0 = ib.convert_constant(ShapeTuple([1, 2]))
        assert s0 == ib.convert_constant(ShapeTuple([1, 2]))
        assert s0 != ib.convert_constant(ShapeTuple([1, 3]))
        t = np.array([1, 2, 3], dtype="int32")
        assert ib.convert_constant(wb.nd.array(t)) == ib.convert_constant(wb.nd.array(t))
        # small ints are immediates; dtypes and floats are appended every time (as in TVM)
        assert ib.convert_constant(7).kind == ArgKind.Immediate
        assert ib.convert_constant(DataType("int8")) != ib.convert_constant(DataType("int8"))
        ib.emit_ret(ib.r(0))


def test_formalize_renumbers_registers():
    texts = []
    for hi, lo in ((100, 50), (2, 3)):
        ib = ExecBuilder()
        with ib.function("func0", num_inputs=2):
            ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(hi))
            ib.emit_call("test.vm.mul", args=[ib.r(1), ib.r(hi)], dst=ib.r(lo))
            ib.emit_ret(ib.r(lo))
        exe = ib.get()
        assert exe.func_table[exe.func_map["func0"]].register_file_size == 4
        texts.append(exe.as_text())
    assert texts[0] == texts[1]


def test_shape_of_and_storage():
    ib = ExecBuilder()
    arr = rand(32, 16)
    with ib.function("shape", num_inputs=0):
        ib.emit_call("vm.builtin.shape_of", args=[arr], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with ib.function("storage", num_inputs=0):
        ib.emit_call("vm.builtin.alloc_storage", args=[
            ib.vm_state(), (24,), ib.convert_constant(0), DataType("float32"),
            ib.convert_constant("global")], dst=ib.r(1))
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(1), ib.imm(0), (4, 6),
                                                      DataType("float32")], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = VirtualMachine(ib.get(), wb.cpu())
    shape = vm["shape"]()
    assert isinstance(shape, ShapeTuple) and tuple(shape) == (32, 16)
    res = vm["storage"]()
    assert res.device == wb.cpu() and res.shape == (4, 6) and res.dtype == "float32"


# -- golden text forms (written by hand from the reference's layout) -------------------------------

def control_flow_program():
    ib = ExecBuilder()
    ib.declare_function("helper", VMFuncKind.VM_FUNC)
    with ib.function("main", num_inputs=2, param_names=["cond", "x"]):
        ib.emit_call("vm.builtin.read_if_cond", args=[ib.r(0)], dst=ib.r(7))
        ib.emit_if(ib.r(7), 3)
        ib.emit_call("test.vm.add_scalar", args=[ib.r(1), ib.imm(-3)], dst=ib.r(9))
        ib.emit_goto(3)
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("helper"), ib.r(1)], dst=ib.r(8))
        ib.emit_call("vm.builtin.invoke_closure",
                     args=[ib.vm_state(), ib.r(8), ib.convert_constant(2.5)], dst=ib.r(9))
        ib.emit_ret(ib.r(9))
    with ib.function("helper", num_inputs=2):
        ib.emit_call("test.vm.add_scalar", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    return ib.get()


GOLDEN_TEXT = """\
@helper:
  call  test.vm.add_scalar in: %0, %1       dst: %2
  ret   %2

@main:
  call  vm.builtin.read_if_cond in: %0           dst: %2
  If    %2, 3
  call  test.vm.add_scalar in: %1, i-3      dst: %3
  goto  3
  call  vm.builtin.make_closure in: f[helper], %1 dst: %4
  call  vm.builtin.invoke_closure in: %vm, %4, c[0] dst: %3
  ret   %3

@vm.builtin.read_if_cond packed_func;

@test.vm.add_scalar packed_func;

@vm.builtin.make_closure packed_func;

@vm.builtin.invoke_closure packed_func;

"""

GOLDEN_PYTHON = """\
ib = rx.Builder()
with ib.function("helper", num_inputs=2):
    ib.emit_call("test.vm.add_scalar", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
    ib.emit_ret(ib.r(2))
with ib.function("main", num_inputs=2):
    ib.emit_call("vm.builtin.read_if_cond", args=[ib.r(0)], dst=ib.r(2))
    ib.emit_if(ib.r(2), 3)
    ib.emit_call("test.vm.add_scalar", args=[ib.r(1), ib.imm(-3)], dst=ib.r(3))
    ib.emit_goto(3)
    ib.emit_call("vm.builtin.make_closure", args=[ib.f("helper"), ib.r(1)], dst=ib.r(4))
    ib.emit_call("vm.builtin.invoke_closure", args=[ib.r(vm), ib.r(4), ib.c(0)], dst=ib.r(3))
    ib.emit_ret(ib.r(3))
"""

GOLDEN_STATS = """\
Relax VM executable statistics:
  Constant pool (# 1): [2.5]
  Globals (#6): [helper, main, vm.builtin.read_if_cond, test.vm.add_scalar, \
vm.builtin.make_closure, vm.builtin.invoke_closure]
"""


def test_as_text_golden():
    assert control_flow_program().as_text() == GOLDEN_TEXT


def test_as_python_golden():
    assert control_flow_program().as_python() == GOLDEN_PYTHON


def test_stats_golden():
    assert control_flow_program().stats() == GOLDEN_STATS


def test_stats_constant_kinds():
    ib = ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("f", args=[DataType("float32"), ib.convert_constant("global"), (2, 3),
                                wb.nd.array(np.zeros((2, 3), "float32")),
                                wb.nd.array(np.float32(1.0)), ib.convert_constant(1 << 60)])
        ib.emit_ret(ib.void_arg())
    # convert_constant calls run while Python builds the args list, before emit_call converts
    # the others, so "global" and the big int come first.
    assert ib.get().stats().splitlines()[1] == (
        f'  Constant pool (# 6): ["global", {1 << 60}, float32, shapetuple[2, 3], [2, 3], '
        'scalar]')


def test_golden_program_runs():
    vm = VirtualMachine(control_flow_program(), wb.cpu())
    assert vm["main"](1, 10) == 7       # true branch: x - 3
    assert vm["main"](0, 10) == 12.5    # false branch: helper(2.5, captured x)
