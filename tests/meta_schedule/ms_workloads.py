"""Workloads and worker-side helpers for the tuner infrastructure tests.

Functions that run inside builder/runner worker processes live here (module level) so that the
spawned workers can import them by name.
"""
import os
import shutil
import time

import numpy as np

import workbench as wb
from workbench import te, tir
from workbench.meta_schedule.builder.local_builder import default_build
from workbench.tir import stmt as S
from workbench.tir.schedule import Schedule


def matmul(n=16, scale=None, name="C"):
    """``C = A @ B`` (``* scale`` if given: a "wrong" variant of the same signature)."""
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    r = te.reduce_axis((0, n), name="k")
    if scale is None:
        C = te.compute((n, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name=name)
    else:
        C = te.compute((n, n), lambda i, j: te.sum(A[i, r] * B[r, j] * scale, axis=r),
                       name=name)
    return wb.IRModule({"main": te.create_prim_func([A, B, C])})


def scheduled(mod, factor):
    """A traced schedule of a matmul: split the first loop by ``factor``, then the
    EnterPostproc marker (as the tuner's candidates have)."""
    sch = Schedule(mod)
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    sch.split(i, [None, factor])
    sch.enter_postproc()
    return sch


def out_of_bounds_store():
    """A kernel whose store lands ~4 GB past its 16-element buffer: it segfaults."""
    A = tir.decl_buffer((16,), "float32", "A")
    i = tir.Var("i")
    index = i * 100000000 + 1000000000
    body = S.For(i, tir.const(0), tir.const(16), "serial",
                 S.BufferStore(A, tir.const(1.0, "float32"), (index,)))
    return wb.IRModule({"main": tir.prim_func([A], body)})


def infinite_loop():
    """``while (true) A[0] += 1``: never returns."""
    A = tir.decl_buffer((16,), "float32", "A")
    body = S.While(tir.const(True),
                   S.BufferStore(A, A[tir.const(0)] + 1.0, (tir.const(0),)))
    return wb.IRModule({"main": tir.prim_func([A], body)})


def remove_artifacts(results):
    """Delete the temp dirs of BuilderResults (what RemoveBuildArtifact does in tuning)."""
    for r in results:
        if getattr(r, "artifact_path", None):
            shutil.rmtree(os.path.dirname(r.artifact_path), ignore_errors=True)


# ---- worker-side functions (must be importable by name) ---------------------------------------

def build_sleepy(mod, target, params):
    """Sleeps for a module marked ``test_sleep`` (the timeout test), else builds normally."""
    seconds = mod.attrs.get("test_sleep")
    if seconds:
        time.sleep(seconds)
    return default_build(mod, target, params)


def build_raises(mod, target, params):
    raise ValueError("boom: this build always fails")


def build_aborts_if_marked(mod, target, params):
    """Kills the worker with SIGABRT for a module marked ``test_abort``."""
    if mod.attrs.get("test_abort"):
        os.abort()
    return default_build(mod, target, params)


def build_llvm_aborts_if_marked(mod, target, params):
    """For a module marked ``test_llvm_abort``: compiles IR that aborts LLVM (for the x86
    baseline CPU) through the normal compiler, so the worker's compile helper dies, not the
    worker. Else builds normally."""
    if mod.attrs.get("test_llvm_abort"):
        from workbench.codegen import LLVMCompiler
        from workbench.codegen.testing import LLVM_ABORT_TARGET, llvm_abort_ir
        from workbench.target import Target
        return LLVMCompiler(Target(LLVM_ABORT_TARGET)).compile(llvm_abort_ir("tuned_kernel"))
    return default_build(mod, target, params)


def evaluator_raises(rt_mod, device, evaluator_config, repeated_args):
    raise RuntimeError("evaluator exploded")


def evaluator_aborts(rt_mod, device, evaluator_config, repeated_args):
    os.abort()


def numpy_matmul(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def counting_evaluator(rt_mod, device, evaluator_config, repeated_args):
    """The default evaluator, then one line in the file ``$WB_TEST_MEASURED`` per finished
    measurement: a witness, kept by the runner's worker, of what was measured."""
    from workbench.meta_schedule.runner.utils import default_run_evaluator
    costs = default_run_evaluator(rt_mod, device, evaluator_config, repeated_args)
    with open(os.environ["WB_TEST_MEASURED"], "a") as f:
        f.write(f"{os.getpid()}\n")
    return costs
