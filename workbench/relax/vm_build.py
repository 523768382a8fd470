"""``relax.build``: a graph module -> a VM :class:`Executable` with its kernel library (TVM's
``relax.build`` / ``tvm.compile`` for Relax modules).

Steps: bind ``params`` as constants (optional), run the Relax pipeline
(:func:`workbench.relax.pipeline.get_default_pipeline`), generate bytecode for every Relax
function (:mod:`workbench.relax.vm_codegen`), compile all remaining PrimFuncs (fused kernels,
unfused ones, shape functions) with ``workbench.build`` into one runtime Module and import it
into the Executable, with the modules a backend codegen made (``RunCodegen``'s
``external_mods``). The result runs with ``relax.VirtualMachine(exe, dev)`` and can be saved
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
from workbench.ir.transform import Pass
from workbench.relax.expr import Function
from workbench.relax.pipeline import Pipeline, RelaxInstrument, get_default_pipeline
from workbench.runtime.relax_vm import Executable
from workbench.target import Target


def entry_function(mod: IRModule) -> str:
    """The Relax function a build binds ``params`` to: ``main`` when the module has it (or has
    no exported function), else the first exported one."""
    names = [n for n, f in mod.items() if isinstance(f, Function) and
             "global_symbol" in f.attrs]
    if "main" in names or not names:
        return "main"
    return names[0]


def build(mod: IRModule, target: Any = None, params: Mapping[str, Any] | None = None,
          relax_pipeline: Any = None, tir_pipeline: Any = None, exec_mode: str = "bytecode",
          *, fuse: bool = True, plan_memory: bool = True,
          instrument: RelaxInstrument | None = None, database: Any = None,
          default_schedule: bool | None = None, system_lib: bool | None = None) -> Executable:
    """Compile the Relax functions of ``mod`` for ``target`` into an Executable.

    ``target`` (default: the target of the innermost ``with target:``, else the host
    ``llvm``) is in scope while the pipeline runs, as in TVM. ``params`` binds parameters of
    the entry function (``main``, else the first public function) to constant values by
    name. ``relax_pipeline``: None or ``"default"`` -- Workbench's default pipeline, shaped
    by ``fuse`` / ``plan_memory`` (operator fusion, memory planning), ``database`` (a
    meta-schedule Database, or the one in scope: each fused kernel replaced by its best
    tuned schedule, a weight the kernel packs on every call packed at compile time when
    ``params`` binds it) and ``default_schedule`` (default: the option; untuned kernels get a
    default CPU schedule); another name -- ``relax.get_pipeline(name)``; a Pass -- run as
    given, which must leave the module in VM form (end with the default_build pipeline).
    ``tir_pipeline``: None or ``"default"`` (the TIR lowering always runs), or a Pass run on
    the kernels before it. ``instrument(pass_name, module, seconds)`` is called after every
    pass of a :class:`Pipeline`. ``exec_mode`` is ``"bytecode"`` only.
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
    if exec_mode != "bytecode":
        raise ValueError(f"relax.build: exec_mode {exec_mode!r} is not supported; Workbench's "
                         "VM runs bytecode (exec_mode='bytecode')")
    if target is None:
        target = Target.current() or Target("llvm")
    target = target if isinstance(target, Target) else Target(target)
    # Backend modules from RunCodegen (the symbols its call_dps_packed calls name); passes may
    # rebuild the module without its attrs, so they are taken before the pipeline.
    external_mods = tuple(mod.attrs.get("external_mods", ()))
    if params:
        mod = BindParams(entry_function(mod), params)(mod)
    pipeline = _relax_pipeline(relax_pipeline, target, fuse, plan_memory, database,
                               default_schedule)
    with target:
        if isinstance(pipeline, Pipeline):
            lowered = pipeline(mod, instrument)
        elif pipeline is not None:
            lowered = pipeline(mod)
        else:
            lowered = mod
    exe, kernels = vm_codegen(lowered)
    if len(kernels):
        if tir_pipeline not in (None, "default"):
            if not isinstance(tir_pipeline, Pass):
                raise TypeError(f"relax.build: tir_pipeline must be 'default', None or a Pass, "
                                f"got {tir_pipeline!r}")
            with target:
                kernels = tir_pipeline(kernels)
        exe.import_module(build_kernels(kernels, target))
    for ext in external_mods:
        exe.import_module(ext)
    exe.memory_usage = memory_usage(lowered)
    exe.kernel_names = list(kernels)
    exe.lowered_mod = lowered
    return exe


def _relax_pipeline(relax_pipeline: Any, target: Target, fuse: bool, plan_memory: bool,
                    database: Any, default_schedule: bool | None) -> Any:
    if relax_pipeline is None or relax_pipeline == "default":
        return get_default_pipeline(target, fuse=fuse, plan_memory=plan_memory,
                                    database=database, default_schedule=default_schedule)
    if isinstance(relax_pipeline, str):
        from workbench.relax.named_pipelines import get_pipeline
        with target:
            return get_pipeline(relax_pipeline)
    if isinstance(relax_pipeline, Pass):
        return relax_pipeline
    raise TypeError(f"relax.build: relax_pipeline must be a pipeline name, a Pass or None, got "
                    f"{type(relax_pipeline).__name__}")


__all__ = ["build"]
