"""A reference interpreter for TIR: runs a PrimFunc on numpy arrays in pure Python.

It is slow (one Python call per node per iteration) and exists as an oracle independent of
codegen: tests compare it with numpy, and schedule tests compare a scheduled function's result
with the unscheduled one. It understands block form (blocks with ``init``, predicates, iter var
bindings, ``alloc_buffers``, ``match_buffers``) as well as lowered forms (``Allocate``,
``DeclBuffer``, flattened or strided buffers, vectors through ``Ramp``/``Broadcast``).

Semantics follow the compiled code: integer arithmetic wraps in its dtype, ``Div``/``Mod`` on
integers truncate toward zero, ``FloorDiv``/``FloorMod`` round toward minus infinity, casts from
float to int truncate, ``if_then_else`` evaluates only the taken branch, ``Select`` both.
Memory from ``Allocate``/``alloc_buffers`` starts as NaN (floats) or a 0x5A byte pattern, so a
missing ``init`` shows up instead of reading convenient zeros.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from workbench.ir import dtype as dt
from workbench.ir.dispatch import TypeTable
from workbench.tir import expr as E
from workbench.tir import stmt as S
from workbench.tir.buffer import Buffer
from workbench.tir.function import PrimFunc


class InterpreterError(RuntimeError):
    """The function did something the interpreter refuses: unbound var, bad index, ..."""


def run(func: PrimFunc, *arrays: Any, shape_vars: Mapping[Any, int] | None = None) -> None:
    """Execute ``func`` with one argument per parameter; buffer arguments are written in place.

    Buffer parameters take C-contiguous numpy arrays of the buffer's dtype and rank; scalar
    parameters take Python/numpy numbers. Shape variables are bound from the arrays' shapes;
    ``shape_vars`` ({Var or name: int}) gives values that no array shape determines.
    """
    if len(arrays) != len(func.params):
        raise TypeError(f"run: the function takes {len(func.params)} argument(s) "
                        f"({', '.join(p.name for p in func.params)}), got {len(arrays)}")
    it = _Interpreter()
    by_name = {}
    for k, v in (shape_vars or {}).items():
        if isinstance(k, E.Var):
            it.env[k] = _scalar(v, k.dtype)
        else:
            by_name[str(k)] = v
    it.bind_named = by_name
    pending: list[tuple[E.PrimExpr, int, str]] = []
    for p, a in zip(func.params, arrays):
        buf = func.buffer_map.get(p)
        if buf is None:
            it.env[p] = _scalar(a, p.dtype)
            continue
        it.bind_param_buffer(buf, a, pending)
    for e, size, where in pending:  # shape entries that are expressions, once vars are known
        got = int(it.eval(e))
        if got != size:
            raise InterpreterError(f"run: {where} should be {got} but the array has {size}")
    with np.errstate(all="ignore"):
        it.exec(func.body)


def _np_dtype(dtype: str) -> np.dtype:
    return np.dtype(dt.parse(dtype).scalar)


def _scalar(value: Any, dtype: str) -> Any:
    t = dt.parse(dtype)
    if t.lanes > 1:
        return np.full(t.lanes, value, dtype=_np_dtype(dtype))
    if t.is_handle:
        return value
    if t.is_bool:
        return np.bool_(bool(value))
    with np.errstate(all="ignore"):
        return _np_dtype(dtype).type(value) if t.is_float else _wrap(int(value), dtype)


def _wrap(value: int, dtype: str) -> Any:
    t = dt.parse(dtype)
    bits = t.bits
    value &= (1 << bits) - 1
    if t.is_int and value >= 1 << (bits - 1):
        value -= 1 << bits
    return _np_dtype(dtype).type(value)


class _Memory:
    """A buffer's backing store: the flat array its data var is bound to."""

    __slots__ = ("flat",)

    def __init__(self, flat: np.ndarray):
        self.flat = flat


