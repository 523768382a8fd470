"""Register-blocked AVX-512 micro-kernels on a packed weight (built on first use by name).

Both compute ``C[MR, NR] += A[MR, KC] . B[NR, KC]`` (products cast to the accumulator type)
with the weight packed ``[NR/16, KC/P, 16, P]`` -- the description indexes it
``B[j // 16, k // P, j % 16, k % P]`` (:func:`workbench.tir.tensor_intrin._build.packed_matmul_desc`)
-- and keep the ``MR x NR/16`` accumulators in vector registers across the KC loop:

- ``avx512_vnni_mk_<MR>x<NR>x<KC>``: uint8 x int8 -> int32, P = 4 (TVM's VNNI weight layout),
  one ``vpdpbusd`` per accumulator and 4 k (needs AVX-512 VNNI); exact.
- ``avx512_bf16_mk_<MR>x<NR>x<KC>``: bfloat16 x bfloat16 -> float32, P = 2, one
  ``vdpbf16ps`` per accumulator and 2 k (needs AVX512-BF16). The instruction adds the pair's
  products before the accumulator and treats denormals as zero, so it may round differently
  from a k-ordered float32 sum.

Per k step the kernel loads one 64-byte vector of the weight per 16 columns (16 columns x P
k values) and broadcasts P consecutive A values (4 or 2 bytes) to every 32-bit lane; the
instruction multiplies them pairwise within each lane. A and C are strided (any row-major
sub-block); the weight's last two dimensions are whole in any packed weight, so one load runs
across them.
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.buffer import decl_buffer
from workbench.tir.expr import Broadcast, BufferLoad, PrimExpr
from workbench.tir.function import PrimFunc
from workbench.tir.stmt import Allocate, BufferStore, DeclBuffer, SeqStmt
from workbench.tir.tensor_intrin import register_intrin_factory
from workbench.tir.tensor_intrin._build import (
    MAX_ACC, i32, impl_func, k_loop, packed_matmul_desc, ramp, strided,
)

__all__ = ["vnni_microkernel_name", "bf16_microkernel_name", "PACKED_FAMILIES"]

# name prefix: (A dtype, weight dtype, accumulator dtype, P, LLVM intrinsic)
PACKED_FAMILIES = {
    "avx512_vnni_mk": ("uint8", "int8", "int32", 4, "llvm.x86.avx512.vpdpbusd.512"),
    "avx512_bf16_mk": ("bfloat16", "bfloat16", "float32", 2,
                       "llvm.x86.avx512bf16.dpbf16ps.512"),
}
_PATTERN = r"(?P<family>avx512_vnni_mk|avx512_bf16_mk)_(?P<mr>\d+)x(?P<nr>\d+)x(?P<kc>\d+)"


def vnni_microkernel_name(mr: int, nr: int, kc: int) -> str:
    """The name of the int8 VNNI micro-kernel intrinsic of that shape."""
    return f"avx512_vnni_mk_{mr}x{nr}x{kc}"


def bf16_microkernel_name(mr: int, nr: int, kc: int) -> str:
    """The name of the bf16 AVX-512 micro-kernel intrinsic of that shape."""
    return f"avx512_bf16_mk_{mr}x{nr}x{kc}"


def _packed_microkernel(family: str, mr: str, nr: str, kc: str) -> tuple[PrimFunc, PrimFunc]:
    a_t, b_t, acc_t, p, intrin = PACKED_FAMILIES[family]
    m, n, k = int(mr), int(nr), int(kc)
    if m < 1 or n < 16 or n % 16 or k < p or k % p:
        raise ValueError(f"MR must be >= 1, NR a multiple of 16 and KC a multiple of {p}")
    nv = n // 16
    if m * nv > MAX_ACC["avx512"]:
        raise ValueError(f"{m} x {nv} accumulators exceed the {MAX_ACC['avx512']} vector "
                         "registers the micro-kernel may use")
    desc = packed_matmul_desc(m, n, k, a_t, b_t, acc_t, p)
    A = strided("A", (m, k), a_t)
    C = strided("C", (m, n), acc_t)
    B = strided("B", (nv, k // p, 16, p), b_t, inner=(p,))
    acc = decl_buffer((m, n), acc_t, "acc", scope="local")
    vec = f"{acc_t}x16"
    tiles = [(i, v) for i in range(m) for v in range(nv)]
    load = [BufferStore(acc, BufferLoad(C, (i32(i), ramp(v * 16, 16)), vec),
                        (i32(i), ramp(v * 16, 16))) for i, v in tiles]

    def step(kp: PrimExpr) -> SeqStmt:
        cols = [op.reinterpret("int32x16", BufferLoad(B, (i32(v), kp, i32(0), ramp(0, 16 * p)),
                                                      f"{b_t}x{16 * p}"))
                for v in range(nv)]
        update = []
        for i in range(m):
            a = Broadcast(op.reinterpret("int32", BufferLoad(
                A, (i32(i), ramp(op.mul(kp, p), p)), f"{a_t}x{p}")), 16, "int32x16")
            for v in range(nv):
                idx = (i32(i), ramp(v * 16, 16))
                update.append(BufferStore(acc, op.call_llvm_pure_intrin(
                    vec, intrin, BufferLoad(acc, idx, vec), a, cols[v]), idx))
        return SeqStmt(tuple(update))
    loop = k_loop("kp", k // p, step)
    store = [BufferStore(C, BufferLoad(acc, (i32(i), ramp(v * 16, 16)), vec),
                         (i32(i), ramp(v * 16, 16))) for i, v in tiles]
    body = SeqStmt(tuple(load) + (loop,) + tuple(store))
    impl = impl_func([A, B, C], C, Allocate(acc.data, acc_t, (i32(m), i32(n)), op.const(True),
                                            DeclBuffer(acc, body)))
    return desc, impl


register_intrin_factory(_PATTERN, _packed_microkernel)
