"""The ``vm.builtin.*`` functions: memory, shapes, checks, tuples, closures, control flow.

Registered in the global function registry when this module is imported (the VM package
imports it), so executables call them by name like any other packed function. Names,
argument orders and error classes follow TVM (reference: runtime_vm_profiling.md section 4.7);
``ctx`` is the :class:`VirtualMachine` running the call (the ``%vm`` register).

Conventions the compiler relies on (see also the package docstring):

- ``err_ctx`` arguments are strings naming where a value came from, e.g.
  ``"ErrorContext(fn=main, loc=param[0], param=x, annotation=R.Tensor((n, 4)))"``; every check
  error starts with it, which is how a wrong input names its parameter.
- Shape-match codes (``match_shape`` / ``match_prim_value``): 0 = assert equal to the
  immediate, 1 = store into ``heap[v]``, 2 = no-op, 3 = assert equal to ``heap[v]``.
  ``make_shape`` / ``make_prim_value`` codes: 0 = the immediate, 1 = ``heap[v]``.
- ``alloc_tensor`` offsets must be multiples of 64 bytes: kernels assume aligned buffers.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..device import Device
from ..ndarray import ALIGNMENT, NDArray, numpy_dtype
from ..packed_func import PackedFunc
from ..registry import get_global_func, register_func
from .objects import InternalError, ShapeTuple, Storage, VMClosure, tensor_view

__all__ = ["BUILTINS", "register_builtins", "make_shape_site"]

# match_shape / match_prim_value codes
ASSERT_EQUAL_TO_IMM, STORE_TO_HEAP, NO_OP, ASSERT_EQUAL_TO_LOAD = 0, 1, 2, 3
# make_shape / make_prim_value codes
USE_IMM, LOAD_SHAPE = 0, 1

BUILTINS: dict[str, Callable[..., Any]] = {}


def builtin(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        BUILTINS["vm.builtin." + name] = fn
        return fn
    return add


def _ctx(err_ctx: Any) -> str:
    return "" if err_ctx is None else str(err_ctx)


def _type_name(x: Any) -> str:
    return {NDArray: "Tensor", ShapeTuple: "Shape", tuple: "Array", VMClosure: "Closure",
            type(None): "None"}.get(type(x), type(x).__name__)


# -- memory ------------------------------------------------------------------------------------

_ITEMSIZE: dict[str, int] = {}


def _itemsize(dtype: Any) -> int:
    size = _ITEMSIZE.get(dtype)
    if size is None:
        size = _ITEMSIZE[str(dtype)] = numpy_dtype(str(dtype)).itemsize
    return size


@builtin("alloc_storage")
def alloc_storage(ctx: Any, size: ShapeTuple, device_index: int, dtype_hint: Any,
                  scope: str = "global") -> Storage:
    """``prod(size) * itemsize(dtype_hint)`` bytes on device ``device_index`` (-1 = host).
    The compiler passes the byte count with dtype ``uint8``."""
    devices = ctx.devices
    dev = devices[-1] if device_index == -1 else devices[device_index]
    nbytes = math.prod(size) * _itemsize(dtype_hint)
    return Storage(nbytes, dev)


@builtin("alloc_tensor")
def alloc_tensor(storage: Storage, offset: int, shape: ShapeTuple, dtype: Any) -> NDArray:
    """A tensor viewing ``storage`` at byte ``offset`` (a multiple of 64)."""
    nbytes = math.prod(shape) * _itemsize(dtype)
    if offset < 0 or offset + nbytes > storage.nbytes:
        raise InternalError(f"storage allocation failure, attempted to allocate {nbytes} at "
                            f"offset {offset} in region that is {storage.nbytes} bytes")
    if offset % ALIGNMENT:
        raise ValueError(f"vm.builtin.alloc_tensor: offset {offset} is not a multiple of "
                         f"{ALIGNMENT} bytes; kernels require {ALIGNMENT}-byte aligned tensors")
    return tensor_view(storage, offset, tuple(shape), str(dtype))


@builtin("alloc_shape_heap")
def alloc_shape_heap(ctx: Any, size: int) -> NDArray:
    """An int64 tensor of ``size`` slots on the host, holding symbolic dimensions."""
    # Made on every call of a function with symbolic shapes: a view of fresh storage skips
    # ``empty``'s argument normalisation (8 us -> 3.7 us; in an encoder's run, with cold
    # caches, ~35 us of a 1-thread, 7-row call of ~450 us).
    n = int(size)
    return tensor_view(Storage(8 * n, ctx.devices[-1]), 0, (n,), "int64")


@builtin("null_value")
def null_value() -> None:
    return None


@builtin("copy")
def copy(x: Any) -> Any:
    return x


@builtin("to_device")
def to_device(x: NDArray, dev_type: int, dev_id: int) -> NDArray:
    return x.copyto(Device(int(dev_type), int(dev_id)))


@builtin("ensure_zero_offset")
def ensure_zero_offset(x: NDArray) -> NDArray:
    return x  # our tensors always start at their data pointer


# -- shapes ------------------------------------------------------------------------------------

def _shape_of_value(x: Any, err_ctx: Any) -> tuple:
    if isinstance(x, NDArray):
        return x._shape
    if isinstance(x, ShapeTuple):
        return x
    raise TypeError(f"{_ctx(err_ctx)} expect a Tensor or Shape but get {_type_name(x)}")


def _heap_view(heap: Any) -> Any:
    return heap.numpy(copy=False) if isinstance(heap, NDArray) else heap


def _match_one(value: int, heap: Any, code: int, reg: int, err_ctx: Any, what: str) -> None:
    if code == ASSERT_EQUAL_TO_IMM:
        if value != reg:
            raise RuntimeError(f"{_ctx(err_ctx)} match_cast error, {what} mismatch to specified "
                               f"constant: expected {reg}, got {value}.")
    elif code == STORE_TO_HEAP:
        heap[reg] = value
    elif code == ASSERT_EQUAL_TO_LOAD:
        if value != heap[reg]:
            raise RuntimeError(f"{_ctx(err_ctx)} match_cast error, {what} mismatch to a previous "
                               f"populated value: expected {int(heap[reg])}, got {value}.")
    elif code != NO_OP:
        raise InternalError(f"match_shape: unknown code {code}")


@builtin("match_shape")
def match_shape(x: Any, heap: Any, ndim: int, *rest: Any) -> None:
    """``match_shape(x, heap, ndim, code0, v0, ..., err_ctx)``: check/bind x's dimensions."""
    err_ctx = rest[2 * ndim] if len(rest) > 2 * ndim else None
    shape = _shape_of_value(x, err_ctx)
    if len(shape) != ndim:
        raise RuntimeError(f"{_ctx(err_ctx)} match_cast shape size mismatch: expected ndim "
                           f"{ndim}, got {len(shape)}.")
    h = _heap_view(heap)
    for i in range(ndim):
        _match_one(shape[i], h, rest[2 * i], rest[2 * i + 1], err_ctx, f"shape[{i}]")


