"""Lowering for feature extraction: the passes TVM runs before collecting per-store features.

TVM does not extract features from block-form TIR but from a partly lowered copy
(``PassListForPerStoreFeature``). We run the same steps through our own lowering pipeline,
``workbench.tir.transform.lower(mod, passes=FEATURE_PASSES)``:

1. ``SimplifyForFeatureExtraction`` (here): unit serial loops without annotations disappear
   (their variable becomes 0), zero-extent loops disappear, and a ``Select`` that loads no
   buffer becomes the constant 1 (so padding predicates do not count as computation);
2. ``LowerInitBlock``: reduction inits become ``if (k == 0) C[..] = 0`` stores;
3. ``LowerOpaqueBlock``: block vars are replaced by their bindings, allocations become
   ``Allocate`` + ``DeclBuffer`` (TVM keeps opaque blocks; only where the allocation sits
   matters to the features);
4. ``PlanBufferAllocation``: each allocation moves to the innermost loop holding its uses;
5. ``CompactBufferAllocation``: each allocation shrinks to the region it touches (our
   pipeline's pass, computed by :mod:`.compact`'s affine fast path when it applies);
6. ``Simplify``.

Unlike ``workbench.compile`` we stop here: no buffer flattening (features read N-d indices and
row-major strides from the shape), no unrolling or vectorizing (loop kinds are features).
TVM's layout-rewrite-block removal, cross-thread reduction, auto-copy, thread-binding
unification and match-buffer lowering have no counterpart in our CPU-only IR yet.

Lowered modules are cached by structural hash (``lower_for_features``), since the tuner's
evolutionary search re-scores the same schedules many times.
"""
from __future__ import annotations

from collections import OrderedDict

from workbench.ir.module import IRModule
from workbench.ir.structural import structural_hash
from workbench.tir import expr as E
from workbench.tir import op
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator
from workbench.tir.stmt import Evaluate, For, ForKind, Stmt
from workbench.tir.transform.lower_blocks import lower_init_block, lower_opaque_block
from workbench.tir.transform.pipeline import Pass, lower
from workbench.tir.transform.plan_buffers import plan_buffer_allocation
from workbench.tir.transform.simplify import simplify_func

from workbench.meta_schedule.feature_extractor.per_store.compact import compact_for_features


def _has_load(e: E.PrimExpr) -> bool:
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, E.BufferLoad):
            return True
        if isinstance(n, E.BinaryOp):
            stack += (n.a, n.b)
        elif isinstance(n, E.Select):
            stack += (n.condition, n.true_value, n.false_value)
        elif isinstance(n, E.Call):
            stack += n.args
        elif isinstance(n, (E.Cast, E.Not)):
            stack.append(n.value if isinstance(n, E.Cast) else n.a)
        elif isinstance(n, E.Let):
            stack += (n.value, n.body)
        elif isinstance(n, E.Broadcast):
            stack.append(n.value)
        elif isinstance(n, E.Ramp):
            stack += (n.base, n.stride)
        elif isinstance(n, E.Shuffle):
            stack += n.vectors
    return False


class _SimplifyForFeatures(IRMutator):
    """TVM's ``SimplifyForFeatureExtraction`` (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.unit_vars: dict[E.Var, E.PrimExpr] = {}

    def visit_For(self, loop: For) -> Stmt:
        ext, mn = loop.extent, loop.min
        if isinstance(ext, E.IntImm) and ext.value == 0:
            return Evaluate(op.const(0, "int32"))
        if isinstance(ext, E.IntImm) and ext.value == 1 and isinstance(mn, E.IntImm) and \
                mn.value == 0 and loop.kind == ForKind.SERIAL and not loop.annotations:
            self.unit_vars[loop.loop_var] = op.const(0, loop.loop_var.dtype)
            return self.visit(loop.body)
        return self.generic_visit(loop)

    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        return self.unit_vars.get(v, v)

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        if _has_load(e):
            return self.generic_visit(e)
        return op.const(1, e.dtype)


def simplify_for_feature_extraction(func: PrimFunc) -> PrimFunc:
    """Drop unit and empty loops; turn load-free Selects into 1 (TVM's pass of that name)."""
    return func.with_body(_SimplifyForFeatures().visit(func.body))


FEATURE_PASSES: tuple[Pass, ...] = (
    Pass("SimplifyForFeatureExtraction", simplify_for_feature_extraction),
    Pass("PlanBufferAllocation", plan_buffer_allocation),  # block form, as in the pipeline
    Pass("LowerInitBlock", lower_init_block),
    Pass("LowerOpaqueBlock", lower_opaque_block),
    Pass("CompactBufferAllocation", compact_for_features),  # same result, affine fast path
    Pass("Simplify", simplify_func),
)


class _LRU:
    """A small least-recently-used map (the tuner keeps proposing the same schedules)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.data: OrderedDict = OrderedDict()

    def get(self, key):
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.capacity:
            self.data.popitem(last=False)


# Small: the extractor caches finished features too; this serves other callers (notebooks).
_LOWERED = _LRU(64)


def lower_for_features(mod: IRModule | PrimFunc, key: int | None = None) -> IRModule:
    """``mod`` lowered through :data:`FEATURE_PASSES`, cached by structural hash.

    ``key`` may pass a structural hash the caller already computed. The input is not modified.
    """
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_expr(mod)
    if key is None:
        key = structural_hash(mod)
    got = _LOWERED.get(key)
    if got is None:
        got = lower(mod, passes=FEATURE_PASSES)
        _LOWERED.put(key, got)
    return got


__all__ = ["FEATURE_PASSES", "lower_for_features", "simplify_for_feature_extraction"]
