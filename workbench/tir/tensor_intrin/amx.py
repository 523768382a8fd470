"""AMX tile micro-kernels (Intel Advanced Matrix Extensions; built on first use by name).

``amx_bf16_mk_<MR>x<NR>x<KC>`` (bfloat16 x bfloat16 -> float32, ``tdpbf16ps``) and
``amx_int8_mk_<MR>x<NR>x<KC>`` (uint8 x int8 -> int32, ``tdpbusd``; exact) compute
``C[MR, NR] += A[MR, KC] . B[NR, KC]`` with the weight packed ``[NR/16, KC/P, 16, P]`` (P = 2
for bf16, 4 for int8): the same description and weight layout as the AVX-512 kernels of
:mod:`workbench.tir.tensor_intrin.x86_packed`, because 16 rows of that layout are exactly an AMX
``B`` tile (16 rows of 16 columns x P values, 64 bytes per row).

The C block is ``ceil(MR/16) x NR/16`` tiles of up to 16 x 16 accumulators held in tile
registers across the KC loop (a last row group of ``MR % 16`` rows uses shorter tiles, so MR
need not be a multiple of 16); per step of 32 (bf16) or 64 (int8) k the kernel loads one A
tile per row group (up to 16 rows x 64 bytes of A, any row stride) and one B tile per 16
columns, and issues one tile dot product per C tile. Eight tile registers hold C tiles + A
tiles + B tiles, so ``TM * TN + TM + TN <= 8`` with ``TM = ceil(MR/16)``, ``TN = NR/16``
(32 x 32 is the largest square block).

Each call makes sure the tiles are configured as it needs (palette 1, every tile 64 bytes
wide, 16 rows or its row group's): it reads the thread's current configuration (``sttilecfg``, a few cycles) and loads its
own (``ldtilecfg``, ~500 cycles) only when they differ, then loads the C tiles, runs the k loop
and stores C. It leaves the tiles configured for the next call: the x86-64 ABI makes the tile
configuration and data call-clobbered, so other AMX code configures its own (LLVM re-issues
``ldtilecfg`` after calls), and a call never depends on what an earlier one left in the tiles.
``tdpbf16ps`` rounds like ``vdpbf16ps`` (pairs summed before accumulating, denormals flushed).
The compiled module records ``"cpu_state": ["amx"]`` and the runtime asks Linux for AMX
permission before loading it (:mod:`workbench.runtime.cpu_state`).
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.buffer import Buffer, decl_buffer
from workbench.tir.expr import BufferLoad, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.stmt import Allocate, BufferStore, DeclBuffer, Evaluate, For, ForKind, \
    IfThenElse, SeqStmt, Stmt
from workbench.tir.tensor_intrin import register_intrin_factory
from workbench.tir.tensor_intrin._build import i32, impl_func, packed_matmul_desc, strided

__all__ = ["amx_microkernel_name", "AMX_FAMILIES", "AMX_TILES"]

# family: (A dtype, weight dtype, accumulator dtype, P, k per tile step, dot-product intrinsic)
AMX_FAMILIES = {
    "amx_bf16_mk": ("bfloat16", "bfloat16", "float32", 2, 32, "llvm.x86.tdpbf16ps"),
    "amx_int8_mk": ("uint8", "int8", "int32", 4, 64, "llvm.x86.tdpbusd"),
}
AMX_TILES = 8
_PATTERN = r"(?P<family>amx_bf16_mk|amx_int8_mk)_(?P<mr>\d+)x(?P<nr>\d+)x(?P<kc>\d+)"
_ELEM_BYTES = {"bfloat16": 2, "uint8": 1, "int8": 1, "float32": 4, "int32": 4}


def amx_microkernel_name(dtype: str, mr: int, nr: int, kc: int) -> str:
    """The name of the AMX micro-kernel for ``dtype`` "bf16" or "int8" of that shape."""
    return f"amx_{dtype}_mk_{mr}x{nr}x{kc}"


def _call(name: str, *args) -> Stmt:
    return Evaluate(op.call_llvm_intrin("void", name, *args))


def _tile(t: int) -> PrimExpr:
    return op.const(t, "int8")


def _row_bytes(buf: Buffer, dim: int) -> PrimExpr:
    """The byte stride of dimension ``dim`` of a strided buffer, as int64."""
    return op.cast("int64", op.mul(buf.strides[dim], _ELEM_BYTES[buf.dtype]))


def config_words(rows: list[int]) -> tuple[int, ...]:
    """The 64-byte palette-1 configuration as eight int64 words: every tile 64 bytes wide
    (bytes 16..31: colsb as uint16), tile ``t`` ``rows[t]`` rows high (bytes 48..55, uint8;
    16 for tiles past the list); the rest zero."""
    colsb = sum(64 << (16 * t) for t in range(4))     # four uint16 per int64 word
    heights = list(rows) + [16] * (AMX_TILES - len(rows))
    return (1, 0, colsb, colsb, 0, 0, sum(h << (8 * t) for t, h in enumerate(heights)), 0)


def _configure(cfg: Buffer, words: tuple[int, ...]) -> list[Stmt]:
    """Store the thread's tile configuration in ``cfg`` and load ours when it differs."""
    addr = op.address_of(BufferLoad(cfg, (i32(0),), "int64"))
    differs = op.any(*(op.ne(BufferLoad(cfg, (i32(k),), "int64"), op.const(w, "int64"))
                       for k, w in enumerate(words)))
    ours = [BufferStore(cfg, op.const(w, "int64"), (i32(k),)) for k, w in enumerate(words)]
    return [_call("llvm.x86.sttilecfg", addr),
            IfThenElse(differs, SeqStmt(tuple(ours) + (_call("llvm.x86.ldtilecfg", addr),)))]


