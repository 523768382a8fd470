"""How TIR nodes take part in structural equality and hashing (see workbench.ir.structural).

Registered on ``import workbench.tir``. The rules say which fields *define* variables or
buffers, and put those fields first so a definition is always met before its uses.
"""
from __future__ import annotations

from workbench.ir.structural import BOUND, VAR, register_structural
from workbench.tir.buffer import Buffer, MatchBufferRegion
from workbench.tir.expr import Let, Reduce, Var
from workbench.tir.function import PrimFunc
from workbench.tir.stmt import Allocate, Block, DeclBuffer, For, IterVar, LetStmt


def register() -> None:
    # Names are for people: renaming a variable or buffer keeps the IR the same.
    register_structural(Var, kind=VAR, ignore=("name",))
    register_structural(Buffer, kind=BOUND, ignore=("name",),
                        inherit_defs=("data", "shape", "strides", "elem_offset"))
    register_structural(IterVar, kind=BOUND, order=("var",), inherit_defs=("var",))

    register_structural(For, order=("loop_var",), defs=("loop_var",))
    register_structural(LetStmt, order=("var",), defs=("var",))
    register_structural(Let, order=("var",), defs=("var",))
    register_structural(Allocate, order=("buffer_var",), defs=("buffer_var",))
    register_structural(DeclBuffer, order=("buffer",), defs=("buffer",))
    register_structural(MatchBufferRegion, order=("buffer",), defs=("buffer",))
    register_structural(Reduce, order=("axis",), defs=("axis",))
    register_structural(Block, order=("iter_vars", "alloc_buffers", "match_buffers"),
                        defs=("iter_vars", "alloc_buffers"))
    # Parameters, then the buffers they carry, then the body that uses them.
    register_structural(PrimFunc, order=("params", "buffer_map"), defs=("params", "buffer_map"))


register()
