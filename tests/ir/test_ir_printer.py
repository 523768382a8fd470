"""Printed TIR against expected text written out here (goldens), and the printer registry."""
from __future__ import annotations

import textwrap

import pytest

from ir_builders import elementwise, matmul, matmul_bias_relu, misc, point, rng
from workbench import tir
from workbench.ir import IRModule
from workbench.ir.node import FrozenDict
from workbench.ir.printer import html_highlight, register_short_repr, script, short_repr
from workbench.tir import (
    Block, BlockRealize, BufferStore, Evaluate, For, IterType, IterVar, SizeVar, Var, const,
    decl_buffer,
)


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


MATMUL = golden('''
    @T.prim_func
    def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
''')


def test_matmul_block_form():
    assert matmul().script() == MATMUL


def test_three_stages_dedupe_names_in_definition_order():
    assert matmul_bias_relu().script() == golden('''
        @T.prim_func
        def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), bias: T.Buffer((128,), "float32"), E: T.Buffer((128, 128), "float32")):
            T.func_attr({"tir.noalias": True})
            # with T.block("root"):
            C = T.alloc_buffer((128, 128))
            D = T.alloc_buffer((128, 128))
            for i, j, k in T.grid(128, 128, 128):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
            for i_1, j_1 in T.grid(128, 128):
                with T.block("D"):
                    vi_1, vj_1 = T.axis.remap("SS", [i_1, j_1])
                    T.reads(C[vi_1, vj_1], bias[vj_1])
                    T.writes(D[vi_1, vj_1])
                    D[vi_1, vj_1] = C[vi_1, vj_1] + bias[vj_1]
            for i_2, j_2 in T.grid(128, 128):
                with T.block("E"):
                    vi_2, vj_2 = T.axis.remap("SS", [i_2, j_2])
                    T.reads(D[vi_2, vj_2])
                    T.writes(E[vi_2, vj_2])
                    E[vi_2, vj_2] = T.max(D[vi_2, vj_2], T.float32(0))
    ''')


def test_elementwise_loop_kinds_and_annotations():
    assert elementwise().script() == golden('''
        @T.prim_func
        def main(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32")):
            T.func_attr({"tir.noalias": True})
            for i_outer in T.parallel(128):
                for i_inner in T.vectorized(8):
                    B[i_outer * 8 + i_inner] = T.exp(A[i_outer * 8 + i_inner]) * T.float32(2)
            for u in T.unroll(0, 4, annotations={"pragma_unroll_explicit": 1}):
                T.evaluate(0)
    ''')


def test_misc_statements_and_expressions():
    assert misc().script() == golden('''
        @T.prim_func
        def main(X: T.Buffer((n,), "float32"), n: T.int32):
            T.func_attr({"tir.noalias": True})
            assert n > 0, "n must be positive"
            x: T.int32 = n // 2 - 1
            tmp = T.allocate([8], "float32")
            tmp_buf = T.decl_buffer((8,), "float32", data=tmp)
            tmp_buf[0:8] = X[x * 8:x * 8 + 8] + T.Broadcast(T.float32(1), 8)
            if x > 2:
                X[x] = T.Select(x < n, T.Cast("float32", x), T.float32(-1.5))
            else:
                X[x] = T.if_then_else(x == 0, T.sqrt(X[x]), T.float32(0))
            while x < 4:
                T.evaluate(T.exp(T.float32(1)))
    ''')


def test_module_script_and_repr():
    mod = IRModule({"main": matmul(), "ew": elementwise()}).with_attr("target", "llvm")
    text = golden('''
        @I.ir_module
        class Module:
            I.module_attrs({"target": "llvm"})

            @T.prim_func
            def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
                T.func_attr({"tir.noalias": True})
                # with T.block("root"):
                for i, j, k in T.grid(128, 128, 128):
                    with T.block("C"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                        T.writes(C[vi, vj])
                        with T.init():
                            C[vi, vj] = T.float32(0)
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

            @T.prim_func
            def ew(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32")):
                T.func_attr({"global_symbol": "main", "tir.noalias": True})
                for i_outer in T.parallel(128):
                    for i_inner in T.vectorized(8):
                        B[i_outer * 8 + i_inner] = T.exp(A[i_outer * 8 + i_inner]) * T.float32(2)
                for u in T.unroll(0, 4, annotations={"pragma_unroll_explicit": 1}):
                    T.evaluate(0)
    ''')
    assert mod.script() == text
    assert repr(mod) == text and str(mod) == text
    assert mod._repr_html_().startswith("<pre")
    assert matmul()._repr_html_().startswith("<pre")