@builtin("match_prim_value")
def match_prim_value(value: int, heap: Any, code: int, reg: int, err_ctx: Any = None) -> None:
    _match_one(int(value), _heap_view(heap), code, reg, err_ctx, "PrimValue")


@builtin("check_upper_bound")
def check_upper_bound(heap: Any, slot: int, bound: int, name: str, err_ctx: Any = None) -> None:
    """A symbolic dim (``heap[slot]``, named ``name``) must not exceed its ``bound`` (the
    function's ``tir_var_upper_bound``, which memory was planned for)."""
    value = int(_heap_view(heap)[slot])
    if value > bound:
        raise ValueError(f"{_ctx(err_ctx)}the dimension {name!s} is {value}, above its upper "
                         f"bound {bound} (the function's tir_var_upper_bound, for which its "
                         f"memory is planned); compile with a larger bound")


#: make_shape's results by (codes, heap values): a symbolic-length model rebuilds the same
#: few shapes on every call at a given length. Bounded: cleared when it grows past the limit.
_SHAPES: dict[tuple, ShapeTuple] = {}
_SHAPES_LIMIT = 4096


@builtin("make_shape")
def make_shape(heap: Any, n: int, *codes: int) -> ShapeTuple:
    """``make_shape(heap, n, code0, v0, ...)`` -> ShapeTuple (code 0 immediate, 1 heap[v])."""
    # Runs before every allocation of a symbolic shape, on every call: building and checking
    # a ShapeTuple cost ~3 us, 7 calls ~15% of a 1-row encoder layer pair's time; a lookup of
    # the heap's Python ints costs a fraction of that.
    h = heap.numpy(copy=False).tolist() if isinstance(heap, NDArray) else \
        [int(v) for v in heap]
    key = (codes, *h)
    shape = _SHAPES.get(key)
    if shape is None:
        if len(_SHAPES) >= _SHAPES_LIMIT:
            _SHAPES.clear()
        shape = _SHAPES[key] = ShapeTuple.of_ints(
            [int(codes[2 * i + 1]) if codes[2 * i] == USE_IMM else h[codes[2 * i + 1]]
             for i in range(n)])
    return shape


