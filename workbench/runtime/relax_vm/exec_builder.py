"""``ExecBuilder``: write VM bytecode by hand (TVM's ``relax.ExecBuilder``), and what the
relax compiler's codegen emits through.

Typical use::

    ib = ExecBuilder()
    with ib.function("main", num_inputs=2, param_names=["x", "y"]):
        ib.emit_call("vm.builtin.alloc_storage", args=[ib.vm_state(), (64,), ib.imm(0),
                     DataType("uint8"), ib.convert_constant("global")], dst=ib.r(2))
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(2), ib.imm(0), (4,),
                     DataType("float32")], dst=ib.r(3))
        ib.emit_call("add", args=[ib.r(0), ib.r(1), ib.r(3)])      # kernel, DPS
        ib.emit_ret(ib.r(3))
    exe = ib.get()
    exe.import_module(kernels)

``get()`` finalises as TVM does: non-argument registers are renumbered densely in order of
first definition (so the register file is as small as possible), then the code is checked (a
register read before any instruction wrote it, an out-of-range constant or function index, a
zero Goto, an If offset <= 1, a function never closed) -- errors are ``InternalError``.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np

from ..ndarray import NDArray
from .bytecode import (BEGIN_SPECIAL_REG, VALUE_MAX, VALUE_MIN, VM_REG, VOID_REG, Arg, ArgKind,
                       Call, Goto, If, Opcode, Ret)
from .executable import Executable, VMFuncInfo, VMFuncKind
from .objects import DataType, InternalError, ShapeTuple

__all__ = ["ExecBuilder"]


def _dedup_key(value: Any) -> Any:
    """A hashable key equal for structurally equal object constants, or None (not deduped).

    Like TVM: strings, shapes and tensors are deduplicated by content; plain numbers and
    dtypes are appended every time.
    """
    if isinstance(value, NDArray):
        return ("tensor", value.dtype, value.shape, value.numpy(copy=False).tobytes())
    if isinstance(value, ShapeTuple):
        return ("shape", tuple(value))
    if isinstance(value, str) and not isinstance(value, DataType):
        return ("str", str(value))
    return None


class ExecBuilder:
    """Builds an :class:`Executable` one function at a time."""

    def __init__(self) -> None:
        self._exe = Executable()
        self._current: str | None = None
        self._dedup: dict[Any, int] = {}

    # -- functions -------------------------------------------------------------------------------
    def declare_function(self, name: str, kind: VMFuncKind = VMFuncKind.PACKED_FUNC) -> None:
        """Add ``name`` to the function table (no-op if present with the same kind)."""
        exe = self._exe
        idx = exe.func_map.get(name)
        if idx is not None:
            if exe.func_table[idx].kind != VMFuncKind(kind):
                raise InternalError(f"Function {name} already declared in a different kind")
            return
        exe.func_map[name] = len(exe.func_table)
        exe.func_table.append(VMFuncInfo(VMFuncKind(kind), name))

    @contextlib.contextmanager
    def function(self, func_name: str, num_inputs: int = 0,
                 param_names: Sequence[str] | None = None) -> Iterator[None]:
        """Context in which instructions are emitted into VM function ``func_name``, whose
        arguments arrive in registers ``0..num_inputs-1``."""
        if self._current is not None:
            raise ValueError(f"ExecBuilder.function({func_name!r}): function "
                             f"{self._current!r} is still open; functions cannot nest")
        if isinstance(num_inputs, bool) or not isinstance(num_inputs, int) or num_inputs < 0:
            raise ValueError(f"ExecBuilder.function: num_inputs must be an int >= 0, "
                             f"got {num_inputs!r}")
        self.declare_function(func_name, VMFuncKind.VM_FUNC)
        exe = self._exe
        info = exe.func_table[exe.func_map[func_name]]
        if info.num_args != -2:
            raise InternalError(f"Function {func_name} already defined")
        if param_names is not None:
            param_names = [str(p) for p in param_names]
            if len(param_names) != num_inputs:
                raise InternalError(
                    f"Function {func_name} defined with {num_inputs} arguments, but the list of "
                    f"parameter names has {len(param_names)} names ({param_names})")
            info.param_names = param_names
        info.num_args = num_inputs
        info.start_instr = len(exe.instr_offset)
        self._current = func_name
        try:
            yield
        finally:
            self._current = None
            info.end_instr = len(exe.instr_offset)

    def _emit(self, words: list[int]) -> None:
        if self._current is None:
            raise ValueError("emit should happen in a function scope")
        exe = self._exe
        exe.instr_offset.append(len(exe.instr_data))
        exe.instr_data.extend(words)

    # -- argument encoders -----------------------------------------------------------------------
    def r(self, idx: int) -> Arg:
        """Register ``idx``."""
        return Arg.register(idx)

    def imm(self, value: int) -> Arg:
        """An immediate int (must fit 56 signed bits)."""
        return Arg.immediate(value)

    def c(self, idx: int) -> Arg:
        """Constant-pool entry ``idx``."""
        return Arg.const_idx(idx)

    def f(self, name: str) -> Arg:
        """Function-table entry ``name`` (declared already)."""
        idx = self._exe.func_map.get(name)
        if idx is None:
            raise InternalError(f"Cannot find function {name}")
        return Arg.func_idx(idx)

    def void_arg(self) -> Arg:
        return Arg.register(VOID_REG)

    def vm_state(self) -> Arg:
        """The VM context register (first argument of ``alloc_storage`` and friends)."""
        return Arg.register(VM_REG)

    def convert_constant(self, value: Any) -> Arg:
        """Ints in the immediate range become immediates; anything else a constant-pool entry
        (strings, shapes and tensors shared with equal earlier ones)."""
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
                and VALUE_MIN <= int(value) <= VALUE_MAX:
            return Arg.immediate(int(value))
        value = _canonical_constant(value)
        key = _dedup_key(value)
        if key is not None and key in self._dedup:
            return Arg.const_idx(self._dedup[key])
        idx = len(self._exe.constants)
        self._exe.constants.append(value)
        if key is not None:
            self._dedup[key] = idx
        return Arg.const_idx(idx)

    # -- instructions ----------------------------------------------------------------------------
    def emit_call(self, name: str, args: Sequence[Any] | None = None,
                  dst: Arg | int | None = None) -> None:
        """``dst = name(*args)``. ``args`` entries: encoded args (``r``/``imm``/``c``/``f``),
        or tuples (-> ShapeTuple), NDArrays, ShapeTuples and DataTypes (-> constants). An
        unknown ``name`` is declared as a packed function. ``dst`` defaults to void."""
        if self._current is None:
            raise ValueError("emit should happen in a function scope")
        if not isinstance(name, str) or not name:
            raise TypeError(f"emit_call: name must be a function name, got {name!r}")
        encoded = [self._encode_arg(a, name, i) for i, a in enumerate(args or ())]
        dst_reg = VOID_REG if dst is None else _register_of(dst, "emit_call dst")
        self.declare_function(name, self._kind_of(name))
        func_idx = self._exe.func_map[name]
        self._emit([int(Opcode.Call), dst_reg, func_idx, len(encoded), *encoded])

    def _kind_of(self, name: str) -> VMFuncKind:
        idx = self._exe.func_map.get(name)
        return self._exe.func_table[idx].kind if idx is not None else VMFuncKind.PACKED_FUNC

    def _encode_arg(self, arg: Any, name: str, pos: int) -> int:
        if isinstance(arg, tuple) and not isinstance(arg, ShapeTuple):
            return self.convert_constant(ShapeTuple(arg))
        if isinstance(arg, (NDArray, ShapeTuple, DataType)):
            return self.convert_constant(arg)
        if isinstance(arg, (int, np.integer)) and not isinstance(arg, (bool, np.bool_)):
            return int(arg)  # an encoded word, as in TVM (use imm() for an integer value)
        raise TypeError(f"emit_call({name!r}): argument {pos} must be an encoded argument "
                        f"(ib.r/imm/c/f), a tuple, NDArray, ShapeTuple or DataType, "
                        f"got {type(arg).__name__} {arg!r}")

    def emit_ret(self, result: Arg | int) -> None:
        """Return register ``result``."""
        self._emit([int(Opcode.Ret), _register_of(result, "emit_ret")])

    def emit_goto(self, pc_offset: int) -> None:
        """Jump by ``pc_offset`` instructions (relative, non-zero)."""
        self._emit([int(Opcode.Goto), int(pc_offset)])

    def emit_if(self, cond: Arg | int, false_offset: int) -> None:
        """If register ``cond`` is non-zero go to the next instruction, else jump by
        ``false_offset`` (> 1)."""
        self._emit([int(Opcode.If), _register_of(cond, "emit_if"), int(false_offset)])

    # -- finalise --------------------------------------------------------------------------------
    def get(self) -> Executable:
        """Renumber registers, check the code, and return the Executable."""
        if self._current is not None:
            raise InternalError(f"Function {self._current} EndFunction has not be been called")
        for func in self._exe.func_table:
            if func.kind == VMFuncKind.VM_FUNC:
                _formalize(self._exe, func)
        for func in self._exe.func_table:
            if func.kind == VMFuncKind.VM_FUNC:
                _check(self._exe, func)
        return self._exe


def _canonical_constant(value: Any) -> Any:
    if isinstance(value, (NDArray, ShapeTuple, DataType)):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, np.dtype):
        return DataType(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, tuple):
        return ShapeTuple(value)
    raise TypeError(f"convert_constant: cannot store {type(value).__name__} {value!r} in the "
                    "constant pool (expected an NDArray, ShapeTuple/tuple, DataType, str, int "
                    "or float)")


def _register_of(arg: Any, where: str) -> int:
    word = Arg(int(arg))
    if word.kind != ArgKind.Register:
        raise InternalError(f"{where}: expected a register (ib.r(i)), got {word!r}")
    return word.value


def _formalize(exe: Executable, func: VMFuncInfo) -> None:
    """Rename non-argument registers densely in order of first definition (TVM's Formalize)."""
    n_in = func.num_args
    mapping: dict[int, int] = {}

    def renamed(reg: int) -> int:
        return mapping.get(reg, reg)

    data = exe.instr_data
    for pc in range(func.start_instr, func.end_instr):
        at = exe.instr_offset[pc]
        op = data[at]
        if op == Opcode.Call:
            for i in range(data[at + 3]):
                arg = Arg(data[at + 4 + i])
                if arg.kind == ArgKind.Register and arg.value in mapping:
                    data[at + 4 + i] = int(Arg.register(mapping[arg.value]))
            dst = data[at + 1]
            if n_in <= dst < BEGIN_SPECIAL_REG:
                if dst not in mapping:
                    mapping[dst] = n_in + len(mapping)
                data[at + 1] = mapping[dst]
        elif op in (Opcode.Ret, Opcode.If):
            data[at + 1] = renamed(data[at + 1])
    func.register_file_size = n_in + len(mapping)


class _Checker:
    """Linear scan of one VM function (TVM's CheckExecutable): a register read before any
    instruction wrote it, an out-of-range constant or function index, a zero Goto or an If
    offset <= 1 is an ``InternalError`` that dumps the program."""

    def __init__(self, exe: Executable, func: VMFuncInfo) -> None:
        self.exe, self.func = exe, func
        self.defined: set[int] = set()

    def fail(self, msg: str) -> None:
        raise InternalError(f"{msg} in VM function \"{self.func.name}\". Dump:\n"
                            f"{self.exe.as_text()}")

    def read(self, reg: int) -> None:
        if reg < self.func.num_args or reg >= BEGIN_SPECIAL_REG or reg in self.defined:
            return
        self.fail(f"register r({reg}) is used as input while it is never defined as a "
                  "destination")

    def func_index(self, idx: int) -> None:
        if not 0 <= idx < len(self.exe.func_table):
            self.fail(f"Func index {idx} exceed size of fun_table")

    def const_index(self, idx: int) -> None:
        if not 0 <= idx < len(self.exe.constants):
            self.fail(f"Constant index {idx} exceed size of constant pool")

    def call(self, instr: Call) -> None:
        self.func_index(instr.func_idx)
        arg_checks = {ArgKind.Register: self.read, ArgKind.ConstIdx: self.const_index,
                      ArgKind.FuncIdx: self.func_index, ArgKind.Immediate: lambda v: None}
        for arg in instr.args:
            arg_checks[arg.kind](arg.value)
        if instr.dst != VOID_REG:
            self.defined.add(instr.dst)

    def goto(self, instr: Goto) -> None:
        if instr.pc_offset == 0:
            self.fail("Goto offset must not be 0")

    def branch(self, instr: If) -> None:
        if instr.false_offset <= 1:
            self.fail(f"If false_offset must be > 1, got {instr.false_offset}")
        self.read(instr.cond)

    def run(self) -> None:
        func = self.func
        if func.start_instr >= func.end_instr:
            raise InternalError(f"Function {func.name} is empty or EndFunction has not been "
                                "called")
        handlers = {Call: self.call, Ret: lambda i: self.read(i.result), Goto: self.goto,
                    If: self.branch}
        for pc in range(func.start_instr, func.end_instr):
            instr = self.exe.instruction(pc)
            handlers[type(instr)](instr)


def _check(exe: Executable, func: VMFuncInfo) -> None:
    _Checker(exe, func).run()
