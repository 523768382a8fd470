"""Static replay: a VM function of fixed shapes runs as a prepared list of native calls.

A compiled CNN's ``main`` is a straight line of ~100 kernel calls, each preceded by
``vm.builtin.alloc_tensor`` views into a few planned storages. Interpreted, every call pays
the loop, the kernel's argument checks and the view's construction -- ~3 us of Python between
two kernels, which onnxruntime does not pay: EfficientNet-B0 ran 7.4 ms interpreted and 6.2
replayed, MobileNetV2 4.4 and 3.8 (Zen 4, 2 threads, in turns). Since nothing in such a function
depends on the inputs' values, its first call is recorded and later calls replay it (the idea
of CUDA graphs, and of TVM's ``RewriteCUDAGraph``, on the CPU):

- **What qualifies** (decided when the VM is created, :func:`replayable`): no jumps, and every
  Call is a compiled kernel or one of :data:`REPLAYABLE_BUILTINS` (memory, input checks,
  tuples). At capture time (:func:`capture`) the arguments must be tensors, and every tensor
  the function returns must be a view it allocated; otherwise the function keeps being
  interpreted.
- **The plan** (:class:`StaticPlan`): each kernel's argument slots filled once (the same
  ``int64`` slot array the kernel ABI reads), the storages of intermediates kept and reused
  by every replay, and a list of patches for what changes per call: the inputs' data pointers
  and the storages holding the outputs, which are allocated fresh on every call (the caller
  keeps the outputs).
- **Guard**: a replay first checks that every argument is a tensor of exactly the shape and
  dtype seen at capture; anything else runs the interpreter, whose own checks raise the
  error naming the parameter. Inputs that pass the guard pass every check the recorded call
  made, which is why the kernels' own checks can be skipped.
- **Threads**: a plan owns its intermediates, so one plan serves one call at a time; a call
  that finds every plan busy (another thread is replaying) is interpreted.
- The instrument and the profiler see every call: when either is active the VM runs its
  hooked loop, never a replay. The option ``vm_static_replay`` (read when a VirtualMachine is
  created) turns replay off.

Cost: the intermediates' storages stay allocated between calls (the planned bytes of
``exe.memory_usage``), as with TVM's pooled allocator.
"""
from __future__ import annotations

import ctypes
from typing import Any

from .. import loader
from ..ndarray import NDArray
from ..packed_func import _FLOATS, PackedFunc, _scalar_value
from .objects import Storage, tensor_view

__all__ = ["REPLAYABLE_BUILTINS", "StaticPlan", "replayable", "capture"]

ALLOC_STORAGE, ALLOC_TENSOR = "vm.builtin.alloc_storage", "vm.builtin.alloc_tensor"
REPLAYABLE_BUILTINS = frozenset({
    ALLOC_STORAGE, ALLOC_TENSOR, "vm.builtin.check_tensor_info", "vm.builtin.match_shape",
    "vm.builtin.make_tuple", "vm.builtin.tuple_getitem", "vm.builtin.null_value",
})


def replayable(code: list, info: list, call_op: int, ret_op: int) -> bool:
    """Whether a decoded VM function can be replayed: only Calls (of kernels and
    :data:`REPLAYABLE_BUILTINS`) and Rets, besides the trailing END."""
    for entry, call_info in zip(code[:-1], info[:-1]):
        op = entry[0]
        if op == ret_op:
            continue
        if op != call_op or call_info[3] is not None:
            return False
        if not (_is_kernel(call_info[0]) or call_info[1] in REPLAYABLE_BUILTINS):
            return False
    return True


def _is_kernel(callee: Any) -> bool:
    return isinstance(callee, PackedFunc) and callee.native_function is not None


class StaticPlan:
    """One recorded call of a VM function, ready to run again (see the module docstring)."""

    __slots__ = ("guards", "calls", "input_patches", "fresh", "result", "keep")

    def __init__(self, guards: tuple, calls: list, input_patches: list, fresh: list,
                 result: Any, keep: list) -> None:
        self.guards = guards                # ((shape, dtype), ...) per argument
        self.calls = calls                  # [(native function, slot address, name)]
        self.input_patches = input_patches  # [(slot array, slot, argument position)]
        self.fresh = fresh                  # [(nbytes, device, views, patches)]
        self.result = result                # the returned structure: ("view", s, v) leaves
        self.keep = keep                    # slot arrays, storages and constants kept alive

    def matches(self, args: tuple) -> bool:
        """Whether ``args`` are tensors of the recorded shapes and dtypes."""
        for a, (shape, dtype) in zip(args, self.guards):
            if a.__class__ is not NDArray or a._shape != shape or a._dtype != dtype:
                return False
        return True

    def run(self, args: tuple) -> Any:
        """Replay on ``args`` (which :meth:`matches`)."""
        for slots, i, pos in self.input_patches:
            slots[i] = args[pos]._ptr
        made = []
        for nbytes, device, views, patches in self.fresh:
            storage = Storage(nbytes, device)
            made.append([tensor_view(storage, off, shape, dtype) for off, shape, dtype in views])
            base = storage.ptr
            for slots, i, off in patches:
                slots[i] = base + off
        loader.apply_num_threads()
        for fn, address, name in self.calls:
            rc = fn(address)
            if rc:
                raise RuntimeError(f"runtime check failed in kernel {name!r} (error code {rc})")
        return _build(self.result, made)


