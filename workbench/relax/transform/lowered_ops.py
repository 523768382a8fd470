"""The low-level Relax vocabulary the compilation passes lower into (TVM's builtin/memory ops).

After ``CallTIRRewrite`` a function no longer calls ``call_tir``; it allocates outputs and calls
kernels in destination-passing style. These are the forms the later passes and the VM code
generator understand:

- ``R.builtin.alloc_tensor(shape, dtype=..., runtime_device_index=0)``: a fresh tensor
  (:func:`builtin_alloc_tensor`); ``shape`` is a ShapeExpr (symbolic dims allowed).
- ``R.memory.alloc_storage(size, virtual_device_index=0, storage_scope="global",
  dtype="uint8")``: ``size`` bytes of storage (:func:`memory_alloc_storage`).
- ``R.memory.alloc_tensor(storage, offset, shape, dtype)``: a tensor viewing a storage at byte
  ``offset`` (:func:`memory_alloc_tensor`); tensors of one storage alias it (memory planning).
- ``R.call_builtin_with_ctx(func, args)``: call a ``vm.builtin.*`` function with the VM
  context prepended (``alloc_shape_heap``).
- ``R.null_value()``: the VM's void value (the heap argument of a shape check without
  symbolic dims).
- A kernel call is ``Call(GlobalVar(prim_func), (*inputs, *outputs))`` (struct info: empty
  tuple); any other runtime function is ``Call(ExternFunc(name), args)``.
- :class:`DataTypeImm` is a dtype value (TVM's ``relax.DataTypeImm``), stored in the VM's
  constant pool as a DataType.

The op constructors return normalised calls (struct info set), so passes can bind them directly.
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench.ir.node import node
from workbench.relax.expr import (
    Call, Expr, ExternFunc, PrimValue, ShapeExpr, Tuple, Var, register_leaf_type,
)
from workbench.relax.op.registry import def_infer, register_op
from workbench.relax.struct_info import (
    ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
    TupleStructInfo,
)

VOID_SINFO = TupleStructInfo(())


@node
class DataTypeImm(Expr):
    """A dtype as a Relax value (TVM's ``relax.DataTypeImm``)."""

    value: str
    struct_info: StructInfo | None = ObjectStructInfo()


@node
class NullValue(Expr):
    """The VM's void value (``R.null_value()``); codegen passes the void register."""

    struct_info: StructInfo | None = ObjectStructInfo()


def _shape_sinfo(shape: ShapeExpr | Var) -> Any:
    return shape.values if isinstance(shape, ShapeExpr) else None


# ---- builtin.alloc_tensor ----------------------------------------------------------------------

BUILTIN_ALLOC_TENSOR = register_op("relax.builtin.alloc_tensor")


def builtin_alloc_tensor(shape: ShapeExpr, dtype: str, runtime_device_index: int = 0) -> Call:
    """A new tensor of ``shape``/``dtype`` (TVM's ``R.builtin.alloc_tensor``)."""
    return Call(BUILTIN_ALLOC_TENSOR, (shape,),
                {"dtype": dtype, "runtime_device_index": runtime_device_index}, (),
                TensorStructInfo(shape, dtype))


@def_infer("relax.builtin.alloc_tensor")
def _infer_builtin_alloc(call: Call, ctx: Any) -> StructInfo:
    return TensorStructInfo(call.args[0], call.attrs["dtype"])


# ---- memory.alloc_storage / alloc_tensor / kill ------------------------------------------------

MEMORY_ALLOC_STORAGE = register_op("relax.memory.alloc_storage")
MEMORY_ALLOC_TENSOR = register_op("relax.memory.alloc_tensor")
MEMORY_KILL_STORAGE = register_op("relax.memory.kill_storage")
MEMORY_KILL_TENSOR = register_op("relax.memory.kill_tensor")


def memory_alloc_storage(size: ShapeExpr, virtual_device_index: int = 0,
                         storage_scope: str = "global", dtype: str = "uint8") -> Call:
    """``size`` (a one-element ShapeExpr: bytes for uint8) of storage."""
    return Call(MEMORY_ALLOC_STORAGE, (size,),
                {"virtual_device_index": virtual_device_index, "storage_scope": storage_scope,
                 "dtype": dtype}, (), ObjectStructInfo())


def memory_alloc_tensor(storage: Expr, offset: int, shape: ShapeExpr | Var, dtype: str) -> Call:
    """A tensor of ``shape``/``dtype`` at byte ``offset`` of ``storage``."""
    return Call(MEMORY_ALLOC_TENSOR, (storage, shape), {"offset": offset, "dtype": dtype}, (),
                _alloc_sinfo(shape, dtype))


def _alloc_sinfo(shape: ShapeExpr | Var, dtype: str) -> TensorStructInfo:
    """A shape variable whose struct info knows its values gives the tensor that shape (as
    TVM's inference does), so building the call and re-inferring it agree."""
    if isinstance(shape, ShapeExpr):
        return TensorStructInfo(shape, dtype)
    si = shape.struct_info
    if isinstance(si, ShapeStructInfo) and si.values is not None:
        return TensorStructInfo(ShapeExpr(tuple(si.values)), dtype)
    return TensorStructInfo(None, dtype, ndim=_ndim_of(shape))


def _ndim_of(shape: Var) -> int:
    si = shape.struct_info
    return si.ndim if isinstance(si, ShapeStructInfo) else -1


@def_infer("relax.memory.alloc_storage")
def _infer_alloc_storage(call: Call, ctx: Any) -> StructInfo:
    return ObjectStructInfo()


@def_infer("relax.memory.alloc_tensor")
def _infer_alloc_tensor(call: Call, ctx: Any) -> StructInfo:
    return _alloc_sinfo(call.args[1], call.attrs["dtype"])


@def_infer("relax.memory.kill_storage")
def _infer_kill_storage(call: Call, ctx: Any) -> StructInfo:
    return VOID_SINFO


@def_infer("relax.memory.kill_tensor")
def _infer_kill_tensor(call: Call, ctx: Any) -> StructInfo:
    return VOID_SINFO


# ---- runtime calls -----------------------------------------------------------------------------

CALL_BUILTIN_WITH_CTX = register_op("relax.call_builtin_with_ctx")
NULL_VALUE = register_op("relax.null_value")


def call_builtin_with_ctx(name: str, args: Sequence[Expr], sinfo: StructInfo) -> Call:
    """``name(%vm, *args)``."""
    # The argument tuple's struct info is its fields' (derived), not the void tuple's.
    return Call(CALL_BUILTIN_WITH_CTX, (ExternFunc(name), Tuple(tuple(args))),
                {}, (sinfo,), sinfo)


@def_infer("relax.call_builtin_with_ctx")
def _infer_with_ctx(call: Call, ctx: Any) -> StructInfo:
    return call.sinfo_args[0] if call.sinfo_args else ObjectStructInfo()


@def_infer("relax.null_value")
def _infer_null(call: Call, ctx: Any) -> StructInfo:
    return ObjectStructInfo()


def call_packed(name: str, args: Sequence[Expr], sinfo: StructInfo = VOID_SINFO) -> Call:
    """``name(*args)`` for a function found by name at run time (TVM's ``R.call_packed``)."""
    return Call(ExternFunc(name), tuple(args), {}, (sinfo,), sinfo)


def prim_int(value: int) -> PrimValue:
    """An int64 PrimValue (codegen turns it into an immediate)."""
    return PrimValue(int(value))


def is_op(expr: Any, op: Any) -> bool:
    return isinstance(expr, Call) and expr.op is op


# ---- printing ----------------------------------------------------------------------------------

def _register_printers() -> None:
    from workbench.relax import printer
    table = getattr(printer, "_EXPR", None)
    if table is not None:
        table.setdefault(DataTypeImm, lambda p, e: f'R.dtype("{e.value}")')
        table.setdefault(NullValue, lambda p, e: "R.null_value()")


_register_printers()
# Both are values a call takes inline (TVM's DataTypeImm is a LeafExpr; the heap argument of a
# shape check is a null value): the parser's normaliser must not bind them to variables.
register_leaf_type(DataTypeImm)
register_leaf_type(NullValue)

__all__ = ["DataTypeImm", "NullValue", "builtin_alloc_tensor", "memory_alloc_storage",
           "memory_alloc_tensor", "call_builtin_with_ctx", "call_packed", "prim_int", "is_op",
           "BUILTIN_ALLOC_TENSOR", "MEMORY_ALLOC_STORAGE", "MEMORY_ALLOC_TENSOR",
           "MEMORY_KILL_STORAGE", "MEMORY_KILL_TENSOR", "CALL_BUILTIN_WITH_CTX", "NULL_VALUE",
           "VOID_SINFO", "PrimStructInfo"]
