"""Output checking: is a candidate's result the unscheduled function's result?

A *reference* is computed once per task by :func:`make_reference`: the unscheduled module is
compiled, run (in an isolated worker: the workload itself may be unsafe) on the runner's
seeded inputs (:func:`random_arguments`), and the values of its output arguments are saved to
``<workdir>/reference_<key>.npz`` with

- ``outputs``: the indices of the arguments the function writes (from its BufferStores);
- ``expected_<i>``: the value of argument ``i`` after the call, for each output;
- ``args_info``: the JSON of the arguments (checked against the candidate's).

The runner then calls each candidate once on fresh copies of the same inputs and compares
every argument (:func:`check_arguments`): outputs against the expected values, inputs against
their initial values. Floats pass when ``|got - want| <= atol * scale + rtol * |want|`` with
per-dtype tolerances and ``scale = max(1, max |want|)`` (reassociated sums differ by rounding);
NaNs must match NaNs; integers and booleans must be equal.

Packed weights: when ``RewriteLayout`` re-laid out a weight, the builder strips the packing
block, so the candidate takes the weight *packed* (its ``args_info`` has the packed shape) and
its artifact also holds ``<entry>__layout_pack_<i>(src, dst)`` for each packed argument ``i``.
The check then draws the inputs of the original arguments (the reference's inputs), packs each
such weight with the candidate's packing function, and calls the candidate on the packed
weights: a packing and a kernel that disagree about the layout give wrong outputs and fail
the check like any other wrong schedule. The check is never skipped for these candidates.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.structural import structural_hash
from workbench.meta_schedule.arg_info import ArgInfo, find_entry_func
from workbench.meta_schedule.runner.utils import random_arguments
from workbench.target import Target
from workbench.tir.function import PrimFunc

__all__ = ["make_reference", "compile_reference", "run_reference", "CompiledReference",
           "check_arguments", "written_arguments", "layout_packers",
           "WrongResult", "TOLERANCES"]

#: (rtol, atol) per float dtype; atol is scaled by max(1, max |expected|).
TOLERANCES = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float32": (1e-4, 1e-5), "float64": (1e-8, 1e-10)}


class WrongResult(Exception):
    """A candidate's output differs from the reference (the message says where and how)."""


def written_arguments(func: PrimFunc) -> list[int]:
    """Indices of the parameters whose buffers ``func`` stores to."""
    from workbench.tir.functor import IRVisitor

    params = [func.buffer_map.get(p) for p in func.params]
    datas = {id(b.data): i for i, b in enumerate(params) if b is not None}
    written: set[int] = set()

    class _Stores(IRVisitor):
        def visit_BufferStore(self, node: Any) -> None:
            i = datas.get(id(node.buffer.data))
            if i is not None:
                written.add(i)
            self.generic_visit(node)

    _Stores().visit(func.body)
    return sorted(written)


# ---- making a reference (parent process) -----------------------------------------------------

def _reference_key(mod: IRModule, target: Target, args_json: list) -> str:
    text = f"{structural_hash(mod)}|{target}|{json.dumps(args_json)}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _compute_reference(artifact: str, args_json: list, outputs: list[int], out_path: str) -> str:
    """Worker job: run the unscheduled artifact and save the outputs."""
    from workbench.runtime import cpu, load_module
    from workbench.runtime.ndarray import tensor

    rt_mod = load_module(artifact)
    args = [tensor(a, cpu(0)) for a in random_arguments(args_json)]
    rt_mod(*args)
    arrays = {f"expected_{i}": args[i].numpy() for i in outputs}
    tmp = f"{out_path}.{os.getpid()}.tmp.npz"
    np.savez(tmp, outputs=np.asarray(outputs, dtype=np.int64),
             args_info=np.asarray(json.dumps(args_json)), **arrays)
    os.replace(tmp, out_path)
    return out_path


@dataclass(frozen=True)
class CompiledReference:
    """A reference compiled and not run yet (:func:`compile_reference`): the object file of
    the unscheduled function, its arguments, which of them it writes, and where
    :func:`run_reference` puts their expected values."""

    obj_path: str
    args_json: list
    outputs: list[int]
    out_path: str


