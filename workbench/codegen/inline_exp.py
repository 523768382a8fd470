"""``exp`` on float32 vectors as straight-line LLVM IR: the ``exp`` intrinsic itself, and the
one inside ``sigmoid`` (SiLU, squeeze-excite, the tanh form of GELU).

Why not libmvec: a vector-ABI call clobbers every vector register, so inside a fused kernel
-- a convolution whose epilogue is ``x * sigmoid(x)``, an attention kernel's streaming
softmax -- the register tile around the call is spilled and reloaded for every vector, and
the call itself costs a few cycles an element. Sixteen lanes of a polynomial are a dozen FMAs
that stay in registers and interleave with the loads and stores around them (onnxruntime's
MLAS evaluates its exp and logistic the same way, inline).

The method (Cody-Waite range reduction, then a polynomial):

- ``x`` is clamped to ``[-104, 89]``: below, ``exp`` underflows to 0 (under the smallest
  denormal), above it overflows to ``inf``; both come out of the arithmetic below unaided;
- ``n = round(x / ln 2)`` with the add-and-subtract ``1.5 * 2**23`` trick (no rounding
  instruction needed, so it holds on any x86-64 vector unit); the integer ``n`` is read from
  the sum's low mantissa bits (integer arithmetic on the bits: a NaN input gives garbage
  bits, never LLVM poison, and its NaN propagates through the product);
- ``r = x - n * ln 2`` with ``ln 2`` split in a high part exact in float32 and a low part,
  so ``|r| <= ln(2) / 2`` without cancellation error;
- ``e**r`` by its Taylor series to degree 7 in Horner form (the truncation error,
  ``(ln(2)/2)**8 / 8!``, is ~5e-9, below float32's half ulp), times ``2**n`` as two factors
  ``2**(n//2) * 2**(n - n//2)`` made by writing each exponent into a float's exponent bits
  (each a normal float for ``n`` in [-150, 128], so results in the denormal range and the
  overflow to ``inf`` are right).

The result is within a few ulp of the correctly rounded ``exp`` wherever it is a normal
float (tests/codegen/test_inline_exp.py checks it against numpy in float64, with the
denormal range, the overflow, infinities and NaN).
"""
from __future__ import annotations

import math
import struct

import llvmlite.ir as ir

from workbench.codegen.llvm_types import I32

_LO, _HI = -104.0, 89.0
_LOG2E = 1.0 / math.log(2.0)
_LN2_HI = 0.693359375            # 0x3f318000: few mantissa bits, so n * _LN2_HI is exact
_LN2_LO = math.log(2.0) - _LN2_HI
_ROUNDER = 1.5 * 2.0 ** 23       # adding it rounds a float32 of magnitude < 2**22 to an integer
_ROUNDER_BITS = int.from_bytes(struct.pack("<f", _ROUNDER), "little")   # its float32 bits
_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(7, -1, -1))   # degree 7 down to 0


def applies(ty: ir.Type) -> bool:
    """Is ``ty`` a float32 vector (the only type the inline form is emitted for)?"""
    return isinstance(ty, ir.VectorType) and isinstance(ty.element, ir.FloatType)


def _splat(ty: ir.VectorType, value: float | int) -> ir.Constant:
    return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)


def emit_exp(ctx, x: ir.Value) -> ir.Value:
    """``exp(x)`` for a float32 vector ``x`` (see the module docstring for the accuracy)."""
    return _exp(ctx, x, _LO, _HI, split_scale=True)


def emit_exp_of_sigmoid(ctx, x: ir.Value) -> ir.Value:
    """``exp(x)`` as ``sigmoid`` needs it, ``1 / (1 + exp(-v))``: exact as :func:`emit_exp`
    wherever the result is a normal float, but ``x`` clamped to ``[-88, 88]`` so ``2**n`` is
    one factor (``n`` in [-127, 127]; ``2**-127`` comes out as 0). Below -88 ``exp`` is
    under the smallest normal float, and ``1 + exp`` is 1 either way; above 88 the sigmoid
    is under 6.1e-39 (a denormal) and comes out as that. Two fewer multiplies and four
    fewer integer operations per vector: EfficientNet-B0 spends about 14% of its time in
    sigmoids."""
    return _exp(ctx, x, -_SIGMOID_CLAMP, _SIGMOID_CLAMP, split_scale=False)


_SIGMOID_CLAMP = 88.0   # round(88 / ln 2) = 127: 2**n is a normal float (or 0 at -127)


def _exp(ctx, x: ir.Value, lo: float, hi: float, split_scale: bool) -> ir.Value:
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

    x = clamp(x, lo, hi)
    rounder = _splat(ty, _ROUNDER)
    biased = fmuladd(x, _splat(ty, _LOG2E), rounder)        # rounder + n, n in the low bits
    n = b.fsub(biased, rounder)
    r = fmuladd(n, _splat(ty, -_LN2_HI), x)
    r = fmuladd(n, _splat(ty, -_LN2_LO), r)
    p = _splat(ty, _TAYLOR[0])
    for c in _TAYLOR[1:]:
        p = fmuladd(p, r, _splat(ty, c))
    bits = b.bitcast(biased, ity)

    def pow2(k: ir.Value) -> ir.Value:
        return b.bitcast(b.shl(k, _splat(ity, 23)), ty)
    if not split_scale:     # n + 127 straight from the bits, one factor
        return b.fmul(p, pow2(b.sub(bits, _splat(ity, _ROUNDER_BITS - 127))))
    ni = b.sub(bits, _splat(ity, _ROUNDER_BITS))
    half = b.ashr(ni, _splat(ity, 1))
    return b.fmul(b.fmul(p, pow2(b.add(half, _splat(ity, 127)))),
                  pow2(b.add(b.sub(ni, half), _splat(ity, 127))))


__all__ = ["applies", "emit_exp", "emit_exp_of_sigmoid"]
