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
