"""TVMScript-like text of Relax functions, registered with workbench.ir.printer on import.

::

    @R.function
    def main(x: R.Tensor((n, 8), dtype="float32"), w: R.Tensor((8, 16), dtype="float32")) -> R.Tensor((n, 16), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            lv: R.Tensor((n, 16), dtype="float32") = R.matmul(x, w, out_dtype="void")
            gv: R.Tensor((n, 16), dtype="float32") = R.nn.relu(lv)
            R.output(gv)
        return gv

Symbolic dims used by the function are declared at the top (``n = T.int64()``); names that
clash get ``_1``, ``_2``. Ops print as ``R.<name>`` with their attributes as keywords; PrimFuncs
of the module are referred to as ``cls.<name>``.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from workbench.ir.dispatch import TypeTable
from workbench.ir.module import GlobalVar
from workbench.ir.printer import (
    format_value, metadata_ref, quote, register_attr_value, register_function_printer,
    register_script, register_short_repr,
)
from workbench.relax.expr import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc, Function, If,
    MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var,
    VarBinding,
)
from workbench.relax.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from workbench.relax.dim_text import dim_text
from workbench.relax.op.registry import op_constructor
from workbench.runtime.module import Module
from workbench.tir.expr import PrimExpr, SizeVar
from workbench.tir.script_expr import ExprPrinter, Names

#: The metadata table of tensor values in function attrs (TVM's kind name).
NDARRAY_METADATA = "runtime.NDArray"
#: The metadata table of compiled modules in module attrs (RunCodegen's external_mods).
MODULE_METADATA = "runtime.Module"

_CONST_INLINE_LIMIT = 8  # constants with more elements print as a summary


class _Printer:
    def __init__(self) -> None:
        self.names = Names()
        self.prim = ExprPrinter(self.names)

    # ---- struct info ------------------------------------------------------------------------

    def dims(self, values: Any) -> str:
        parts = [dim_text(v, self.names.var, self.prim) for v in values]
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"

    def sinfo(self, si: Any) -> str:
        rule = _SINFO.get(type(si))
        return rule(self, si) if rule else repr(si)

    # ---- expressions ------------------------------------------------------------------------

    def var_name(self, v: Var) -> str:
        """The printed name of a Relax var (defined on first sight, e.g. a free var)."""
        # Names' public ``var`` would list a relax Var as a free *tir* var; look it up directly.
        known = self.names._by_id.get(id(v))
        return known if known is not None else self.names.define(v, v.name_hint)

    def expr(self, e: Any) -> str:
        rule = _EXPR.lookup(type(e))
        return rule(self, e) if rule else repr(e)

    def attr_value(self, v: Any) -> str:
        if isinstance(v, tuple):
            return "[" + ", ".join(self.attr_value(x) for x in v) + "]"
        if isinstance(v, PrimExpr):
            return dim_text(v, self.names.var, self.prim)
        return format_value(v)

    # ---- statements -------------------------------------------------------------------------

    def binding(self, b: Any, out: list[str]) -> None:
        name = self.names.define(b.var, b.var.name_hint)
        ann = self.sinfo(b.var.struct_info) if b.var.struct_info is not None else None
        if isinstance(b, MatchCast):
            out.append(f"{name}: {ann} = R.match_cast({self.expr(b.value)}, "
                       f"{self.sinfo(b.struct_info)})")
            return
        if isinstance(b.value, If):
            self.if_binding(name, ann, b.value, out)
            return
        if isinstance(b.value, Function):
            out.extend(self.function(b.value, name, local=True).split("\n"))
            return
        lhs = f"{name}: {ann}" if ann else name
        span = getattr(b.value, "span", None)
        # Source locations of imported models show as a trailing comment.
        out.append(f"{lhs} = {self.expr(b.value)}" + (f"  # {span.label()}" if span else ""))

    def if_binding(self, name: str, ann: str | None, e: If, out: list[str]) -> None:
        out.append(f"if {self.expr(e.cond)}:")
        for branch in (e.true_branch, e.false_branch):
            lines: list[str] = []
            body = self.seq(branch, lines)
            lines.append(f"{name}: {ann} = {body}" if ann else f"{name} = {body}")
            out.extend("    " + line for line in lines)
            if branch is e.true_branch:
                out.append("else:")

    def seq(self, s: Any, out: list[str]) -> str:
        """Print the blocks of ``s`` into ``out``; return the text of its result."""
        if not isinstance(s, SeqExpr):
            return self.expr(s)
        for block in s.blocks:
            if isinstance(block, DataflowBlock):
                out.append("with R.dataflow():")
                inner: list[str] = []
                for b in block.bindings:
                    self.binding(b, inner)
                outputs = [self.var_name(b.var) for b in block.bindings
                           if not isinstance(b.var, DataflowVar)]
                inner.append(f"R.output({', '.join(outputs)})")
                out.extend("    " + line for line in inner)
            else:
                for b in block.bindings:
                    self.binding(b, out)
        return self.expr(s.body)

    def function(self, f: Function, name: str, local: bool = False) -> str:
        """``@R.function def name(...)``; a ``local`` function (bound inside another) never
        has an implicit global_symbol, so it prints as plain ``@R.function`` with all its attrs
        (TVM's form)."""
        params = []
        for p in f.params:
            pname = self.names.define(p, p.name_hint)
            params.append(f"{pname}: {self.sinfo(p.struct_info)}")
        body: list[str] = []
        result = self.seq(f.body, body)
        body.append(f"return {result}")
        ret = f" -> {self.sinfo(f.ret_struct_info)}" if f.ret_struct_info is not None else ""
        head: list[str] = []
        for v in self.names.free_vars:
            # SizeVar and Var are different IR; say which, so the text reads back the same.
            size = "is_size_var=True" if isinstance(v, SizeVar) else ""
            head.append(f"{self.names.var(v)} = T.{v.dtype}({size})")
        attrs = {k: _attr_summary(v) for k, v in f.attrs.items()
                 if local or not (k == "global_symbol" and v == name)}
        if attrs:
            head.append(f"R.func_attr({format_value(attrs)})")
        opts = []
        if "global_symbol" not in f.attrs and not local:
            opts.append("private=True")
        if not f.is_pure:
            opts.append("pure=False")
        deco = "@R.function" + (f"({', '.join(opts)})" if opts else "")
        lines = [deco, f"def {name}({', '.join(params)}){ret}:"]
        lines += ["    " + line for line in head + body]
        return "\n".join(lines)


class _TensorRef:
    """How a tensor value in a function attr (the importers' ``params``) prints: a reference
    into the printout's metadata, ``metadata["runtime.NDArray"][k]`` (TVM's form), which
    ``IRModule.script(show_meta=True)`` writes out and the parser reads back as an NDArray."""

    def __init__(self, v: Any) -> None:
        self.text = metadata_ref(NDARRAY_METADATA, Constant(v))

    def __repr__(self) -> str:
        return self.text


def _attr_summary(v: Any) -> Any:
    if isinstance(v, (tuple, list)):
        return type(v)(_attr_summary(x) for x in v)
    if hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, (Expr, PrimExpr)):
        return _TensorRef(v)
    return v


