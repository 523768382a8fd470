"""Group 6 (8 features, only with ``extract_workload=True``): what kind of workload this is.

One-hot slots set from the lower-cased names of the blocks of the task's (block-form) module:
each block sets the first category of ``softmax``, ``max``|``min``, ``add``, ``batch_matmul``,
``matmul``, ``depthwiseconv2d``, ``conv2d_winograd``, ``conv2d`` its name contains (several
blocks may set several slots). The same 8 values are appended to every row of a candidate.
"""
from __future__ import annotations

from workbench.ir.module import IRModule
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRVisitor
from workbench.tir.stmt import Block

WORKLOAD_NAMES = ("workload.softmax", "workload.max_min", "workload.add",
                  "workload.batch_matmul", "workload.matmul", "workload.depthwiseconv2d",
                  "workload.conv2d_winograd", "workload.conv2d")
_PATTERNS = (("softmax",), ("max", "min"), ("add",), ("batch_matmul",), ("matmul",),
             ("depthwiseconv2d",), ("conv2d_winograd",), ("conv2d",))


class _BlockNames(IRVisitor):
    def __init__(self) -> None:
        self.embedding = [0.0] * len(_PATTERNS)

    def visit_Block(self, block: Block) -> None:
        self.generic_visit(block)
        name = block.name_hint.lower()
        for slot, words in enumerate(_PATTERNS):
            if any(w in name for w in words):
                self.embedding[slot] = 1.0
                break


def workload_embedding(mod: IRModule | PrimFunc) -> list[float]:
    """The 8 workload features of a block-form module (see the module docstring)."""
    v = _BlockNames()
    funcs = [mod] if isinstance(mod, PrimFunc) else \
        [f for _, f in mod.items() if isinstance(f, PrimFunc)]
    for f in funcs:
        v.visit(f.body)
    return v.embedding


__all__ = ["WORKLOAD_NAMES", "workload_embedding"]
