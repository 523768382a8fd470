"""``LegalizeOps``: rewrite every high-level op call into ``call_tir`` of te-made PrimFuncs.

Contract: ``LegalizeOps()(mod)`` returns a new module (``mod`` is not changed) in which every
call of an op that has a legalization rule (``registry.LEGALIZE_RULES``, or the
``customize_legalize_map`` given here, which wins) and whose tensors have known shapes and
dtypes is replaced by what the rule builds, normally::

    lv: R.Tensor((n, 16), dtype="float32") = R.call_tir(cls.matmul, (x, w),
                                                         out_sinfo=R.Tensor((n, 16), "float32"))

The PrimFuncs are added to the module (named after the op: ``matmul``, ``add``, ``add1``, ...;
structurally equal kernels are shared). Calls with unknown shapes, and ops without a rule, are
left as they are (listed in the pass's ``skipped`` attribute). Bound variables keep their
identity and names, so the function reads the same apart from the calls. Every call a rule
makes gets the legalized call's ``span`` (source location, see ``workbench.relax.span``).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import Call, Expr, Op
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.op.registry import LEGALIZE_RULES
from workbench.relax.struct_info import TensorStructInfo, TupleStructInfo

LegalizeFunc = Callable[[Any, Call], Expr]


def _known(si: Any) -> bool:
    if isinstance(si, TensorStructInfo):
        return si.values is not None and bool(si.dtype)
    if isinstance(si, TupleStructInfo):
        return all(_known(f) for f in si.fields)
    return True


class _Legalizer(ExprMutator):
    def __init__(self, mod: IRModule, rules: Mapping[str, LegalizeFunc]):
        super().__init__(mod)
        self.rules = rules
        self.skipped: list[str] = []

    def visit_Call_(self, c: Call) -> Expr:
        call = super().visit_Call_(c)
        if not isinstance(call, Call) or not isinstance(call.op, Op):
            return call
        rule = self.rules.get(call.op.name)
        if rule is None:
            if call.op.name not in ("relax.call_tir", "relax.call_dps_packed",
                                    "relax.call_pure_packed"):
                self.skipped.append(f"{call.op.name}: no legalization rule")
            return call
        if not (_known(call.struct_info) and all(_known(a.struct_info) for a in call.args)):
            self.skipped.append(f"{call.op.name}: shapes or dtypes unknown")
            return call
        # The call_tirs the rule makes (and any calls it emits) inherit the call's span.
        with self.builder_.span_scope(call.span):
            return self.builder_.normalize(rule(self.builder_, call))


class LegalizeOps(Pass):
    """The pass object: ``mod = LegalizeOps()(mod)`` (TVM's ``relax.transform.LegalizeOps``)."""

    name = "LegalizeOps"

    def __init__(self, customize_legalize_map: Mapping[str, LegalizeFunc] | None = None,
                 enable_warning: bool = False):
        self.custom = dict(customize_legalize_map or {})
        self.enable_warning = enable_warning
        self.skipped: list[str] = []

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"LegalizeOps expects an IRModule, got {type(mod).__name__}")
        import workbench.relax.op  # noqa: F401  (every family registers its rules)
        rules = {**LEGALIZE_RULES, **{_full(k): v for k, v in self.custom.items()}}
        legalizer = _Legalizer(mod.copy(), rules)
        out = legalizer.mutate_module()
        self.skipped = legalizer.skipped
        if self.enable_warning and self.skipped:
            import warnings
            warnings.warn("LegalizeOps left calls unchanged: " + "; ".join(self.skipped),
                          stacklevel=2)
        return out


def _full(name: str) -> str:
    return name if name.startswith("relax.") else f"relax.{name}"


__all__ = ["LegalizeOps"]
