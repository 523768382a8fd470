"""``FuseOpsByPattern``: group the bindings a pattern matches into functions (TVM's pass).

Contract: ``FuseOpsByPattern(patterns, bind_constants=True, annotate_codegen=False,
entry_functions=None)(mod)`` returns a new module. Patterns are tried one after the other
(earlier ones first: they have priority); for each, every dataflow block of every entry
function (the named ones, else each Relax function that is not itself ``Primitive``,
``Composite`` or ``Codegen``) is scanned binding by binding:

- a call binding whose value the pattern matches (following the block's variables to their
  values) and whose match the pattern's ``check`` accepts becomes the root of a group holding
  every binding whose call (or tuple item) a non-root call pattern matched; what wildcards
  matched stays outside and becomes a parameter. A binding already in a group is only taken
  over when that whole group lies inside the new match;
- each group becomes a private function with attrs ``Composite=<pattern name>`` and
  ``Primitive=True``, named ``fused_<op>_<op>...`` (``fused_relax_matmul_relax_add``), whose
  parameters are the values it reads from outside (constants stay inside with
  ``bind_constants``) and whose result is what is used outside (a tuple when several are);
  the group's bindings are replaced by one call of it, placed after the groups it depends on.

With ``annotate_codegen`` each composite function is then wrapped in a public function with
attrs ``Codegen=<pattern name prefix>`` and ``global_symbol=<name>_<codegen>``, whose body
binds the composite function locally and calls it: what ``RunCodegen`` hands to a backend.

Not done (as noted where it matters): a symbolic var used inside a group but defined by none
of its parameters' shapes (TVM adds a ``tir_vars`` parameter), and TVM's splitting of a tuple
parameter that is only read item by item.
"""
from __future__ import annotations

import warnings
from typing import Any, Iterable, Mapping, Sequence

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.dpl.matcher import extract_matched_expr
from workbench.relax.dpl.pattern import CallPattern, TupleGetItemPattern
from workbench.relax.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, Function, Op,
    PrimValue, SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var, VarBinding,
)
from workbench.relax.struct_info import TupleStructInfo
from workbench.relax.transform._util import fresh_name, renew_symbolic_vars, used_vars
from workbench.relax.transform.fusion_pattern import (
    FusionPattern, PatternCheckContext, as_fusion_pattern,
)

_SKIP_ATTRS = ("Primitive", "Composite", "Codegen")


# ---- partitioning one dataflow block by one pattern -------------------------------------------

class _Group:
    """A union-find node; the root of a fused group carries its function attrs."""

    __slots__ = ("parent", "num_nodes", "attrs")

    def __init__(self) -> None:
        self.parent: _Group | None = None
        self.num_nodes = 1
        self.attrs: dict[str, Any] = {}

    def root(self) -> "_Group":
        g = self
        while g.parent is not None:
            g = g.parent
        return g


def _is_fused_part(pat: Any, match: Any, root_call: Call) -> bool:
    """Whether a sub-match is a binding pulled into the group (wildcards stay outside)."""
    return (isinstance(pat, CallPattern) and match is not root_call) or \
        isinstance(pat, TupleGetItemPattern)


def _use_def(block: DataflowBlock) -> dict[Var, list[Var]]:
    usages: dict[Var, list[Var]] = {b.var: [] for b in block.bindings}
    for b in block.bindings:
        for v in used_vars(b.value):
            usages.setdefault(v, []).append(b.var)
    return usages


def _partition(block: DataflowBlock, fp: FusionPattern) -> dict[Var, _Group]:
    groups: dict[Var, _Group] = {}
    members: dict[_Group, list[Var]] = {}
    var2val: dict[Var, Expr] = {}
    value_to_var: dict[Expr, Var] = {}
    usages = _use_def(block)
    for b in block.bindings:
        if isinstance(b, VarBinding):
            var2val[b.var] = b.value
            value_to_var[b.value] = b.var
        g = groups[b.var] = _Group()
        members[g] = [b.var]
        if not (isinstance(b, VarBinding) and isinstance(b.value, Call)):
            continue
        matches = extract_matched_expr(fp.pattern, b.value, var2val)
        if matches is None:
            continue
        if fp.check is not None and not fp.check(
                _context(b.value, matches, fp, usages, value_to_var)):
            continue
        parts = [value_to_var.get(m) for p, m in matches.items()
                 if _is_fused_part(p, m, b.value)]
        if any(v is None for v in parts):
            continue  # a matched call that no binding holds (not in normal form)
        matched_vars = set(parts) | {b.var}
        if any(groups[v].root().num_nodes > 1 and
               not all(x in matched_vars for x in members[groups[v]]) for v in parts):
            continue  # it would split a group an earlier match made
        parent = groups[b.var].root()
        parent.attrs["Composite"] = fp.name
        if fp.attrs_getter is not None:
            annotated = {k: matches[p] for k, p in fp.annotation_patterns.items()
                         if p in matches}
            parent.attrs.update(fp.attrs_getter(annotated))
        for v in parts:
            g0 = groups[v]
            if g0 is not parent:
                g0.num_nodes -= 1
                g0.parent = parent
                members[parent].append(v)
                parent.num_nodes += 1
    return groups


