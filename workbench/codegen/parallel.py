"""Parallel loops: outlined into a closure and run on libgomp's thread pool.

``for i in T.parallel(n): body`` becomes a function ``void f_par_k(i8* closure)`` that unpacks
the values the body uses and passes them to ``f_par_k_body`` (buffer pointers keep the caller's
``noalias``), which runs the body serially over its share of ``[0, n)``; the caller packs the
closure on its stack and calls ``GOMP_parallel``. No Python and no GIL are involved. A
parallel loop nested inside another runs serially.

The share (option ``parallel_chunks`` = K): thread t owns the balanced range
``[t*n/T, (t+1)*n/T)`` as K chunks and takes them in order through its counter in the closure
(an atomic add); when its own are done it takes the chunks other threads have not started.
Unloaded, every thread runs exactly its own range, as a static schedule would (same data per
thread from call to call). On a busy machine (issue 26: JupyterLab and Chromium on the same
2 cores) a thread that the OS has not scheduled yet no longer holds the whole region up by
its full share: the threads that run take its chunks. K = 0 is the plain static split by
thread number.
"""
from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from workbench import options
from workbench.codegen.llvm_types import I32, I8P, value_type
from workbench.codegen.renderer import FunctionContext, emit_serial_loop
from workbench.tir import expr as E
from workbench.tir import stmt as S
from workbench.tir.buffer import Buffer
from workbench.tir.functor import walk_nodes


I64 = ir.IntType(64)
#: Chunk counters in a closure of a kernel built without ``-num-cores`` (thread count chosen at
#: run time): more threads than this share out the chunks of the first ones.
MAX_OWNERS = 256


def _uses(stmt: S.Stmt) -> dict[E.Var, None]:
    """Variables ``stmt`` mentions, with the data pointers of the buffers it touches, in a
    fixed order (the closure's field order, so the same loop gives the same LLVM IR). A
    superset of what it reads (its own loop and let variables too): the caller keeps those
    in scope outside."""
    used: dict[E.Var, None] = {}
    for n in walk_nodes(stmt):
        if isinstance(n, E.Var):
            used[n] = None
        elif isinstance(n, Buffer):
            used[n.data] = None
    return used


