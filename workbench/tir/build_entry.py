"""``tir.build``: TVM's spelling of "compile these PrimFuncs into a runtime Module".

It sits in ``tir`` because TVM puts it there, but the compiler is one floor up
(``workbench.codegen``), so it is imported when ``build`` is called (an allowed upward edge,
see tests/test_layering.py): importing ``tir`` stays free of LLVM.
"""
from __future__ import annotations

from typing import Any

from workbench.ir.module import IRModule
from workbench.tir.function import PrimFunc

__all__ = ["build"]


def build(mod: IRModule | PrimFunc, target: Any = None, pipeline: Any = "default") -> Any:
    """Compile the PrimFunc ``mod`` (or every PrimFunc of the IRModule ``mod``) for ``target``
    (default: the host CPU, ``"llvm"``) and return a ``runtime.Module`` with one function per
    PrimFunc, named by its ``global_symbol``.

    ``pipeline``: only TVM's ``"default"`` (or None) lowering pipeline exists here; anything
    else raises ``ValueError``.
    """
    if not isinstance(mod, (IRModule, PrimFunc)):
        raise TypeError(f"tir.build: expects a PrimFunc or an IRModule, got "
                        f"{type(mod).__name__}")
    if pipeline not in (None, "default"):
        raise ValueError(f"tir.build: pipeline={pipeline!r} is not supported; Workbench "
                         "lowers with its one TIR pipeline (pipeline='default')")
    if isinstance(mod, IRModule):
        others = [name for name, f in mod.items() if not isinstance(f, PrimFunc)]
        if others:
            raise TypeError(f"tir.build: the module has functions that are not PrimFuncs "
                            f"({', '.join(others)}); compile a Relax module with "
                            "workbench.compile")
    from workbench.codegen.build import build as codegen_build  # floor 3, see the docstring
    return codegen_build(mod, target)