def make_shape_site(n: int, codes: tuple[int, ...]) -> Callable[[Any], ShapeTuple]:
    """``heap -> make_shape(heap, n, *codes)`` for one call site whose ``n`` and codes are
    immediates (the interpreter decodes such calls to it). Same results as ``make_shape``,
    from a cache of the site's own shapes keyed by the heap's values alone: it saves the
    generic call's argument spreading and key building (~0.55 -> ~0.33 us a call; an
    encoder's call builds 7 shapes)."""
    n = int(n)
    codes = tuple(int(c) for c in codes)
    if len(codes) != 2 * n or any(c not in (USE_IMM, LOAD_SHAPE) for c in codes[::2]):
        raise InternalError(f"make_shape: {n} dims need {2 * n} codes 0/1, got {codes}")
    picks = [(codes[2 * i] == LOAD_SHAPE, codes[2 * i + 1]) for i in range(n)]
    cache: dict[tuple, ShapeTuple] = {}

    def site(heap: Any) -> ShapeTuple:
        if heap.__class__ is not NDArray:
            return make_shape(heap, n, *codes)
        key = tuple(heap._view.tolist())
        shape = cache.get(key)
        if shape is None:
            if len(cache) >= _SHAPES_LIMIT:
                cache.clear()
            shape = cache[key] = ShapeTuple.of_ints([key[v] if load else v
                                                     for load, v in picks])
        return shape

    return site


@builtin("make_prim_value")
def make_prim_value(heap: Any, code: int, reg: int) -> int:
    return reg if code == USE_IMM else int(_heap_view(heap)[reg])


@builtin("shape_of")
def shape_of(x: NDArray) -> ShapeTuple:
    return ShapeTuple(x._shape)


@builtin("reshape")
def reshape(x: NDArray, shape: ShapeTuple) -> NDArray:
    """A view of ``x`` with ``shape`` (same element count)."""
    if math.prod(shape) != math.prod(x._shape):
        raise ValueError(f"vm.builtin.reshape: cannot reshape {x._dtype}{list(x._shape)} to "
                         f"{list(shape)} (element counts differ)")
    nd = object.__new__(NDArray)
    nd._view = x._view.reshape(tuple(shape))
    nd._shape, nd._dtype, nd._ptr, nd._device = tuple(shape), x._dtype, x._ptr, x._device
    return nd


@builtin("tensor_to_shape")
def tensor_to_shape(x: NDArray) -> ShapeTuple:
    if x.ndim != 1 or not np.issubdtype(np.dtype(x.dtype), np.integer):
        raise ValueError(f"vm.builtin.tensor_to_shape expects a 1-d integer tensor, got "
                         f"{x.dtype}{list(x.shape)}")
    return ShapeTuple(int(v) for v in x.numpy(copy=False))


# -- checks ------------------------------------------------------------------------------------

@builtin("check_tensor_info")
def check_tensor_info(x: Any, ndim: int, *rest: Any) -> None:
    """``check_tensor_info(x, ndim, [dtype,] err_ctx)``: x must be a tensor with ``ndim``
    dimensions (-1: any) and ``dtype`` (void/omitted: any)."""
    dtype, err_ctx = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0] if rest else None)
    if not isinstance(x, NDArray):
        raise TypeError(f"{_ctx(err_ctx)} expect a Tensor but get {_type_name(x)}")
    if ndim != -1 and x.ndim != ndim:
        raise ValueError(f"{_ctx(err_ctx)} expect Tensor with ndim {ndim} but get {x.ndim}")
    if dtype is not None and str(dtype) not in ("", "void") and x._dtype != str(dtype):
        raise ValueError(f"{_ctx(err_ctx)} expect Tensor with dtype {dtype} but get {x._dtype}")


@builtin("check_shape_info")
def check_shape_info(x: Any, ndim: int, err_ctx: Any = None) -> None:
    if not isinstance(x, ShapeTuple):
        raise TypeError(f"{_ctx(err_ctx)} expect a Shape but get {_type_name(x)}")
    if ndim != -1 and len(x) != ndim:
        raise ValueError(f"{_ctx(err_ctx)} expect Shape with ndim {ndim} but get {len(x)}")


_PRIM_KINDS: dict[str, tuple[type, ...]] = {"int": (int, np.integer), "uint": (int, np.integer),
                                            "float": (float, int, np.floating),
                                            "bool": (bool, np.bool_, int)}


