"""Integer arithmetic: simplification, constant bounds and interval sets (TVM's ``tvm.arith``).

``Analyzer`` is the entry point; ``ConstIntBound`` and ``IntervalSet`` are what it returns.
See :mod:`.analyzer` for how simplification works and :mod:`.canonical` for the affine form.
"""
from workbench.tir.arith.analyzer import Analyzer
from workbench.tir.arith.const_bound import ConstIntBound
from workbench.tir.arith.evaluate import evaluate
from workbench.tir.arith.int_set import NEG_INF, POS_INF, IntervalSet
from workbench.tir.arith.rewrite_rules import DEFAULT_RULES, Rule, RuleSet

__all__ = ["Analyzer", "ConstIntBound", "IntervalSet", "POS_INF", "NEG_INF", "evaluate",
           "Rule", "RuleSet", "DEFAULT_RULES"]
