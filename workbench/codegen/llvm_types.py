"""Mapping dtypes to LLVM types. Booleans are ``i1`` in registers and ``i8`` in memory."""
from __future__ import annotations

import functools

import llvmlite.ir as ir

from workbench.ir import dtype as dt

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8P = I8.as_pointer()
VOID = ir.VoidType()

_SCALAR = {
    "bool": I1, "int8": I8, "uint8": I8, "int16": ir.IntType(16), "uint16": ir.IntType(16),
    "int32": I32, "uint32": I32, "int64": I64, "uint64": I64,
    "float16": ir.HalfType(), "float32": ir.FloatType(), "float64": ir.DoubleType(),
    # bfloat16 lives in registers and memory as its 16 bits; codegen converts through float32.
    "bfloat16": ir.IntType(16),
    "handle": I8P,
}


@functools.lru_cache(maxsize=None)
def value_type(dtype: str) -> ir.Type:
    """The LLVM type of a value of ``dtype`` (vector types for lanes > 1)."""
    t = dt.parse(dtype)
    scalar = _SCALAR[t.scalar]
    return scalar if t.lanes == 1 else ir.VectorType(scalar, t.lanes)


@functools.lru_cache(maxsize=None)
def memory_type(dtype: str) -> ir.Type:
    """The LLVM type a value of ``dtype`` has in memory."""
    t = dt.parse(dtype)
    scalar = I8 if t.is_bool else _SCALAR[t.scalar]
    return scalar if t.lanes == 1 else ir.VectorType(scalar, t.lanes)


def element_bytes(dtype: str) -> int:
    t = dt.parse(dtype)
    return 1 if t.is_bool else t.bits // 8
