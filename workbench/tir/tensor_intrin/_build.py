"""Building blocks for tensor intrinsics written in TIR: constants, ramps, strided buffers,
root blocks, and the reduction descriptions every dot-product / matmul intrinsic uses."""
from __future__ import annotations

from typing import Callable

from workbench.tir import op
from workbench.tir.buffer import Buffer, BufferRegion, Range, decl_buffer
from workbench.tir.expr import BufferLoad, PrimExpr, Ramp, Var
from workbench.tir.function import PrimFunc, prim_func
from workbench.tir.functor import post_order_visit
from workbench.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterType, \
    IterVar, Stmt

__all__ = ["i32", "ramp", "strided", "root_block", "reduction_desc", "impl_func",
           "packed_matmul_desc", "k_loop", "MAX_ACC"]

# At most this many accumulator registers (of 32 zmm / 16 ymm), leaving room for the weight's
# vectors and A's broadcast.
MAX_ACC = {"avx512": 28, "avx2": 12}


def i32(v: int) -> PrimExpr:
    return op.const(v, "int32")


def ramp(base: int | PrimExpr, lanes: int, stride: int = 1) -> Ramp:
    base = i32(base) if isinstance(base, int) else base
    return Ramp(base, i32(stride), lanes, f"int32x{lanes}")


def strided(name: str, shape: tuple[int, ...], dtype: str,
            inner: tuple[int, ...] = ()) -> Buffer:
    """A buffer viewing any row-major sub-block: a stride Var per dimension except the last
    ``len(inner) + 1`` ones, whose strides are ``inner`` and 1 (dimensions known to be whole)."""
    free = len(shape) - 1 - len(inner)
    strides = [Var(f"{name}_s{k}", "int32") for k in range(free)] + list(inner) + [1]
    return decl_buffer(shape, dtype, name, strides=strides)


def root_block(body: Stmt, reads: list[Buffer], writes: list[Buffer]) -> BlockRealize:
    block = Block((), tuple(BufferRegion.full(b) for b in reads),
                  tuple(BufferRegion.full(b) for b in writes), "root", body)
    return BlockRealize((), op.const(True), block)


def reduction_desc(params: list[Buffer], out: Buffer, loops: list[tuple[str, int, int]],
                   store_index: Callable, addend: Callable,
                   nest: tuple[int, ...] | None = None) -> PrimFunc:
    """``for <loops>: out[store_index(v)] = out[...] + addend(v)`` in one block "update"
    (no init), under a root block reading every buffer (output first) and writing ``out``.
    The block's iter vars follow ``loops``; the loops nest in the order ``nest`` (indices into
    ``loops``, outermost first; default: as listed)."""
    loop_vars = [Var(name, "int32") for name, _, _ in loops]
    ivs = [IterVar(Range(i32(0), i32(ext)), Var(f"v{name}", "int32"), kind)
           for name, ext, kind in loops]
    bvars = [iv.var for iv in ivs]
    idx = tuple(store_index(*bvars))
    value = addend(*bvars)
    loads: list[BufferLoad] = []
    post_order_visit(value, lambda n: loads.append(n) if isinstance(n, BufferLoad) else None)
    point = lambda ld: BufferRegion(ld.buffer, tuple(Range(i, i32(1)) for i in ld.indices))  # noqa: E731
    out_load = BufferLoad(out, idx, out.dtype)
    block = Block(tuple(ivs), tuple(point(ld) for ld in [out_load] + loads),
                  (point(out_load),), "update",
                  BufferStore(out, op.add(out_load, value), idx))
    body: Stmt = BlockRealize(tuple(loop_vars), op.const(True), block)
    for k in reversed(nest if nest is not None else range(len(loops))):
        body = For(loop_vars[k], i32(0), i32(loops[k][1]), ForKind.SERIAL, body)
    inputs = [b for b in params if b is not out]
    return prim_func(params, root_block(body, [out] + inputs, [out]))


def impl_func(params: list[Buffer], out: Buffer, body: Stmt) -> PrimFunc:
    inputs = [b for b in params if b is not out]
    return prim_func(params, root_block(body, [out] + inputs, [out]))


def packed_matmul_desc(m: int, n: int, k: int, a_dtype: str, b_dtype: str, acc_dtype: str,
                       pack_k: int) -> PrimFunc:
    """``C[MR, NR] += A[MR, KC] . B[NR, KC]`` (operands cast to ``acc_dtype``) with the weight
    packed ``[NR/16, KC/pack_k, 16, pack_k]`` -- TVM's VNNI layout for ``pack_k`` = 4, the
    bf16 pair layout for 2, and the layout AMX tiles load -- indexed
    ``B[j // 16, k // pack_k, j % 16, k % pack_k]``."""
    A = decl_buffer((m, k), a_dtype, "A")
    B = decl_buffer((n // 16, k // pack_k, 16, pack_k), b_dtype, "B")
    C = decl_buffer((m, n), acc_dtype, "C")
    c16, cp = i32(16), i32(pack_k)
    return reduction_desc(
        [A, B, C], C, [("i", m, IterType.DATA_PAR), ("j", n, IterType.DATA_PAR),
                       ("k", k, IterType.COMM_REDUCE)],
        lambda i, j, kk: (i, j),
        lambda i, j, kk: op.mul(op.cast(acc_dtype, A[i, kk]), op.cast(acc_dtype, B[
            op.floordiv(j, c16), op.floordiv(kk, cp), op.floormod(j, c16), op.floormod(kk, cp)])))


def k_loop(name: str, extent: int, body: Callable[[PrimExpr], Stmt], unroll: int = 4) -> Stmt:
    """``for k in range(extent): body(k)`` with ``body`` repeated ``u`` times per iteration
    (an unrolled inner loop; ``u`` the largest of ``unroll``, 2, 1 dividing ``extent``): in a
    micro-kernel the loop counter's uops otherwise compete with the vector ops for issue
    ports (unrolling by 4 gave the fp32 4x64 kernel ~10%)."""
    u = next(d for d in (unroll, 2, 1) if d >= 1 and extent % d == 0)
    if u == 1:
        k = Var(name, "int32")
        return For(k, i32(0), i32(extent), ForKind.SERIAL, body(k))
    ko, ku = Var(f"{name}_o", "int32"), Var(f"{name}_u", "int32")
    return For(ko, i32(0), i32(extent // u), ForKind.SERIAL,
               For(ku, i32(0), i32(u), ForKind.UNROLLED, body(op.add(op.mul(ko, u), ku))))
