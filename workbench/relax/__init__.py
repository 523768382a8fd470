"""Relax: the graph-level IR (TVM's ``tvm.relax``), up to legalization to TIR.

- Expressions and struct info: :mod:`workbench.relax.expr`, :mod:`workbench.relax.struct_info`.
- :class:`BlockBuilder` builds functions; ``relax.op`` has the operators (``relax.op.nn`` the
  neural-network ones); ``relax.call_tir`` calls a PrimFunc.
- ``relax.transform``: ``LegalizeOps``, ``AnnotateTIROpPattern``, ``FuseOpsByPattern``, ``RunCodegen``.
- ``relax.dpl``: dataflow patterns; ``relax.backend``: the backends' pattern registry.
- ``relax.testing.evaluate_numpy``: the numpy reference evaluator.
- ``relax.frontend.nn``: PyTorch-like modules exported with ``Module.export_tvm``;
  ``relax.frontend.torch.from_exported_program`` / ``relax.frontend.onnx.from_onnx`` import
  PyTorch / ONNX models.
- ``relax.Span`` / ``relax.Source``: where a call came from in an imported model.
"""
from workbench.ir.module import GlobalVar
from workbench.relax.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from workbench.relax.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc,
    Function, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem,
    Var, VarBinding, const, get_struct_info,
)
from workbench.relax import structural_rules as _structural_rules  # noqa: F401 (registers)
from workbench.relax import printer as _printer  # noqa: F401 (registers)
from workbench.relax.block_builder import BlockBuilder
from workbench.relax import op
from workbench.relax.op.base import (
    call_dps_packed, call_pure_packed, call_tir, call_tir_inplace,
)
from workbench.relax.op.registry import OpError
from workbench.relax.expr_functor import ExprMutator, ExprVisitor, PyExprMutator, PyExprVisitor
from workbench.relax import expr_functor
from workbench.relax.span import Source, Span
from workbench.relax import analysis, testing, transform
from workbench.relax import frontend
# Dataflow patterns and bring-your-own-codegen backends (issue 23).
from workbench.relax import dpl, backend
# Compilation to the VM (issue 5): relax.build, the pipeline, and TVM's VM aliases.
from workbench.relax.pipeline import get_default_pipeline
from workbench.relax.named_pipelines import get_pipeline, register_pipeline
from workbench.relax.vm_build import build
from workbench.runtime.relax_vm import Executable, ExecBuilder, VirtualMachine, VMExecutable

__all__ = [
    "GlobalVar", "StructInfo", "ObjectStructInfo", "PrimStructInfo", "ShapeStructInfo",
    "TensorStructInfo", "TupleStructInfo", "FuncStructInfo", "Expr", "Var", "DataflowVar",
    "Constant", "const", "PrimValue", "StringImm", "ShapeExpr", "ExternFunc", "Op", "Tuple",
    "TupleGetItem", "Call", "If", "Binding", "VarBinding", "MatchCast", "BindingBlock",
    "DataflowBlock", "SeqExpr", "Function", "get_struct_info", "BlockBuilder", "op",
    "call_tir", "call_tir_inplace", "call_dps_packed", "call_pure_packed", "OpError",
    "ExprMutator", "ExprVisitor", "PyExprMutator", "PyExprVisitor", "expr_functor", "analysis",
    "testing", "transform", "frontend", "dpl", "backend", "build", "get_default_pipeline", "get_pipeline",
    "register_pipeline", "VirtualMachine", "Executable",
    "VMExecutable", "ExecBuilder", "Span", "Source",
]
