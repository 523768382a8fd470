"""Shape heaps reused per frame (the interpreter's HEAP instruction) and make_shape call sites
decoded to ``make_shape_site``: each frame's heap values stay its own under recursion, threads
and several VirtualMachines; hooks still see the plain builtin calls."""
import random
import threading
import time

import numpy as np
import pytest

import workbench as wb
from workbench.runtime import register_func, remove_global_func
from workbench.runtime.relax_vm import (ExecBuilder, InternalError, ShapeTuple, VirtualMachine,
                                        VMFuncKind)
from workbench.runtime.relax_vm import builtins as B

_FUNCS = {
    "is_zero": lambda k: k == 0,
    "dec": lambda k: k - 1,
    "shrink": lambda x: _shrink(x),
    "cons": lambda shape, rest: (tuple(shape), *rest),
    "record": lambda heap: _SEEN.append(heap),
    "pause": lambda: time.sleep(0.0005),   # lets another thread run between the steps
}
_SEEN: list = []


def _shrink(x):
    if x.shape[0] == 0:
        raise ValueError("test.heap.shrink: empty")
    return wb.nd.array(x.numpy()[:-1])


@pytest.fixture(autouse=True)
def funcs():
    for name, fn in _FUNCS.items():
        register_func(f"test.heap.{name}", fn, override=True)
    _SEEN.clear()
    yield
    for name in _FUNCS:
        remove_global_func(f"test.heap.{name}")


def _shapes_program():
    """``shapes(x, k)``: ``((len(x), 7), *shapes(x[:-1], k - 1))``, ``()`` at k == 0, with the
    outer frame's make_shape *after* the nested call: a heap shared between frames would give
    the inner frame's length."""
    ib = ExecBuilder()
    ib.declare_function("shapes", VMFuncKind.VM_FUNC)
    with ib.function("shapes", num_inputs=2, param_names=["x", "k"]):
        ib.emit_call("vm.builtin.alloc_shape_heap", args=[ib.vm_state(), ib.imm(1)],
                     dst=ib.r(2))
        ib.emit_call("test.heap.record", args=[ib.r(2)], dst=ib.r(9))
        ib.emit_call("vm.builtin.match_shape",
                     args=[ib.r(0), ib.r(2), ib.imm(1), ib.imm(B.STORE_TO_HEAP), ib.imm(0),
                           ib.convert_constant("ctx")], dst=ib.r(9))
        ib.emit_call("test.heap.pause", args=[], dst=ib.r(9))
        ib.emit_call("test.heap.is_zero", args=[ib.r(1)], dst=ib.r(3))
        ib.emit_if(ib.r(3), 3)
        ib.emit_call("vm.builtin.make_tuple", args=[], dst=ib.r(4))
        ib.emit_goto(4)
        ib.emit_call("test.heap.shrink", args=[ib.r(0)], dst=ib.r(5))
        ib.emit_call("test.heap.dec", args=[ib.r(1)], dst=ib.r(6))
        ib.emit_call("shapes", args=[ib.r(5), ib.r(6)], dst=ib.r(4))
        ib.emit_call("test.heap.pause", args=[], dst=ib.r(9))
        ib.emit_call("vm.builtin.make_shape",
                     args=[ib.r(2), ib.imm(2), ib.imm(B.LOAD_SHAPE), ib.imm(0),
                           ib.imm(B.USE_IMM), ib.imm(7)], dst=ib.r(7))
        ib.emit_call("test.heap.cons", args=[ib.r(7), ib.r(4)], dst=ib.r(8))
        ib.emit_ret(ib.r(8))
    return ib.get()


def _want(n, k):
    return tuple((n - i, 7) for i in range(k + 1))


def _x(n):
    return wb.nd.array(np.zeros(n, "float32"))


def test_recursive_frames_keep_their_own_heap():
    vm = VirtualMachine(_shapes_program(), wb.cpu())
    assert vm["shapes"](_x(6), 3) == _want(6, 3)
    first = list(_SEEN)
    assert len({id(h) for h in first}) == 4          # one heap per live frame
    _SEEN.clear()
    assert vm["shapes"](_x(9), 3) == _want(9, 3)     # the same heaps, new values
    assert {id(h) for h in _SEEN} == {id(h) for h in first}
    _SEEN.clear()
    assert vm["shapes"](_x(2), 0) == _want(2, 0)
    assert len(_SEEN) == 1 and any(_SEEN[0] is h for h in first)


def test_a_failed_frame_leaves_the_vm_usable():
    vm = VirtualMachine(_shapes_program(), wb.cpu())
    with pytest.raises(ValueError, match="empty"):
        vm["shapes"](_x(2), 5)                       # x runs out three frames down
    assert vm["shapes"](_x(5), 2) == _want(5, 2)


def test_threads_and_several_vms_see_their_own_lengths():
    exe = _shapes_program()
    vms = [VirtualMachine(exe, wb.cpu()) for _ in range(2)]
    errors: list = []

    def work(seed):
        rng = random.Random(seed)
        vm = vms[seed % 2]
        try:
            for _ in range(15):
                n, k = rng.randint(4, 12), rng.randint(0, 3)
                got = vm["shapes"](_x(n), k)
                if got != _want(n, k):
                    errors.append((n, k, got))
        except Exception as e:  # surfaced below: a thread's exception is otherwise lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_hooks_see_the_plain_builtin_calls():
    vm = VirtualMachine(_shapes_program(), wb.cpu())
    events = []
    vm.set_instrument(lambda f, name, before, ret, *a: events.append((name, before, ret, a)))
    assert vm["shapes"](_x(4), 1) == _want(4, 1)
    heap_calls = [e for e in events if e[0] == "vm.builtin.alloc_shape_heap" and e[1]]
    assert len(heap_calls) == 2 and all(e[3][0] is vm and e[3][1] == 1 for e in heap_calls)
    made = [e for e in events if e[0] == "vm.builtin.make_shape" and not e[1]]
    assert [tuple(e[2]) for e in made] == [(3, 7), (4, 7)]
    assert all(e[3][1:] == (2, B.LOAD_SHAPE, 0, B.USE_IMM, 7) for e in made)
    vm.set_instrument(None)
    assert vm["shapes"](_x(5), 1) == _want(5, 1)


def test_make_shape_site_matches_make_shape():
    rng = random.Random(0)
    dev = wb.cpu()

    class Ctx:
        devices = [dev]

    heap = B.alloc_shape_heap(Ctx(), 4)
    for _ in range(300):
        n = rng.randint(0, 5)
        codes = []
        for _ in range(n):
            load = rng.random() < 0.5
            codes += [B.LOAD_SHAPE, rng.randrange(4)] if load else [B.USE_IMM,
                                                                     rng.randint(0, 1 << 40)]
        site = B.make_shape_site(n, tuple(codes))
        for _ in range(3):
            heap.numpy(copy=False)[:] = [rng.randint(0, 9) for _ in range(4)]
            got, want = site(heap), B.make_shape(heap, n, *codes)
            assert isinstance(got, ShapeTuple) and got == want
            assert all(type(d) is int for d in got)
    list_heap = [5, 6]
    assert B.make_shape_site(2, (B.LOAD_SHAPE, 1, B.USE_IMM, 3))(list_heap) == (6, 3)
    with pytest.raises(InternalError, match="need 4 codes"):
        B.make_shape_site(2, (B.LOAD_SHAPE, 1))
    with pytest.raises(InternalError, match="codes 0/1"):
        B.make_shape_site(1, (7, 1))
