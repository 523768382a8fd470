"""``StaticPlanBlockMemory``: reuse storage between tensors whose lifetimes do not overlap
(TVM's pass of that name), and ``LowerAllocTensor`` for what is left.

Contract of ``StaticPlanBlockMemory()(mod)`` (run after ``CallTIRRewrite``): in the top-level
body of every Relax function, each ``R.builtin.alloc_tensor`` whose shape is static and whose
tensor does not reach the function's result is replaced by ::

    storage = R.memory.alloc_storage(R.shape([nbytes]), virtual_device_index=0,
                                     storage_scope="global", dtype="uint8")   # first user only
    alloc = R.memory.alloc_tensor(storage, offset=0, R.shape([...]), dtype)

where tensors share a storage when the earlier one is dead before the later one is allocated
(its last use -- through any alias: ``lv = alloc``, tuples, tuple items, calls -- is an earlier
binding). Storages are pooled per dtype and matched by size class like TVM's 1-d allocator:
the smallest free storage of at least the requested bytes within a factor of 16, else the
largest smaller one (grown to fit). A symbolic size (``n * 64`` bytes) whose variables all have
an upper bound in the function's ``tir_var_upper_bound`` attribute (``{"n": 128}``, TVM's
attribute; the torch importer sets it from ``torch.export.Dim(max=...)``) is planned as the
constant size it has at those bounds, like a static one: the tensors of every length share
the same storages, allocated with a size known at compile time. Any other symbolic size
reuses only a storage of the very same size expression; such storages are allocated on each
call, with the size computed from the shape heap. Function outputs and allocations inside If
branches keep ``builtin.alloc_tensor`` (their own memory on each call).

``LowerAllocTensor()(mod)`` then rewrites each remaining ``builtin.alloc_tensor`` into its own
``memory.alloc_storage`` (size ``prod(shape) * itemsize``, symbolic allowed) plus
``memory.alloc_tensor``.

:func:`memory_usage` / :func:`estimate_memory_usage` report the constant-size bytes a function
allocates per call with and without the planning (TVM's ``relax.analysis.estimate_memory_usage``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    Binding, Call, Function, If, SeqExpr, ShapeExpr, Var, VarBinding,
)
from workbench.relax.struct_info import ObjectStructInfo, static_shape
from workbench.relax.transform._util import (
    is_primitive, map_bindings, relax_functions, used_vars, with_body,
)
from workbench.relax.transform.lowered_ops import (
    BUILTIN_ALLOC_TENSOR, MEMORY_ALLOC_STORAGE, MEMORY_ALLOC_TENSOR, VOID_SINFO, is_op,
    memory_alloc_storage, memory_alloc_tensor,
)
from workbench.tir import op as tir_op
from workbench.tir.arith.analyzer import Analyzer
from workbench.tir.arith.expr_key import KeyMaker
from workbench.tir.expr import IntImm, PrimExpr

MATCH_RANGE = 16  # a free storage is reused for requests within this size factor
_END = float("inf")


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


# ---- liveness and aliasing -----------------------------------------------------------------------

@dataclass
class _Token:
    """One planned allocation request; ``nbytes`` is an int, or a PrimExpr when symbolic."""

    binding_index: int
    nbytes: Any
    dtype: str
    end: float = -1
    storage: "_Storage | None" = None


@dataclass
class _Storage:
    nbytes: Any
    dtype: str
    first_user: int
    var: Var | None = None
    tokens: list[_Token] = field(default_factory=list)


def _symbolic_nbytes(shape: ShapeExpr, dtype: str) -> PrimExpr:
    size: PrimExpr = tir_op.const(np.dtype(dtype).itemsize, "int64")
    for d in shape.values:
        size = size * d
    return Analyzer().simplify(size)


def _flat_bindings(seq: SeqExpr) -> list[Binding]:
    return [b for block in seq.blocks for b in block.bindings]


def _last_uses(bindings: list[Binding], body: Any) -> dict[int, float]:
    last: dict[int, float] = {}
    for i, b in enumerate(bindings):
        for v in used_vars(b.value):
            last[id(v)] = i
    for v in used_vars(body):
        last[id(v)] = _END
    return last


def _alias_tokens(b: Binding, tokens_of: dict[int, set[int]]) -> set[int]:
    """Which tokens the value of ``b`` may alias (conservatively: any token it reads, unless
    the value is a kernel call or a fresh allocation)."""
    value = b.value
    if isinstance(value, Call) and (is_op(value, MEMORY_ALLOC_TENSOR) or
                                    value.struct_info is VOID_SINFO):
        return set()
    out: set[int] = set()
    for v in used_vars(value):
        out |= tokens_of.get(id(v), set())
    return out


# ---- the 1-d allocator -----------------------------------------------------------------------------

class _Allocator:
    """Static sizes: TVM's 1-d allocator (size classes within ``MATCH_RANGE``). Symbolic
    sizes: TVM's mixed allocator -- reuse only a free storage whose byte count is the very
    same expression (``n * 64`` is not comparable with ``m * 64`` or with 4096)."""

    def __init__(self) -> None:
        self.free: dict[str, list[_Storage]] = {}
        self.free_symbolic: dict[tuple, list[_Storage]] = {}
        self.storages: list[_Storage] = []
        self.keys = KeyMaker()

    def _symbolic_pool(self, token: _Token) -> list[_Storage]:
        return self.free_symbolic.setdefault((token.dtype, self.keys.key(token.nbytes)), [])

    def _new(self, token: _Token, at: int) -> _Storage:
        st = _Storage(token.nbytes, token.dtype, at)
        self.storages.append(st)
        st.tokens.append(token)
        return st

    def request(self, token: _Token, at: int) -> _Storage:
        if not isinstance(token.nbytes, int):
            pool = self._symbolic_pool(token)
            if not pool:
                return self._new(token, at)
            chosen = pool.pop()
            chosen.tokens.append(token)
            return chosen
        pool = self.free.setdefault(token.dtype, [])
        size = token.nbytes
        bigger = [s for s in pool if size <= s.nbytes <= size * MATCH_RANGE]
        smaller = [s for s in pool if size // MATCH_RANGE <= s.nbytes < size]
        if bigger:
            chosen = min(bigger, key=lambda s: s.nbytes)
        elif smaller:
            chosen = max(smaller, key=lambda s: s.nbytes)
            chosen.nbytes = size  # grow it: the storage is allocated once, at its final size
        else:
            return self._new(token, at)
        pool.remove(chosen)
        chosen.tokens.append(token)
        return chosen

    def release(self, storage: _Storage) -> None:
        if isinstance(storage.nbytes, int):
            self.free.setdefault(storage.dtype, []).append(storage)
        else:
            self._symbolic_pool(storage.tokens[-1]).append(storage)


def upper_bounds(func: Function) -> dict[str, int]:
    """The function's ``tir_var_upper_bound`` attribute as ``{name: int}`` (empty without it).
    Raises ValueError naming the entry when a bound is not a non-negative int."""
    raw = (func.attrs or {}).get("tir_var_upper_bound") or {}
    out: dict[str, int] = {}
    for name, value in dict(raw).items():
        v = getattr(value, "value", value)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"StaticPlanBlockMemory: tir_var_upper_bound[{name!r}] must be a "
                             f"non-negative int, got {value!r}")
        out[str(name)] = int(v)
    return out


def _bounded_nbytes(size: PrimExpr, upper: dict[str, int]) -> int | None:
    """The largest value of the byte count ``size`` when every variable in it has an upper
    bound (and is a size, >= 0), else None."""
    from workbench.tir.functor import collect_vars
    from workbench.tir.buffer import Range
    variables = collect_vars(size)
    if not variables or any(v.name not in upper for v in variables):
        return None
    ana = Analyzer()
    for v in variables:
        ana.bind(v, Range.from_min_extent(0, upper[v.name] + 1))
    bound = ana.const_int_bound(size)
    hi = bound.max_value
    return int(hi) if isinstance(hi, (int, np.integer)) and bound.min_value >= 0 else None


def _plan(bindings: list[Binding], body: Any,
          upper: dict[str, int] | None = None) -> dict[int, _Token]:
    """Tokens (by binding index) with the storage each was given; ``upper``: the symbolic
    variables' upper bounds, which make their sizes plannable as constants."""
    last = _last_uses(bindings, body)
    tokens: dict[int, _Token] = {}
    tokens_of: dict[int, set[int]] = {}
    aliases: dict[int, list[int]] = {}
    for i, b in enumerate(bindings):
        value = b.value
        if isinstance(value, Call) and is_op(value, BUILTIN_ALLOC_TENSOR):
            dtype = value.attrs["dtype"]
            shape = static_shape(value.struct_info)
            size = _nbytes(shape, dtype) if shape is not None else \
                _symbolic_nbytes(value.args[0], dtype)
            if isinstance(size, IntImm):
                size = size.value
            elif not isinstance(size, int) and upper:
                bounded = _bounded_nbytes(size, upper)
                size = size if bounded is None else bounded
            tokens[i] = _Token(i, size, dtype)
            tokens_of[id(b.var)] = {i}
            aliases.setdefault(i, []).append(id(b.var))
            continue
        alias = _alias_tokens(b, tokens_of)
        if alias:
            tokens_of[id(b.var)] = alias
            for t in alias:
                aliases[t].append(id(b.var))
    for t, tok in tokens.items():
        tok.end = max(last.get(v, t) for v in aliases[t])
    planned = {t: tok for t, tok in tokens.items() if tok.end != _END}
    alloc = _Allocator()
    live: list[_Token] = []
    for i in sorted(planned):
        for tok in [x for x in live if x.end < i]:
            live.remove(tok)
            alloc.release(tok.storage)
        tok = planned[i]
        tok.storage = alloc.request(tok, i)
        live.append(tok)
    return planned


