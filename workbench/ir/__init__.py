"""Floor 1 of the IR: node base, dtypes, IRModule, structural equality/hash, JSON, printer."""
from workbench.ir.node import FrozenDict, Node
from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.structural import (
    assert_structural_equal, register_structural, structural_equal, structural_hash,
)
from workbench.ir.json import load_json, save_json
from workbench.ir import instrument, transform

__all__ = ["FrozenDict", "Node", "GlobalVar", "IRModule", "structural_equal",
           "structural_hash", "assert_structural_equal", "register_structural", "save_json",
           "load_json", "instrument", "transform"]
