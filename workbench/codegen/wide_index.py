"""Buffer indices rendered in 64-bit arithmetic.

TIR indexes buffers with int32 expressions. Rendered as int32 arithmetic, LLVM widens them
itself (``zext nneg`` / ``sext`` at each address), and LLVM 22's loop vectorizer then
mis-vectorizes some of those widened addresses: a load ``W[base + i % 4]`` inside a loop
over ``i`` became one consecutive 8-wide load ``W[base .. base + 7]`` (found by ``make fuzz``:
conv2d NHWC stride 2 after fuse / split / compute_inline / reorder, wrong at ``-opt-level``
1 and above, right at 0 and in the interpreter; reduced by hand to
``zext(add(and(trunc iv, 3), base))``). Computing the whole index in int64 leaves no
narrow-to-wide cast inside the address for LLVM to reason about, and costs nothing on a
64-bit target (addresses are 64-bit anyway).

:func:`widen` rewrites an int32 index expression into the int64 expression with the same
value (TIR's indices never overflow int32, so every intermediate value is unchanged). The
arithmetic nodes are rebuilt in int64; anything else (a variable, a loaded index, a call) is
cast at the leaf.
"""
from __future__ import annotations

import functools
from typing import Callable

from workbench.ir import dtype as dt
from workbench.tir import expr as E


# Cached per dtype string: a tuned kernel's render asks ~5,000 times for a handful of dtypes.
@functools.lru_cache(maxsize=None)
def _wide(dtype: str) -> str:
    lanes = dt.lanes_of(dtype)
    return "int64" if lanes == 1 else f"int64x{lanes}"


@functools.lru_cache(maxsize=None)
def _narrow_int(dtype: str) -> bool:
    t = dt.parse(dtype)
    return t.is_int and t.bits < 64


def _binary(memo: dict[int, E.PrimExpr], e: E.BinaryOp) -> E.PrimExpr:
    return type(e)(_widen(memo, e.a), _widen(memo, e.b), _wide(e.dtype))


def _int_imm(memo: dict[int, E.PrimExpr], e: E.IntImm) -> E.PrimExpr:
    return _wide_imm(e.dtype, e.value)


@functools.lru_cache(maxsize=4096)
def _wide_imm(dtype: str, value: int) -> E.IntImm:
    # nodes are immutable: one IntImm per constant serves every index (building them was a
    # fifth of rendering an unrolled tile)
    return E.IntImm(_wide(dtype), value)


def _ramp(memo: dict[int, E.PrimExpr], e: E.Ramp) -> E.PrimExpr:
    return E.Ramp(_widen(memo, e.base), _widen(memo, e.stride), e.lanes, _wide(e.dtype))


def _broadcast(memo: dict[int, E.PrimExpr], e: E.Broadcast) -> E.PrimExpr:
    return E.Broadcast(_widen(memo, e.value), e.lanes, _wide(e.dtype))


def _select(memo: dict[int, E.PrimExpr], e: E.Select) -> E.PrimExpr:
    return E.Select(e.condition, _widen(memo, e.true_value), _widen(memo, e.false_value),
                    _wide(e.dtype))


_RULES: dict[type, Callable[[dict[int, E.PrimExpr], E.PrimExpr], E.PrimExpr]] = {
    **{cls: _binary for cls in (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod,
                                E.Min, E.Max)},
    E.IntImm: _int_imm, E.Ramp: _ramp, E.Broadcast: _broadcast, E.Select: _select,
}


def _widen(memo: dict[int, E.PrimExpr], e: E.PrimExpr) -> E.PrimExpr:
    got = memo.get(id(e))
    if got is not None:
        return got
    if not _narrow_int(e.dtype):
        out = e
    else:
        rule = _RULES.get(type(e))
        out = rule(memo, e) if rule is not None else E.Cast(_wide(e.dtype), e)
    memo[id(e)] = out
    return out


def widen(index: E.PrimExpr) -> E.PrimExpr:
    """``index`` (a signed integer buffer index, scalar or vector) as an int64 expression of
    the same value; 64-bit and non-integer expressions are returned unchanged."""
    return _widen({}, index)