class _Interpreter:
    def __init__(self) -> None:
        self.env: dict[E.Var, Any] = {}
        self.mem: dict[E.Var, _Memory] = {}          # buffer data var -> memory
        self.alias: dict[Buffer, tuple[Buffer, tuple]] = {}  # match_buffer -> (source, mins)
        self.bind_named: dict[str, int] = {}

    # ---- parameters -----------------------------------------------------------------------

    def bind_param_buffer(self, buf: Buffer, a: Any, pending: list) -> None:
        if not isinstance(a, np.ndarray):
            raise TypeError(f"run: buffer {buf.name!r} needs a numpy array, got {type(a).__name__}")
        want = _np_dtype(buf.dtype)
        if a.dtype != want:
            raise TypeError(f"run: buffer {buf.name!r} has dtype {buf.dtype}, the array {a.dtype}")
        if a.ndim != len(buf.shape):
            raise ValueError(f"run: buffer {buf.name!r} has {len(buf.shape)} dimension(s), the "
                             f"array {a.ndim}")
        if not a.flags.c_contiguous:
            raise ValueError(f"run: the array for {buf.name!r} must be C-contiguous")
        for d, (s, n) in enumerate(zip(buf.shape, a.shape)):
            where = f"{buf.name}.shape[{d}]"
            if isinstance(s, E.Var):
                if s not in self.env and s.name in self.bind_named:
                    self.env[s] = _scalar(self.bind_named[s.name], s.dtype)
                if s not in self.env:
                    self.env[s] = _scalar(n, s.dtype)
                elif int(self.env[s]) != n:
                    raise InterpreterError(f"run: {where} is {s.name}={int(self.env[s])} but "
                                           f"the array has {n}")
            elif isinstance(s, E.IntImm):
                if s.value != n:
                    raise InterpreterError(f"run: {where} is {s.value} but the array has {n}")
            else:
                pending.append((s, n, where))
        self.mem[buf.data] = _Memory(a.reshape(-1))

    # ---- expressions ------------------------------------------------------------------------

    def eval(self, e: E.PrimExpr) -> Any:
        h = _EXPR.lookup(type(e))
        if h is None:
            raise InterpreterError(f"interpreter: cannot evaluate {type(e).__name__} nodes")
        return h(self, e)

    def var(self, v: E.Var) -> Any:
        try:
            return self.env[v]
        except KeyError:
            if v.name in self.bind_named:
                val = self.env[v] = _scalar(self.bind_named[v.name], v.dtype)
                return val
            raise InterpreterError(f"interpreter: variable {v.name!r} ({v.dtype}) is not bound; "
                                   "pass it in shape_vars or define it") from None

    def offsets(self, buf: Buffer, indices: tuple) -> tuple[_Memory, Any]:
        """The memory of ``buf`` and the flat element offset(s) of ``indices``."""
        if buf in self.alias:
            src, mins = self.alias[buf]
            lead = len(mins) - len(indices)
            full = tuple(mins[:lead]) + tuple(m + i for m, i in zip(mins[lead:], indices))
            return self.offsets(src, full)
        mem = self.mem.get(buf.data)
        if mem is None:
            raise InterpreterError(f"interpreter: buffer {buf.name!r} is used outside the scope "
                                   "that allocates it")
        if buf.strides:
            strides = [int(self.eval(x)) for x in buf.strides]
        else:
            shape = [int(self.eval(x)) for x in buf.shape]
            for d, (i, n) in enumerate(zip(indices, shape)):
                _check_bounds(buf, d, i, n)
            strides = [1] * len(shape)
            for d in range(len(shape) - 2, -1, -1):
                strides[d] = strides[d + 1] * shape[d + 1]
        off: Any = int(self.eval(buf.elem_offset)) if buf.elem_offset is not None else 0
        for i, s in zip(indices, strides):
            off = off + (i.astype(np.int64) if isinstance(i, np.ndarray) else int(i)) * s
        size = mem.flat.shape[0]
        if np.any(np.asarray(off) < 0) or np.any(np.asarray(off) >= size):
            raise InterpreterError(f"interpreter: access to {buf.name!r} at {indices} is outside "
                                   f"its memory of {size} element(s)")
        return mem, off

    # ---- statements -------------------------------------------------------------------------

    def exec(self, s: S.Stmt) -> None:
        h = _STMT.lookup(type(s))
        if h is None:
            raise InterpreterError(f"interpreter: cannot execute {type(s).__name__} nodes")
        h(self, s)

    def scoped(self, v: E.Var, value: Any, body: Callable[[], None]) -> None:
        had = v in self.env
        old = self.env.get(v)
        self.env[v] = value
        try:
            body()
        finally:
            if had:
                self.env[v] = old
            else:
                del self.env[v]

    def allocate(self, data: E.Var, dtype: str, n: int) -> None:
        self.mem[data] = _Memory(_fresh(dtype, n))


def _check_bounds(buf: Buffer, d: int, i: Any, n: int) -> None:
    lo, hi = (int(np.min(i)), int(np.max(i))) if isinstance(i, np.ndarray) else (int(i), int(i))
    if lo < 0 or hi >= n:
        raise InterpreterError(f"interpreter: index {lo if lo < 0 else hi} out of bounds for "
                               f"dimension {d} of {buf.name!r} (extent {n})")


