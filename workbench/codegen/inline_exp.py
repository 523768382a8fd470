"""``exp`` on float32 vectors as straight-line LLVM IR, for ``sigmoid`` (SiLU, squeeze-excite).

Why not libmvec: a vector-ABI call clobbers every vector register, so inside a fused kernel
-- a convolution whose epilogue is ``x * sigmoid(x)`` -- the register tile around the call
is spilled and reloaded for every vector, and the call itself is not free. Sixteen lanes of
a polynomial are a dozen FMAs that stay in registers and interleave with the loads and
stores around them (onnxruntime's MLAS evaluates its logistic the same way, inline).

The method (Cody-Waite range reduction, then a polynomial):

- ``x`` is clamped to ``[-87, 88]``, where ``2**n`` below stays a normal float (sigmoid only
  needs ``exp`` to saturate: ``1 / (1 + e**88)`` is ~6e-39 and ``1 + e**-87`` is 1);
- ``n = round(x / ln 2)`` with the add-and-subtract ``1.5 * 2**23`` trick (no rounding
  instruction needed, so it holds on any x86-64 vector unit);
- ``r = x - n * ln 2`` with ``ln 2`` split in a high part exact in float32 and a low part,
  so ``|r| <= ln(2) / 2`` without cancellation error;
- ``e**r`` by its Taylor series to degree 7 in Horner form (the truncation error,
  ``(ln(2)/2)**8 / 8!``, is ~5e-9, below float32's half ulp), and ``2**n`` by writing
  ``n + 127`` into the exponent bits.

The result is within a few ulp of the correctly rounded ``exp`` on the clamped range
(tests/codegen/test_inline_exp.py checks it against numpy in float64).
"""
from __future__ import annotations

import math

import llvmlite.ir as ir

from workbench.codegen.llvm_types import I32

_LO, _HI = -87.0, 88.0
_LOG2E = 1.0 / math.log(2.0)
_LN2_HI = 0.693359375            # 0x3f318000: few mantissa bits, so n * _LN2_HI is exact
_LN2_LO = math.log(2.0) - _LN2_HI
_ROUNDER = 1.5 * 2.0 ** 23       # adding it rounds a float32 of magnitude < 2**22 to an integer
_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(7, -1, -1))   # degree 7 down to 0


def applies(ty: ir.Type) -> bool:
    """Is ``ty`` a float32 vector (the only type the inline form is emitted for)?"""
    return isinstance(ty, ir.VectorType) and isinstance(ty.element, ir.FloatType)


def _splat(ty: ir.VectorType, value: float | int) -> ir.Constant:
    return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)


def emit_exp(ctx, x: ir.Value) -> ir.Value:
    """``exp(x)`` for a float32 vector ``x`` (see the module docstring for the accuracy)."""
    b, ty = ctx.b, x.type
    ity = ir.VectorType(I32, ty.count)

    # llvm.fmuladd: one FMA where the target has it, a multiply and an add elsewhere
    name = f"llvm.fmuladd.v{ty.count}f32"
    fma = ctx.module.globals.get(name) or ir.Function(
        ctx.module, ir.FunctionType(ty, [ty, ty, ty]), name)

    def fmuladd(a: ir.Value, m: ir.Value, c: ir.Value) -> ir.Value:
        return b.call(fma, [a, m, c])

    def clamp(v: ir.Value, lo: float, hi: float) -> ir.Value:
        lo_c, hi_c = _splat(ty, lo), _splat(ty, hi)
        # ordered compares are false for NaN: a NaN input passes through and stays NaN
        v = b.select(b.fcmp_ordered(">", v, hi_c), hi_c, v)
        return b.select(b.fcmp_ordered("<", v, lo_c), lo_c, v)

    x = clamp(x, _LO, _HI)
    rounder = _splat(ty, _ROUNDER)
    n = b.fsub(fmuladd(x, _splat(ty, _LOG2E), rounder), rounder)
    r = fmuladd(n, _splat(ty, -_LN2_HI), x)
    r = fmuladd(n, _splat(ty, -_LN2_LO), r)
    p = _splat(ty, _TAYLOR[0])
    for c in _TAYLOR[1:]:
        p = fmuladd(p, r, _splat(ty, c))
    bits = b.shl(b.add(b.fptosi(n, ity), _splat(ity, 127)), _splat(ity, 23))
    return b.fmul(p, b.bitcast(bits, ty))


__all__ = ["applies", "emit_exp"]
