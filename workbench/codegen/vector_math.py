"""Vector math through glibc's libmvec (the x86-64 vector function ABI).

LLVM expands ``llvm.exp.v16f32`` into sixteen scalar ``expf`` calls; libmvec has SIMD versions
(``_ZGVeN16v_expf`` for AVX-512, ``_ZGVdN8v_expf`` for AVX2, ``_ZGVbN4v_expf`` for SSE) that
are several times faster at a few ULP of accuracy, which is what numpy's SIMD loops give too.
A vector of any width is cut into native-width pieces, each piece goes through the widest
variant the target supports, and the results are joined again.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

import llvmlite.ir as ir

from workbench.codegen.llvm_types import I32
from workbench.target import Target

# Our intrinsic name -> libmvec's base name (the float version appends "f").
MVEC_FUNCS = {
    "exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "pow": "pow", "exp2": "exp2",
    "exp10": "exp10", "log2": "log2", "log10": "log10", "log1p": "log1p", "tanh": "tanh",
    "erf": "erf", "tan": "tan", "atan": "atan", "atan2": "atan2",
}

# ISA letter, register bits, the target feature that enables it.
# (Target.has_feature, so a named -mcpu answers from its own features, not the host's)
_ISAS = (("e", 512, ("avx512f",)), ("d", 256, ("avx2",)), ("b", 128, ("sse4.1", "avx2")))


@functools.lru_cache(maxsize=1)
def _libmvec() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("mvec")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


@functools.lru_cache(maxsize=None)
def _has_symbol(symbol: str) -> bool:
    lib = _libmvec()
    return lib is not None and hasattr(lib, symbol)


def _variant(target: Target, func: str, elem_bits: int, lanes: int, nargs: int
             ) -> tuple[str, int] | None:
    """The widest usable ``(symbol, width)`` whose width divides ``lanes``."""
    base = MVEC_FUNCS[func] + ("f" if elem_bits == 32 else "")
    for letter, bits, feature in _ISAS:
        width = bits // elem_bits
        if lanes % width or not any(target.has_feature(f) for f in feature):
            continue
        symbol = f"_ZGV{letter}N{width}{'v' * nargs}_{base}"
        if _has_symbol(symbol):
            return symbol, width
    return None


def vector_math_call(ctx, func: str, args: list[ir.Value]) -> ir.Value | None:
    """Emit ``func`` on vector ``args`` via libmvec, or return None when it does not apply."""
    ty = args[0].type
    if func not in MVEC_FUNCS or not isinstance(ty, ir.VectorType) or ctx.target.mtriple and \
            not ctx.target.mtriple.startswith("x86_64"):
        return None
    elem = ty.element
    if isinstance(elem, ir.FloatType):
        bits = 32
    elif isinstance(elem, ir.DoubleType):
        bits = 64
    else:
        return None
    found = _variant(ctx.target, func, bits, ty.count, len(args))
    if found is None:
        return None
    symbol, width = found
    piece_ty = ir.VectorType(elem, width)
    fn = ctx.renderer.declare(symbol, piece_ty, [piece_ty] * len(args))
    pieces = []
    for start in range(0, ty.count, width):
        mask = ir.Constant(ir.VectorType(I32, width), [ir.Constant(I32, start + i)
                                                       for i in range(width)])
        parts = [a if width == ty.count else ctx.b.shuffle_vector(a, a, mask) for a in args]
        pieces.append(ctx.b.call(fn, parts))
    return _concat(ctx, pieces, ty)


def _concat(ctx, pieces: list[ir.Value], ty: ir.VectorType) -> ir.Value:
    """Join equal-width vectors back into one of type ``ty`` (pairwise shuffles)."""
    while len(pieces) > 1:
        joined = []
        for a, b in zip(pieces[::2], pieces[1::2]):
            n = a.type.count
            mask = ir.Constant(ir.VectorType(I32, 2 * n), [ir.Constant(I32, i)
                                                           for i in range(2 * n)])
            joined.append(ctx.b.shuffle_vector(a, b, mask))
        if len(pieces) % 2:
            # An odd count happens only when lanes/width is odd: fall back to lane inserts.
            return _concat_lanes(ctx, pieces, ty)
        pieces = joined
    return pieces[0]


def _concat_lanes(ctx, pieces: list[ir.Value], ty: ir.VectorType) -> ir.Value:
    out = ir.Constant(ty, ir.Undefined)
    pos = 0
    for p in pieces:
        for i in range(p.type.count):
            v = ctx.b.extract_element(p, ir.Constant(I32, i))
            out = ctx.b.insert_element(out, v, ir.Constant(I32, pos))
            pos += 1
    return out