def _fresh(dtype: str, n: int) -> np.ndarray:
    t = dt.parse(dtype)
    npd = np.dtype(t.scalar)
    if t.is_float:
        return np.full(n, np.nan, dtype=npd)
    if t.is_bool:
        return np.zeros(n, dtype=npd)
    return np.full(n * npd.itemsize, 0x5A, dtype=np.uint8).view(npd)


# ---- expression handlers ------------------------------------------------------------------

def _is_int(dtype: str) -> bool:
    return dt.parse(dtype).is_integer


def _cast_value(v: Any, dtype: str) -> Any:
    t = dt.parse(dtype)
    npd = np.dtype(t.scalar)
    if t.lanes == 1 and isinstance(v, np.generic) and v.dtype == npd:
        return v  # the common case: already the right scalar type
    arr = np.asarray(v)
    if t.is_bool:
        out = arr != 0
    elif t.is_integer and arr.dtype.kind == "f":
        # C truncation toward zero, then two's-complement wraparound into the target width.
        out = np.trunc(arr).astype(np.int64).astype(npd)
    else:
        out = arr.astype(npd)
    if t.lanes > 1 and out.ndim == 0:
        out = np.full(t.lanes, out, dtype=npd)
    return out if out.ndim else out[()]


def _e_const(it: _Interpreter, e: Any) -> Any:
    return _scalar(e.value, e.dtype)


def _e_string(it: _Interpreter, e: E.StringImm) -> Any:
    return e.value


def _int_divisor(b: Any, e: E.PrimExpr) -> None:
    if np.any(np.asarray(b) == 0):
        raise InterpreterError(f"interpreter: integer division by zero in {type(e).__name__}")


def _truncdiv(a: Any, b: Any) -> Any:
    r = np.fmod(a, b)
    return (a - r) // b


def _floor_mod_float(a: Any, b: Any) -> Any:
    return a - b * np.floor(a / b)


_ARITH: dict[type, tuple[Callable, Callable]] = {
    # node type -> (integer op, float op)
    E.Add: (np.add, np.add), E.Sub: (np.subtract, np.subtract),
    E.Mul: (np.multiply, np.multiply), E.Min: (np.minimum, np.minimum),
    E.Max: (np.maximum, np.maximum),
    E.Div: (_truncdiv, np.divide), E.Mod: (np.fmod, np.fmod),
    E.FloorDiv: (np.floor_divide, lambda a, b: np.floor(a / b)),
    E.FloorMod: (np.mod, _floor_mod_float),
    E.EQ: (np.equal, np.equal), E.NE: (np.not_equal, np.not_equal),
    E.LT: (np.less, np.less), E.LE: (np.less_equal, np.less_equal),
    E.GT: (np.greater, np.greater), E.GE: (np.greater_equal, np.greater_equal),
    E.And: (np.logical_and, np.logical_and), E.Or: (np.logical_or, np.logical_or),
}
_INT_DIVS = (E.Div, E.Mod, E.FloorDiv, E.FloorMod)


def _e_binary(it: _Interpreter, e: E.BinaryOp) -> Any:
    a, b = it.eval(e.a), it.eval(e.b)
    is_int = not dt.parse(e.a.dtype).is_float
    f_int, f_float = _ARITH[type(e)]
    if is_int and isinstance(e, _INT_DIVS):
        _int_divisor(b, e)
    out = (f_int if is_int else f_float)(a, b)
    if isinstance(e, (E.CmpOp, E.And, E.Or)):
        return out
    return _cast_value(out, e.dtype)


def _e_not(it: _Interpreter, e: E.Not) -> Any:
    return np.logical_not(it.eval(e.a))


def _e_cast(it: _Interpreter, e: E.Cast) -> Any:
    return _cast_value(it.eval(e.value), e.dtype)


def _e_select(it: _Interpreter, e: E.Select) -> Any:
    c, t, f = it.eval(e.condition), it.eval(e.true_value), it.eval(e.false_value)
    out = np.where(c, t, f).astype(_np_dtype(e.dtype))
    return out if out.ndim else out[()]


def _e_load(it: _Interpreter, e: E.BufferLoad) -> Any:
    idx = tuple(it.eval(i) for i in e.indices)
    mem, off = it.offsets(e.buffer, idx)
    val = mem.flat[off]
    if e.predicate is not None:
        mask = np.asarray(it.eval(e.predicate))
        val = np.where(mask, val, np.zeros_like(val))
    return val


