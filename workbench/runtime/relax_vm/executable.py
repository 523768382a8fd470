"""``Executable``: the VM's program -- function table, constant pool, bytecode, kernel libraries.

Layout as TVM's relax ``VMExecutable`` (reference: runtime_vm_profiling.md section 4):

- ``func_table``: one :class:`VMFuncInfo` per function, VM functions (bytecode in
  ``[start_instr, end_instr)``) and packed functions (kernels, builtins, registered Python
  functions, resolved by name when a VM is created); ``func_map`` maps names to indices.
- ``constants``: NDArrays, :class:`ShapeTuple`, :class:`DataType`, str, int, float.
- ``instr_offset`` / ``instr_data``: the code (see :mod:`.bytecode`).
- ``libs``: runtime Modules whose kernels the packed functions resolve to, searched in order.

An Executable is plain data and never changes once built; a :class:`VirtualMachine` decodes it
into its own fast form. ``save``/``load`` (``serialization.py``) write one archive file.
"""
from __future__ import annotations

import enum
import html
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from workbench.ir.dispatch import TypeTable

from ..module import Module
from ..ndarray import NDArray
from .bytecode import (VM_REG, VOID_REG, Arg, ArgKind, Call, Goto, If, Instruction, Ret,
                       decode_instruction, reg_name)
from .call_origin import CallOrigin
from .objects import DataType, ShapeTuple

__all__ = ["VMFuncKind", "VMFuncInfo", "Executable", "VMExecutable"]


class VMFuncKind(enum.IntEnum):
    """What a function-table entry is (TVM's ``VMFuncInfo::FuncKind``)."""

    PACKED_FUNC = 0
    VM_FUNC = 1
    VMTIR_FUNC = 2


@dataclass
class VMFuncInfo:
    """One function-table entry. ``num_args == -2`` marks a declared, not yet defined function
    (as in TVM's builder)."""

    kind: VMFuncKind
    name: str
    start_instr: int = 0
    end_instr: int = 0
    num_args: int = -2
    register_file_size: int = 0
    param_names: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"kind": int(self.kind), "name": self.name, "start_instr": self.start_instr,
                "end_instr": self.end_instr, "num_args": self.num_args,
                "register_file_size": self.register_file_size,
                "param_names": list(self.param_names)}

    @classmethod
    def from_json(cls, d: dict) -> "VMFuncInfo":
        return cls(VMFuncKind(d["kind"]), d["name"], d["start_instr"], d["end_instr"],
                   d["num_args"], d["register_file_size"], list(d["param_names"]))


# -- how constants print in stats() ------------------------------------------------------------

def _stat_tensor(value: NDArray) -> str:
    return "scalar" if not value.shape else f"[{', '.join(str(d) for d in value.shape)}]"


_STAT_FORMAT: dict[type, Callable[[Any], str]] = {
    NDArray: _stat_tensor,
    ShapeTuple: lambda v: f"shapetuple[{', '.join(str(d) for d in v)}]",
    DataType: str,
    str: lambda v: f'"{v}"',
    int: str,
    float: repr,
}


# The kind of a constant's type: the nearest class along its MRO with a format (bool -> int).
_KIND: TypeTable[type] = TypeTable({cls: cls for cls in _STAT_FORMAT})


def constant_kind(value: Any) -> type:
    """The constant-pool kind of ``value`` (a key of the format/serialisation tables)."""
    kind = _KIND.lookup(type(value))
    if kind is not None:
        return kind
    raise TypeError(f"a VM constant must be an NDArray, ShapeTuple, DataType, str, int or "
                    f"float, got {type(value).__name__}")