def _amx_microkernel(family: str, mr: str, nr: str, kc: str) -> tuple[PrimFunc, PrimFunc]:
    a_t, b_t, acc_t, p, kstep, dot = AMX_FAMILIES[family]
    m, n, k = int(mr), int(nr), int(kc)
    if m < 1 or n < 16 or n % 16 or k < kstep or k % kstep:
        raise ValueError(f"MR must be >= 1, NR a multiple of 16 and KC a multiple of {kstep}")
    # Row groups of up to 16 rows: one A tile and a row of C tiles each (the last may be
    # shorter: MR = 28 is 16 + 12 rows, for a 56-wide image).
    rows = [16] * (m // 16) + ([m % 16] if m % 16 else [])
    tm, tn = len(rows), n // 16
    if tm * tn + tm + tn > AMX_TILES:
        raise ValueError(f"{tm} x {tn} C tiles + {tm} A tiles + {tn} B tiles exceed the "
                         f"{AMX_TILES} AMX tile registers")
    desc = packed_matmul_desc(m, n, k, a_t, b_t, acc_t, p)
    A = strided("A", (m, k), a_t)
    C = strided("C", (m, n), acc_t)
    B = strided("B", (tn, k // p, 16, p), b_t, inner=(p,))
    c_tile = {(ti, tj): ti * tn + tj for ti in range(tm) for tj in range(tn)}
    a_tile = {ti: tm * tn + ti for ti in range(tm)}
    b_tile = {tj: tm * tn + tm + tj for tj in range(tn)}
    cfg = decl_buffer((8,), "int64", "amx_cfg", scope="local")

    def c_at(ti: int, tj: int) -> PrimExpr:
        return op.address_of(BufferLoad(C, (i32(16 * ti), i32(16 * tj)), acc_t))

    ks = Var("ks", "int32")
    step = [_call("llvm.x86.tileloadd64", _tile(a_tile[ti]), op.address_of(BufferLoad(
                A, (i32(16 * ti), op.mul(ks, kstep)), a_t)), _row_bytes(A, 0))
            for ti in range(tm)]
    step += [_call("llvm.x86.tileloadd64", _tile(b_tile[tj]), op.address_of(BufferLoad(
                 B, (i32(tj), op.mul(ks, 16), i32(0), i32(0)), b_t)), _row_bytes(B, 1))
             for tj in range(tn)]
    step += [_call(dot, _tile(c_tile[t]), _tile(a_tile[t[0]]), _tile(b_tile[t[1]]))
             for t in c_tile]
    heights = [0] * AMX_TILES
    for (ti, _), t in c_tile.items():
        heights[t] = rows[ti]
    for ti, t in a_tile.items():
        heights[t] = rows[ti]
    for t in b_tile.values():
        heights[t] = 16
    body: list[Stmt] = _configure(cfg, config_words(heights[:tm * tn + tm + tn]))
    body += [_call("llvm.x86.tileloadd64", _tile(c_tile[t]), c_at(*t), _row_bytes(C, 0))
             for t in c_tile]
    body.append(For(ks, i32(0), i32(k // kstep), ForKind.SERIAL, SeqStmt(tuple(step))))
    body += [_call("llvm.x86.tilestored64", _tile(c_tile[t]), c_at(*t), _row_bytes(C, 0))
             for t in c_tile]
    impl = impl_func([A, B, C], C, Allocate(cfg.data, "int64", (i32(8),), op.const(True),
                                            DeclBuffer(cfg, SeqStmt(tuple(body)))))
    return desc, impl


register_intrin_factory(_PATTERN, _amx_microkernel)
