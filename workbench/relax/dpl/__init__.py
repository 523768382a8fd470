"""The Relax dataflow pattern language (TVM's ``tvm.relax.dpl``): patterns over Relax
expressions (:mod:`.pattern`) and the matcher (:mod:`.matcher`), which
``relax.transform.FuseOpsByPattern`` and the backends' pattern tables
(``workbench.relax.backend``) use."""
from workbench.relax.dpl.pattern import *  # noqa: F401,F403
from workbench.relax.dpl.pattern import __all__ as _pattern_names
from workbench.relax.dpl.matcher import DFPatternMatcher, extract_matched_expr, match_expr

__all__ = [*_pattern_names, "DFPatternMatcher", "extract_matched_expr", "match_expr"]