def _context(call: Call, matches: Mapping[Any, Expr], fp: FusionPattern,
             usages: Mapping[Var, list[Var]], value_to_var: Mapping[Expr, Var]
             ) -> PatternCheckContext:
    annotated = {k: matches[p] for k, p in fp.annotation_patterns.items() if p in matches}
    bindings = {value_to_var[m]: m for p, m in matches.items()
                if isinstance(p, (CallPattern, TupleGetItemPattern)) and m in value_to_var}
    return PatternCheckContext(call, annotated, bindings, usages, dict(value_to_var))


# ---- building the function of one group --------------------------------------------------------

def _callee_part(value: Any) -> str:
    op = value.op
    if isinstance(op, Op):
        if op.name in ("relax.call_tir", "relax.call_tir_inplace"):
            return value.args[0].name_hint
        return op.name
    if isinstance(op, GlobalVar):
        name = op.name_hint
        return name[len("fused_"):] if name.startswith("fused_") else name
    return ""


def _inlinable(e: Any) -> bool:
    """Constant PrimValues and ShapeExprs (and tuples of them) stay inside the function."""
    if isinstance(e, Tuple):
        return all(_inlinable(f) for f in e.fields)
    if isinstance(e, (PrimValue, ShapeExpr)):
        from workbench.relax.struct_info import symbolic_vars
        return not symbolic_vars(e.struct_info)
    return False


class _FunctionCreator:
    """Collects a group's bindings, its parameters (what it reads from outside) and outputs."""

    def __init__(self, lift_constants: bool):
        self.lift_constants = lift_constants
        self.bindings: list[Binding] = []
        self.defined: set[Var] = set()
        self.params: list[Var] = []
        self.arguments: list[Expr] = []
        self.outputs: list[Var] = []
        self.name = "fused"
        self._n_const = 0

    def append(self, b: Binding) -> None:
        value = b.value
        if isinstance(b, VarBinding) and isinstance(value, Call):
            part = _callee_part(value)
            if part:
                self.name += "_" + part
            args = value.args[1].fields if isinstance(value.op, Op) and value.op.name in (
                "relax.call_tir", "relax.call_tir_inplace") else value.args
            for a in args:
                self._argument(a)
        elif isinstance(b, VarBinding) and isinstance(value, TupleGetItem):
            self._argument(value.tuple_value)
        else:
            for v in used_vars(value):
                self._argument(v)
        self.defined.add(b.var)
        if not isinstance(b.var, DataflowVar):
            self.add_output(b.var)
        self.bindings.append(b)

    def add_output(self, var: Var) -> int:
        if var not in self.outputs:
            self.outputs.append(var)
        return self.outputs.index(var)

    def _argument(self, e: Any) -> None:
        if any(a is e for a in self.arguments):
            return
        if isinstance(e, Tuple) and not _inlinable(e):
            for f in e.fields:  # a tuple of values: each outside value is a parameter
                self._argument(f)
            return
        if isinstance(e, Var):
            if e not in self.defined:
                self._param(e.name_hint, e)
        elif isinstance(e, Constant):
            if self.lift_constants:
                self._param(f"param_{self._n_const}", e)
            self._n_const += 1
        elif isinstance(e, (PrimValue, ShapeExpr)) and not _inlinable(e):
            # Symbolic values come from the caller; constant ones (and strings, dtypes) stay.
            self._param(f"param_{self._n_const}", e)
            self._n_const += 1

    def _param(self, name: str, arg: Expr) -> None:
        self.params.append(Var(name, arg.struct_info))
        self.arguments.append(arg)

    def make(self) -> Function | None:
        if not self.outputs:
            warnings.warn("FuseOpsByPattern: a matched group's result is never used; run "
                          "DeadCodeElimination first (the group is dropped)", stacklevel=4)
            return None
        remap: dict[Expr, Expr] = dict(zip(self.arguments, self.params))
        new_bindings: list[Binding] = []
        for b in self.bindings:
            value = _substitute(b.value, remap)
            cls = Var if b.var in self.outputs else DataflowVar
            var = cls(b.var.name_hint, b.var.struct_info)
            remap[b.var] = var
            new_bindings.append(b.replace(var=var, value=value))
        outs = [remap[o] for o in self.outputs]
        body: Expr = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
        seq = SeqExpr((DataflowBlock(tuple(new_bindings)),), body, body.struct_info)
        func = Function(tuple(self.params), seq, body.struct_info, True)
        return func


