"""Parallel loops: outlined into a closure and run on libgomp's thread pool.

``for i in T.parallel(n): body`` becomes a function ``void f_par_k(i8* closure)`` that unpacks
the values the body uses and passes them to ``f_par_k_body`` (buffer pointers keep the caller's
``noalias``), which takes its static chunk of ``[0, n)`` by thread number and runs the body
serially over it; the caller packs the closure on its stack and calls ``GOMP_parallel``.
No Python and no GIL are involved. A parallel loop nested inside another runs serially.
"""
from __future__ import annotations

import llvmlite.ir as ir

from workbench.codegen.llvm_types import I32, I8P, value_type
from workbench.codegen.renderer import FunctionContext, emit_serial_loop
from workbench.tir import expr as E
from workbench.tir import stmt as S
from workbench.tir.functor import IRVisitor


class _Uses(IRVisitor):
    """Variables a statement reads, including the data pointers of the buffers it touches."""

    def __init__(self) -> None:
        self.used: dict[E.Var, None] = {}

    def visit_Var(self, v: E.Var) -> None:
        self.used[v] = None

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        self.used[e.buffer.data] = None
        self.generic_visit(e)

    def visit_BufferStore(self, s: S.BufferStore) -> None:
        self.used[s.buffer.data] = None
        self.generic_visit(s)


def emit_parallel_for(ctx: FunctionContext, loop: S.For) -> None:
    renderer = ctx.renderer
    uses = _Uses()
    uses.visit(loop.body)
    # Everything in scope now that the body reads must travel in the closure.
    captured = [v for v in uses.used if v in ctx.vars and v is not loop.loop_var]
    begin = ctx.expr(loop.min)
    extent = ctx.expr(loop.extent)
    values = [begin, extent] + [ctx.vars[v] for v in captured]
    struct = ir.LiteralStructType([v.type for v in values])

    # Pack the closure in the caller.
    slot = ctx.entry_alloca(struct, 1, 8)
    for i, v in enumerate(values):
        ctx.b.store(v, ctx.b.gep(slot, [ir.Constant(I32, 0), ir.Constant(I32, i)]))

    name = renderer.fresh_name(f"{ctx.name}_par")
    fn = ir.Function(renderer.module, ir.FunctionType(ir.VoidType(), [I8P]), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    _emit_closure_body(ctx, fn, struct, captured, loop)

    gomp = renderer.declare("GOMP_parallel", ir.VoidType(),
                            [fn.type, I8P, I32, I32])
    nthreads = ir.Constant(I32, renderer.target.num_cores)
    ctx.b.call(gomp, [fn, ctx.b.bitcast(slot, I8P), nthreads, ir.Constant(I32, 0)])


def _emit_closure_body(parent: FunctionContext, fn: ir.Function, struct: ir.Type,
                       captured: list[E.Var], loop: S.For) -> None:
    renderer = parent.renderer
    # The closure function only unpacks the fields and passes them to ``<fn>_body`` as
    # arguments, so buffer pointers keep the ``noalias`` they have in the caller. Loaded
    # from the closure they would lose it, LICM could then not hoist loop-invariant loads
    # past the loop's stores, and LLVM 22's loop vectorizer takes time exponential in the
    # length of an in-loop chain of uniform fcmp/select (max) ops (``vputils::isSingleScalar``
    # walks the operand DAG unmemoised): an unrolled 64-term softmax max chain never finished.
    ub = ir.IRBuilder(fn.append_basic_block("entry"))
    data = ub.bitcast(fn.args[0], struct.as_pointer())
    fields = [ub.load(ub.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
              for i in range(len(struct.elements))]
    body_fn = ir.Function(renderer.module, ir.FunctionType(ir.VoidType(), list(struct.elements)),
                          f"{fn.name}_body")
    body_fn.linkage = "internal"
    body_fn.attributes.add("nounwind")
    # Only when every captured pointer is a distinct ``noalias`` argument of the caller: a
    # pointer derived from (or equal to) another one must not become a separate noalias arg.
    pointers = [parent.vars[v] for v in captured
                if isinstance(parent.vars[v].type, ir.PointerType)]
    if all(isinstance(p, ir.Argument) and "noalias" in p.attributes for p in pointers) \
            and len({id(p) for p in pointers}) == len(pointers):
        for arg in body_fn.args:
            if isinstance(arg.type, ir.PointerType):
                arg.add_attribute("noalias")
    ub.call(body_fn, fields)
    ub.ret_void()

    ctx = FunctionContext(renderer, body_fn, parent.name)
    b = ctx.b
    begin, extent = body_fn.args[0], body_fn.args[1]
    for v, value in zip(captured, body_fn.args[2:]):
        ctx.vars[v] = value

    ity = value_type(loop.loop_var.dtype)
    tid = b.call(renderer.declare("omp_get_thread_num", I32, []), [])
    nthr = b.call(renderer.declare("omp_get_num_threads", I32, []), [])
    tid, nthr = b.sext(tid, ity) if ity.width > 32 else tid, \
        b.sext(nthr, ity) if ity.width > 32 else nthr
    if ity.width < 32:
        tid, nthr = b.trunc(tid, ity), b.trunc(nthr, ity)
    one = ir.Constant(ity, 1)
    # Static schedule: thread t takes [t*chunk, min((t+1)*chunk, extent)).
    chunk = b.sdiv(b.sub(b.add(extent, nthr), one), nthr)
    lo = b.mul(tid, chunk)
    hi = b.add(lo, chunk)
    hi = b.select(b.icmp_signed("<", hi, extent), hi, extent)

    renderer.in_parallel = True
    try:
        def body() -> None:
            i = ctx.vars[loop.loop_var]
            ctx.vars[loop.loop_var] = b.add(begin, i, flags=("nsw",))
            ctx.stmt(loop.body)
            ctx.vars[loop.loop_var] = i
        emit_serial_loop(ctx, loop.loop_var, lo, hi, body)
    finally:
        renderer.in_parallel = False
    if not ctx.b.block.is_terminated:
        ctx.b.ret_void()
    ctx.finish_entry()