def _e_ramp(it: _Interpreter, e: E.Ramp) -> Any:
    base, stride = it.eval(e.base), it.eval(e.stride)
    return _cast_value(np.asarray(base) + np.arange(e.lanes) * np.asarray(stride), e.dtype)


def _e_broadcast(it: _Interpreter, e: E.Broadcast) -> Any:
    return np.full(e.lanes, it.eval(e.value), dtype=_np_dtype(e.dtype))


def _e_shuffle(it: _Interpreter, e: E.Shuffle) -> Any:
    flat = np.concatenate([np.atleast_1d(it.eval(v)) for v in e.vectors])
    out = flat[list(e.indices)]
    return out if len(e.indices) > 1 else out[0]


def _e_let(it: _Interpreter, e: E.Let) -> Any:
    result: list[Any] = []
    it.scoped(e.var, it.eval(e.value), lambda: result.append(it.eval(e.body)))
    return result[0]


def _e_reduce(it: _Interpreter, e: E.Reduce) -> Any:
    raise InterpreterError("interpreter: Reduce nodes only live inside te.compute; "
                           "run the PrimFunc from te.create_prim_func instead")


def _e_call(it: _Interpreter, e: E.Call) -> Any:
    if e.op == "if_then_else":
        c = it.eval(e.args[0])
        if np.ndim(c) == 0:  # lazy: the untaken branch may be an out-of-bounds load
            return it.eval(e.args[1] if c else e.args[2])
        return _e_select(it, E.Select(*e.args, e.dtype))
    fn = _CALLS.get(e.op)
    if fn is None:
        raise InterpreterError(f"interpreter: unknown intrinsic {e.op!r}")
    args = [it.eval(a) for a in e.args]
    return _cast_value(fn(*args), e.dtype)


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def _round_half_away(x: Any) -> Any:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _popcount(x: Any) -> Any:
    v = np.asarray(x)
    bits = v.dtype.itemsize * 8
    counted = [bin(int(i) & ((1 << bits) - 1)).count("1") for i in np.atleast_1d(v)]
    return np.array(counted if v.ndim else counted[0], dtype=v.dtype)


def _erf(x: Any) -> Any:
    v = np.asarray(x)
    return np.vectorize(math.erf, otypes=[v.dtype])(v)


_CALLS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x),
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sigmoid": _sigmoid, "erf": _erf,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "atan": np.arctan, "floor": np.floor,
    "ceil": np.ceil, "round": _round_half_away, "trunc": np.trunc, "nearbyint": np.rint,
    "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2, "fabs": np.abs, "abs": np.abs,
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor, "bitwise_not": np.invert, "shift_left": np.left_shift,
    "shift_right": np.right_shift, "popcount": _popcount,
}

_EXPR: TypeTable[Callable[[_Interpreter, Any], Any]] = TypeTable({
    E.Var: lambda it, e: it.var(e),
    E.IntImm: _e_const, E.FloatImm: _e_const, E.StringImm: _e_string,
    E.BinaryOp: _e_binary, E.Not: _e_not, E.Cast: _e_cast, E.Select: _e_select,
    E.BufferLoad: _e_load, E.Ramp: _e_ramp, E.Broadcast: _e_broadcast, E.Shuffle: _e_shuffle,
    E.Let: _e_let, E.Call: _e_call, E.Reduce: _e_reduce,
})


# ---- statement handlers -------------------------------------------------------------------

def _s_seq(it: _Interpreter, s: S.SeqStmt) -> None:
    for x in s.seq:
        it.exec(x)


def _s_for(it: _Interpreter, s: S.For) -> None:
    lo, n = int(it.eval(s.min)), int(it.eval(s.extent))
    v = s.loop_var
    had, old = v in it.env, it.env.get(v)
    try:
        for i in range(lo, lo + n):  # every loop kind runs serially here
            it.env[v] = _scalar(i, v.dtype)
            it.exec(s.body)
    finally:
        if had:
            it.env[v] = old
        else:
            it.env.pop(v, None)


def _s_while(it: _Interpreter, s: S.While) -> None:
    while bool(it.eval(s.condition)):
        it.exec(s.body)


def _s_if(it: _Interpreter, s: S.IfThenElse) -> None:
    if bool(it.eval(s.condition)):
        it.exec(s.then_case)
    elif s.else_case is not None:
        it.exec(s.else_case)


def _s_store(it: _Interpreter, s: S.BufferStore) -> None:
    value = it.eval(s.value)
    idx = tuple(it.eval(i) for i in s.indices)
    mem, off = it.offsets(s.buffer, idx)
    value = _cast_value(value, dt.with_lanes(s.buffer.dtype, max(1, np.size(off))))
    if s.predicate is not None:
        mask = np.asarray(it.eval(s.predicate))
        off, value = np.asarray(off)[mask], np.asarray(value)[mask]
    mem.flat[off] = value


