"""Relax passes up to legalization (the compilation pipeline after it lives elsewhere)."""
from workbench.relax.transform.legalize_ops import LegalizeOps
from workbench.relax.transform.annotate_tir_op_pattern import AnnotateTIROpPattern, OpPatternKind

__all__ = ["LegalizeOps", "AnnotateTIROpPattern", "OpPatternKind"]
