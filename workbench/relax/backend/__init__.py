"""Relax backends (TVM's ``tvm.relax.backend``): the registry of fusion patterns that
bring-your-own-codegen backends offload (:mod:`.pattern_registry`), the common pattern makers
(:mod:`.patterns`), and the backends' pattern tables (``backend.cuda.cublas``, imported on
its own as in TVM: importing it registers its patterns)."""
from workbench.relax.backend import cuda, patterns, utils
from workbench.relax.backend.pattern_registry import (
    get_pattern, get_patterns_with_prefix, register_patterns,
)

__all__ = ["cuda", "patterns", "utils", "get_pattern", "get_patterns_with_prefix",
           "register_patterns"]