class Executable:
    """A VM program (TVM's ``VMExecutable``). Build one with :class:`ExecBuilder`, the relax
    compiler, or :meth:`load`; run it with ``VirtualMachine(exe, device)``."""

    def __init__(self, func_table: Sequence[VMFuncInfo] = (), constants: Sequence[Any] = (),
                 instr_offset: Sequence[int] = (), instr_data: Sequence[int] = (),
                 libs: Sequence[Module] = ()) -> None:
        self.func_table: list[VMFuncInfo] = list(func_table)
        self.func_map: dict[str, int] = {f.name: i for i, f in enumerate(self.func_table)}
        self.constants: list[Any] = list(constants)
        self.instr_offset: list[int] = list(instr_offset)
        self.instr_data: list[int] = list(instr_data)
        self._libs: list[Module] = []
        for lib in libs:
            self.import_module(lib)
        # (VM function, instruction index) -> CallOrigin: the model layers a call implements
        # (set by relax.build for imported models; saved with the executable).
        self.call_origins: dict[tuple[str, int], CallOrigin] = {}

    # -- kernel libraries ------------------------------------------------------------------------
    def import_module(self, lib: Module) -> None:
        """Add a kernel library; packed functions resolve to the first library defining them."""
        if not isinstance(lib, Module):
            raise TypeError(f"Executable.import_module: expected a runtime Module (from "
                            f"workbench.build), got {type(lib).__name__}")
        self._libs.append(lib)

    @property
    def imported_modules(self) -> list[Module]:
        return list(self._libs)

    @property
    def libs(self) -> list[Module]:
        return list(self._libs)

    def jit(self, *args: Any, **kwargs: Any) -> "Executable":
        """TVM links the kernels here; ours are loaded already, so this returns ``self``."""
        return self

    # -- queries ---------------------------------------------------------------------------------
    def has_function(self, name: str) -> bool:
        return name in self.func_map

    def function_info(self, name: str) -> VMFuncInfo:
        idx = self.func_map.get(name)
        if idx is None:
            raise ValueError(f"Unknown function: {name}")
        return self.func_table[idx]

    def get_function_arity(self, name: str) -> int:
        """The number of recorded parameter names (0 if emitted without names), as in TVM."""
        return len(self.function_info(name).param_names)

    def get_function_param_name(self, name: str, index: int) -> str:
        names = self.function_info(name).param_names
        if not 0 <= index < len(names):
            raise IndexError(f"function {name!r} has {len(names)} named parameters; "
                             f"index {index} is out of range")
        return names[index]

    def instruction(self, pc: int) -> Instruction:
        """Decode instruction ``pc`` (a global instruction index)."""
        return decode_instruction(self.instr_data, self.instr_offset[pc])

    def instructions(self, func: VMFuncInfo) -> list[Instruction]:
        return [self.instruction(pc) for pc in range(func.start_instr, func.end_instr)]

    def _func_name(self, idx: int) -> str:
        if 0 <= idx < len(self.func_table):
            return self.func_table[idx].name
        return f"unknown_func_index({idx})"

    # -- text forms (TVM's layouts, character for character) -------------------------------------
    def _arg_text(self, arg: Arg) -> str:
        return {ArgKind.Register: lambda v: reg_name(v), ArgKind.Immediate: lambda v: f"i{v}",
                ArgKind.ConstIdx: lambda v: f"c[{v}]",
                ArgKind.FuncIdx: lambda v: f"f[{self._func_name(v)}]"}[arg.kind](arg.value)

    def _instr_text(self, instr: Instruction) -> str:
        return {
            Call: lambda i: (f"{'call':<6}{self._func_name(i.func_idx):<16} in: "
                             f"{', '.join(self._arg_text(a) for a in i.args):<12} "
                             f"dst: {reg_name(i.dst)}"),
            Ret: lambda i: f"{'ret ':<6}{reg_name(i.result)}",
            Goto: lambda i: f"{'goto':<6}{i.pc_offset}",
            If: lambda i: f"{'If':<6}{reg_name(i.cond)}, {i.false_offset}",
        }[type(instr)](instr)

    def as_text(self) -> str:
        """The program in TVM's text form (``@main:`` then one indented line per instruction)."""
        out = []
        for func in self.func_table:
            if func.kind == VMFuncKind.PACKED_FUNC:
                out.append(f"@{func.name} packed_func;\n\n")
            elif func.kind == VMFuncKind.VMTIR_FUNC:
                out.append(f"@{func.name} num_inputs={func.num_args} vm_tir_func;\n\n")
            else:
                out.append(f"@{func.name}:\n")
                out += [f"  {self._instr_text(i)}\n" for i in self.instructions(func)]
                out.append("\n")
        return "".join(out)

    def _arg_python(self, arg: Arg) -> str:
        kind, value = arg.kind, arg.value
        if kind == ArgKind.Register:
            return "ib.r(vm)" if value == VM_REG else f"ib.r({value})"
        if kind == ArgKind.FuncIdx:
            name = self._func_name(value)
            return f'ib.f("{name}")' if 0 <= value < len(self.func_table) \
                else f"ib.f(ib.unknown_func_index({value}))"
        return {ArgKind.Immediate: "ib.imm({})", ArgKind.ConstIdx: "ib.c({})"}[kind].format(value)

    def _instr_python(self, instr: Instruction) -> str:
        return {
            Call: lambda i: (f'ib.emit_call("{self._func_name(i.func_idx)}", args=['
                             f'{", ".join(self._arg_python(a) for a in i.args)}]'
                             f'{"" if i.dst == VOID_REG else f", dst=ib.r({i.dst})"})'),
            Ret: lambda i: f"ib.emit_ret(ib.r({i.result}))",
            Goto: lambda i: f"ib.emit_goto({i.pc_offset})",
            If: lambda i: f"ib.emit_if(ib.r({i.cond}), {i.false_offset})",
        }[type(instr)](instr)

    def as_python(self) -> str:
        """The program as ExecBuilder calls (TVM's ``as_python`` layout)."""
        out = ["ib = rx.Builder()\n"]
        for func in self.func_table:
            if func.kind != VMFuncKind.VM_FUNC:
                continue
            out.append(f'with ib.function("{func.name}", num_inputs={func.num_args}):\n')
            out += [f"    {self._instr_python(i)}\n" for i in self.instructions(func)]
        return "".join(out)

    def stats(self) -> str:
        """TVM's three-line summary: constant pool kinds and the function table's names."""
        consts = ", ".join(_STAT_FORMAT[constant_kind(c)](c) for c in self.constants)
        names = ", ".join(f.name for f in self.func_table)
        return (f"Relax VM executable statistics:\n"
                f"  Constant pool (# {len(self.constants)}): [{consts}]\n"
                f"  Globals (#{len(self.func_table)}): [{names}]\n")

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the executable and its kernel libraries to one archive file (see
        ``serialization.py`` for the format); :meth:`load` reads it in any process."""
        from .serialization import save_executable

        save_executable(self, path)

    export_library = save  # TVM's spelling

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Executable":
        """Read an archive written by :meth:`save`."""
        from .serialization import load_executable

        return load_executable(path)

    # -- display ---------------------------------------------------------------------------------
    def __repr__(self) -> str:
        funcs = [f.name for f in self.func_table if f.kind == VMFuncKind.VM_FUNC]
        return (f"<Executable functions={funcs} constants={len(self.constants)} "
                f"instructions={len(self.instr_offset)} libs={len(self._libs)}>")

    def _repr_html_(self) -> str:
        return (f"<div class='workbench-executable'><b>VM Executable</b>"
                f"<pre>{html.escape(self.stats())}</pre>"
                f"<pre>{html.escape(self.as_text())}</pre></div>")


VMExecutable = Executable  # TVM's class name