def _s_let(it: _Interpreter, s: S.LetStmt) -> None:
    it.scoped(s.var, it.eval(s.value), lambda: it.exec(s.body))


def _s_evaluate(it: _Interpreter, s: S.Evaluate) -> None:
    it.eval(s.value)


def _s_attr(it: _Interpreter, s: S.AttrStmt) -> None:
    it.exec(s.body)


def _s_assert(it: _Interpreter, s: S.AssertStmt) -> None:
    if not bool(it.eval(s.condition)):
        msg = s.message.value if isinstance(s.message, E.StringImm) else it.eval(s.message)
        raise InterpreterError(f"interpreter: assertion failed: {msg}")
    it.exec(s.body)


def _s_allocate(it: _Interpreter, s: S.Allocate) -> None:
    n = 1
    for x in s.extents:
        n *= int(it.eval(x))
    old = it.mem.get(s.buffer_var)
    it.allocate(s.buffer_var, s.dtype, n)
    try:
        it.exec(s.body)
    finally:
        _restore(it.mem, s.buffer_var, old)


def _s_decl_buffer(it: _Interpreter, s: S.DeclBuffer) -> None:
    if s.buffer.data in it.mem:
        it.exec(s.body)
        return
    # A declaration without an enclosing Allocate owns its memory.
    it.allocate(s.buffer.data, s.buffer.dtype, _numel(it, s.buffer))
    try:
        it.exec(s.body)
    finally:
        it.mem.pop(s.buffer.data, None)


def _numel(it: _Interpreter, buf: Buffer) -> int:
    n = 1
    for x in buf.shape:
        n *= int(it.eval(x))
    return n


def _restore(table: dict, key: Any, old: Any) -> None:
    if old is None:
        table.pop(key, None)
    else:
        table[key] = old


def _s_block_realize(it: _Interpreter, s: S.BlockRealize) -> None:
    if not bool(it.eval(s.predicate)):
        return
    blk = s.block
    values = [it.eval(v) for v in s.iter_values]
    if len(values) != len(blk.iter_vars):
        raise InterpreterError(f"interpreter: block {blk.name_hint!r} binds {len(values)} "
                               f"value(s) to {len(blk.iter_vars)} iter var(s)")
    saved = {iv.var: it.env.get(iv.var) for iv in blk.iter_vars}
    at_first = True
    for iv, v in zip(blk.iter_vars, values):
        lo, n = int(it.eval(iv.dom.min)), int(it.eval(iv.dom.extent))
        if not lo <= int(v) < lo + n:
            raise InterpreterError(
                f"interpreter: block {blk.name_hint!r} binds {iv.var.name}={int(v)} outside "
                f"its domain [{lo}, {lo + n})")
        if iv.iter_type == S.IterType.COMM_REDUCE and int(v) != lo:
            at_first = False
        it.env[iv.var] = _scalar(int(v), iv.var.dtype)
    owned = []
    try:
        for buf in blk.alloc_buffers:
            owned.append((buf.data, it.mem.get(buf.data)))
            it.allocate(buf.data, buf.dtype, _numel(it, buf))
        for mb in blk.match_buffers:
            mins = tuple(int(it.eval(r.min)) for r in mb.source.region)
            it.alias[mb.buffer] = (mb.source.buffer, mins)
        if blk.init is not None and at_first:
            it.exec(blk.init)
        it.exec(blk.body)
    finally:
        for data, old in owned:
            _restore(it.mem, data, old)
        for mb in blk.match_buffers:
            it.alias.pop(mb.buffer, None)
        for var, old in saved.items():
            _restore(it.env, var, old)


def _s_block(it: _Interpreter, s: S.Block) -> None:
    _s_block_realize(it, S.BlockRealize((), E.IntImm("bool", 1), s))


_STMT: TypeTable[Callable[[_Interpreter, Any], None]] = TypeTable({
    S.SeqStmt: _s_seq, S.For: _s_for, S.While: _s_while, S.IfThenElse: _s_if,
    S.BufferStore: _s_store, S.LetStmt: _s_let, S.Evaluate: _s_evaluate, S.AttrStmt: _s_attr,
    S.AssertStmt: _s_assert, S.Allocate: _s_allocate, S.DeclBuffer: _s_decl_buffer,
    S.BlockRealize: _s_block_realize, S.Block: _s_block,
})