def test_printing_is_deterministic_across_fresh_copies():
    assert matmul_bias_relu().script() == matmul_bias_relu().script()
    assert misc(suffix="").script() == misc().script()


def test_split_loop_block_with_predicate_and_annotations():
    A, B = decl_buffer((100,), "float32", "A"), decl_buffer((100,), "float32", "B")
    io, ii, vi = Var("i"), Var("i"), Var("vi")
    blk = Block((IterVar(rng(0, 100), vi, IterType.DATA_PAR),), (point(A, vi),),
                (point(B, vi),), "B", BufferStore(B, A[vi] + 1.0, (vi,)),
                annotations=FrozenDict({"meta_schedule.tiling_structure": "SSRSRS"}))
    realize = BlockRealize((io * 32 + ii,), io * 32 + ii < 100, blk)
    nest = For(io, const(0), const(4), "serial",
               For(ii, const(0), const(32), "serial", realize,
                   annotations=FrozenDict({"pragma": "x"})))
    assert script(nest) == golden('''
        A = T.Buffer((100,), "float32")
        B = T.Buffer((100,), "float32")
        for i in range(4):
            for i_1 in T.serial(0, 32, annotations={"pragma": "x"}):
                with T.block("B"):
                    vi = T.axis.spatial(100, i * 32 + i_1)
                    T.where(i * 32 + i_1 < 100)
                    T.reads(A[vi])
                    T.writes(B[vi])
                    T.block_attr({"meta_schedule.tiling_structure": "SSRSRS"})
                    B[vi] = A[vi] + T.float32(1)
    ''')


def test_loop_forms():
    n = SizeVar("n")
    body = Evaluate(const(0))
    tx = IterVar(rng(0, n), Var("tx"), 1, "threadIdx.x")
    assert script(For(Var("t"), const(2), n, "serial", body)) == golden('''
        n = T.int32(is_size_var=True)
        for t in range(2, 2 + n):
            T.evaluate(0)
    ''')
    assert script(For(Var("t"), const(0), n, "thread_binding", body, thread_binding=tx)) == \
        golden('''
        n = T.int32(is_size_var=True)
        for t in T.thread_binding(0, n, thread="threadIdx.x"):
            T.evaluate(0)
    ''')
    assert script(For(Var("t", "int64"), const(0, "int64"), const(16, "int64"), "serial",
                      body)) == "for t in range(T.int64(16)):\n    T.evaluate(0)"
    # An inner extent that depends on the outer var cannot join a T.grid.
    i, j = Var("i"), Var("j")
    tri = For(i, const(0), const(4), "serial", For(j, const(0), i + 1, "serial", body))
    assert script(tri) == golden('''
        for i in range(4):
            for j in range(i + 1):
                T.evaluate(0)
    ''')