def _substitute(e: Any, remap: Mapping[Expr, Expr]) -> Any:
    if not isinstance(e, Expr) or isinstance(e, Function):
        return e
    hit = remap.get(e)
    if hit is not None:
        return hit
    if isinstance(e, Tuple):
        fields = tuple(_substitute(f, remap) for f in e.fields)
        return e if all(a is b for a, b in zip(fields, e.fields)) else \
            Tuple(fields, e.struct_info)
    if isinstance(e, Call):
        args = tuple(_substitute(a, remap) for a in e.args)
        return e if all(a is b for a, b in zip(args, e.args)) else e.replace(args=args)
    if isinstance(e, TupleGetItem):
        t = _substitute(e.tuple_value, remap)
        return e if t is e.tuple_value else e.replace(tuple_value=t)
    return e


# ---- rewriting one block -------------------------------------------------------------------------

def _fuse_block(block: DataflowBlock, groups: Mapping[Var, _Group], lift_constants: bool,
                out_mod: IRModule) -> DataflowBlock:
    roots = {b.var: groups[b.var].root() for b in block.bindings}

    def fused(g: _Group) -> bool:
        return g.num_nodes > 1 or bool(g.attrs)

    creators: dict[_Group, _FunctionCreator] = {}
    for b in block.bindings:
        g = roots[b.var]
        if fused(g):
            creators.setdefault(g, _FunctionCreator(lift_constants)).append(b)
    if not creators:
        return block
    deps: dict[_Group, list[_Group]] = {}
    for b in block.bindings:
        cur = roots[b.var]
        for v in used_vars(b.value):
            producer = roots.get(v)
            if producer is None or producer is cur:
                continue
            if cur in deps.get(producer, ()):
                raise RuntimeError(f"FuseOpsByPattern: A cyclic dependency detected between "
                                   f"the groups {b.var.name_hint} and {v.name_hint} are in.")
            deps.setdefault(cur, []).append(producer)
            if producer in creators:
                creators[producer].add_output(v)
    funcs = {g: c.make() for g, c in creators.items()}

    out: list[Binding] = []
    for b in _topo_sort(block.bindings, roots, deps):
        g = roots[b.var]
        if not fused(g):
            out.append(b)
            continue
        creator, func = creators[g], funcs[g]
        if func is None or creator.bindings[-1] is not b:
            continue
        attrs = {**g.attrs, "Primitive": True}
        func = renew_symbolic_vars(func.with_attrs(attrs))
        name = fresh_name(out_mod, creator.name.replace(".", "_"))
        out_mod[name] = func
        out.extend(_call_bindings(out_mod.get_global_var(name), creator))
    return DataflowBlock(tuple(out))


def _topo_sort(bindings: Sequence[Binding], roots: Mapping[Var, _Group],
               deps: Mapping[_Group, list[_Group]]) -> list[Binding]:
    """Bindings group by group, each group after the groups it reads from, otherwise in the
    original order (TVM's order)."""
    per_group: dict[_Group, list[Binding]] = {}
    order: list[_Group] = []
    for b in bindings:
        g = roots[b.var]
        if g not in per_group:
            order.append(g)
        per_group.setdefault(g, []).append(b)
    visited: set[_Group] = set()
    out: list[Binding] = []

    def visit(g: _Group) -> None:
        if g in visited or g not in per_group:
            return
        visited.add(g)
        for d in deps.get(g, ()):
            visit(d)
        out.extend(per_group[g])
    for g in order:
        visit(g)
    return out


def _call_bindings(gv: GlobalVar, creator: _FunctionCreator) -> list[Binding]:
    outputs = creator.outputs
    # The call's struct info is in the caller's symbolic vars (the callee has its own).
    sinfo = outputs[0].struct_info if len(outputs) == 1 else \
        TupleStructInfo(tuple(o.struct_info for o in outputs))
    call = Call(gv, tuple(creator.arguments), {}, (), sinfo)
    if len(outputs) == 1:
        return [VarBinding(outputs[0], call)]
    tuple_var = DataflowVar(f"{outputs[-1].name_hint}_tuple", sinfo)
    return [VarBinding(tuple_var, call)] + [
        VarBinding(o, TupleGetItem(tuple_var, k, o.struct_info)) for k, o in enumerate(outputs)]


def _fuse_function(func: Function, fp: FusionPattern, lift_constants: bool,
                   out_mod: IRModule) -> Function:
    seq = func.body
    if not isinstance(seq, SeqExpr):
        return func
    blocks = []
    for block in seq.blocks:
        if isinstance(block, DataflowBlock):
            block = _fuse_block(block, _partition(block, fp), lift_constants, out_mod)
        blocks.append(block)
    if all(a is b for a, b in zip(blocks, seq.blocks)):
        return func
    return func.replace(body=SeqExpr(tuple(blocks), seq.body, seq.struct_info))


