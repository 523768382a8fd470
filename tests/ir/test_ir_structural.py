"""structural_equal / structural_hash: renaming, mutations, free vars, modules, messages."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ir_builders import edit, elementwise, matmul, matmul_bias_relu, misc, renamed
from workbench import tir
from workbench.ir import (
    IRModule, assert_structural_equal, structural_equal, structural_hash,
)
from workbench.ir.node import FrozenDict
from workbench.ir.structural import StructuralSet
from workbench.tir import For, IterType, IterVar, Var, const

BUILDERS = [matmul, matmul_bias_relu, elementwise, misc]


def same(a, b, **kw):
    """Equal both ways, and equal hashes."""
    return (structural_equal(a, b, **kw) and structural_equal(b, a, **kw)
            and structural_hash(a, **kw) == structural_hash(b, **kw))


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_renamed_copy_is_equal_with_equal_hash(build):
    f = build()
    assert same(f, build(suffix="_other"))  # built again with other names
    assert same(f, renamed(f))               # every Var and Buffer replaced by a fresh one
    assert structural_equal(f, f)


def _first_block(f):
    return f.body.block.body.body.body.body.block


MUTATIONS = {
    "constant": lambda f: edit(f, tir.FloatImm, lambda c: c.replace(value=1.0)),
    "loop extent": lambda f: edit(f, For, lambda s: s.replace(extent=const(64))
                                  if s.loop_var.name == "k" else None),
    "op": lambda f: edit(f, tir.Add, lambda e: tir.Sub(e.a, e.b, e.dtype), first=True),
    "dtype": lambda f: edit(f, tir.Buffer, lambda b: b.replace(dtype="float64")
                            if b.name == "A" else None),
    "loop kind": lambda f: edit(f, For, lambda s: s.replace(kind="parallel")
                                if s.loop_var.name == "i" else None),
    "loop annotation": lambda f: edit(f, For, lambda s: s.replace(
        annotations=FrozenDict({"pragma_unroll": 1})) if s.loop_var.name == "j" else None),
    "block annotation": lambda f: edit(f, tir.Block, lambda b: b.replace(
        annotations=FrozenDict({"meta_schedule.tiling_structure": "SSRSRS"}))
        if b.name_hint == "C" else None),
    "swap operands": lambda f: edit(f, tir.Mul, lambda e: tir.Mul(e.b, e.a, e.dtype)),
    "swap indices": lambda f: edit(f, tir.BufferStore, lambda s: s.replace(
        indices=tuple(reversed(s.indices))), first=True),
    "block name": lambda f: edit(f, tir.Block, lambda b: b.replace(name_hint="C2")
                                 if b.name_hint == "C" else None),
    "iter type": lambda f: edit(f, IterVar, lambda iv: iv.replace(iter_type=IterType.DATA_PAR)
                                if iv.iter_type == IterType.COMM_REDUCE else None),
    "func attr": lambda f: f.with_attr("tir.noalias", False),
    "buffer shape": lambda f: edit(f, tir.Buffer, lambda b: b.replace(
        shape=(const(128), const(64))) if b.name == "B" else None),
    "buffer scope": lambda f: edit(f, tir.Buffer, lambda b: b.replace(scope="local")
                                   if b.name == "A" else None),
    "init dropped": lambda f: edit(f, tir.Block, lambda b: b.replace(init=None)
                                   if b.init is not None else None),
    "read region": lambda f: edit(f, tir.Block, lambda b: b.replace(reads=b.reads[1:])
                                  if b.reads else None),
    "float sign": lambda f: edit(f, tir.FloatImm, lambda c: c.replace(value=-0.0)),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_each_mutation_is_unequal_with_another_hash(name):
    f = matmul_bias_relu()
    g = MUTATIONS[name](f)
    assert not structural_equal(f, g)
    assert not structural_equal(g, f)
    assert structural_hash(f) != structural_hash(g)
    # ... and the mutation survives renaming: still unequal to a renamed original.
    assert not structural_equal(renamed(f), g)


def test_all_mutation_hashes_are_distinct():
    f = matmul_bias_relu()
    hashes = {structural_hash(m(f)) for m in MUTATIONS.values()} | {structural_hash(f)}
    assert len(hashes) == len(MUTATIONS) + 1


def test_swapping_two_loop_vars_is_a_change():
    # for i, j: C[i, j] vs C[j, i] -- the mapping, not the names, decides.
    A = tir.decl_buffer((8, 8), "float32", "A")

    def nest(swap):
        i, j = Var("i"), Var("j")
        idx = (j, i) if swap else (i, j)
        store = tir.BufferStore(A, const(0.0), idx)
        return For(i, const(0), const(8), "serial", For(j, const(0), const(8), "serial", store))

    assert same(nest(False), nest(False))
    assert not structural_equal(nest(False), nest(True))
    assert structural_hash(nest(False)) != structural_hash(nest(True))


def test_free_vars_equal_only_by_identity_unless_mapped():
    x, y = Var("x"), Var("y")
    assert same(x + 1, x + 1)
    assert not structural_equal(x + 1, y + 1)
    assert structural_equal(x + 1, y + 1, map_free_vars=True)
    assert same(x + 1, y + 1, map_free_vars=True)
    # Mapping is consistent: x + x is not y + z.
    z = Var("z")
    assert not structural_equal(x + x, y + z, map_free_vars=True)
    assert not structural_equal(x + y, z + z, map_free_vars=True)
    # dtype still matters when mapping.
    assert not structural_equal(x + 1, Var("w", "int64") + tir.IntImm("int64", 1),
                                map_free_vars=True)
    # Distinct free vars hash apart by name; same-named ones may collide (allowed).
    assert structural_hash(x + 1) != structural_hash(y + 1)


def test_free_var_inside_function_body():
    n = Var("n")
    A = tir.decl_buffer((16,), "float32", "A")

    def func(bound):
        i = Var("i")
        body = For(i, const(0), bound, "serial", tir.BufferStore(A, const(0.0), (i,)))
        return tir.prim_func([A], body)

    f, g = func(n), func(n)
    assert structural_equal(f, g)
    other = Var("n")
    assert not structural_equal(f, func(other))
    assert structural_equal(f, func(other), map_free_vars=True)


def test_sibling_scopes_and_sharing():
    """A loop var reused by two loops must map the same way in both."""
    i, j1, j2 = Var("i"), Var("j"), Var("j")
    body = tir.Evaluate(const(0))
    shared = tir.SeqStmt((For(i, const(0), const(4), "serial", body),
                          For(i, const(0), const(4), "serial", body)))
    fresh = tir.SeqStmt((For(j1, const(0), const(4), "serial", body),
                         For(j2, const(0), const(4), "serial", body)))
    k = Var("k")
    shared2 = tir.SeqStmt((For(k, const(0), const(4), "serial", body),
                           For(k, const(0), const(4), "serial", body)))
    assert same(shared, shared2)
    assert not structural_equal(shared, fresh)


def test_module_equality_by_function_name_and_attrs():
    m1 = IRModule({"a": matmul(), "b": elementwise()})
    m2 = IRModule({"b": elementwise(suffix="_x"), "a": matmul(suffix="_y")})
    assert same(m1, m2)
    assert not structural_equal(m1, m1.with_attr("k", 1))
    assert structural_hash(m1) != structural_hash(m1.with_attr("k", 1))
    m3 = IRModule({"a": matmul(), "c": elementwise()})
    assert not structural_equal(m1, m3)
    assert structural_hash(m1) != structural_hash(m3)


def test_module_hash_memo_follows_every_change():
    """A module memoizes its hash; each mutation gives a fresh one, a copy shares it until
    either changes, and a pickled module (a tuner's candidate coming back from a replay
    worker) brings it along."""
    import pickle

    m = IRModule({"a": matmul()})
    h = structural_hash(m)
    assert m._shash == {False: h}
    c = m.copy()
    assert c._shash is m._shash and structural_hash(c) == h
    c["b"] = elementwise()
    assert structural_hash(c) == structural_hash(IRModule({"a": matmul(), "b": elementwise()}))
    assert structural_hash(m) == h                       # the original keeps its own
    m.attrs = m.attrs.set("k", 1)
    assert structural_hash(m) == structural_hash(IRModule({"a": matmul()}, attrs={"k": 1}))
    del c["b"]
    assert structural_hash(c) == h
    assert structural_hash(c, map_free_vars=True) == structural_hash(
        IRModule({"a": matmul()}), map_free_vars=True)
    back = pickle.loads(pickle.dumps(c))
    assert back._shash == c._shash and structural_hash(back) == h
    back["a"] = elementwise()
    assert structural_hash(back) != h and structural_hash(c) == h
    old = IRModule({"a": matmul()})                      # pickled before the memo existed
    state = dict(old.__dict__)
    state["attrs"] = state.pop("_attrs")
    del state["_shash"]
    revived = IRModule.__new__(IRModule)
    revived.__setstate__(state)
    assert structural_hash(revived) == h and revived.attrs == old.attrs


def test_plain_values_and_containers():
    assert same((1, "a", None, 2.5), (1, "a", None, 2.5))
    assert not structural_equal(1, True)
    assert not structural_equal(1, 1.0)
    assert not structural_equal(0.0, -0.0)
    assert same(float("nan"), float("nan"))
    assert not structural_equal((1, 2), [1, 2])
    assert same(FrozenDict({"a": 1, "b": 2}), FrozenDict({"b": 2, "a": 1}))
    assert not structural_equal(FrozenDict({"a": 1}), FrozenDict({"a": 2}))
    assert structural_hash(FrozenDict({"a": 1})) != structural_hash(FrozenDict({"a": 2}))


def test_structural_set_keeps_one_of_each_shape_in_insertion_order():
    s = StructuralSet()
    f, g = matmul(), elementwise()
    assert s.add(f) and s.add(g)
    assert not s.add(renamed(f))              # equal up to renaming: already present
    assert list(s) == [f, g] and len(s) == 2
    assert s.find(renamed(g)) is g and renamed(f) in s
    assert s.owns(f) and not s.owns(renamed(f))
    t = s.copy()
    assert t.add(misc()) and len(t) == 3 and len(s) == 2
    pairs = StructuralSet(key=lambda item: item[1])  # compared by a part of the item
    assert pairs.add(("a", f)) and not pairs.add(("b", renamed(f)))
    assert pairs.find(f) == ("a", f)


def test_deep_expression_does_not_recurse():
    x = Var("x")
    e = x
    for k in range(5000):
        e = tir.Add(e, tir.IntImm("int32", k), "int32")
    y = Var("y")
    e2 = y
    for k in range(5000):
        e2 = tir.Add(e2, tir.IntImm("int32", k), "int32")
    assert structural_equal(e, e2, map_free_vars=True)
    assert structural_hash(e, map_free_vars=True) == structural_hash(e2, map_free_vars=True)


def test_hash_is_stable_across_processes():
    f = matmul_bias_relu()
    code = ("import sys; sys.path.insert(0, %r); import ir_builders, workbench.ir as ir; "
            "print(ir.structural_hash(ir_builders.matmul_bias_relu()))"
            % str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "123", "PATH": ""})
    assert int(out.stdout) == structural_hash(f)


def test_assert_structural_equal_names_the_path():
    f = matmul()
    assert_structural_equal(f, renamed(f))
    g = MUTATIONS["swap operands"](f)
    with pytest.raises(ValueError) as info:
        assert_structural_equal(f, g)
    msg = str(info.value)
    assert msg.splitlines() == [
        "structural mismatch at root.body.block.body.body.body.body.block.body.value.b.a.buffer:"
        " maps to a different object earlier",
        "lhs: <Buffer A: (128, 128) float32>",
        "rhs: <Buffer B: (128, 128) float32>",
        "in lhs: A[vi, vk]",
        "in rhs: B[vk, vj]",
    ]
    with pytest.raises(ValueError, match="free variables differ"):
        assert_structural_equal(Var("x") + 1, Var("y") + 1)
