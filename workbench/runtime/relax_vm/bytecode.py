"""VM bytecode: four instructions over int64 words, with TVM's encoding.

An executable stores its code as ``instr_data`` (int64 words) plus ``instr_offset[pc]`` (the
first word of instruction ``pc``), exactly like TVM's relax VM:

======  ===============================================  =========================================
op      words                                            meaning
======  ===============================================  =========================================
Call    ``1, dst, func_idx, num_args, arg_0 .. arg_n-1``  ``dst = func_pool[func_idx](*args)``
Ret     ``2, result_reg``                                return register ``result_reg``
Goto    ``3, pc_offset``                                 ``pc += pc_offset``
If      ``4, cond_reg, false_offset``                    ``pc += 1 if cond else false_offset``
======  ===============================================  =========================================

An argument word packs a kind in its top 8 bits and a signed 56-bit value below:
register (0), immediate int (1), constant-pool index (2), function-table index (3).
Registers from ``1 << 54`` up are special: ``void`` reads None and discards writes, ``vm``
reads the VM context.

This module only encodes and decodes; ``interpreter.py`` turns decoded instructions into the
tuples its loop runs.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

__all__ = [
    "Opcode", "ArgKind", "Arg", "Instruction", "Call", "Ret", "Goto", "If",
    "BEGIN_SPECIAL_REG", "VOID_REG", "VM_REG", "VALUE_MAX", "VALUE_MIN",
    "decode_instruction", "encode_instruction", "reg_name",
]

BEGIN_SPECIAL_REG = 1 << 54
VOID_REG = BEGIN_SPECIAL_REG
VM_REG = BEGIN_SPECIAL_REG + 1
_VALUE_BITS = 56
_KIND_SHIFT = _VALUE_BITS
_VALUE_MASK = (1 << _VALUE_BITS) - 1
VALUE_MAX = (1 << (_VALUE_BITS - 1)) - 1      # immediates that fit an argument word
VALUE_MIN = -VALUE_MAX


class Opcode(enum.IntEnum):
    Call = 1
    Ret = 2
    Goto = 3
    If = 4


class ArgKind(enum.IntEnum):
    Register = 0
    Immediate = 1
    ConstIdx = 2
    FuncIdx = 3


class Arg(int):
    """One encoded argument word (an int, as in TVM's Python ExecBuilder), with helpers.

    ``Arg.register(2)`` etc. build one; ``arg.kind`` / ``arg.value`` decode it. Plain ints that
    hold a valid word are accepted wherever an ``Arg`` is.
    """

    __slots__ = ()

    @classmethod
    def make(cls, kind: ArgKind, value: int) -> "Arg":
        if not VALUE_MIN <= value <= VALUE_MAX:  # special registers (1 << 54) fit too
            raise ValueError(f"{kind.name} value {value} does not fit a 56-bit argument word "
                             f"(range {VALUE_MIN}..{VALUE_MAX})")
        return cls((int(kind) << _KIND_SHIFT) | (value & _VALUE_MASK))

    @classmethod
    def register(cls, idx: int) -> "Arg":
        return cls.make(ArgKind.Register, idx)

    @classmethod
    def immediate(cls, value: int) -> "Arg":
        return cls.make(ArgKind.Immediate, value)

    @classmethod
    def const_idx(cls, idx: int) -> "Arg":
        return cls.make(ArgKind.ConstIdx, idx)

    @classmethod
    def func_idx(cls, idx: int) -> "Arg":
        return cls.make(ArgKind.FuncIdx, idx)

    @property
    def kind(self) -> ArgKind:
        return ArgKind((int(self) >> _KIND_SHIFT) & 0xFF)

    @property
    def value(self) -> int:
        raw = int(self) & _VALUE_MASK  # sign-extend the low 56 bits
        return raw - (1 << _VALUE_BITS) if raw >> (_VALUE_BITS - 1) else raw

    def __repr__(self) -> str:
        return f"Arg({self.kind.name}, {self.value})"


def reg_name(reg: int) -> str:
    """A register as ``as_text`` prints it: ``%3``, ``%void``, ``%vm``."""
    if reg == VOID_REG:
        return "%void"
    if reg == VM_REG:
        return "%vm"
    return f"%{reg}"


@dataclass(frozen=True)
class Call:
    func_idx: int
    args: tuple[Arg, ...]
    dst: int
    op = Opcode.Call


@dataclass(frozen=True)
class Ret:
    result: int
    op = Opcode.Ret


@dataclass(frozen=True)
class Goto:
    pc_offset: int
    op = Opcode.Goto


@dataclass(frozen=True)
class If:
    cond: int
    false_offset: int
    op = Opcode.If


Instruction = Call | Ret | Goto | If


def _decode_call(data: Sequence[int], at: int) -> Call:
    n = data[at + 3]
    return Call(data[at + 2], tuple(Arg(w) for w in data[at + 4:at + 4 + n]), data[at + 1])


_DECODERS = {
    Opcode.Call: _decode_call,
    Opcode.Ret: lambda data, at: Ret(data[at + 1]),
    Opcode.Goto: lambda data, at: Goto(data[at + 1]),
    Opcode.If: lambda data, at: If(data[at + 1], data[at + 2]),
}


def decode_instruction(data: Sequence[int], at: int) -> Instruction:
    """The instruction whose first word is ``data[at]``."""
    try:
        decoder = _DECODERS[Opcode(data[at])]
    except ValueError:
        raise ValueError(f"bad opcode {data[at]} at word {at}") from None
    return decoder(data, at)


_ENCODERS = {
    Call: lambda i: [int(Opcode.Call), i.dst, i.func_idx, len(i.args), *map(int, i.args)],
    Ret: lambda i: [int(Opcode.Ret), i.result],
    Goto: lambda i: [int(Opcode.Goto), i.pc_offset],
    If: lambda i: [int(Opcode.If), i.cond, i.false_offset],
}


def encode_instruction(instr: Instruction) -> list[int]:
    """The words of ``instr`` (inverse of :func:`decode_instruction`)."""
    return _ENCODERS[type(instr)](instr)