# ---- annotate_codegen: wrap composite functions for a backend ------------------------------------

def _annotate_codegen(mod: IRModule) -> IRModule:
    out = mod.copy()
    renamed: dict[str, GlobalVar] = {}

    def wrap(gv: GlobalVar) -> GlobalVar:
        if gv.name_hint not in renamed:
            inner = out[gv]
            codegen = inner.attrs["Composite"].split(".")[0]
            symbol = f"{gv.name_hint}_{codegen}"
            del out[gv]
            out[symbol] = _codegen_function(inner, codegen, symbol)
            renamed[gv.name_hint] = out.get_global_var(symbol)
        return renamed[gv.name_hint]

    def is_composite_call(e: Any) -> bool:
        return isinstance(e, Call) and isinstance(e.op, GlobalVar) and e.op in out and \
            isinstance(out[e.op], Function) and "Composite" in out[e.op].attrs

    for name, func in list(out.items()):
        if not isinstance(func, Function) or any(k in func.attrs for k in ("Composite",
                                                                            "Codegen")):
            continue
        if not isinstance(func.body, SeqExpr):
            continue
        blocks = []
        for block in func.body.blocks:
            new = tuple(b.replace(value=b.value.replace(op=wrap(b.value.op)))
                        if isinstance(b, VarBinding) and is_composite_call(b.value) else b
                        for b in block.bindings)
            blocks.append(block if all(x is y for x, y in zip(new, block.bindings))
                          else type(block)(new))
        if any(x is not y for x, y in zip(blocks, func.body.blocks)):
            out[name] = func.replace(body=func.body.replace(blocks=tuple(blocks)))
    return out


def _codegen_function(inner: Function, codegen: str, symbol: str) -> Function:
    """``def <symbol>(params): local_func = <inner>; return local_func(params)`` with the
    Codegen and global_symbol attrs (the inner function keeps only Composite)."""
    # The local function gets symbolic vars of its own: each function defines the ones its
    # parameters use (shared ones would not read back from the printed text). The outer
    # function and the call keep the composite function's.
    params = tuple(Var(p.name_hint, p.struct_info) for p in inner.params)
    ret = inner.ret_struct_info
    local_func = renew_symbolic_vars(inner.without_attr("Primitive"))
    local = Var("local_func", local_func.struct_info)
    output = Var("output", ret)
    body = SeqExpr((BindingBlock((VarBinding(local, local_func),
                                  VarBinding(output, Call(local, params, {}, (), ret)))),),
                   output, ret)
    return Function(params, body, ret, inner.is_pure,
                    {"Codegen": codegen, "global_symbol": symbol})


# ---- the pass ------------------------------------------------------------------------------------

class _FuseOpsByPattern(Pass):
    name = "FuseOpsByPattern"

    def __init__(self, patterns: list[FusionPattern], bind_constants: bool,
                 annotate_codegen: bool, entry_functions: list[str]):
        self.patterns = patterns
        self.bind_constants = bind_constants
        self.annotate_codegen = annotate_codegen
        self.entry_functions = entry_functions

    def _entries(self, mod: IRModule) -> list[str]:
        if self.entry_functions:
            for name in self.entry_functions:
                if name not in mod or not isinstance(mod[name], Function):
                    raise ValueError(f"FuseOpsByPattern: entry function {name!r} is not a "
                                     f"Relax function of the module")
            return list(self.entry_functions)
        return [n for n, f in mod.items()
                if isinstance(f, Function) and not any(f.attrs.get(k) for k in _SKIP_ATTRS)]

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for fp in self.patterns:
            for name in self._entries(out):
                out[name] = _fuse_function(out[name], fp, not self.bind_constants, out)
        return _annotate_codegen(out) if self.annotate_codegen else out


def FuseOpsByPattern(patterns: Iterable[Any], bind_constants: bool = True,
                     annotate_codegen: bool = False,
                     entry_functions: Sequence[str] | None = None) -> Pass:
    """The pass (see the module docstring). ``patterns``: FusionPatterns or
    ``(name, pattern[, annotation_patterns[, check]])`` tuples, highest priority first."""
    if isinstance(patterns, (FusionPattern, tuple)):
        patterns = [patterns]
    converted = [as_fusion_pattern(p) for p in patterns]
    if entry_functions is not None and (isinstance(entry_functions, str) or not all(
            isinstance(n, str) for n in entry_functions)):
        raise TypeError(f"FuseOpsByPattern: entry_functions must be a list of function "
                        f"names, got {entry_functions!r}")
    return _FuseOpsByPattern(converted, bool(bind_constants), bool(annotate_codegen),
                             list(entry_functions or []))


__all__ = ["FuseOpsByPattern"]
