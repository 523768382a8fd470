"""Runtime values the VM handles besides NDArrays: shapes, dtypes, storage, closures, errors.

TVM passes these through its FFI as objects; here they are small Python classes:

- :class:`ShapeTuple` -- a tuple of ints (a subclass, so indexing/len/unpacking work) kept
  distinct from a plain ``tuple``, which is the VM's *Array* (what ``make_tuple`` builds).
- :class:`DataType` -- a ``str`` subclass ("float32"). The builder needs to tell a dtype
  constant from a string constant (``stats()`` prints them differently), while everything that
  receives one (instruments, builtins) can treat it as the plain string TVM passes to Python.
- :class:`Storage` -- a 64-byte aligned byte buffer from ``vm.builtin.alloc_storage``; tensors
  are views into it (``vm.builtin.alloc_tensor``), which is how memory planning reuses memory.
- :class:`VMClosure` -- a named callable: a VM function (or a packed function) with captured
  arguments appended after the call-time ones.
- :class:`InternalError` -- TVM's ``InternalError`` (a ``RuntimeError``): broken invariants such
  as an arity mismatch.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Iterable

import numpy as np

from ..device import Device
from ..ndarray import ALIGNMENT, NDArray

__all__ = ["ShapeTuple", "DataType", "Storage", "VMClosure", "InternalError", "shape_string",
           "tensor_view"]


class InternalError(RuntimeError):
    """A violated VM invariant (TVM's ``InternalError``, also a ``RuntimeError``)."""


class ShapeTuple(tuple):
    """An immutable tuple of int64 dimensions (TVM's ``ShapeTuple``)."""

    __slots__ = ()

    def __new__(cls, dims: Iterable[int] = ()) -> "ShapeTuple":
        out = []
        for d in dims:
            if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
                raise TypeError(f"ShapeTuple takes ints, got {d!r} in {dims!r}")
            out.append(int(d))
        return tuple.__new__(cls, out)

    @classmethod
    def of_ints(cls, dims: list[int]) -> "ShapeTuple":
        """A ShapeTuple of ``dims``, which must already be Python ints: skips the per-element
        checks of the constructor (the VM builds shapes of a symbolic-length model on every
        call, where the checks cost more than the rest of the builtin)."""
        return tuple.__new__(cls, dims)

    def __repr__(self) -> str:
        return f"ShapeTuple({list(self)})"


class DataType(str):
    """A dtype name such as ``"float32"`` (TVM's ``DataType``); ``"void"`` means "any"."""

    __slots__ = ()

    def __new__(cls, name: Any) -> "DataType":
        if isinstance(name, DataType):
            return name
        if isinstance(name, str) and name in ("void", "handle"):
            return str.__new__(cls, name)
        try:
            text = np.dtype(name).name
        except TypeError:
            raise TypeError(f"DataType: {name!r} is not a dtype") from None
        return str.__new__(cls, text)

    def __repr__(self) -> str:
        return f"DataType({str(self)!r})"


class Storage:
    """``nbytes`` of 64-byte aligned memory on ``device``; tensors are made as views into it."""

    __slots__ = ("raw", "base", "nbytes", "device", "ptr")

    def __init__(self, nbytes: int, device: Device) -> None:
        if nbytes < 0:
            raise ValueError(f"Storage: size must be >= 0 bytes, got {nbytes}")
        raw = np.empty(max(nbytes, 1) + ALIGNMENT - 1, dtype=np.uint8)
        # ctypes' from_buffer + addressof is ~3x cheaper than ``raw.ctypes.data``, and the
        # allocation is on the path of every unplanned tensor.
        address = ctypes.addressof(ctypes.c_char.from_buffer(raw))
        self.base = (-address) % ALIGNMENT
        self.raw = raw
        self.ptr = address + self.base
        self.nbytes = nbytes
        self.device = device

    def __repr__(self) -> str:
        return f"<Storage {self.nbytes} bytes on {self.device}>"


def tensor_view(storage: Storage, offset: int, shape: tuple[int, ...], dtype: str) -> NDArray:
    """An NDArray of ``shape``/``dtype`` aliasing ``storage`` at byte ``offset`` (no copy).

    The NDArray class has no public view constructor, so its slots are filled here, exactly as
    ``NDArray._new`` does for fresh memory.
    """
    nd = object.__new__(NDArray)
    nd._view = np.ndarray(shape, dtype=dtype, buffer=storage.raw, offset=storage.base + offset)
    nd._shape = shape
    nd._dtype = dtype
    nd._ptr = storage.ptr + offset
    nd._device = storage.device
    return nd


class VMClosure:
    """A callable VM value: ``impl`` (already bound to its VM) plus captured arguments.

    Calling it runs ``impl(*args, *captured)``: captured values go *after* the call-time
    arguments, as in TVM's ``make_closure``.
    """

    __slots__ = ("func_name", "impl", "captured", "_call")

    def __init__(self, func_name: str, impl: Callable[..., Any], captured: tuple = ()) -> None:
        self.func_name = func_name
        self.impl = impl
        self.captured = tuple(captured)
        if self.captured:
            cap = self.captured
            self._call = lambda *args: impl(*args, *cap)
        else:
            self._call = impl

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)

    def __repr__(self) -> str:
        extra = f", {len(self.captured)} captured" if self.captured else ""
        return f"<VMClosure {self.func_name}{extra}>"


def shape_string(tensors: Iterable[NDArray]) -> str:
    """TVM's argument-shape string: ``float32[1, 64], float32[64]`` (a 0-d tensor is ``[]``)."""
    return ", ".join(f"{t._dtype}[{', '.join(str(d) for d in t._shape)}]" for t in tensors)
