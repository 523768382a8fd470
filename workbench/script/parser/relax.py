"""TVMScript -> Relax Function: parameters, bindings, dataflow blocks, ``if`` and ``return``.

Contract: ``parse_relax_function(fdef, source, env, pure, private)`` reads one ``def`` and
returns the normalised ``relax.Function``. Rules that are not plain Python:

- ``n = T.int64()`` declarations are known from the start (the signature above uses them), and
  a dim written as a string (``R.Tensor(("n", 4))``) is the function's var of that name.
- ``x: ann = value`` binds ``x`` with the annotated struct info (else the inferred one); inside
  ``with R.dataflow():`` the names listed in ``R.output(...)`` are ordinary Vars, the rest
  DataflowVars. Nested calls (``R.add(R.matmul(x, w), b)``) are bound to fresh vars first,
  as the BlockBuilder does.
- ``if cond:`` with both branches ending in an assignment to the same name binds that name
  to a Relax ``If``.
"""
from __future__ import annotations

import ast
from typing import Any, Callable

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.node import frozen
from workbench.relax.block_builder import BlockBuilder
from workbench.relax.expr import (
    Call, DataflowVar, Expr, Function, If, MatchCast, SeqExpr, Var, VarBinding, is_leaf,
)
from workbench.script import relax as R, tir as T
from workbench.script.parser.core import Parser, Source
from workbench.tir.expr import SizeVar, Var as TirVar