def compile_reference(mod: IRModule | PrimFunc, target: Target | str,
                      args_info: Sequence[ArgInfo] | None, workdir: str
                      ) -> "CompiledReference | str":
    """The first half of :func:`make_reference`: compile the unscheduled ``mod`` into
    ``workdir``; the existing ``.npz`` path instead when this workload's reference was made
    before. Touches no worker process (the tuner compiles in a thread while a batch builds)."""
    from workbench.codegen import compile_to_object

    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod})
    target = target if isinstance(target, Target) else Target(target)
    func = find_entry_func(mod)
    if args_info is None:
        args_info = ArgInfo.from_prim_func(func)
    args_json = [a.as_json() for a in args_info]
    key = _reference_key(mod, target, args_json)
    os.makedirs(workdir, exist_ok=True)
    out_path = os.path.abspath(os.path.join(workdir, f"reference_{key}.npz"))
    if os.path.exists(out_path):
        return out_path
    obj_path = os.path.join(workdir, f"reference_{key}.o")
    tmp = f"{obj_path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as f:
        f.write(compile_to_object(mod, target).obj)
    os.replace(tmp, obj_path)   # whole, even if the process stops while writing
    return CompiledReference(obj_path, args_json, written_arguments(func), out_path)


def run_reference(compiled: "CompiledReference | str", runner: Any = None,
                  timeout_sec: float = 60.0) -> str:
    """The second half of :func:`make_reference`: run a :func:`compile_reference` result
    (a path is returned as it is) and return the ``.npz`` path of its outputs."""
    from workbench.workers import WorkerPool

    if isinstance(compiled, str):
        return compiled
    c = compiled
    compute = getattr(runner, "compute_reference", None)
    if callable(compute):  # the runner runs it where it measures (the "rpc" runner)
        return compute(c.obj_path, c.args_json, c.outputs, c.out_path, timeout_sec)
    worker = getattr(runner, "_pool", None)
    own = worker is None
    if own:
        worker = WorkerPool(1, name="wb-reference", label="make_reference",
                            fallback="running the unscheduled function in this process")
    try:
        out = worker.call(_compute_reference, (c.obj_path, c.args_json, c.outputs, c.out_path),
                          timeout_sec)
    finally:
        if own:
            worker.shutdown()
    if out.kind != "ok":
        detail = {"timeout": f"timed out after {timeout_sec} seconds",
                  "crashed": out.value, "error": out.value}[out.kind]
        raise RuntimeError(f"make_reference: the unscheduled function failed: {detail}")
    return c.out_path


def make_reference(mod: IRModule | PrimFunc, target: Target | str,
                   args_info: Sequence[ArgInfo] | None, workdir: str,
                   runner: Any = None, timeout_sec: float = 60.0) -> str:
    """Compute the expected outputs of the unscheduled ``mod`` once; return the ``.npz`` path
    to put in ``RunnerInput.reference``. Cached by (structural hash, target, args): calling it
    again for the same task returns the existing file. ``runner`` (a LocalRunner) lends its
    worker pool; a runner with a ``compute_reference(obj_path, args_json, outputs,
    out_path, timeout_sec)`` method (the "rpc" runner) computes it itself, on the machines it
    measures on; otherwise a temporary worker is started. Raises ``RuntimeError`` if the
    unscheduled function itself fails, crashes or times out. It is :func:`compile_reference`
    then :func:`run_reference`."""
    return run_reference(compile_reference(mod, target, args_info, workdir), runner=runner,
                         timeout_sec=timeout_sec)


# ---- checking (runner worker) -----------------------------------------------------------------

_REFS: "OrderedDict[str, tuple[float, Any]]" = OrderedDict()


def _load_reference(path: str) -> tuple:
    """(outputs, expected, None, args_json) from an .npz, or (None, None, module, None) for
    an artifact reference."""
    mtime = os.path.getmtime(path)
    hit = _REFS.get(path)
    if hit is not None and hit[0] == mtime:
        _REFS.move_to_end(path)
        return hit[1]
    if path.endswith(".npz"):
        with np.load(path) as data:
            outputs = [int(i) for i in data["outputs"]]
            expected = {i: data[f"expected_{i}"] for i in outputs}
            ref_args = json.loads(str(data["args_info"]))
        value: Any = (outputs, expected, None, ref_args)
    else:
        from workbench.runtime import load_module
        value = (None, None, load_module(path), None)
    _REFS[path] = (mtime, value)
    while len(_REFS) > 4:
        _REFS.popitem(last=False)
    return value


