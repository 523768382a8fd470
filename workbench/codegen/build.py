"""``build``: lower an IRModule of PrimFuncs, render LLVM IR, compile, and load it."""
from __future__ import annotations

from typing import Any

from workbench.codegen.compiler import CompiledObject, LLVMCompiler
from workbench.codegen.renderer import render
from workbench.ir.module import IRModule
from workbench.runtime.module import Module
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.transform.pipeline import Instrument, lower


def _as_target(target: Any) -> Target:
    if target is None:
        return Target("llvm")
    return target if isinstance(target, Target) else Target(target)


def _as_module(mod: Any) -> IRModule:
    if isinstance(mod, PrimFunc):
        return IRModule.from_expr(mod)
    if isinstance(mod, IRModule):
        return mod
    raise TypeError(f"build expects an IRModule or a PrimFunc, got {type(mod).__name__}")


def compile_to_object(mod: IRModule | PrimFunc, target: Any = None,
                      instrument: Instrument | None = None,
                      use_cache: bool = True) -> CompiledObject:
    """Lower and compile to object code without loading it (what the tuner's builder runs)."""
    tgt = _as_target(target)
    lowered = lower(_as_module(mod), instrument)
    ll, _ = render(lowered, tgt)
    return LLVMCompiler(tgt, use_cache).compile(ll)


def build(mod: IRModule | PrimFunc, target: Any = None, name: str | None = None,
          instrument: Instrument | None = None):
    """Compile every PrimFunc in ``mod`` for ``target`` and load the result.

    Returns a :class:`workbench.runtime.Module` whose functions are called with NDArrays;
    ``module.get_source("ll")`` / ``get_source("asm")`` show the generated code.
    """
    tgt = _as_target(target)
    mod = _as_module(mod)
    if name is not None and len(mod) == 1:
        only = next(iter(mod))
        mod = IRModule({name: mod[only].with_attr("global_symbol", name)})
    compiled = compile_to_object(mod, tgt, instrument)
    compiler = LLVMCompiler(tgt)
    return Module.from_object(compiled.obj, sources={"ll": compiled.ll,
                                                     "asm": lambda: compiler.assembly(compiled.ll)})