@pytest.mark.parametrize("build, text", [
    (lambda a, b, c: (a + b) * c, "(a + b) * c"),
    (lambda a, b, c: a + b * c, "a + b * c"),
    (lambda a, b, c: a - (b - c), "a - (b - c)"),
    (lambda a, b, c: a - b - c, "a - b - c"),
    (lambda a, b, c: a + (b + c), "a + (b + c)"),
    (lambda a, b, c: (a * b) // c, "a * b // c"),
    (lambda a, b, c: a // (b * c), "a // (b * c)"),
    (lambda a, b, c: a % 4 + 1, "a % 4 + 1"),
    (lambda a, b, c: tir.Div(a, b, "int32"), "T.Div(a, b)"),
    (lambda a, b, c: tir.truncmod(a, b), "T.truncmod(a, b)"),
    (lambda a, b, c: tir.min(a, b) * 2, "T.min(a, b) * 2"),
    (lambda a, b, c: tir.EQ(a < b, b < c, "bool"), "(a < b) == (b < c)"),
    (lambda a, b, c: tir.logical_and(a < b, tir.logical_or(b < c, a == c)),
     "a < b and (b < c or a == c)"),
    (lambda a, b, c: tir.logical_or(tir.logical_and(a < b, b < c), a == c),
     "a < b and b < c or a == c"),
    (lambda a, b, c: tir.logical_not(tir.logical_and(a < b, b < c)), "not (a < b and b < c)"),
    (lambda a, b, c: a * -3, "a * -3"),
    (lambda a, b, c: tir.Mul(tir.IntImm("int32", -3), a, "int32"), "-3 * a"),
    (lambda a, b, c: tir.cast("int64", a) + tir.IntImm("int64", 3), 'T.Cast("int64", a) + T.int64(3)'),
    (lambda a, b, c: tir.cast("float32", a) / 2.0, 'T.Cast("float32", a) / T.float32(2)'),
])
def test_expression_precedence(build, text):
    a, b, c = Var("a"), Var("b"), Var("c")
    e = build(a, b, c)
    assert repr(e) == text
    assert script(e) == text


@pytest.mark.parametrize("value, dtype, text", [
    (3, "int32", "3"), (-3, "int32", "-3"), (3, "int64", "T.int64(3)"),
    (255, "uint8", "T.uint8(255)"), (1, "bool", "True"), (0, "bool", "False"),
    (0.5, "float32", "T.float32(0.5)"), (0.0, "float32", "T.float32(0)"),
    (-0.0, "float32", "T.float32(-0.0)"), (2.0, "float64", "T.float64(2)"),
    (float("inf"), "float32", 'T.float32("inf")'), (float("nan"), "float16", 'T.float16("nan")'),
    (1e-7, "float32", "T.float32(1e-07)"),
])
def test_constants(value, dtype, text):
    node = tir.FloatImm(dtype, value) if "float" in dtype else tir.IntImm(dtype, value)
    assert repr(node) == text


def test_short_repr_of_statements_and_other_nodes():
    f = matmul()
    root = f.body
    loop = root.block.body
    realize = loop.body.body.body
    assert repr(loop) == "<For i in 0..128>"
    assert repr(For(Var("x"), const(0), const(8), "vectorized", Evaluate(const(0)))) == \
        "<For x in 0..8 vectorized>"
    assert repr(realize) == "<BlockRealize C>"
    assert repr(realize.block) == "<Block C>"
    assert repr(realize.block.body) == "<BufferStore C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]>"
    assert repr(realize.block.iter_vars[2]) == "<IterVar vk: reduce 0..128>"
    assert repr(realize.block.reads[1]) == "A[vi, vk]"
    assert repr(f.buffer_map[f.params[0]]) == "<Buffer A: (128, 128) float32>"
    assert repr(f) == "<PrimFunc main(A, B, C)>"
    assert repr(tir.Range(const(0), const(4))) == "Range(0, 4)"
    assert repr(tir.SeqStmt((Evaluate(const(0)), Evaluate(const(1))))) == "<SeqStmt of 2>"
    # Distinct vars that share a name stay distinguishable.
    assert repr(Var("i") + Var("i")) == "i + i_1"


def test_print_fun_uses_script():
    assert str(matmul()) == MATMUL


def test_registry_dispatch_for_other_layers():
    from workbench.ir.node import Node, node

    @node
    class _Toy(Node):
        x: int

    assert short_repr(_Toy(3)) == "_Toy(x=3)"
    register_short_repr(_Toy, lambda t: f"<toy {t.x}>")
    assert repr(_Toy(3)) == "<toy 3>"
    assert script(_Toy(4)) == "<toy 4>"


def test_short_repr_never_raises():
    broken = tir.Add(Var("a"), None, "int32")  # not valid IR; repr must still work
    assert "a" in repr(broken)


def test_html_highlight_escapes_and_colours():
    out = html_highlight('for i in range(4):\n    A[i] = T.float32(0)  # <x> & "y"')
    assert out.startswith("<pre") and out.endswith("</pre>")
    assert "&lt;x&gt; &amp; &quot;y&quot;" in out
    assert ">for</span>" in out and ">T.float32</span>" in out
    assert "<x>" not in out


def test_deep_expression_prints():
    x = Var("x")
    e = x
    for _ in range(3000):
        e = tir.Add(e, tir.IntImm("int32", 1), "int32")
    text = repr(e)
    assert text.startswith("x + 1 + 1") and text.count("+") == 3000
    assert script(tir.Evaluate(e)).endswith("+ 1)")
