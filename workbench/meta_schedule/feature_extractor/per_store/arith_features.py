"""Group 1 (57 features): what a store computes, and the parallel/vector/unroll loops around it.

Layout (TVM's ``group1::Feature``):

- 16 arithmetic counts: ``float_{mad, add_sub, mul, div_mod, cmp, math_func, other_func}``,
  the same 7 for ``int``, then ``bool_op`` and ``select_op``. Each is the number of such nodes
  in the stored value (index arithmetic inside its loads included, the store's own indices
  not) times the product of the constant extents of the enclosing loops.
  A node counts as float when its own dtype is float, so comparisons (dtype ``bool``) always
  count as int_cmp and only float ``min``/``max`` reach float_cmp; ``mad`` is never counted
  (TVM has no fused multiply-add node at this stage either). Calls count as ``math_func`` when
  pure (every intrinsic, ``if_then_else``), else ``other_func``.
- 3 x 11 loop-kind features, for vectorized, unrolled and parallel loops in that order:
  ``[num, prod of extents, extent of the innermost one, position one-hot (8)]``; the position
  is ``none`` (slot 0) without such loops and otherwise always ``mixed`` (slot 7), as in TVM,
  which never computes the finer positions.
- 8 GPU features: ``is_gpu`` then the extents of the outermost blockIdx.x/y/z, threadIdx.x/y/z
  and vthread loops (1 when absent or not on GPU).
"""
from __future__ import annotations

from workbench.tir import expr as E
from workbench.tir.functor import IRVisitor
from workbench.tir.op import INTRINSICS
from workbench.tir.stmt import ForKind

from workbench.meta_schedule.feature_extractor.per_store.loop_context import (
    THREAD_TAGS, LoopFrame, LoopNest, slog,
)

ARITH_NAMES = (
    "float_mad", "float_add_sub", "float_mul", "float_div_mod", "float_cmp",
    "float_math_func", "float_other_func",
    "int_mad", "int_add_sub", "int_mul", "int_div_mod", "int_cmp", "int_math_func",
    "int_other_func",
    "bool_op", "select_op",
)
N_ARITH = len(ARITH_NAMES)  # 16
POSITION_NAMES = ("none", "inner_spatial", "middle_spatial", "outer_spatial",
                  "inner_reduce", "middle_reduce", "outer_reduce", "mixed")
LOOP_KINDS = (("vec", ForKind.VECTORIZED), ("unroll", ForKind.UNROLLED),
              ("parallel", ForKind.PARALLEL))
N_KIND = 3 + len(POSITION_NAMES)  # 11
GPU_NAMES = ("is_gpu", "blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len",
             "threadIdx_x_len", "threadIdx_y_len", "threadIdx_z_len", "vthread_len")
N_GROUP1 = N_ARITH + N_KIND * len(LOOP_KINDS) + len(GPU_NAMES)  # 57

# Calls TVM marks kPure / kExprAnnotation: every math intrinsic, the lazy conditional and
# the "likely" hint. Anything else (extern calls, ...) is an "other" function.
PURE_CALLS = frozenset(INTRINSICS) | {"if_then_else", "tir.if_then_else", "likely",
                                      "tir.likely", "reinterpret"}

# Slots within the 16 counters: float slot = int slot - 7.
_ADD, _MUL, _DIV, _CMP, _MATH, _OTHER = 1, 2, 3, 4, 5, 6
_BOOL, _SELECT = 14, 15


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float")


class _ArithCounter(IRVisitor):
    """Counts arithmetic nodes of one expression into ``counts`` (per loop iteration)."""

    def __init__(self) -> None:
        self.counts = [0] * N_ARITH

    def _bump(self, e: E.PrimExpr, slot: int) -> None:
        self.counts[slot if _is_float(e.dtype) else slot + 7] += 1
        self.generic_visit(e)

    def visit_Add(self, e: E.Add) -> None: self._bump(e, _ADD)
    def visit_Sub(self, e: E.Sub) -> None: self._bump(e, _ADD)
    def visit_Mul(self, e: E.Mul) -> None: self._bump(e, _MUL)
    def visit_Div(self, e: E.Div) -> None: self._bump(e, _DIV)
    def visit_Mod(self, e: E.Mod) -> None: self._bump(e, _DIV)
    def visit_FloorDiv(self, e: E.FloorDiv) -> None: self._bump(e, _DIV)
    def visit_FloorMod(self, e: E.FloorMod) -> None: self._bump(e, _DIV)
    def visit_Min(self, e: E.Min) -> None: self._bump(e, _CMP)
    def visit_Max(self, e: E.Max) -> None: self._bump(e, _CMP)
    def visit_CmpOp(self, e: E.CmpOp) -> None: self._bump(e, _CMP)

    def visit_And(self, e: E.And) -> None:
        self.counts[_BOOL] += 1
        self.generic_visit(e)

    def visit_Or(self, e: E.Or) -> None:
        self.counts[_BOOL] += 1
        self.generic_visit(e)

    def visit_Not(self, e: E.Not) -> None:
        self.counts[_BOOL] += 1
        self.generic_visit(e)

    def visit_Select(self, e: E.Select) -> None:
        self.counts[_SELECT] += 1
        self.generic_visit(e)

    def visit_Call(self, e: E.Call) -> None:
        self._bump(e, _MATH if e.op in PURE_CALLS else _OTHER)


def count_arith(value: E.PrimExpr) -> list[int]:
    """The 16 counters of ``value`` for one loop iteration (multiply by the loop product)."""
    counter = _ArithCounter()
    counter.visit(value)
    return counter.counts


def float_op_count(counts: list[int]) -> int:
    """Sum of the 7 float counters (group 3's "compute ops")."""
    return sum(counts[:7])


def _kind_features(frames: list[LoopFrame]) -> list[float]:
    if not frames:
        return [0.0, 0.0, 0.0] + [1.0] + [0.0] * 7
    prod = 1
    for f in frames:
        if f.extent is not None:
            prod *= f.extent
    inner = frames[-1].extent if frames[-1].extent is not None else 1
    return [slog(len(frames)), slog(prod), slog(inner)] + [0.0] * 7 + [1.0]


def group1_features(counts: list[int], nest: LoopNest, is_gpu: bool) -> list[float]:
    """The 57 group-1 features of a store with per-iteration ``counts`` inside ``nest``."""
    prod = nest.prod
    out = [slog(c * prod) for c in counts]
    for _, kind in LOOP_KINDS:
        out += _kind_features(nest.of_kind(kind))
    out.append(1.0 if is_gpu else 0.0)
    for tag in THREAD_TAGS:
        frames = nest.of_kind(tag) if is_gpu else []
        ext = frames[0].extent if frames and frames[0].extent is not None else 1
        out.append(slog(ext))
    return out


def group1_names() -> list[str]:
    names = list(ARITH_NAMES)
    for short, _ in LOOP_KINDS:
        names += [f"{short}_num", f"{short}_prod", f"{short}_len"]
        names += [f"{short}_type.kPos{''.join(p.title() for p in pos.split('_'))}"
                  for pos in POSITION_NAMES]
    names += list(GPU_NAMES)
    return names


__all__ = ["ARITH_NAMES", "N_ARITH", "N_GROUP1", "PURE_CALLS", "count_arith", "float_op_count",
           "group1_features", "group1_names"]
