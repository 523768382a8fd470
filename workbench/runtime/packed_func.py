"""PackedFunc: a callable that checks its arguments and calls one compiled kernel.

A kernel follows the ABI of docs/internals.md: ``i32 f(i64* args)``, one 8-byte slot per
parameter (buffer data pointer, int64 value, or float64 bit pattern), then one slot per shape
variable. The Python side must guarantee that nothing but a correctly shaped, typed, aligned
buffer ever reaches native code, while costing only a few microseconds per call.

How the call path is made fast (the benchmark target is <= 5 us for 3 tiny arrays):

- The checker is *generated* once per kernel from its metadata as straight-line Python source
  and compiled with ``exec`` (as ``collections.namedtuple`` does): no loop over parameters, no
  dict lookups, constants inlined (expected dtype string, static dims, slot indices). A fully
  static buffer is checked with a single tuple comparison.
- Only the cheap test "is this exactly what we expect" runs on the fast path; when it fails,
  a slow generic function (:func:`_explain`) works out *what* is wrong and raises a
  ``TypeError`` / ``ValueError`` naming the kernel, the parameter, what was expected and what
  was given.
- The int64 slot array (with a float64 view of the same memory for float scalars) is
  preallocated and kept in a small per-function pool; ``list.pop``/``list.append`` are atomic
  under the GIL, so a call made while another thread is inside the kernel (ctypes releases the
  GIL during the native call) simply gets a fresh array instead of sharing one.

Arguments accepted: NDArray for buffer parameters (numpy arrays are rejected with a hint to
wrap them: their alignment is whatever numpy chose, and the ABI promises 64-byte alignment);
Python/numpy ints for integer scalars (range-checked), ints or floats for float scalars.
Errors: wrong number of arguments or a wrong kind of value -> ``TypeError``; wrong dtype,
ndim, shape or inconsistent shape variables, or an out-of-range scalar -> ``ValueError``;
a kernel returning non-zero -> ``RuntimeError("runtime check failed in kernel 'f' ...")``.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import options
from . import loader
from .ndarray import NDArray, SUPPORTED_DTYPES

__all__ = ["PackedFunc", "ParamInfo", "make_kernel_func"]

_KERNEL_PROTO = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)

_INT_RANGE = {
    "bool": (0, 1),
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
    "uint8": (0, (1 << 8) - 1), "uint16": (0, (1 << 16) - 1), "uint32": (0, (1 << 32) - 1),
    "uint64": (0, (1 << 64) - 1),
}
_FLOATS = ("float16", "float32", "float64")


@dataclass(frozen=True)
class ParamInfo:
    """One kernel parameter from the metadata: ``kind`` is "buffer" or "scalar"; ``shape``
    (buffers only) holds ints and shape-variable names."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int | str, ...] | None = None

    def describe(self) -> str:
        if self.kind == "scalar":
            return f"{self.dtype} scalar"
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"

    def to_dict(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "dtype": self.dtype}
        if self.shape is not None:
            out["shape"] = list(self.shape)
        return out


class PackedFunc:
    """A callable function: a compiled kernel (``params``/``shape_vars`` describe it) or a
    Python function from the global registry (``params`` is None)."""

    __slots__ = ("name", "params", "shape_vars", "_call", "_keepalive", "_native",
                 "__weakref__")

    def __init__(self, func: Callable[..., Any], name: str | None = None) -> None:
        if not callable(func):
            raise TypeError(f"PackedFunc wraps a callable, got {func!r}")
        self.name = name or getattr(func, "__name__", "<function>")
        self.params: tuple[ParamInfo, ...] | None = None
        self.shape_vars: tuple[str, ...] = ()
        self._call = func
        self._keepalive = None
        self._native = None

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)

    @property
    def is_kernel(self) -> bool:
        return self.params is not None

    @property
    def native_function(self) -> Any:
        """A kernel's unchecked native entry point, ``i32 f(i64* slots)`` (a ctypes function):
        for callers that prepared the slots themselves from arguments this function's checks
        already accepted (the VM's static replay). None for a Python function."""
        return self._native

    def __repr__(self) -> str:
        if self.params is None:
            return f"<PackedFunc {self.name}>"
        sig = ", ".join(f"{p.name}: {p.describe()}" for p in self.params)
        return f"<PackedFunc {self.name}({sig})>"


# -- metadata validation ------------------------------------------------------------------