def _compare(i: int, got: np.ndarray, want: np.ndarray) -> tuple[float, str] | None:
    """None if equal within tolerance, else (max abs error, description)."""
    if got.shape != want.shape:
        return float("inf"), f"argument {i} has shape {got.shape}, expected {want.shape}"
    if got.dtype.kind == "f" or got.dtype.name == "bfloat16":
        rtol, atol = TOLERANCES.get(str(got.dtype), TOLERANCES["float32"])
        g, w = got.astype(np.float64), want.astype(np.float64)
        finite = np.isfinite(w)
        scale = max(1.0, float(np.max(np.abs(w[finite]))) if finite.any() else 1.0)
        err = np.abs(g - w)
        same_nan = np.isnan(g) & np.isnan(w)
        same_inf = np.isinf(w) & (g == w)
        bad = ~(same_nan | same_inf | (err <= atol * scale + rtol * np.abs(w)))
        tol = f"rtol={rtol:g}, atol={atol:g}*{scale:.3g}"
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        err = np.abs(g - w)
        bad = got != want
        tol = "exact"
    if not bad.any():
        return None
    err = np.where(bad, np.nan_to_num(err, nan=np.inf), 0.0)
    flat = int(np.argmax(err))
    where = np.unravel_index(flat, got.shape) if got.ndim else ()
    max_err = float(err.reshape(-1)[flat]) if err.size else float("inf")
    return max_err, (f"argument {i} ({got.dtype}{list(got.shape)}) at index "
                     f"{tuple(int(x) for x in where)}: got {got[where]!r}, expected "
                     f"{want[where]!r}; {int(bad.sum())} of {bad.size} element(s) differ "
                     f"({tol})")


def layout_packers(rt_mod: Any) -> dict[int, tuple[str, list, list]]:
    """The packing functions a build compiled next to the entry function (see
    ``LocalBuilder``'s default build): ``{argument index: (function name, original
    argument JSON, packed argument JSON)}`` for each ``<entry>__layout_pack_<i>(src, dst)``."""
    from workbench.tir.transform.remove_weight_layout_rewrite_block import PACK_FUNC_INFIX

    meta = getattr(rt_mod, "metadata", None)
    entry = getattr(rt_mod, "entry_name", None)
    if not isinstance(meta, dict) or not entry:
        return {}
    prefix = f"{entry}{PACK_FUNC_INFIX}"
    out: dict[int, tuple[str, list, list]] = {}
    for fn in meta.get("functions", ()):
        name = fn.get("name", "")
        suffix = name[len(prefix):]
        if not (name.startswith(prefix) and suffix.isdigit()) or len(fn["params"]) != 2:
            continue
        src, dst = fn["params"]
        out[int(suffix)] = (name, ["TENSOR", src["dtype"], list(src["shape"])],
                            ["TENSOR", dst["dtype"], list(dst["shape"])])
    return out


def check_arguments(rt_mod: Any, device: Any, args_json: list, reference: str) -> None:
    """Call ``rt_mod`` once on fresh seeded inputs and compare every argument with the
    reference; raise :class:`WrongResult` on a mismatch.

    A candidate whose weights were packed by ``RewriteLayout`` (its build stripped the
    packing block, so ``args_json`` has packed shapes) carries a packing function per packed
    argument: the check draws the inputs of the *original* arguments -- the very inputs the
    reference was computed on -- packs those weights with the candidate's own packing
    functions, calls the candidate, and compares its outputs with the reference (and each
    packed input with its packed value)."""
    from workbench.runtime.ndarray import tensor

    outputs, expected, ref_mod, ref_args = _load_reference(reference)
    args_json = [list(a) for a in args_json]
    packers = layout_packers(rt_mod)
    original = list(args_json)
    for i, (name, src_json, dst_json) in packers.items():
        if i >= len(args_json) or dst_json != args_json[i]:
            got = args_json[i] if i < len(args_json) else "missing"
            raise WrongResult(f"the packing function {name} makes {dst_json}, but argument "
                              f"{i} of the candidate is {got} (args_info must come from "
                              "this candidate's own stripped function)")
        original[i] = src_json
    if ref_args is not None and ref_args != original:
        what = f"{original} (packed: {args_json})" if packers else f"{args_json}"
        raise WrongResult(f"the reference {reference} was made for arguments {ref_args}, "
                          f"not {what}")
    initial = random_arguments(original)
    args = [tensor(a, device) for a in initial]
    packed: dict[int, np.ndarray] = {}
    for i, (name, _, dst_json) in packers.items():
        dst = tensor(np.zeros([int(d) for d in dst_json[2]], dtype=dst_json[1]), device)
        rt_mod[name](args[i], dst)
        packed[i] = dst.numpy()
        args[i] = dst
    rt_mod(*args)
    got = [a.numpy() for a in args]
    if ref_mod is not None:  # an artifact of the unscheduled function: run it the same way
        ref_args = [tensor(a, device) for a in initial]
        ref_mod(*ref_args)
        want = [a.numpy() for a in ref_args]
    else:
        want = [expected[i] if i in expected else initial[i] for i in range(len(initial))]
    for i, value in packed.items():
        want[i] = value  # a packed input must come back unchanged, in its packed layout
    worst: tuple[float, str] | None = None
    for i, (g, w) in enumerate(zip(got, want)):
        bad = _compare(i, g, w)
        if bad is not None and (worst is None or bad[0] > worst[0]):
            worst = bad
    if worst is not None:
        raise WrongResult(f"max abs error {worst[0]:.6g} in {worst[1]}")
