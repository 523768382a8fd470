"""TVMScript: Python-syntax text of IR, read back into IR (TVM's ``tvm.script``).

::

    from workbench.script import ir as I, tir as T, relax as R

    @I.ir_module
    class Module:
        @T.prim_func
        def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.block("B"):
                    vi = T.axis.spatial(8, i)
                    B[vi] = A[vi] + T.float32(1)

The decorators read the function's source with :mod:`ast`; the body is never run as Python.
``from_source(text)`` reads what ``.script()`` prints. Errors are :class:`ParserError`, whose
message names the file and line and shows the line.
"""
from __future__ import annotations

from workbench.script import ir, relax, tir
from workbench.script.errors import ParserError
from workbench.script.ir import ir_module
from workbench.script.parser.entry import from_source

__all__ = ["ir", "tir", "relax", "ir_module", "from_source", "ParserError"]