class RelaxParser(Parser):
    """Parses one ``@R.function``; see the module docstring."""

    def __init__(self, source: Source, env: dict[str, Any], mod: IRModule | None = None) -> None:
        super().__init__(source, env)
        self.mod = mod
        # The module's functions parsed so far let calls of them infer their result.
        self.bb = BlockBuilder(mod)
        self.dims: dict[str, TirVar] = {}   # symbolic vars by name, for string dims
        self.outputs: set[str] | None = None  # inside a dataflow block: its output names
        self.attrs: dict[str, Any] = {}

    def string_dim(self, name: str) -> TirVar:
        var = self.dims.get(name)
        if var is None:
            var = self.dims[name] = TirVar(name, "int64")
        return var

    # ---- function ----------------------------------------------------------------------------

    def parse_function(self, fdef: ast.FunctionDef, pure: bool = True,
                       private: bool = False) -> Function:
        token = R._STRING_DIMS.set(self.string_dim)
        try:
            with self.scope():
                done = self._declare_ahead(fdef.body)
                params = [self._param(a) for a in fdef.args.args]
                ret = None if fdef.returns is None else self.sinfo(fdef.returns)
                self.bb.begin_scope([p.name_hint for p in params])
                result = self._body([s for s in fdef.body if id(s) not in done], fdef)
                blocks = self.bb.end_scope()
        finally:
            R._STRING_DIMS.reset(token)
        attrs = dict(self.attrs)
        if not private:
            attrs.setdefault("global_symbol", fdef.name)
        body = SeqExpr(tuple(blocks), result, result.struct_info)
        return Function(tuple(params), body, ret, pure, frozen(attrs))

    def _declare_ahead(self, body: list[ast.stmt]) -> set[int]:
        done = set()
        for node in body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            calls = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if all(isinstance(c, ast.Call) and not c.args and self._is_scalar_type(c.func)
                   for c in calls):
                self._declare(node)
                done.add(id(node))
        return done

    def _is_scalar_type(self, func: ast.expr) -> bool:
        try:
            return isinstance(self.eval(func), T._ScalarType)
        except Exception:  # noqa: BLE001 - a probe; the real parse reports errors
            return False

    def _declare(self, node: ast.Assign) -> None:
        target = node.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        values = self.eval(node.value)
        values = values if isinstance(values, tuple) else (values,)
        if len(names) != len(values) or not all(isinstance(n, ast.Name) for n in names):
            raise self.error(node, "declare symbolic vars as `n = T.int64()` or "
                                   "`n, m = T.int64(), T.int64()`")
        for n, v in zip(names, values):
            var = self.dims.get(n.id)
            if var is None:
                var = (SizeVar if isinstance(v, SizeVar) else TirVar)(n.id, v.dtype)
                self.dims[n.id] = var
            self.define(n.id, var)

    def _param(self, arg: ast.arg) -> Var:
        if arg.annotation is None:
            raise self.error(arg, f"parameter {arg.arg!r} needs a struct info annotation such "
                                  "as R.Tensor((n, 4), 'float32')")
        var = Var(arg.arg, self.sinfo(arg.annotation))
        self.define(arg.arg, var)
        return var

    def sinfo(self, node: ast.expr) -> Any:
        value = self.eval(node)
        with self.located(node):
            return R.as_struct_info(value)

    # ---- statements --------------------------------------------------------------------------

    def _body(self, stmts: list[ast.stmt], owner: ast.AST) -> Expr:
        """Bindings of ``stmts`` into the current scope; the value of the final ``return``."""
        for k, node in enumerate(stmts):
            if isinstance(node, ast.Return):
                if k != len(stmts) - 1:
                    raise self.error(stmts[k + 1], "statements after `return`")
                if node.value is None:
                    raise self.error(node, "a Relax function returns a value")
                return self.leaf(self.expr_of(self.eval(node.value), node.value))
            self.statement(node)
        raise self.error(owner, "a Relax function must end with `return <value>`")

    def statement(self, node: ast.stmt) -> None:
        handler = _STMT.get(type(node))
        if handler is None:
            raise self.error(node, f"unsupported statement in a Relax function: "
                                   f"{type(node).__name__} ({ast.unparse(node).splitlines()[0]})")
        with self.located(node):
            handler(self, node)

    def _assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = ...) is not supported")
        self._bind(node.targets[0], None, node.value, node)

    def _ann_assign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise self.error(node, "a binding needs a value")
        self._bind(node.target, self.sinfo(node.annotation), node.value, node)

    def _bind(self, target: ast.expr, ann: Any, value_node: ast.expr, node: ast.AST) -> None:
        if isinstance(target, ast.Tuple):
            raise self.error(node, "bind a tuple to one name, then take its fields (t[0])")
        if not isinstance(target, ast.Name):
            raise self.error(node, f"cannot assign to {ast.unparse(target)}")
        value = self.eval(value_node)
        if isinstance(value, R.MatchCastSpec):
            self._match_cast(target.id, ann, value, node)
            return
        if isinstance(value, (TirVar,)) and value.name == "":
            raise self.error(node, "declare symbolic vars at the top of the function")
        if not _is_relax_value(value):  # a Python value (`cls = Module`): just a name
            self.define(target.id, value)
            return
        expr = self.expr_of(value, value_node)
        with self.located(node):
            expr = self.normalize(expr, ann)
        var = self._new_var(target.id, ann if ann is not None else expr.struct_info)
        self.bb.emit_normalized(VarBinding(var, expr))
        self.define(target.id, var)

    def _match_cast(self, name: str, ann: Any, spec: R.MatchCastSpec, node: ast.AST) -> None:
        value = self.leaf(self.expr_of(spec.value, node))
        var = self._new_var(name, ann if ann is not None else spec.struct_info)
        self.bb.emit_normalized(MatchCast(var, value, spec.struct_info))
        self.define(name, var)

    def _new_var(self, name: str, sinfo: Any) -> Var:
        dataflow = self.outputs is not None and name not in self.outputs
        return (DataflowVar if dataflow else Var)(name, sinfo)

    def _expr_stmt(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        value = self.eval(node.value)
        if isinstance(value, R.FuncAttr):
            self.attrs.update(value.attrs)
        elif isinstance(value, R.Output):
            if self.outputs is None:
                raise self.error(node, "R.output(...) belongs inside `with R.dataflow():`")
        elif isinstance(value, (Expr, tuple, list)):
            expr = self.normalize(self.expr_of(value, node), None)
            var = self._new_var("_", expr.struct_info)
            self.bb.emit_normalized(VarBinding(var, expr))
        else:
            raise self.error(node, f"this expression makes no binding: {ast.unparse(node)}")

    def _with(self, node: ast.With) -> None:
        if len(node.items) != 1 or not isinstance(self.eval(node.items[0].context_expr),
                                                  R.DataflowScope):
            raise self.error(node, "the only `with` in a Relax function is `with R.dataflow():`")
        if self.outputs is not None:
            raise self.error(node, "dataflow blocks do not nest")
        self.outputs = _output_names(node.body)
        self.bb.begin_dataflow_block()
        try:
            for s in node.body:
                self.statement(s)
        finally:
            self.outputs = None
            self.bb.end_block()

    def _if(self, node: ast.If) -> None:
        cond = self.leaf(self.expr_of(self.eval(node.test), node.test))
        if not node.orelse:
            raise self.error(node, "a Relax `if` needs an `else` branch")
        name = _branch_target(self, node.body, node)
        if _branch_target(self, node.orelse, node) != name:
            raise self.error(node, "both branches of a Relax `if` must end by assigning the "
                                   "same name")
        branches = []
        ann = None
        for stmts in (node.body, node.orelse):
            self.bb.begin_scope()
            with self.scope():
                for s in stmts[:-1]:
                    self.statement(s)
                last = stmts[-1]
                if isinstance(last, ast.AnnAssign):
                    ann = self.sinfo(last.annotation)
                result = self.leaf(self.expr_of(self.eval(last.value), last))
            blocks = self.bb.end_scope()
            branches.append(SeqExpr(tuple(blocks), result, result.struct_info))
        with self.located(node):
            expr = self.bb.normalize(If(cond, branches[0], branches[1]))
        var = self._new_var(name, ann if ann is not None else expr.struct_info)
        self.bb.emit_normalized(VarBinding(var, expr))
        self.define(name, var)

    def _function_def(self, node: ast.FunctionDef) -> None:
        """A local function (``@R.function def f(...)`` inside a function body, as
        ``FuseOpsByPattern(annotate_codegen=True)`` makes): parsed with the names in scope,
        then bound to a variable of its name."""
        opts = _function_options(self, node)
        # A local function has no implicit global_symbol (TVM's parser adds none either);
        # one it has is written in its R.func_attr.
        opts["private"] = True
        env = dict(self.env)
        for frame in self.scopes:
            env.update(frame)
        func = RelaxParser(self.source, env, self.mod).parse_function(node, **opts)
        var = self._new_var(node.name, func.struct_info)
        self.bb.emit_normalized(VarBinding(var, func))
        self.define(node.name, var)

    # ---- expressions -------------------------------------------------------------------------

    def expr_of(self, value: Any, node: ast.AST) -> Expr:
        if isinstance(value, (tuple, list)):
            from workbench.relax.expr import Tuple
            return Tuple(tuple(self.expr_of(v, node) for v in value))
        if isinstance(value, (Expr, GlobalVar)):
            return value
        if isinstance(value, (int, float, bool)):
            return R.const(value)
        raise self.error(node, f"not a Relax value: {ast.unparse(node)} is {value!r}")

    def call(self, func: Callable, args: list, kwargs: dict, node: ast.Call) -> Any:
        if isinstance(func, (GlobalVar, Var)):  # cls.helper(x): a call of another function
            if kwargs:
                raise self.error(node, "a call of a Relax function takes no keywords")
            return Call(func, tuple(self.leaf(self.expr_of(a, node)) for a in args))
        return super().call(func, args, kwargs, node)

    def normalize(self, expr: Expr, ann: Any) -> Expr:
        """Struct info filled in; a call of another function of the module takes the binding's
        annotation (its callee may not be parsed yet)."""
        if isinstance(expr, Call) and isinstance(expr.op, (GlobalVar, Var)) and ann is not None:
            args = tuple(self.leaf(a) for a in expr.args)
            return expr.replace(args=args, struct_info=ann)
        return self.bb.normalize(expr)

    def leaf(self, expr: Expr) -> Expr:
        """``expr`` as a call argument: non-leaf values are bound to a fresh var first."""
        expr = self.bb.normalize(expr)
        if is_leaf(expr) or isinstance(expr, GlobalVar):
            return expr
        from workbench.relax.expr import Tuple
        if isinstance(expr, Tuple):
            return expr
        return self.bb.emit(expr)



def _is_relax_value(v: Any) -> bool:
    if isinstance(v, (tuple, list)):
        return len(v) > 0 and all(_is_relax_value(x) for x in v)
    return isinstance(v, Expr)


def _output_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for s in body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "output":
            names.update(a.id for a in s.value.args if isinstance(a, ast.Name))
    return names


def _branch_target(p: RelaxParser, stmts: list[ast.stmt], node: ast.AST) -> str:
    last = stmts[-1] if stmts else None
    target = getattr(last, "target", None) or (last.targets[0] if isinstance(last, ast.Assign)
                                               else None)
    if not isinstance(target, ast.Name):
        raise p.error(node, "each branch of a Relax `if` must end with `name = value`")
    return target.id


def _function_options(p: RelaxParser, node: ast.FunctionDef) -> dict[str, bool]:
    """``pure`` / ``private`` from a local function's ``@R.function(...)`` decorator."""
    if len(node.decorator_list) != 1:
        raise p.error(node, "a local function takes one decorator, @R.function")
    deco = node.decorator_list[0]
    func = deco.func if isinstance(deco, ast.Call) else deco
    if p.eval(func) is not R.function:
        raise p.error(node, "a local function in a Relax function must be an @R.function")
    opts: dict[str, bool] = {}
    for kw in deco.keywords if isinstance(deco, ast.Call) else ():
        if kw.arg not in ("pure", "private"):
            raise p.error(deco, f"@R.function: unknown option {kw.arg!r}")
        opts[kw.arg] = bool(p.eval(kw.value))
    return opts


_STMT: dict[type, Callable[[RelaxParser, Any], None]] = {
    ast.Assign: RelaxParser._assign, ast.AnnAssign: RelaxParser._ann_assign,
    ast.Expr: RelaxParser._expr_stmt, ast.With: RelaxParser._with, ast.If: RelaxParser._if,
    ast.Pass: lambda p, n: None, ast.FunctionDef: RelaxParser._function_def,
}


def parse_relax_function(fdef: ast.FunctionDef, source: Source, env: dict[str, Any],
                         pure: bool = True, private: bool = False,
                         mod: IRModule | None = None) -> Function:
    """The Relax Function of one ``def`` node of ``source``; ``mod`` holds the functions of
    its module parsed so far."""
    return RelaxParser(source, env, mod).parse_function(fdef, pure, private)


__all__ = ["RelaxParser", "parse_relax_function"]
