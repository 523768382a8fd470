"""Buffer allocation planning and compaction: a cache_write tile becomes a small local buffer."""
import numpy as np

import workbench as wb
from workbench import te
from workbench.tir.schedule import Schedule


def _tiled_matmul(M=64, N=64, K=32):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = Schedule(te.create_prim_func([A, B, C]))
    b = sch.get_block("C")
    i, j, kk = sch.get_loops(b)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, kk, i1, j1)
    cw = sch.cache_write(b, 0, "local")
    sch.reverse_compute_at(cw, j0)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j1)
    sch.decompose_reduction(b, kk)
    return sch.mod


def test_cache_write_tile_is_allocated_per_tile_and_compacted():
    mod = _tiled_matmul()
    text = wb.lower(mod)["main"].script()
    # 4 x 16 tile allocated inside the parallel loop instead of a 64 x 64 buffer at the root
    assert 'T.allocate([64], "float32")' in text
    assert text.index("T.parallel") < text.index("T.allocate")
    a = np.random.rand(64, 32).astype("float32")
    b = np.random.rand(32, 64).astype("float32")
    c = wb.nd.empty((64, 64), "float32")
    wb.build(mod)["main"](wb.nd.array(a), wb.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_root_intermediate_used_by_two_stages_keeps_its_size():
    A = te.placeholder((32,), name="A")
    B = te.compute((32,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((32,), lambda i: B[31 - i] + 1.0, name="C")
    mod = te.create_prim_func([A, C])
    text = wb.lower(mod)["main"].script()
    assert 'T.allocate([32], "float32")' in text
    a = np.random.rand(32).astype("float32")
    c = wb.nd.empty((32,), "float32")
    wb.build(mod)["main"](wb.nd.array(a), c)
    np.testing.assert_allclose(c.numpy(), a[::-1] * 2 + 1, rtol=1e-6)


def _partly_used_buffer(take_address: bool):
    """A 64-element scratch buffer of which a loop writes the first 8, then (optionally) its
    address goes to a call: code with a pointer may reach any of it."""
    from workbench.tir import op
    from workbench.tir.buffer import decl_buffer
    from workbench.tir.expr import BufferLoad, Var
    from workbench.tir.function import prim_func
    from workbench.tir.stmt import Allocate, BufferStore, DeclBuffer, Evaluate, For, ForKind, \
        SeqStmt
    out = decl_buffer((8,), "float32", "out")
    tmp = decl_buffer((64,), "float32", "tmp")
    i = Var("i", "int32")
    zero = op.const(0, "int32")
    stmts = [For(i, zero, op.const(8, "int32"), ForKind.SERIAL,
                 BufferStore(tmp, op.const(1.0, "float32"), (i,)))]
    if take_address:
        stmts.append(Evaluate(op.call_llvm_intrin(
            "void", "llvm.x86.sttilecfg", op.address_of(BufferLoad(tmp, (zero,), "float32")))))
    stmts.append(BufferStore(out, BufferLoad(tmp, (zero,), "float32"), (zero,)))
    body = Allocate(tmp.data, "float32", tmp.shape, op.const(True),
                    DeclBuffer(tmp, SeqStmt(tuple(stmts))))
    return prim_func([out], body)


def test_a_buffer_whose_address_escapes_keeps_its_size():
    from workbench.tir.transform.plan_buffers import compact_buffer_allocation
    shrunk = compact_buffer_allocation(_partly_used_buffer(take_address=False))
    assert 'T.allocate([8], "float32")' in shrunk.script()
    kept = compact_buffer_allocation(_partly_used_buffer(take_address=True))
    assert 'T.allocate([64], "float32")' in kept.script()