def parse_params(fmeta: dict) -> tuple[str, tuple[ParamInfo, ...], tuple[str, ...]]:
    """Validate one function's metadata entry; returns (name, params, shape_vars)."""
    name = fmeta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"kernel metadata without a name: {fmeta!r}")
    shape_vars = tuple(fmeta.get("shape_vars", ()))
    if not all(isinstance(v, str) for v in shape_vars):
        raise ValueError(f"kernel {name!r}: shape_vars must be names, got {shape_vars!r}")
    params = []
    bound: set[str] = set()
    for p in fmeta.get("params", ()):
        kind, dtype, pname = p.get("kind"), p.get("dtype"), p.get("name")
        if kind not in ("buffer", "scalar") or not isinstance(pname, str):
            raise ValueError(f"kernel {name!r}: bad parameter metadata {p!r}")
        if dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"kernel {name!r}: parameter {pname!r} has unsupported dtype "
                             f"{dtype!r}")
        shape = None
        if kind == "buffer":
            shape = tuple(p.get("shape", ()))
            for d in shape:
                if isinstance(d, str):
                    if d not in shape_vars:
                        raise ValueError(f"kernel {name!r}: parameter {pname!r} uses shape "
                                         f"variable {d!r} not listed in shape_vars")
                    bound.add(d)
                elif isinstance(d, bool) or not isinstance(d, int) or d < 0:
                    raise ValueError(f"kernel {name!r}: parameter {pname!r} has bad dim {d!r}")
        params.append(ParamInfo(pname, kind, dtype, shape))
    unbound = [v for v in shape_vars if v not in bound]
    if unbound:
        raise ValueError(f"kernel {name!r}: shape variables {unbound} are not the dimension of "
                         "any buffer parameter, so a call cannot bind them")
    return name, tuple(params), shape_vars


# -- the slow path: say precisely what is wrong -------------------------------------------

def _explain(fname: str, params: tuple[ParamInfo, ...], args: tuple) -> None:
    """Raise the error for a call the fast path rejected (or return if it finds nothing)."""
    if len(args) != len(params):
        sig = ", ".join(p.name for p in params)
        raise TypeError(f"{fname}({sig}) takes {len(params)} argument"
                        f"{'s' if len(params) != 1 else ''}, got {len(args)}")
    bound: dict[str, tuple[int, str, int]] = {}
    for i, (p, a) in enumerate(zip(params, args)):
        where = f"{fname}: parameter {p.name!r} (argument {i})"
        if p.kind == "scalar":
            _scalar_value(fname, i, p, a)
            continue
        if not isinstance(a, NDArray):
            hint = (" Wrap it with workbench.nd.array(x)." if isinstance(a, np.ndarray) else "")
            raise TypeError(f"{where} expects an NDArray {p.describe()}, got "
                            f"{type(a).__module__}.{type(a).__qualname__}.{hint}")
        got = f"{a._dtype} array of shape {a._shape}"
        if a._dtype != p.dtype:
            raise ValueError(f"{where} expects dtype {p.dtype}, got {got}")
        if len(a._shape) != len(p.shape):
            raise ValueError(f"{where} expects {len(p.shape)} dimensions "
                             f"({p.describe()}), got {got}")
        for d, (want, have) in enumerate(zip(p.shape, a._shape)):
            if isinstance(want, int):
                if want != have:
                    raise ValueError(f"{where} expects shape {p.describe()}: dimension {d} "
                                     f"must be {want}, got {got}")
            elif want in bound:
                value, by, by_dim = bound[want]
                if value != have:
                    raise ValueError(
                        f"{where}: dimension {d} is shape variable {want!r}, bound to {value} "
                        f"by parameter {by!r} dimension {by_dim}, but got {have} ({got})")
            else:
                bound[want] = (have, p.name, d)


def _scalar_value(fname: str, i: int, p: ParamInfo, a: Any) -> int | float:
    """Convert a scalar argument (the slot value: int64 or float), raising if it cannot be."""
    where = f"{fname}: parameter {p.name!r} (argument {i})"
    if p.dtype in _FLOATS:
        if isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool):
            return float(a)
        raise TypeError(f"{where} expects a {p.dtype} scalar (int or float), "
                        f"got {type(a).__name__}")
    if isinstance(a, (bool, np.bool_)) and p.dtype == "bool":
        return int(a)
    if not isinstance(a, (int, np.integer)) or isinstance(a, (bool, np.bool_)):
        raise TypeError(f"{where} expects a {p.dtype} scalar (an int), got {type(a).__name__}")
    value = int(a)
    lo, hi = _INT_RANGE[p.dtype]
    if not lo <= value <= hi:
        raise ValueError(f"{where}: {value} is out of range for {p.dtype} [{lo}, {hi}]")
    # uint64 values above 2**63-1 travel as their two's-complement int64 bit pattern.
    return value - (1 << 64) if value > (1 << 63) - 1 else value


# -- the fast path: generated per kernel --------------------------------------------------