# ---- struct info rules ------------------------------------------------------------------------

def _tensor(p: _Printer, si: TensorStructInfo) -> str:
    args = []
    if si.shape is not None:
        args.append(p.dims(si.values))
    if si.dtype:
        args.append(f"dtype={quote(si.dtype)}")
    if si.shape is None and si.ndim >= 0:
        args.append(f"ndim={si.ndim}")
    return f"R.Tensor({', '.join(args)})" if args else "R.Tensor"


def _shape(p: _Printer, si: ShapeStructInfo) -> str:
    if si.values is not None:
        return f"R.Shape([{p.dims(si.values)[1:-1].rstrip(',')}])"
    return f"R.Shape(ndim={si.ndim})" if si.ndim >= 0 else "R.Shape"


def _tuple_si(p: _Printer, si: TupleStructInfo) -> str:
    return f"R.Tuple({', '.join(p.sinfo(f) for f in si.fields)})"


def _func_si(p: _Printer, si: FuncStructInfo) -> str:
    params = "..." if si.params is None else \
        "(" + ", ".join(p.sinfo(x) for x in si.params) + ("," if len(si.params) == 1 else "") + ")"
    pure = "" if si.purity else ", purity=False"
    return f"R.Callable({params}, {p.sinfo(si.ret)}{pure})"