# ---- rewriting -----------------------------------------------------------------------------------

def _plan_function(func: Function) -> Function:
    seq = func.body
    bindings = _flat_bindings(seq)
    planned = _plan(bindings, seq.body, upper_bounds(func))
    if not planned:
        return func
    by_var = {id(bindings[i].var): tok for i, tok in planned.items()}

    def rewrite(b: Binding) -> list[Binding]:
        tok = by_var.get(id(b.var))
        if tok is None or not isinstance(b, VarBinding):
            return [b]
        out: list[Binding] = []
        st = tok.storage
        if st.var is None:
            st.var = Var("storage", ObjectStructInfo())
            out.append(VarBinding(st.var, memory_alloc_storage(
                ShapeExpr((st.nbytes,)), dtype="uint8")))
        shape = b.value.args[0]
        out.append(VarBinding(b.var, memory_alloc_tensor(st.var, 0, shape, tok.dtype)))
        return out
    return with_body(func, map_bindings(seq, rewrite, nested=False))


class StaticPlanBlockMemory(Pass):
    """The pass object: ``mod = StaticPlanBlockMemory()(mod)`` (see the module docstring)."""

    name = "StaticPlanBlockMemory"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in relax_functions(mod):
            if not is_primitive(func) and isinstance(func.body, SeqExpr):
                out[name] = _plan_function(func)
        return out


