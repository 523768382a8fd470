"""Built-in tensor intrinsics for x86 CPUs (registered when a name is first looked up).

Dot products in TVM's ``dot_16x4`` shape, ``C[i] += sum_k A[k] * B[i, k]`` for 16 outputs:

- ``dot_16x4_vnni`` (``VNNI_DOT_16x4_INTRIN``): u8 x s8 -> s32, k = 4, one AVX-512 VNNI
  ``vpdpbusd``; exact (no saturation).
- ``dot_16x4_avx512``: the same with AVX-512BW ``pmaddubsw`` + ``pmaddwd`` (TVM's
  ``AVX512_DOT_16x4_INTRIN``); the int16 pair sums saturate, so results differ from the exact
  ones when ``|a0*b0 + a1*b1| > 32767``.
- ``dot_16x4_u8i8i32_generic``: the same exactly, in plain vector TIR (any x86-64; what a
  machine without VNNI uses).
- ``dot_16x2_bf16`` (``BF16_DOT_16x2_INTRIN``): bf16 x bf16 -> f32, k = 2, one AVX512-BF16
  ``vdpbf16ps``. The instruction adds the k = 1 product before the k = 0 one and treats
  denormals as zero, so its rounding may differ from a k-ordered float32 sum.
- ``dot_16x2_bf16_generic``: the same in plain TIR, products summed in k order.

A register-blocked float32 micro-kernel family, ``avx512_fp32_mk_<MR>x<NR>x<KC>`` (``NR`` a
multiple of 16): ``C[MR, NR] += A[MR, KC] @ B[KC, NR]`` with the ``MR x NR/16`` accumulators
held in vector registers across the ``KC`` loop (outer products: ``NR/16`` vector loads of a
row of B and one broadcast of A per row and k). Built on first use by name; it needs AVX-512F
(``avx2_fp32_mk_<MR>x<NR>x<KC>``, ``NR`` a multiple of 8, is the AVX2 version).

Register-blocked int8 (``avx512_vnni_mk_*``) and bf16 (``avx512_bf16_mk_*``) kernels on
packed weights are in :mod:`workbench.tir.tensor_intrin.x86_packed`, AMX tile kernels in
:mod:`workbench.tir.tensor_intrin.amx`.

Buffers of the 16 x k intrinsics are compact (the weight must be packed ``[.., 16, k]``); the
micro-kernel's buffers are strided (any row-major sub-block).
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.buffer import Buffer, decl_buffer
from workbench.tir.expr import Broadcast, BufferLoad, Cast, PrimExpr, Shuffle
from workbench.tir.function import PrimFunc
from workbench.tir.stmt import Allocate, BufferStore, DeclBuffer, IterType, \
    SeqStmt, Stmt
from workbench.tir.tensor_intrin import TensorIntrin, register_intrin_factory
from workbench.tir.tensor_intrin._build import MAX_ACC as _MAX_ACC
from workbench.tir.tensor_intrin._build import i32 as _i
from workbench.tir.tensor_intrin._build import impl_func as _impl
from workbench.tir.tensor_intrin._build import k_loop as _k_loop
from workbench.tir.tensor_intrin._build import ramp as _ramp
from workbench.tir.tensor_intrin._build import reduction_desc as _reduction_desc
from workbench.tir.tensor_intrin._build import strided as _strided

VNNI_DOT_16x4_INTRIN = "dot_16x4_vnni"
AVX512_DOT_16x4_INTRIN = "dot_16x4_avx512"
GENERIC_DOT_16x4_INTRIN = "dot_16x4_u8i8i32_generic"
BF16_DOT_16x2_INTRIN = "dot_16x2_bf16"
#: ``dot_16x4_vnni`` + this: the same with C in "local" scope (a tile's accumulator).
LOCAL_SUFFIX = "_local"
GENERIC_BF16_DOT_16x2_INTRIN = "dot_16x2_bf16_generic"

__all__ = ["VNNI_DOT_16x4_INTRIN", "AVX512_DOT_16x4_INTRIN", "GENERIC_DOT_16x4_INTRIN",
           "BF16_DOT_16x2_INTRIN", "GENERIC_BF16_DOT_16x2_INTRIN", "LOCAL_SUFFIX", "fp32_microkernel_name",
           "vnni_microkernel_name", "bf16_microkernel_name"]


# ---- int8 dot product: C[16] i32 += A[4] u8 . B[16, 4] i8 -------------------------------------

def _dot_16x4_buffers(c_scope: str = "global") -> tuple[Buffer, Buffer, Buffer]:
    return (decl_buffer((4,), "uint8", "A"), decl_buffer((16, 4), "int8", "B"),
            decl_buffer((16,), "int32", "C", scope=c_scope))


def _dot_16x4_desc(c_scope: str = "global") -> PrimFunc:
    A, B, C = _dot_16x4_buffers(c_scope)
    return _reduction_desc(
        [A, B, C], C, [("i", 16, IterType.DATA_PAR), ("k", 4, IterType.COMM_REDUCE)],
        lambda i, k: (i,),
        lambda i, k: op.mul(op.cast("int32", A[k]), op.cast("int32", B[i, k])))


def _dot_16x4_operands(A: Buffer, B: Buffer) -> tuple[PrimExpr, PrimExpr]:
    """A's four bytes broadcast to every 32-bit lane, and B's 64 bytes, both as int32x16."""
    a = op.reinterpret("int32", BufferLoad(A, (_ramp(0, 4),), "uint8x4"))
    b = op.reinterpret("int32x16", BufferLoad(B, (_i(0), _ramp(0, 64)), "int8x64"))
    return Broadcast(a, 16, "int32x16"), b


def _dot_16x4_vnni_impl(c_scope: str = "global") -> PrimFunc:
    A, B, C = _dot_16x4_buffers(c_scope)
    a, b = _dot_16x4_operands(A, B)
    c = BufferLoad(C, (_ramp(0, 16),), "int32x16")
    # Operands typed <16 x i32>, as TVM emits them (LLVM >= 21 upgrades them to <64 x i8>).
    res = op.call_llvm_pure_intrin("int32x16", "llvm.x86.avx512.vpdpbusd.512", c, a, b)
    return _impl([A, B, C], C, BufferStore(C, res, (_ramp(0, 16),)))


def _dot_16x4_avx512_impl() -> PrimFunc:
    A, B, C = _dot_16x4_buffers()
    a, b = _dot_16x4_operands(A, B)
    pairs = op.call_llvm_pure_intrin("int16x32", "llvm.x86.avx512.pmaddubs.w.512",
                                     op.reinterpret("int8x64", a), op.reinterpret("int8x64", b))
    quads = op.call_llvm_pure_intrin("int32x16", "llvm.x86.avx512.pmaddw.d.512", pairs,
                                     Broadcast(op.const(1, "int16"), 32, "int16x32"))
    c = BufferLoad(C, (_ramp(0, 16),), "int32x16")
    return _impl([A, B, C], C, BufferStore(C, op.add(c, quads), (_ramp(0, 16),)))


def _dot_generic(A: Buffer, B: Buffer, C: Buffer, k: int, acc_dtype: str) -> Stmt:
    """``C[0:16] += sum_k cast(A[k]) * cast(B[0:16, k])`` with B loaded once (16k lanes) and
    its k-th column picked by a shuffle; k in order."""
    lanes = 16 * k
    acc_vec = f"{acc_dtype}x16"
    b_all = BufferLoad(B, (_i(0), _ramp(0, lanes)), f"{B.dtype}x{lanes}")
    acc: PrimExpr = BufferLoad(C, (_ramp(0, 16),), acc_vec)
    for kk in range(k):
        col = Shuffle((b_all,), tuple(range(kk, lanes, k)), f"{B.dtype}x16")
        a = Broadcast(Cast(acc_dtype, BufferLoad(A, (_i(kk),), A.dtype)), 16, acc_vec)
        acc = op.add(acc, op.mul(a, Cast(acc_vec, col)))
    return BufferStore(C, acc, (_ramp(0, 16),))


def _dot_16x4_generic_impl(c_scope: str = "global") -> PrimFunc:
    A, B, C = _dot_16x4_buffers(c_scope)
    return _impl([A, B, C], C, _dot_generic(A, B, C, 4, "int32"))


# ---- bf16 dot product: C[16] f32 += A[2] bf16 . B[16, 2] bf16 ----------------------------------

def _dot_16x2_bf16_buffers() -> tuple[Buffer, Buffer, Buffer]:
    return (decl_buffer((2,), "bfloat16", "A"), decl_buffer((16, 2), "bfloat16", "B"),
            decl_buffer((16,), "float32", "C"))


def _dot_16x2_bf16_desc() -> PrimFunc:
    A, B, C = _dot_16x2_bf16_buffers()
    return _reduction_desc(
        [A, B, C], C, [("i", 16, IterType.DATA_PAR), ("k", 2, IterType.COMM_REDUCE)],
        lambda i, k: (i,),
        lambda i, k: op.mul(op.cast("float32", A[k]), op.cast("float32", B[i, k])))


def _dot_16x2_bf16_impl() -> PrimFunc:
    A, B, C = _dot_16x2_bf16_buffers()
    a = op.reinterpret("int32", BufferLoad(A, (_ramp(0, 2),), "bfloat16x2"))
    b = op.reinterpret("int32x16", BufferLoad(B, (_i(0), _ramp(0, 32)), "bfloat16x32"))
    c = BufferLoad(C, (_ramp(0, 16),), "float32x16")
    # <16 x i32> operands (LLVM >= 17 upgrades them to <32 x bfloat>).
    res = op.call_llvm_pure_intrin("float32x16", "llvm.x86.avx512bf16.dpbf16ps.512", c,
                                   Broadcast(a, 16, "int32x16"), b)
    return _impl([A, B, C], C, BufferStore(C, res, (_ramp(0, 16),)))


def _dot_16x2_bf16_generic_impl() -> PrimFunc:
    A, B, C = _dot_16x2_bf16_buffers()
    return _impl([A, B, C], C, _dot_generic(A, B, C, 2, "float32"))


# ---- float32 register-blocked micro-kernel ----------------------------------------------------

MICROKERNEL_PATTERN = r"(?P<isa>avx512|avx2)_fp32_mk_(?P<mr>\d+)x(?P<nr>\d+)x(?P<kc>\d+)"
_LANES = {"avx512": 16, "avx2": 8}


def fp32_microkernel_name(mr: int, nr: int, kc: int, isa: str = "avx512") -> str:
    """The name of the float32 micro-kernel intrinsic of that shape."""
    return f"{isa}_fp32_mk_{mr}x{nr}x{kc}"


def _fp32_microkernel(isa: str, mr: str, nr: str, kc: str) -> tuple[PrimFunc, PrimFunc]:
    m, n, k = int(mr), int(nr), int(kc)
    lanes = _LANES[isa]
    if m < 1 or k < 1 or n < lanes or n % lanes:
        raise ValueError(f"MR and KC must be >= 1 and NR a multiple of {lanes}")
    if m * (n // lanes) > _MAX_ACC[isa]:
        raise ValueError(f"{m} x {n // lanes} accumulators exceed the {_MAX_ACC[isa]} vector "
                         "registers the micro-kernel may use")
    A, B, C = (decl_buffer((m, k), "float32", "A"), decl_buffer((k, n), "float32", "B"),
               decl_buffer((m, n), "float32", "C"))
    desc = _reduction_desc(
        [A, B, C], C, [("i", m, IterType.DATA_PAR), ("j", n, IterType.DATA_PAR),
                       ("k", k, IterType.COMM_REDUCE)],
        lambda i, j, kk: (i, j), lambda i, j, kk: op.mul(A[i, kk], B[kk, j]),
        nest=(0, 2, 1))  # i, k, j: a packed B keeps its rows (j) contiguous
    A, B, C = _strided("A", (m, k), "float32"), _strided("B", (k, n), "float32"), \
        _strided("C", (m, n), "float32")
    return desc, _impl([A, B, C], C, _microkernel_body(A, B, C, m, n, k, lanes))


def _microkernel_body(A: Buffer, B: Buffer, C: Buffer, m: int, n: int, k: int,
                      lanes: int) -> Stmt:
    """Load the C tile into a local accumulator tile, run the k loop on it, store it back.

    Every accumulator access has constant indices, so LLVM keeps the tile in registers; the
    k loop is a real loop (unrolled by LLVM as it sees fit)."""
    vec = f"float32x{lanes}"
    nv = n // lanes
    acc = decl_buffer((m, n), "float32", "acc", scope="local")
    tiles = [(i, v) for i in range(m) for v in range(nv)]
    load = [BufferStore(acc, BufferLoad(C, (_i(i), _ramp(v * lanes, lanes)), vec),
                        (_i(i), _ramp(v * lanes, lanes))) for i, v in tiles]

    def step(kv: PrimExpr) -> Stmt:
        rows = [BufferLoad(B, (kv, _ramp(v * lanes, lanes)), vec) for v in range(nv)]
        update = []
        for i in range(m):
            a = Broadcast(BufferLoad(A, (_i(i), kv), "float32"), lanes, vec)
            for v in range(nv):
                idx = (_i(i), _ramp(v * lanes, lanes))
                update.append(BufferStore(acc, op.add(BufferLoad(acc, idx, vec),
                                                      op.mul(a, rows[v])), idx))
        return SeqStmt(tuple(update))
    loop = _k_loop("k", k, step)
    store = [BufferStore(C, BufferLoad(acc, (_i(i), _ramp(v * lanes, lanes)), vec),
                         (_i(i), _ramp(v * lanes, lanes))) for i, v in tiles]
    body = SeqStmt(tuple(load) + (loop,) + tuple(store))
    return Allocate(acc.data, "float32", (_i(m), _i(n)), op.const(True), DeclBuffer(acc, body))


# ---- registration -----------------------------------------------------------------------------

def _register() -> None:
    for name, desc, impl in (
            (VNNI_DOT_16x4_INTRIN, _dot_16x4_desc, _dot_16x4_vnni_impl),
            (AVX512_DOT_16x4_INTRIN, _dot_16x4_desc, _dot_16x4_avx512_impl),
            (GENERIC_DOT_16x4_INTRIN, _dot_16x4_desc, _dot_16x4_generic_impl),
            (BF16_DOT_16x2_INTRIN, _dot_16x2_bf16_desc, _dot_16x2_bf16_impl),
            (GENERIC_BF16_DOT_16x2_INTRIN, _dot_16x2_bf16_desc, _dot_16x2_bf16_generic_impl)):
        TensorIntrin.register(name, desc(), impl(), override=True)
    # Accumulating into a tile-local buffer (a default schedule's register tile).
    for name, impl in ((VNNI_DOT_16x4_INTRIN, _dot_16x4_vnni_impl),
                       (GENERIC_DOT_16x4_INTRIN, _dot_16x4_generic_impl)):
        TensorIntrin.register(name + LOCAL_SUFFIX, _dot_16x4_desc("local"), impl("local"),
                              override=True)
    register_intrin_factory(MICROKERNEL_PATTERN, _fp32_microkernel)


_register()
# The families on packed weights register their factories when imported.
from workbench.tir.tensor_intrin.x86_packed import (  # noqa: E402
    bf16_microkernel_name, vnni_microkernel_name,
)
