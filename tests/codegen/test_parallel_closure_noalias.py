"""Outlined parallel bodies keep ``noalias`` on buffer pointers, so LLVM stays fast.

Regression: a softmax-like loop nest (parallel outer loop; an inner loop that recomputes a
64-term unrolled ``max`` chain of loop-invariant loads and stores to another buffer) hung
the O1-O3 pipeline for minutes. With the buffer pointers loaded from the closure (no
``noalias``), LICM could not hoist the chain out of the inner loop, and LLVM 22's loop
vectorizer (``vputils::isSingleScalar``) walks an in-loop fcmp/select chain in time
exponential in its length. The compile runs in a subprocess with a timeout so a regression
fails instead of hanging the test run.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np

import workbench as wb
from workbench import tir
from workbench.tir import stmt as S

ROWS, N = 4, 64


def _max_chain_nest(chain=64, rows=ROWS, n=N):
    """y[i*n + j] = exp(x[row(i)*n + j] - max(x[row(i)*n : row(i)*n + chain])), max per j."""
    x = tir.decl_buffer((rows * n,), "float32", "x")
    y = tir.decl_buffer((rows * n,), "float32", "y")
    i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")
    mv = tir.Var("maxelem", "handle")
    m = tir.decl_buffer((1,), "float32", "maxelem", data=mv, scope="local")
    base = (i // n) * n
    chain_stmts = [S.BufferStore(m, tir.const(-3.4e38, "float32"), (tir.const(0),))]
    for c in range(chain):
        chain_stmts.append(S.BufferStore(m, tir.max(m[0], x[base + c]), (tir.const(0),)))
    inner = S.For(k, tir.const(0), tir.const(1), "serial", S.SeqStmt(tuple(chain_stmts)))
    store = S.BufferStore(y, tir.exp(x[base + j] - m[0]), (base + j,))
    body_j = S.Allocate(mv, "float32", (tir.const(1),), tir.const(True, "bool"),
                        S.DeclBuffer(m, S.SeqStmt((inner, store))))
    loop = S.For(i, tir.const(0), tir.const(rows), "parallel",
                 S.For(j, tir.const(0), tir.const(n), "serial", body_j))
    return tir.prim_func([x, y], loop)


_CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    import workbench as wb
    from workbench.codegen import LLVMCompiler
    from workbench.codegen.renderer import render
    from workbench.ir.module import IRModule
    from workbench.tir.transform.pipeline import lower
    sys.path.insert(0, {here!r})
    from test_parallel_closure_noalias import _max_chain_nest
    target = wb.Target("llvm -num-cores=2")
    ll, _ = render(lower(IRModule.from_expr(_max_chain_nest())), target)
    body = [l for l in ll.splitlines() if l.startswith("define") and '_par_1_body"' in l]
    assert body and "noalias" in body[0], "outlined body lost noalias"
    t = time.time()
    LLVMCompiler(target, use_cache=False).compile(ll)
    print("compiled in %.2fs" % (time.time() - t))
""")


def test_parallel_max_chain_compiles_quickly():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    code = _CHILD.format(root=root, here=here)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("LLVM optimisation of the parallel max-chain nest took > 60 s") from None
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compiled in" in proc.stdout


def test_parallel_max_chain_result():
    f = _max_chain_nest(chain=8)
    mod = wb.build(f, wb.Target("llvm -num-cores=2"))
    x = np.random.default_rng(0).standard_normal(ROWS * N).astype("float32")
    y = wb.nd.array(np.zeros_like(x))
    mod["main"](wb.nd.array(x), y)
    rows = x.reshape(ROWS, N)
    expected = np.zeros_like(rows)
    expected[0] = np.exp(rows[0] - rows[0, :8].max())  # only row i // N == 0 is written
    got = y.numpy().reshape(ROWS, N)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
