"""renew_defs: a PrimFunc copy with new Vars and Buffers everywhere (what tensorize gives each
tensorized block), structurally equal to the original and sharing no definition with it."""
from __future__ import annotations

from workbench import te
from workbench.ir.structural import structural_equal
from workbench.tir.buffer import Buffer
from workbench.tir.expr import Var
from workbench.tir.functor import post_order_visit, renew_defs
from workbench.tir.schedule import Schedule
from workbench.tir.tensor_intrin import TensorIntrin, list_intrins


def _defs(func):
    found = {"vars": set(), "buffers": set()}

    def visit(n):
        if isinstance(n, Var):
            found["vars"].add(id(n))
        if isinstance(n, Buffer):
            found["buffers"].add(id(n))
    post_order_visit(func.body, visit)
    for p in func.params:
        found["vars"].add(id(p))
    for b in func.buffer_map.values():
        found["buffers"].add(id(b))
        found["vars"].add(id(b.data))
    return found


def _scheduled_matmul():
    n = 64
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = Schedule(te.create_prim_func([A, B, C]))
    i, j, kk = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 8])
    sch.parallel(io)
    sch.cache_write(sch.get_block("C"), 0, "local")
    return sch.mod["main"]


def test_a_renewed_function_is_equal_and_shares_no_definition():
    func = _scheduled_matmul()
    new = renew_defs(func)
    assert structural_equal(new, func)
    old, fresh = _defs(func), _defs(new)
    assert old["vars"] and old["buffers"]
    assert not (old["vars"] & fresh["vars"]) and not (old["buffers"] & fresh["buffers"])
    # params and buffer_map keys stay one and the same var
    assert set(new.buffer_map) == set(new.params)


def test_every_registered_intrinsic_impl_renews():
    names = list_intrins()
    assert len(names) > 5
    for name in names:
        impl = TensorIntrin.get(name).impl
        new = renew_defs(impl)
        assert structural_equal(new, impl), name
        assert not (_defs(impl)["buffers"] & _defs(new)["buffers"]), name


def test_renew_local_defs_substitutes_in_the_same_walk():
    """What unrolling does per copy: the statement's own definitions (loops, block iter vars)
    renewed, an outer variable replaced, the others kept; the same as renewing, then
    substituting, in two walks."""
    from workbench.ir.structural import structural_equal as eq
    from workbench.tir import op
    from workbench.tir.functor import local_defs, renew_local_defs, substitute
    from workbench.tir.stmt import ForKind
    func = _scheduled_matmul()
    outer = next(s for s in _loops(func.body) if s.kind == ForKind.PARALLEL)
    body = outer.body
    defined = local_defs(body)
    assert defined and outer.loop_var not in defined
    vmap = {outer.loop_var: op.add(outer.min, 3)}
    one = renew_local_defs(body, vmap, defined)
    two = substitute(renew_local_defs(body), vmap)
    assert eq(one, two, map_free_vars=True)
    used = set()
    post_order_visit(one, lambda n: used.add(id(n)) if isinstance(n, Var) else None)
    assert id(outer.loop_var) not in used                       # substituted
    assert not used & {id(v) for v in defined}                  # renewed
    assert renew_local_defs(body, {}, set()) is body           # nothing to do: shared


def _loops(stmt):
    from workbench.tir.stmt import For
    out = []
    post_order_visit(stmt, lambda n: out.append(n) if isinstance(n, For) else None)
    return out[::-1]