# ---- LowerAllocTensor ----------------------------------------------------------------------------

def _lower_alloc(b: Binding) -> list[Binding]:
    if not (isinstance(b, VarBinding) and is_op(b.value, BUILTIN_ALLOC_TENSOR)):
        return [b]
    shape: ShapeExpr = b.value.args[0]
    dtype = b.value.attrs["dtype"]
    storage = Var("storage", ObjectStructInfo())
    size = ShapeExpr((_symbolic_nbytes(shape, dtype),))
    return [VarBinding(storage, memory_alloc_storage(size, dtype="uint8")),
            VarBinding(b.var, memory_alloc_tensor(storage, 0, shape, dtype))]


class LowerAllocTensor(Pass):
    """The pass object: ``mod = LowerAllocTensor()(mod)`` (see the module docstring)."""

    name = "LowerAllocTensor"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in relax_functions(mod):
            if isinstance(func.body, SeqExpr):
                out[name] = with_body(func, map_bindings(func.body, _lower_alloc))
        return out


# ---- memory usage --------------------------------------------------------------------------------

@dataclass
class MemoryUsage:
    """Bytes one call of a function allocates.

    ``unplanned_*``: every tensor allocated on its own (no reuse); ``planned_*``: the storages
    after planning plus tensors still allocated on their own. Sizes that depend on symbolic
    dims count only when the dims are given (``memory_usage(mod, {"n": 4})``); otherwise
    ``dynamic_allocations`` counts the tensors left out.
    """

    function: str
    unplanned_count: int
    unplanned_bytes: int
    planned_count: int
    planned_bytes: int
    dynamic_allocations: int

    @property
    def ratio(self) -> float:
        return self.planned_bytes / self.unplanned_bytes if self.unplanned_bytes else 1.0


def _walk_calls(seq: SeqExpr):
    for block in seq.blocks:
        for b in block.bindings:
            if isinstance(b.value, If):
                for br in (b.value.true_branch, b.value.false_branch):
                    if isinstance(br, SeqExpr):
                        yield from _walk_calls(br)
            elif isinstance(b.value, Call):
                yield b.value