def emit_parallel_for(ctx: FunctionContext, loop: S.For) -> None:
    renderer = ctx.renderer
    # Everything in scope now that the body reads must travel in the closure.
    captured = [v for v in _uses(loop.body) if v in ctx.vars and v is not loop.loop_var]
    begin = ctx.expr(loop.min)
    extent = ctx.expr(loop.extent)
    values = [begin, extent] + [ctx.vars[v] for v in captured]
    chunks = int(options.get("parallel_chunks"))
    # the chunk counters of each owner, then the count of threads that ran out of chunks
    counters = ir.ArrayType(I32, (renderer.target.num_cores or MAX_OWNERS) + 1)
    fields = [v.type for v in values] + ([counters] if chunks else [])
    struct = ir.LiteralStructType(fields)

    # Pack the closure in the caller (the chunk counters start at 0 on every call).
    slot = ctx.entry_alloca(struct, 1, 8)
    for i, v in enumerate(values):
        ctx.b.store(v, ctx.b.gep(slot, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
    if chunks:
        ctx.b.store(ir.Constant(counters, None),
                    ctx.b.gep(slot, [ir.Constant(I32, 0), ir.Constant(I32, len(values))]))

    name = renderer.fresh_name(f"{ctx.name}_par")
    fn = ir.Function(renderer.module, ir.FunctionType(ir.VoidType(), [I8P]), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    _emit_closure_body(ctx, fn, struct, captured, loop, chunks)

    gomp = renderer.declare("GOMP_parallel", ir.VoidType(),
                            [fn.type, I8P, I32, I32])
    nthreads = ir.Constant(I32, renderer.target.num_cores)
    ctx.b.call(gomp, [fn, ctx.b.bitcast(slot, I8P), nthreads, ir.Constant(I32, 0)])


def _emit_closure_body(parent: FunctionContext, fn: ir.Function, struct: ir.Type,
                       captured: list[E.Var], loop: S.For, chunks: int) -> None:
    renderer = parent.renderer
    # The closure function only unpacks the fields and passes them to ``<fn>_body`` as
    # arguments, so buffer pointers keep the ``noalias`` they have in the caller. Loaded
    # from the closure they would lose it, LICM could then not hoist loop-invariant loads
    # past the loop's stores, and LLVM 22's loop vectorizer takes time exponential in the
    # length of an in-loop chain of uniform fcmp/select (max) ops (``vputils::isSingleScalar``
    # walks the operand DAG unmemoised): an unrolled 64-term softmax max chain never finished.
    ub = ir.IRBuilder(fn.append_basic_block("entry"))
    data = ub.bitcast(fn.args[0], struct.as_pointer())
    n_values = len(struct.elements) - (1 if chunks else 0)
    fields = [ub.load(ub.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
              for i in range(n_values)]
    arg_types = list(struct.elements[:n_values])
    if chunks:  # the counters are shared: passed by address
        fields.append(ub.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, n_values),
                                    ir.Constant(I32, 0)]))
        arg_types.append(I32.as_pointer())
    body_fn = ir.Function(renderer.module, ir.FunctionType(ir.VoidType(), arg_types),
                          f"{fn.name}_body")
    body_fn.linkage = "internal"
    body_fn.attributes.add("nounwind")
    # Only when every captured pointer is a distinct ``noalias`` argument of the caller: a
    # pointer derived from (or equal to) another one must not become a separate noalias arg.
    pointers = [parent.vars[v] for v in captured
                if isinstance(parent.vars[v].type, ir.PointerType)]
    if all(isinstance(p, ir.Argument) and "noalias" in p.attributes for p in pointers) \
            and len({id(p) for p in pointers}) == len(pointers):
        for arg in body_fn.args[2:2 + len(captured)]:
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
    renderer.in_parallel = True
    try:
        def body() -> None:
            i = ctx.vars[loop.loop_var]
            ctx.vars[loop.loop_var] = b.add(begin, i, flags=("nsw",))
            ctx.stmt(loop.body)
            ctx.vars[loop.loop_var] = i

        if chunks:
            owners = renderer.target.num_cores or MAX_OWNERS
            _emit_stealing(ctx, loop.loop_var, extent, tid, nthr, body_fn.args[-1], owners,
                           chunks, body)
            _emit_finish_spin(ctx, body_fn.args[-1], owners, nthr,
                              int(options.get("parallel_finish_spin")))
        else:
            one = ir.Constant(ity, 1)
            # Static schedule: thread t takes [t*chunk, min((t+1)*chunk, extent)).
            chunk = b.sdiv(b.sub(b.add(extent, nthr), one), nthr)
            lo = b.mul(tid, chunk)
            hi = b.add(lo, chunk)
            hi = b.select(b.icmp_signed("<", hi, extent), hi, extent)
            emit_serial_loop(ctx, loop.loop_var, lo, hi, body)
    finally:
        renderer.in_parallel = False
    if not ctx.b.block.is_terminated:
        ctx.b.ret_void()
    ctx.finish_entry()


def _emit_stealing(ctx: FunctionContext, loop_var: E.Var, extent: ir.Value, tid: ir.Value,
                   nthr: ir.Value, counters: ir.Value, owners: int, chunks: int,
                   body: Any) -> None:
    """Run ``body`` over the chunks of ``[0, extent)``: first this thread's own, in order,
    then those of the other threads (``tid + 1``, ``tid + 2``, ... modulo ``nthr``) that
    nobody started; ``counters[v]`` counts the chunks of thread v handed out so far. At most
    ``owners`` threads own chunks (the counters there are); any further ones only take."""
    b, fn = ctx.b, ctx.fn
    ity = extent.type

    def wide(v: ir.Value) -> ir.Value:
        return v if v.type.width == 64 else b.sext(v, I64)

    k = ir.Constant(I64, chunks)
    cap = ir.Constant(I64, owners)
    nthr64 = b.select(b.icmp_signed("<", wide(nthr), cap), wide(nthr), cap)
    tid64 = b.srem(wide(tid), nthr64)
    total = b.mul(nthr64, k)
    extent64 = wide(extent)

    pre = b.block
    victims = fn.append_basic_block("steal_victim")
    claim = fn.append_basic_block("steal_claim")
    run = fn.append_basic_block("steal_run")
    next_victim = fn.append_basic_block("steal_next")
    done = fn.append_basic_block("steal_done")
    b.branch(victims)

    # for r in [0, nthr): victim v = (tid + r) % nthr
    b.position_at_end(victims)
    r = b.phi(I64, name="steal_r")
    r.add_incoming(ir.Constant(I64, 0), pre)
    b.cbranch(b.icmp_signed("<", r, nthr64), claim, done)

    # c = counters[v]++ (atomic); the chunk exists while c < K
    b.position_at_end(claim)
    v = b.srem(b.add(tid64, r), nthr64)
    counter = b.gep(counters, [b.trunc(v, I32)])
    c = b.atomic_rmw("add", counter, ir.Constant(I32, 1), "monotonic")
    b.cbranch(b.icmp_signed("<", c, ir.Constant(I32, chunks)), run, next_victim)

    # chunk q = v*K + c covers [q*extent/total, (q+1)*extent/total): balanced, and thread
    # t's own K chunks together are its share of a static split
    b.position_at_end(run)
    q = b.add(b.mul(v, k), b.sext(c, I64))
    lo = b.sdiv(b.mul(q, extent64), total)
    hi = b.sdiv(b.mul(b.add(q, ir.Constant(I64, 1)), extent64), total)
    if ity.width != 64:
        lo, hi = b.trunc(lo, ity), b.trunc(hi, ity)
    emit_serial_loop(ctx, loop_var, lo, hi, body)
    b.branch(claim)

    b.position_at_end(next_victim)
    r.add_incoming(b.add(r, ir.Constant(I64, 1)), next_victim)
    b.branch(victims)

    b.position_at_end(done)


#: The module-level budget of the finish spin (pause iterations), adapted as kernels run.
SPIN_BUDGET = "__workbench_finish_spin_budget"
#: The adapted budget never drops below this many pauses (~5-20 us): on a quiet machine the
#: threads of a balanced loop finish within it, and each such wait doubles the budget again.
SPIN_FLOOR = 256


def _spin_budget(ctx: FunctionContext, limit: int) -> ir.GlobalVariable:
    module = ctx.renderer.module
    g = module.globals.get(SPIN_BUDGET)
    if g is None:
        g = ir.GlobalVariable(module, I32, SPIN_BUDGET)
        g.linkage = "internal"
        g.initializer = ir.Constant(I32, limit)
    return g


def _emit_finish_spin(ctx: FunctionContext, counters: ir.Value, owners: int, nthr: ir.Value,
                      limit: int) -> None:
    """Count this thread as out of chunks (``counters[owners]``), then spin with ``pause`` until
    every thread is, at most the module's current budget of iterations. Why: the early thread
    would otherwise wait in libgomp's closing barrier, which sleeps after GOMP_SPINCOUNT spins
    (kept short so idle threads leave the cores to others), and the next parallel region (the
    next kernel, often a short one: BERT's layer norm after a 2.8 ms matmul ran 12 -> 123 us)
    waits for the sleeping core to wake up. The wait ends when the last thread finishes its
    last chunk.

    The budget adapts (a module global, starting at ``limit``): a wait that ran out before the
    others finished quarters it, a wait that saw them finish doubles it (at most ``limit``, at
    least :data:`SPIN_FLOOR`). On a quiet machine the waits end in time and the budget stays
    at ``limit``; on one busier than its cores (a notebook beside JupyterLab and a browser on
    2 cores) the thread waited for is off its core for a time slice, the waits run out, and
    the spin drops to a few microseconds instead of burning ~1-2 ms of a core per kernel that
    another process could use."""
    if limit <= 0:
        return
    b, fn = ctx.b, ctx.fn
    finished = b.gep(counters, [ir.Constant(I32, owners)])
    b.atomic_rmw("add", finished, ir.Constant(I32, 1), "release")
    want = b.trunc(nthr, I32) if nthr.type.width > 32 else (
        b.sext(nthr, I32) if nthr.type.width < 32 else nthr)
    g = _spin_budget(ctx, limit)
    budget = b.load_atomic(g, "monotonic", 4)
    pre = b.block
    loop = fn.append_basic_block("finish_spin")
    wait = fn.append_basic_block("finish_wait")
    adapt = fn.append_basic_block("finish_adapt")
    out = fn.append_basic_block("finish_done")
    b.branch(loop)
    b.position_at_end(loop)
    n = b.phi(I32, name="finish_n")
    n.add_incoming(ir.Constant(I32, 0), pre)
    seen = b.load_atomic(finished, "acquire", 4)
    behind = b.icmp_signed("<", seen, want)
    more = b.and_(behind, b.icmp_signed("<", n, budget))
    b.cbranch(more, wait, adapt)
    b.position_at_end(wait)
    if ctx.renderer.target.triple.startswith(("x86_64", "i686", "i386")):
        pause = ctx.renderer.declare("llvm.x86.sse2.pause", ir.VoidType(), [])
        b.call(pause, [])
    n.add_incoming(b.add(n, ir.Constant(I32, 1)), wait)
    b.branch(loop)
    b.position_at_end(adapt)
    # ran out: a quarter (not below the floor); saw them finish after waiting: twice (not
    # above the limit); no wait at all (this thread was the last): no news, no store
    floor = ir.Constant(I32, min(SPIN_FLOOR, limit))
    top = ir.Constant(I32, limit)
    less = b.lshr(budget, ir.Constant(I32, 2))
    less = b.select(b.icmp_signed("<", less, floor), floor, less)
    # (the budget is within [floor, limit]: doubling only what is at most limit / 2 cannot
    # overflow)
    twice = b.select(b.icmp_signed(">", budget, ir.Constant(I32, limit // 2)), top,
                     b.shl(budget, ir.Constant(I32, 1)))
    waited = b.icmp_signed(">", n, ir.Constant(I32, 0))
    new = b.select(behind, less, b.select(waited, twice, budget))
    store = fn.append_basic_block("finish_store")
    b.cbranch(b.icmp_signed("!=", new, budget), store, out)
    b.position_at_end(store)
    b.store_atomic(new, g, "monotonic", 4)
    b.branch(out)
    b.position_at_end(out)
