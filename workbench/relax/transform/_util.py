"""Small helpers shared by the compilation passes (which variables an expression uses, which
module functions it references, fresh names, the Relax functions of a module and rewriting
them, the bindings and uses a folding pass looks up, the tir Vars of struct info)."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from workbench.ir.dispatch import TypeTable
from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.node import rewrite_nodes
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    Binding, Call, Constant, Function, If, SeqExpr, Tuple, TupleGetItem, Var, VarBinding,
)
from workbench.relax.expr_functor import ExprVisitor
from workbench.relax.struct_info import TensorStructInfo, TupleStructInfo


def _uses(e: Any, out: list[Var], seen: set[int]) -> None:
    rule = _USES.lookup(type(e))
    if rule is not None:
        rule(e, out, seen)


def _use_var(v: Var, out: list[Var], seen: set[int]) -> None:
    if id(v) not in seen:
        seen.add(id(v))
        out.append(v)


def _use_seq(s: SeqExpr, out: list[Var], seen: set[int]) -> None:
    for block in s.blocks:
        for b in block.bindings:
            _uses(b.value, out, seen)
    _uses(s.body, out, seen)


_USES: TypeTable[Callable[[Any, list, set], None]] = TypeTable({
    Var: _use_var,
    Call: lambda c, out, seen: [_uses(a, out, seen) for a in (c.op, *c.args)],
    Tuple: lambda t, out, seen: [_uses(f, out, seen) for f in t.fields],
    TupleGetItem: lambda g, out, seen: _uses(g.tuple_value, out, seen),
    If: lambda e, out, seen: [_uses(x, out, seen) for x in (e.cond, e.true_branch,
                                                            e.false_branch)],
    SeqExpr: _use_seq,
})


def used_vars(e: Any) -> list[Var]:
    """The Relax Vars ``e`` reads (in first-use order), looking into If branches; variables
    defined inside a branch are included too (they never clash with outer ones)."""
    out: list[Var] = []
    _uses(e, out, set())
    return out


def referenced_functions(e: Any) -> set[str]:
    """The names of the module functions referenced anywhere in ``e`` (called, passed as a
    value, inside nested functions and If conditions)."""
    out: set[str] = set()
    _add_references(e, out)
    return out


def _add_references(e: Any, out: set[str]) -> None:
    if isinstance(e, GlobalVar):
        out.add(e.name_hint)
    elif isinstance(e, SeqExpr):
        for blk in e.blocks:
            for b in blk.bindings:
                _add_references(b.value, out)
        _add_references(e.body, out)
    elif isinstance(e, Call):
        _add_references(e.op, out)
        for a in e.args:
            _add_references(a, out)
    elif isinstance(e, Tuple):
        for f in e.fields:
            _add_references(f, out)
    elif isinstance(e, TupleGetItem):
        _add_references(e.tuple_value, out)
    elif isinstance(e, If):
        for x in (e.cond, e.true_branch, e.false_branch):
            _add_references(x, out)
    elif isinstance(e, Function):
        _add_references(e.body, out)


def relax_functions(mod: IRModule) -> Iterator[tuple[str, Function]]:
    """``(name, function)`` for every Relax function of ``mod`` (a snapshot)."""
    for name, func in list(mod.items()):
        if isinstance(func, Function):
            yield name, func


def is_primitive(func: Any) -> bool:
    return isinstance(func, Function) and bool(func.attrs.get("Primitive", 0))


def rewrite_relax_functions(mod: IRModule, rewrite: Callable[[IRModule, Function],
                                                             Function | None]) -> IRModule:
    """A copy of ``mod`` in which each non-primitive Relax function ``f`` is replaced by
    ``rewrite(copy, f)`` (``copy``: the module being built, for the rewriter's builder), or
    kept when that returns None. The input module is not modified."""
    out = mod.copy()
    for name, func in relax_functions(mod):
        if not is_primitive(func):
            new = rewrite(out, func)
            if new is not None:
                out[name] = new
    return out


class PlannedFoldPass(Pass):
    """A pass that folds in two steps per non-primitive Relax function: ``plan_class()``
    visits it and its ``folds()`` says what to fold (nothing: the function is kept), then
    ``folder_class(mod, folds)`` rewrites it and lists what it folded in ``folded``. After a
    call, ``folded`` holds those lists of every function, in order."""

    plan_class: type
    folder_class: type

    def __init__(self) -> None:
        self.folded: list[str] = []

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name} expects an IRModule, got {type(mod).__name__}")
        self.folded = []
        return rewrite_relax_functions(mod, self._rewrite)

    def _rewrite(self, out: IRModule, func: Any) -> Any:
        plan = self.plan_class()
        plan.visit_expr(func)
        folds = plan.folds()
        if not folds:
            return None
        folder = self.folder_class(out, folds)
        new = folder.visit_expr(func)
        self.folded += folder.folded
        return new


def op_name(e: Any) -> str:
    """The operator name of a Relax ``Call`` (``"relax.nn.conv2d"``), else ``""``."""
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""


class BindingIndex(ExprVisitor):
    """Visited over a function: the value bound to each var (``values``, by ``id``) and how
    many times each var is used anywhere (``uses``) -- what a folding pass asks before it
    rewrites a binding whose value nothing else may read."""

    def __init__(self) -> None:
        self.values: dict[int, Any] = {}
        self.uses: dict[int, int] = {}

    def visit_binding(self, b: Any) -> None:
        if isinstance(b, VarBinding):
            self.values[id(b.var)] = b.value
        super().visit_binding(b)

    def visit_Var_(self, v: Var) -> None:
        self.uses[id(v)] = self.uses.get(id(v), 0) + 1

    def constant(self, e: Any) -> Constant | None:
        """``e`` if it is a Constant, the Constant a var ``e`` is bound to, else None."""
        if isinstance(e, Var):
            e = self.values.get(id(e))
        return e if isinstance(e, Constant) else None

    def single_use_value(self, e: Any) -> Any:
        """The value bound to var ``e`` when ``e`` is used exactly once, else None."""
        if not isinstance(e, Var) or self.uses.get(id(e)) != 1:
            return None
        return self.values.get(id(e))


def fresh_name(mod: IRModule, base: str) -> str:
    """``base``, or ``base1``, ``base2``, ... whichever is not a function of ``mod``."""
    if base not in mod:
        return base
    k = 1
    while f"{base}{k}" in mod:
        k += 1
    return f"{base}{k}"


def map_bindings(seq: SeqExpr, fn: Callable[[Binding], list[Binding]],
                 nested: bool = True) -> SeqExpr:
    """Rebuild ``seq`` with each binding replaced by ``fn(binding)`` (a list). With
    ``nested``, If values are rebuilt first (each branch through the same ``fn``)."""
    blocks = []
    changed = False
    for block in seq.blocks:
        new: list[Binding] = []
        for b in block.bindings:
            if nested and isinstance(b.value, If):
                b2 = _map_if_binding(b, fn)
                changed |= b2 is not b
                b = b2
            out = fn(b)
            changed |= not (len(out) == 1 and out[0] is b)
            new.extend(out)
        blocks.append(type(block)(tuple(new)) if new else None)
    if not changed:
        return seq
    return SeqExpr(tuple(b for b in blocks if b is not None), seq.body, seq.struct_info)


def _map_if_binding(b: Binding, fn: Callable[[Binding], list[Binding]]) -> Binding:
    e: If = b.value
    t = map_bindings(e.true_branch, fn) if isinstance(e.true_branch, SeqExpr) else e.true_branch
    f = map_bindings(e.false_branch, fn) if isinstance(e.false_branch, SeqExpr) \
        else e.false_branch
    if t is e.true_branch and f is e.false_branch:
        return b
    return b.replace(value=If(e.cond, t, f, e.struct_info))


def with_body(func: Function, body: SeqExpr) -> Function:
    return func if body is func.body else func.replace(body=body)


def tensor_fields(sinfo: Any) -> list[TensorStructInfo]:
    """The tensors of a tensor or (nested) tuple struct info, flattened."""
    if isinstance(sinfo, TensorStructInfo):
        return [sinfo]
    if isinstance(sinfo, TupleStructInfo):
        return [t for f in sinfo.fields for t in tensor_fields(f)]
    raise TypeError(f"expected tensor or tuple struct info, got {sinfo}")


def renew_symbolic_vars(func: Function) -> Function:
    """``func`` with fresh tir Vars for the symbolic vars its parameters define (TVM's
    SymbolicVarRenewMutator). A symbolic var belongs to the one function that defines it: a
    function built from another's bindings (FuseOps) that kept the caller's var objects would
    share them across functions, which is malformed (the printed text gives each function its
    own, so the module no longer reads back as itself)."""
    from workbench.relax.struct_info import symbolic_vars

    vmap: dict[int, Any] = {}
    for p in func.params:
        for v in symbolic_vars(p.struct_info):
            vmap.setdefault(id(v), type(v)(v.name, v.dtype))
    if not vmap:
        return func
    # tir Vars have no IR fields, so replace sees the original objects.
    return rewrite_nodes(func, lambda n: vmap.get(id(n)))


__all__ = ["used_vars", "referenced_functions", "relax_functions", "is_primitive", "fresh_name", "map_bindings",
           "with_body", "tensor_fields",
           "renew_symbolic_vars"]