def _prim_si(p: _Printer, si: PrimStructInfo) -> str:
    if si.value is not None:  # a known value, constant or not, is part of the struct info
        return f"R.Prim(value={p.prim(si.value)})"
    return f"R.Prim({quote(si.dtype)})"


_SINFO: dict[type, Callable[[_Printer, Any], str]] = {
    TensorStructInfo: _tensor, ShapeStructInfo: _shape, TupleStructInfo: _tuple_si,
    FuncStructInfo: _func_si, PrimStructInfo: _prim_si,
    ObjectStructInfo: lambda p, si: "R.Object",
}


# ---- expression rules -------------------------------------------------------------------------

def _op_name(name: str) -> str:
    return "R." + (name[len("relax."):] if name.startswith("relax.") else name)


def _call(p: _Printer, c: Call) -> str:
    op = c.op
    if isinstance(op, Op) and op.name in ("relax.call_tir", "relax.call_tir_inplace",
                                          "relax.call_dps_packed"):
        gv, args = c.args[0], c.args[1]
        outs = c.sinfo_args
        out_text = p.sinfo(outs[0]) if len(outs) == 1 else \
            "[" + ", ".join(p.sinfo(o) for o in outs) + "]"
        # TVM prints the packed callee of call_dps_packed by its name, as a string.
        callee = quote(gv.global_symbol) if isinstance(gv, ExternFunc) else p.expr(gv)
        text = f"{_op_name(op.name)}({callee}, {p.expr(args)}"
        if "inplace_indices" in c.attrs:
            idx = list(c.attrs["inplace_indices"])
            text += f", inplace_indices={idx[0] if len(idx) == 1 else idx}"
        text += f", out_sinfo={out_text}"
        if len(c.args) > 2:
            text += f", tir_vars={p.expr(c.args[2])}"
        return text + ")"
    if isinstance(op, Op) and op.name == "relax.call_pure_packed":
        sinfo = ", ".join(p.sinfo(s) for s in c.sinfo_args)
        rest = "".join(", " + p.expr(a) for a in c.args[1:])
        return f"R.call_pure_packed({quote(c.args[0].global_symbol)}{rest}, sinfo_args=({sinfo},))"
    args = [p.expr(a) for a in c.args]
    if isinstance(op, Op):
        args += [f"{k}={p.attr_value(v)}" for k, v in c.attrs.items()]
        if c.sinfo_args and op_constructor(op.name) is None:
            # A registered-only op (R.call_builtin_with_ctx) takes its result from these.
            args.append(f"sinfo_args=({''.join(p.sinfo(s) + ', ' for s in c.sinfo_args)})")
        return f"{_op_name(op.name)}({', '.join(args)})"
    if isinstance(op, ExternFunc):
        sinfo = ", ".join(p.sinfo(s) for s in c.sinfo_args)
        extra = f", sinfo_args=({sinfo},)" if sinfo else ""
        return f"R.call_packed({quote(op.global_symbol)}{''.join(', ' + a for a in args)}{extra})"
    return f"{p.expr(op)}({', '.join(args)})"


def _literal(v: Any) -> str:
    """A Python literal of a constant's values; inf and nan (whose repr is no Python name)
    as ``float("inf")``, which the parser reads back."""
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    if isinstance(v, float) and not math.isfinite(v):
        return f'float("{v}")'
    return repr(v)


