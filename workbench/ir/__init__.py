"""Floor 1 of the IR: node base, dtypes, IRModule, structural equality/hash, JSON, printer."""
from workbench.ir.node import FrozenDict, Node
from workbench.ir.module import GlobalVar, IRModule

__all__ = ["FrozenDict", "Node", "GlobalVar", "IRModule"]