def _gen_source(params: tuple[ParamInfo, ...], shape_vars: tuple[str, ...],
                threads: bool) -> str:
    """Python source of ``call(*args)`` for one kernel (see the module docstring)."""
    n = len(params)
    lines = [
        "def call(*args):",
        f"    if len(args) != {n}:",
        "        _explain(args)",
        "    try:",
        "        iv, dv, addr = _pool_pop()",
        "    except IndexError:",
        "        iv, dv, addr = _new_slots()",
        "    try:",
    ]
    body: list[str] = []
    if n:
        body.append(", ".join(f"a{i}" for i in range(n)) + (", = args" if n == 1 else " = args"))
    bound: dict[str, str] = {}     # shape var -> Python local holding its value
    for i, p in enumerate(params):
        a = f"a{i}"
        if p.kind == "scalar":
            if p.dtype in _FLOATS:
                body += [f"if {a}.__class__ is float: dv[{i}] = {a}",
                         f"else: dv[{i}] = _scalar({i}, {a})"]
            else:
                lo, hi = _INT_RANGE[p.dtype]
                hi = min(hi, (1 << 63) - 1)
                body += [f"if {a}.__class__ is int and {lo} <= {a} <= {hi}: iv[{i}] = {a}",
                         f"else: iv[{i}] = _scalar({i}, {a})"]
            continue
        body.append(f"if {a}.__class__ is not _ND and not isinstance({a}, _ND): _explain(args)")
        if all(isinstance(d, int) for d in p.shape):
            body.append(f"if {a}._dtype != {p.dtype!r} or {a}._shape != {tuple(p.shape)!r}: "
                        "_explain(args)")
        else:
            s = f"s{i}"
            conds = [f"{a}._dtype != {p.dtype!r}", f"len({s}) != {len(p.shape)}"]
            conds += [f"{s}[{d}] != {want}" for d, want in enumerate(p.shape)
                      if isinstance(want, int)]
            body.append(f"{s} = {a}._shape")
            body.append(f"if {' or '.join(conds)}: _explain(args)")
            checks = []
            for d, want in enumerate(p.shape):
                if isinstance(want, str):
                    if want in bound:
                        checks.append(f"{s}[{d}] != {bound[want]}")
                    else:
                        bound[want] = f"v_{len(bound)}"
                        body.append(f"{bound[want]} = {s}[{d}]")
            if checks:
                body.append(f"if {' or '.join(checks)}: _explain(args)")
        body.append(f"iv[{i}] = {a}._ptr")
    for k, var in enumerate(shape_vars):
        body.append(f"iv[{n + k}] = {bound[var]}")
    if threads:
        body.append("if _tls_gen(_tls, 'gen', -1) != _gen[0]: _apply_threads()")
    body.append("rc = _fn(addr)")
    lines += ["        " + line for line in body]
    lines += [
        "    finally:",
        "        _pool_append((iv, dv, addr))",
        "    if rc:",
        "        _fail(rc)",
    ]
    return "\n".join(lines) + "\n"


def make_kernel_func(name: str, params: tuple[ParamInfo, ...], shape_vars: tuple[str, ...],
                     address: int, keepalive: Any, threads: bool = False) -> PackedFunc:
    """Wrap the kernel at ``address`` as a checked PackedFunc. ``keepalive`` (the loaded code)
    is referenced so the code outlives every PackedFunc; ``threads`` adds the per-thread
    OpenMP thread-count update for modules that use libgomp."""
    if not address:
        raise ValueError(f"kernel {name!r} is listed in the metadata but its symbol is missing")
    nslots = max(1, len(params) + len(shape_vars))
    slot_type = ctypes.c_int64 * nslots
    float_view = ctypes.c_double * nslots

    def new_slots() -> tuple:
        iv = slot_type()
        return iv, float_view.from_buffer(iv), ctypes.addressof(iv)

    pool: list = [new_slots()]
    source = _gen_source(params, shape_vars, threads)

    def explain(args: tuple) -> None:
        _explain(name, params, args)
        raise AssertionError(f"{name}: argument check failed for {args!r}")  # unreachable

    def scalar(i: int, a: Any) -> int | float:
        return _scalar_value(name, i, params[i], a)

    def fail(rc: int) -> None:
        raise RuntimeError(f"runtime check failed in kernel {name!r} (error code {rc})")

    fn = _KERNEL_PROTO(address)
    namespace = {
        "_explain": explain, "_scalar": scalar, "_fail": fail, "_ND": NDArray,
        "_pool_pop": pool.pop, "_pool_append": pool.append, "_new_slots": new_slots,
        "_fn": fn, "_tls": loader._tls, "_tls_gen": getattr, "_gen": options._GENERATION,
        "_apply_threads": loader.apply_num_threads,
    }
    exec(compile(source, f"<workbench kernel {name}>", "exec"), namespace)
    call = namespace["call"]
    # A subclass per kernel whose __call__ *is* the generated checker saves the extra Python
    # frame of PackedFunc.__call__ (~0.1 us, >10% of a tiny call).
    cls = type("PackedFunc", (PackedFunc,), {"__slots__": (), "__call__": staticmethod(call),
                                             "__module__": __name__})
    pf = cls(call, name)
    pf.params = params
    pf.shape_vars = shape_vars
    pf._keepalive = (keepalive, fn, source)
    pf._native = fn
    return pf