def _constant(p: _Printer, c: Constant) -> str:
    d = c.data
    size = 1
    for s in d.shape:
        size *= s
    if size <= _CONST_INLINE_LIMIT:
        return f"R.const({_literal(d.numpy().tolist())}, {quote(d.dtype)})"
    # Too big to print: a reference into the printout's metadata (TVM's form), which
    # IRModule.script(show_meta=True) writes out.
    return metadata_ref("relax.expr.Constant", c)


def _tuple(p: _Printer, t: Tuple) -> str:
    inner = ", ".join(p.expr(f) for f in t.fields)
    return f"({inner},)" if len(t.fields) == 1 else f"({inner})"


_EXPR: TypeTable[Callable[[_Printer, Any], str]] = TypeTable({
    Var: lambda p, v: p.var_name(v),
    Constant: _constant,
    ShapeExpr: lambda p, s: f"R.shape([{p.dims(s.values)[1:-1].rstrip(',')}])",
    PrimValue: lambda p, v: f"R.prim_value({p.prim(v.value)})",
    StringImm: lambda p, s: f"R.str({quote(s.value)})",
    Tuple: _tuple,
    TupleGetItem: lambda p, g: f"{p.expr(g.tuple_value)}[{g.index}]",
    Call: _call,
    Op: lambda p, o: _op_name(o.name),
    ExternFunc: lambda p, e: f"R.ExternFunc({quote(e.global_symbol)})",
    GlobalVar: lambda p, g: f"cls.{g.name_hint}",
    SeqExpr: lambda p, s: _inline_seq(p, s),
    If: lambda p, e: f"R.If({p.expr(e.cond)}, ...)",
    Function: lambda p, f: f"<relax.Function with {len(f.params)} params>",
})


def _inline_seq(p: _Printer, s: SeqExpr) -> str:
    lines: list[str] = []
    result = p.seq(s, lines)
    return "\n".join(lines + [f"return {result}"]) if lines else result


# ---- entry points -----------------------------------------------------------------------------

def sinfo_text(si: StructInfo) -> str:
    """The text of a struct info (``R.Tensor((2, 3), dtype="float32")``)."""
    return _Printer().sinfo(si)


def function_text(func: Function, name: str) -> str:
    """``@R.function def name(...)`` for a Relax function."""
    return _Printer().function(func, name)


def expr_text(e: Any) -> str:
    return _Printer().expr(e)


def _binding_text(b: Any) -> str:
    lines: list[str] = []
    _Printer().binding(b, lines)
    return "\n".join(lines)


def _block_text(block: BindingBlock) -> str:
    lines: list[str] = []
    _Printer().seq(SeqExpr((block,), Tuple(())), lines)
    return "\n".join(lines)


def _short_var(v: Var) -> str:
    si = f": {sinfo_text(v.struct_info)}" if v.struct_info is not None else ""
    kind = "DataflowVar" if isinstance(v, DataflowVar) else "Var"
    return f"<relax.{kind} {v.name_hint}{si}>"


def register() -> None:
    register_function_printer(Function, function_text)
    # A compiled module (in RunCodegen's external_mods) prints as a metadata reference (TVM's
    # form); the metadata section holds its code, which I.load_metadata loads again.
    register_attr_value(Module, lambda m: metadata_ref(MODULE_METADATA, m.serialize()))
    register_script(Function, lambda f: function_text(f, f.attrs.get("global_symbol", "main")))
    register_script(Expr, expr_text)
    register_script(StructInfo, sinfo_text)
    register_script(VarBinding, _binding_text)
    register_script(MatchCast, _binding_text)
    register_script(BindingBlock, _block_text)
    register_short_repr(StructInfo, sinfo_text)
    register_short_repr(Var, _short_var)
    register_short_repr(Expr, lambda e: _cut(expr_text(e)))
    register_short_repr(Function, _short_function)


def _short_function(f: Function) -> str:
    return f"<relax.Function({', '.join(p.name_hint for p in f.params)})>"


def _cut(text: str, limit: int = 120) -> str:
    text = text.replace("\n", "; ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


register()

__all__ = ["sinfo_text", "function_text", "expr_text"]