@builtin("check_prim_value_info")
def check_prim_value_info(x: Any, dtype: Any, err_ctx: Any = None) -> None:
    if isinstance(x, (NDArray, ShapeTuple, tuple, VMClosure, Storage)) or x is None:
        raise TypeError(f"{_ctx(err_ctx)} expect a PrimValue but get {_type_name(x)}")
    name = str(dtype)
    kinds = next((v for k, v in _PRIM_KINDS.items() if name.startswith(k)), None)
    if kinds is not None and not isinstance(x, kinds):
        raise TypeError(f"{_ctx(err_ctx)} expect a PrimValue of dtype {name} but get "
                        f"{type(x).__name__}")


@builtin("check_tuple_info")
def check_tuple_info(x: Any, size: int, err_ctx: Any = None) -> None:
    if type(x) is not tuple:
        raise TypeError(f"{_ctx(err_ctx)} expect a Tuple but get {_type_name(x)}")
    if size != -1 and len(x) != size:
        raise ValueError(f"{_ctx(err_ctx)} expect a Tuple with {size} elements but get a "
                         f"Tuple with {len(x)} elements")


@builtin("check_func_info")
def check_func_info(x: Any, err_ctx: Any = None) -> None:
    if not isinstance(x, (VMClosure, PackedFunc)) and not callable(x):
        raise TypeError(f"{_ctx(err_ctx)} expect a Function but get {_type_name(x)}")


# -- tuples, closures, control flow --------------------------------------------------------------

@builtin("make_tuple")
def make_tuple(*fields: Any) -> tuple:
    return fields


@builtin("tuple_getitem")
def tuple_getitem(tup: tuple, index: int) -> Any:
    return tup[index]


@builtin("tuple_reset_item")
def tuple_reset_item(tup: tuple, index: int) -> None:
    """TVM clears the slot to release memory early; our tuples are immutable, so Python's
    garbage collector releases the element when the tuple dies."""
    return None


_COND_READERS: dict[type, Callable[[Any], bool]] = {
    bool: bool, int: bool, np.bool_: bool,
}


@builtin("read_if_cond")
def read_if_cond(x: Any) -> bool:
    """Int, bool, or a tensor holding one int/bool value: non-zero is true."""
    reader = _COND_READERS.get(type(x))
    if reader is not None:
        return reader(x)
    if isinstance(x, NDArray):
        if x.size != 1 or not (np.issubdtype(np.dtype(x.dtype), np.integer) or x.dtype == "bool"):
            raise TypeError(f"vm.builtin.read_if_cond: the condition tensor must hold one "
                            f"int or bool value, got {x.dtype}{list(x.shape)}")
        return bool(x.numpy(copy=False).reshape(()).item())
    if isinstance(x, np.integer):
        return bool(x)
    raise TypeError(f"vm.builtin.read_if_cond: cannot use {_type_name(x)} as a condition")


@builtin("make_closure")
def make_closure(func: Any, *captured: Any) -> VMClosure:
    """A closure calling ``func(*call_args, *captured)``."""
    if isinstance(func, VMClosure):
        return VMClosure(func.func_name, func, captured)
    if callable(func):
        return VMClosure(getattr(func, "name", getattr(func, "__name__", "<func>")), func,
                         captured)
    raise TypeError(f"vm.builtin.make_closure: expected a function, got {_type_name(func)}")


@builtin("invoke_closure")
def invoke_closure(ctx: Any, closure: Any, *args: Any) -> Any:
    if not callable(closure):
        raise TypeError(f"vm.builtin.invoke_closure: expected a closure, got "
                        f"{_type_name(closure)}")
    return closure(*args)


@builtin("call_tir_dyn")
def call_tir_dyn(func: Any, *args: Any) -> None:
    """``func(*tensors, *shape_values)``: the last argument is a ShapeTuple of extra ints."""
    *tensors, shape = args
    return func(*tensors, *shape)


@builtin("invoke_debug_func")
def invoke_debug_func(io_effect: Any, debug_func_name: str, line_info: str, *args: Any) -> None:
    get_global_func(str(debug_func_name))(line_info, *args)
    return None


@builtin("debug_print")
def debug_print(line: str, *values: Any) -> None:
    for v in values:
        if isinstance(v, NDArray):
            print(f"{line}: shape = {v.shape}, dtype = {v.dtype}, data =\n{v.numpy()}")
        else:
            print(f"{line}: {v!r}")


def register_builtins() -> None:
    """Put every builtin in the global registry (idempotent)."""
    for name, fn in BUILTINS.items():
        if get_global_func(name, allow_missing=True) is None:
            register_func(name, PackedFunc(fn, name))