def _build(node: Any, made: list) -> Any:
    if node[0] == "view":
        return made[node[1]][node[2]]
    return tuple(_build(n, made) for n in node[1])


def capture(regs: list, code: list, info: list, nargs: int, call_op: int
            ) -> tuple[Any, StaticPlan | None]:
    """Run a :func:`replayable` function once from its initial register file ``regs``,
    recording its calls; returns (its result, a plan to replay it, or None when this call
    shows it cannot be: an argument that is not a tensor, an output it did not allocate)."""
    inputs = list(regs[:nargs])
    constants = {id(v) for v in regs[nargs:] if isinstance(v, NDArray)}
    events = []
    pc = 0
    while True:
        op, a, b, c = code[pc]
        if op != call_op:
            result = regs[a]
            break
        args = tuple(b(regs))
        out = regs[c] = a(*args)
        events.append((info[pc][0], info[pc][1], args, out))
        pc += 1
    return result, _plan(inputs, constants, events, result)


def _plan(inputs: list, constants: set[int], events: list, result: Any) -> StaticPlan | None:
    if not all(isinstance(x, NDArray) for x in inputs):
        return None
    position = {id(x): i for i, x in enumerate(inputs)}
    storages: dict[int, Storage] = {}
    views: dict[int, tuple[int, int, tuple, str]] = {}   # id(view) -> (id(storage), offset, ...)
    for _, name, args, out in events:
        if name == ALLOC_STORAGE:
            storages[id(out)] = out
        elif name == ALLOC_TENSOR:
            views[id(out)] = (id(args[0]), int(args[1]), out._shape, out._dtype)

    fresh_ids: list[int] = []      # storages allocated per call: those the result views
    fresh_views: dict[int, list] = {}

    def leaf(x: Any) -> Any:
        if isinstance(x, tuple):
            parts = [leaf(y) for y in x]
            return None if any(p is None for p in parts) else ("tuple", parts)
        if not isinstance(x, NDArray) or id(x) not in views:
            return None
        sid = views[id(x)][0]
        if sid not in fresh_views:
            fresh_ids.append(sid)
            fresh_views[sid] = []
        return sid, id(x)

    marks = leaf(result)
    if marks is None:
        return None
    # Every view of a fresh storage is made again per call (intermediates may share it).
    for vid, (sid, *_) in views.items():
        if sid in fresh_views:
            fresh_views[sid].append(vid)
    view_index = {vid: (fresh_ids.index(sid), k) for sid in fresh_ids
                  for k, vid in enumerate(fresh_views[sid])}

    def template(m: Any) -> Any:
        if m[0] == "tuple":
            return ("tuple", [template(p) for p in m[1]])
        return ("view", *view_index[m[1]])

    # The plan owns the intermediates' storages; the fresh ones went to this call's caller.
    keep: list = [st for sid, st in storages.items() if sid not in fresh_views]
    calls, input_patches = [], []
    fresh_patches: dict[int, list] = {sid: [] for sid in fresh_ids}
    for callee, _, args, _ in events:
        if not _is_kernel(callee):
            continue
        slots, values = _slots(callee, args)
        for i, a in values:
            if id(a) in position:
                input_patches.append((slots, i, position[id(a)]))
            elif id(a) in views and views[id(a)][0] in fresh_patches:
                fresh_patches[views[id(a)][0]].append((slots, i, views[id(a)][1]))
            elif id(a) in views or id(a) in constants:
                slots[i] = a._ptr
                keep.append(a)
            else:           # a tensor of unknown origin: its address may change per call
                return None
        keep.append(slots)
        calls.append((callee.native_function, ctypes.addressof(slots), callee.name))
    fresh = []
    for sid in fresh_ids:
        st = storages.get(sid)
        if st is None:           # a view of storage this function did not allocate
            return None
        fresh.append((st.nbytes, st.device,
                      [views[v][1:] for v in fresh_views[sid]], fresh_patches[sid]))
    guards = tuple((x._shape, x._dtype) for x in inputs)
    return StaticPlan(guards, calls, input_patches, fresh, template(marks), keep)


def _slots(kernel: PackedFunc, args: tuple) -> tuple[Any, list]:
    """A kernel's own slot array for ``args`` (already accepted by its checker in the
    recorded call): scalars and shape variables filled in; returns it and the (slot, tensor)
    pairs whose data pointers the caller fills or patches."""
    params, shape_vars = kernel.params, kernel.shape_vars
    slots = (ctypes.c_int64 * max(1, len(params) + len(shape_vars)))()
    floats = (ctypes.c_double * len(slots)).from_buffer(slots)
    bound: dict[str, int] = {}
    tensors = []
    for i, (p, a) in enumerate(zip(params, args)):
        if p.kind == "scalar":     # the checker's own conversion (uint64 as its bit pattern)
            value = _scalar_value(kernel.name, i, p, a)
            if p.dtype in _FLOATS:
                floats[i] = value
            else:
                slots[i] = value
            continue
        tensors.append((i, a))
        for want, have in zip(p.shape, a._shape):
            if isinstance(want, str):
                bound[want] = have
    for k, var in enumerate(shape_vars):
        slots[len(params) + k] = bound[var]
    return slots, tensors