def _dims(e: Any) -> Any:
    """The dims of a shape argument: a ShapeExpr, or (after VMShapeLower) a Var whose struct
    info still records them."""
    if isinstance(e, ShapeExpr):
        return e.values
    return getattr(e.struct_info, "values", None)


def _call_bytes(call: Call, env: dict[str, int]) -> int | None:
    if is_op(call, MEMORY_ALLOC_STORAGE):
        dims, dtype = _dims(call.args[0]), call.attrs["dtype"]
    else:
        dims = call.struct_info.values if call.struct_info.values is not None else \
            _dims(call.args[-1] if is_op(call, MEMORY_ALLOC_TENSOR) else call.args[0])
        dtype = call.attrs["dtype"]
    if dims is None:
        return None
    try:
        values = [_eval_dim(d, env) for d in dims]
    except KeyError:
        return None
    return math.prod(values) * np.dtype(dtype).itemsize


def _eval_dim(d: PrimExpr, env: dict[str, int]) -> int:
    if isinstance(d, IntImm):
        return d.value
    from workbench.tir.arith.evaluate import evaluate
    from workbench.tir.functor import collect_vars
    binding = {}
    for v in collect_vars(d):
        binding[v] = env[v.name]  # KeyError: a dim not given
    return int(evaluate(d, binding))


def _usage(name: str, func: Function, env: dict[str, int]) -> MemoryUsage:
    u = MemoryUsage(name, 0, 0, 0, 0, 0)
    for call in _walk_calls(func.body):
        tensor = is_op(call, BUILTIN_ALLOC_TENSOR) or is_op(call, MEMORY_ALLOC_TENSOR)
        planned = is_op(call, BUILTIN_ALLOC_TENSOR) or is_op(call, MEMORY_ALLOC_STORAGE)
        if not (tensor or planned):
            continue
        nbytes = _call_bytes(call, env)
        if nbytes is None:
            u.dynamic_allocations += tensor
            continue
        if tensor:
            u.unplanned_count += 1
            u.unplanned_bytes += nbytes
        if planned:
            u.planned_count += 1
            u.planned_bytes += nbytes
    return u


def memory_usage(mod: IRModule, shape_vars: dict[str, int] | None = None
                 ) -> dict[str, MemoryUsage]:
    """Per Relax function, the bytes allocated per call with and without memory planning;
    ``shape_vars`` gives values to symbolic dims by name (``{"n": 4}``).

    ``mod`` may be at any stage: a module that still has ``call_tir`` is lowered with
    ``ToNonDataflow``, ``CallTIRRewrite`` and ``StaticPlanBlockMemory`` first.
    """
    from workbench.relax.op.base import is_call_tir
    from workbench.relax.transform.call_tir_rewrite import CallTIRRewrite, ToNonDataflow
    has_call_tir = any(is_call_tir(c) for _, f in relax_functions(mod)
                       if isinstance(f.body, SeqExpr) for c in _walk_calls(f.body))
    if has_call_tir:
        mod = StaticPlanBlockMemory()(CallTIRRewrite()(ToNonDataflow()(mod)))
    env = dict(shape_vars or {})
    return {name: _usage(name, f, env) for name, f in relax_functions(mod)
            if not is_primitive(f) and isinstance(f.body, SeqExpr)}


def estimate_memory_usage(mod: IRModule, shape_vars: dict[str, int] | None = None) -> str:
    """TVM's text report: per function, allocations and bytes with and without planning."""
    lines = ["Memory usage estimation:"]
    for name, u in memory_usage(mod, shape_vars).items():
        lines.append(f"- Function {name}:")
        lines.append(f" * Without memory planning, there are {u.unplanned_count} constant-size "
                     f"memory allocation(s) with total size {u.unplanned_bytes / 2**30:.4g} GB.")
        lines.append(f" * With memory planning, there are {u.planned_count} constant-size "
                     f"memory allocation(s) with total size {u.planned_bytes / 2**30:.4g} GB.")
        lines.append(f" * Memory planning reduces constant memory size to "
                     f"{100 * u.ratio:.1f}%.")
    return "\n".join(lines)


__all__ = ["StaticPlanBlockMemory", "LowerAllocTensor", "upper_bounds", "MemoryUsage", "memory_usage",
           "estimate_memory_usage"]
