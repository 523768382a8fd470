"""A 3-level tiled matmul loop nest written the way split and fuse leave it (test helper).

Loops: ``f0 = fuse(i0, j0)``, then ``fuse(i1, j1)`` split again into ``(g, g2)`` with
``g2`` of extent 4, then ``k0, i2, k1, j2``. The indices are the raw substituted forms
(``i = (i0 * I1 + i1) * I2 + i2`` with ``i0 = f0 // J0`` ...), which Simplify must clean up.

Run as a script to time ``simplify_stmt`` on the 512^3 nest.
"""
from __future__ import annotations

from workbench import tir
from workbench.tir import stmt as S
from workbench.tir.buffer import BufferRegion, Range


def build(m: int = 512, n: int = 512, k: int = 512, ti=(8, 8, 8), tj=(8, 8, 8),
          tk=(64, 8), flat: bool = False) -> tir.PrimFunc:
    """``C = A @ B`` (float32); ``flat=True`` gives 1-D buffers and no block (lowered form)."""
    (I0, I1, I2), (J0, J1, J2), (K0, K1) = ti, tj, tk
    assert I0 * I1 * I2 == m and J0 * J1 * J2 == n and K0 * K1 == k and (I1 * J1) % 4 == 0
    f0, g, g2 = tir.Var("f0"), tir.Var("g"), tir.Var("g2")
    k0, i2, k1, j2 = tir.Var("k0"), tir.Var("i2"), tir.Var("k1"), tir.Var("j2")
    i0, j0 = f0 // J0, f0 % J0
    f1 = g * 4 + g2
    i1, j1 = f1 // J1, f1 % J1
    vi_e = (i0 * I1 + i1) * I2 + i2
    vj_e = (j0 * J1 + j1) * J2 + j2
    vk_e = k0 * K1 + k1
    if flat:
        A = tir.decl_buffer((m * k,), "float32", "A")
        B = tir.decl_buffer((k * n,), "float32", "B")
        C = tir.decl_buffer((m * n,), "float32", "C")
        body: S.Stmt = S.BufferStore(
            C, C[vi_e * n + vj_e] + A[vi_e * k + vk_e] * B[vk_e * n + vj_e], (vi_e * n + vj_e,))
    else:
        A = tir.decl_buffer((m, k), "float32", "A")
        B = tir.decl_buffer((k, n), "float32", "B")
        C = tir.decl_buffer((m, n), "float32", "C")
        vi, vj, vk = tir.Var("vi"), tir.Var("vj"), tir.Var("vk")
        ivs = (S.IterVar(Range.from_min_extent(0, m), vi, S.IterType.DATA_PAR),
               S.IterVar(Range.from_min_extent(0, n), vj, S.IterType.DATA_PAR),
               S.IterVar(Range.from_min_extent(0, k), vk, S.IterType.COMM_REDUCE))
        one = lambda e: Range.from_min_extent(e, 1)  # noqa: E731
        block = S.Block(
            ivs,
            reads=(BufferRegion(A, (one(vi), one(vk))), BufferRegion(B, (one(vk), one(vj)))),
            writes=(BufferRegion(C, (one(vi), one(vj))),),
            name_hint="C",
            body=S.BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
            init=S.BufferStore(C, tir.const(0.0, "float32"), (vi, vj)))
        body = S.BlockRealize((vi_e, vj_e, vk_e), tir.const(True), block)
    for var, ext in ((j2, J2), (k1, K1), (i2, I2), (k0, K0), (g2, 4), (g, I1 * J1 // 4),
                     (f0, I0 * J0)):
        body = S.For(var, tir.const(0), tir.const(ext), "serial", body)
    return tir.prim_func([A, B, C], body)


def index_exprs(func: tir.PrimFunc) -> list:
    """Every index expression and block binding in ``func`` (for reporting)."""
    from workbench.tir.functor import post_order_visit
    out = []

    def visit(node):
        if isinstance(node, (S.BufferStore, tir.BufferLoad)):
            out.extend(node.indices)
        elif isinstance(node, S.BlockRealize):
            out.extend(node.iter_values)
    post_order_visit(func.body, visit)
    return out


if __name__ == "__main__":  # pragma: no cover - timing script
    import time

    from workbench.tir.transform.simplify import simplify_func
    from workbench.tir.printer import expr_text

    for flat in (False, True):
        f = build(flat=flat)
        t0 = time.perf_counter()
        g_ = simplify_func(f)
        t1 = time.perf_counter()
        for _ in range(20):
            simplify_func(build(flat=flat))
        t2 = time.perf_counter()
        print(f"flat={flat}: first {1e3 * (t1 - t0):.2f} ms, "
              f"mean of 20 (fresh func + analyzer) {1e3 * (t2 - t1) / 20:.2f} ms")
        for e in index_exprs(g_):
            print("   ", expr_text(e))
