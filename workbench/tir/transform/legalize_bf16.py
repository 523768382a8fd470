"""``legalize_bf16``: arithmetic on bfloat16 values is done in float32.

bfloat16 has no arithmetic in LLVM's x86 backend that matches numpy's (ml_dtypes') results, and
codegen keeps bfloat16 as its 16 bits. Every arithmetic node, comparison, min/max and math call
whose operands are bfloat16 is rewritten to convert its operands to float32, compute, and (for
non-comparisons) round the result back to bfloat16 -- what ml_dtypes does per operation. Loads,
stores, casts, selects and reinterprets of bfloat16 stay as they are.
"""
from __future__ import annotations

from workbench.ir import dtype as dt
from workbench.tir.expr import BinaryOp, Call, Cast, CmpOp, PrimExpr
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, any_node

_PASS_THROUGH_CALLS = ("reinterpret", "if_then_else", "call_llvm_pure_intrin",
                       "call_llvm_intrin", "address_of")


def _is_bf16(e: PrimExpr) -> bool:
    return dt.parse(e.dtype).is_bfloat


def _f32(e: PrimExpr) -> PrimExpr:
    return Cast(dt.with_lanes("float32", dt.lanes_of(e.dtype)), e) if _is_bf16(e) else e


class _Legalize(IRMutator):
    def visit_BinaryOp(self, e: BinaryOp) -> PrimExpr:
        e = self.generic_visit(e)
        if not (_is_bf16(e.a) or _is_bf16(e.b)):
            return e
        a, b = _f32(e.a), _f32(e.b)
        if isinstance(e, CmpOp):
            return e.replace(a=a, b=b)
        return Cast(e.dtype, e.replace(a=a, b=b, dtype=a.dtype))

    def visit_Call(self, e: Call) -> PrimExpr:
        e = self.generic_visit(e)
        if e.op in _PASS_THROUGH_CALLS or not any(_is_bf16(a) for a in e.args):
            return e
        args = tuple(_f32(a) for a in e.args)
        if _is_bf16(e):
            return Cast(e.dtype, e.replace(args=args, dtype=dt.with_lanes(
                "float32", dt.lanes_of(e.dtype))))
        return e.replace(args=args)


def _has_bf16(n: object) -> bool:
    return isinstance(n, PrimExpr) and _is_bf16(n)


def legalize_bf16(func: PrimFunc) -> PrimFunc:
    # Most functions hold no bfloat16 value: a scan costs a fraction of the rewrite's walk.
    if not any_node(func.body, _has_bf16):
        return func
    return func.with_body(_Legalize().visit(func.body))


__all__ = ["legalize_bf16"]
