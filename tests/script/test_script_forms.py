"""Every TIR statement form the printer writes, read back: attr, let, assert, while, if/else,
vector slices, Let expressions, allocate + decl_buffer, annotated and thread-bound loops, block
match_buffer / block_attr, buffers with strides and offsets; and Relax's call_packed."""
from __future__ import annotations

from workbench import relax, tir
from workbench.ir.structural import first_mismatch
from workbench.script import from_source

TIR_FORMS = '''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((4, 4), "float32", strides=(8, 1), elem_offset=2, scope="global", offset_factor=2), n: T.int32):
    T.func_attr({"tir.noalias": True})
    with T.attr(n, "pragma_x", 1):
        k: T.int32 = n * 2
        assert k >= 0, "k must be non-negative"
        i = T.int32()
        while n > 0:
            A[0] = T.float32(1)
        if n > 3:
            A[0:4] = A[4:8] + T.Broadcast(T.float32(1), 4)
        else:
            A[1] = T.Let(T.float32(2) * x, where={x: T.float32(3)})
        buf = T.allocate([8], "float32", scope="global")
        C = T.decl_buffer((8,), "float32", data=buf)
        for j in T.serial(8, annotations={"pragma_unroll": 1}):
            C[j] = T.Cast("float32", j)
        for t in T.thread_binding(4, thread="blockIdx.x"):
            A[t] = A[T.Ramp(0, 1, 4)[0]] if False else A[t]
        for p in range(4):
            with T.block("sub"):
                vp = T.axis.spatial(4, p)
                T.reads(A[vp * 4:vp * 4 + 4])
                T.writes(B[vp, 0:4])
                T.block_attr({"k": 1})
                Asub = T.match_buffer(A[vp * 4:vp * 4 + 4], (4,), "float32", offset_factor=1)
                for q in range(4):
                    B[vp, q] = Asub[q]
'''


def _round_trip(x):
    back = from_source(x.script())
    bad = first_mismatch(x, back)
    assert bad is None, f"{bad.path}: {bad.reason}"


def test_tir_statement_forms_read_back():
    f = from_source(TIR_FORMS)
    _round_trip(f)
    attr = f.body.block.body
    assert isinstance(attr, tir.AttrStmt) and attr.attr_key == "pragma_x"
    let = attr.body
    assert isinstance(let, tir.LetStmt) and isinstance(let.body, tir.AssertStmt)
    b = f.buffer_map[f.params[1]]
    assert b.elem_offset.value == 2 and b.offset_factor == 2 and len(b.strides) == 2
    kinds = {type(s).__name__ for s in let.body.body.seq}
    assert {"While", "IfThenElse", "Allocate"} <= kinds


def test_relax_call_packed_reads_back():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y: R.Tensor((4,), "float32") = R.call_packed("my.func", x, sinfo_args=(R.Tensor((4,), "float32"),))
        return y
''')
    call = mod["main"].body.blocks[0].bindings[0].value
    assert isinstance(call.op, relax.ExternFunc) and call.op.global_symbol == "my.func"
    assert mod["main"].is_pure is False
    _round_trip(mod)
