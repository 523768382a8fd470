"""``relax.build``: a graph module -> a VM :class:`Executable` with its kernel library (TVM's
``relax.build`` / ``tvm.compile`` for Relax modules).

Steps: bind ``params`` as constants (optional), run the Relax pipeline
(:func:`workbench.relax.pipeline.get_default_pipeline`), generate bytecode for every Relax
function (:mod:`workbench.relax.vm_codegen`), compile all remaining PrimFuncs (fused kernels,
unfused ones, shape functions) with ``workbench.build`` into one runtime Module and import it
into the Executable. The result runs with ``relax.VirtualMachine(exe, dev)`` and can be saved
with ``exe.save(path)`` / loaded with ``Executable.load(path)`` in another process.

The Executable also carries, for inspection (not saved with it):

- ``exe.memory_usage``: :class:`MemoryUsage` per function (bytes allocated per call with and
  without memory planning -- see :func:`workbench.relax.transform.estimate_memory_usage`);
- ``exe.kernel_names``: the compiled kernels, in the library's order;
- ``exe.lowered_mod``: the module after the pipeline (what the bytecode was generated from);
- ``exe.call_sources``: ``{(function, instruction index): Span}`` for every kernel call of an
  imported model (the layers it came from; see :mod:`workbench.relax.span`).
"""
from __future__ import annotations

from typing import Any, Mapping

from workbench.ir.module import IRModule
from workbench.relax.expr import Function
from workbench.relax.pipeline import Pipeline, RelaxInstrument, get_default_pipeline
from workbench.runtime.relax_vm import Executable


def entry_function(mod: IRModule) -> str:
    """The Relax function a build binds ``params`` to: ``main`` when the module has it (or has
    no exported function), else the first exported one."""
    names = [n for n, f in mod.items() if isinstance(f, Function) and
             "global_symbol" in f.attrs]
    if "main" in names or not names:
        return "main"
    return names[0]


def build(mod: IRModule, target: Any = "llvm", params: Mapping[str, Any] | None = None,
          fuse: bool = True, plan_memory: bool = True, relax_pipeline: Pipeline | None = None,
          instrument: RelaxInstrument | None = None, database: Any = None,
          default_schedule: bool | None = None) -> Executable:
    """Compile the Relax functions of ``mod`` for ``target`` into an Executable.

    ``params`` binds parameters of the entry function (``main``, else the first public
    function) to constant values by name, as TVM does. ``fuse`` / ``plan_memory`` switch
    operator fusion and memory planning; ``relax_pipeline`` replaces the whole pipeline;
    ``instrument(pass_name, module, seconds)`` is called after every pass. ``database`` (a
    meta-schedule Database) replaces each fused kernel by its best tuned schedule
    (``MetaScheduleApplyDatabase`` after FuseTIR; ignored with ``relax_pipeline``); a tuned
    kernel that packs a weight on every call (RewriteLayout) gets the weight packed at compile
    time instead when ``params`` binds it (``PrepackConstantWeights``). ``default_schedule``
    (default: the option ``default_schedule``, on) gives every kernel not covered by the
    database a default CPU schedule (``workbench.dlight``; ignored with ``relax_pipeline``).
    """
    from workbench.codegen.build import build as build_kernels
    from workbench.relax.transform.bind_params import BindParams
    from workbench.relax.transform.static_plan_block_memory import memory_usage
    from workbench.relax.vm_codegen import vm_codegen
    if not isinstance(mod, IRModule):
        raise TypeError(f"relax.build expects an IRModule with Relax functions, got "
                        f"{type(mod).__name__}")
    if not any(isinstance(f, Function) for _, f in mod.items()):
        raise ValueError("relax.build: the module has no Relax function; compile PrimFunc-only "
                         "modules with workbench.build / workbench.compile")
    if params:
        mod = BindParams(entry_function(mod), params)(mod)
    pipeline = relax_pipeline or get_default_pipeline(target, fuse=fuse,
                                                      plan_memory=plan_memory,
                                                      database=database,
                                                      default_schedule=default_schedule)
    lowered = pipeline(mod, instrument)
    exe, kernels = vm_codegen(lowered)
    if len(kernels):
        exe.import_module(build_kernels(kernels, target))
    exe.memory_usage = memory_usage(lowered)
    exe.kernel_names = list(kernels)
    exe.lowered_mod = lowered
    return exe


__all__ = ["build"]
