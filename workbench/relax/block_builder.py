"""BlockBuilder: build Relax functions binding by binding (TVM's ``relax.BlockBuilder``).

::

    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(relax.op.matmul(x, w))          # DataflowVar "lv"
            gv = bb.emit_output(relax.op.nn.relu(lv))    # Var "gv", visible after the block
        bb.emit_func_output(gv)
    mod = bb.get()

Contract:

- ``emit`` normalises its expression: nested non-leaf arguments are emitted first as their own
  bindings (A-normal form) and every expression gets its struct info from the op's inference
  rule, which raises :class:`~workbench.relax.op.registry.OpError` on bad shapes or dtypes.
- Emitted variables are named ``lv``, ``lv1``, ... inside dataflow blocks and ``gv``, ``gv1``,
  ... otherwise, unless a name hint is given; names are unique within a function.
- ``add_func`` names functions uniquely in the module (``add``, ``add1``, ...) and returns the
  existing GlobalVar when a structurally equal PrimFunc is already there (legalizing two equal
  adds makes one kernel).
- ``call_te`` turns a te function into a PrimFunc in the module and returns the ``call_tir``
  (not emitted); ``emit_te`` emits it.
"""
from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Iterator, Sequence

from workbench.ir.dispatch import TypeTable
from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.node import frozen
from workbench.relax import analysis
from workbench.relax.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc,
    Function, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem,
    Var, VarBinding, is_leaf,
)
from workbench.relax.struct_info import (
    FuncStructInfo, ObjectStructInfo, StructInfo, TensorStructInfo, TupleStructInfo,
)


class NameSupply:
    """Unique names: ``lv``, ``lv1``, ``lv2``, ... (TVM's style)."""

    def __init__(self, taken: Sequence[str] = ()):
        self._taken: set[str] = set(taken)
        self._next: dict[str, int] = {}

    def reserve(self, name: str) -> None:
        self._taken.add(name)

    def fresh(self, base: str) -> str:
        if base not in self._taken:
            self._taken.add(base)
            return base
        k = self._next.get(base, 1)
        while f"{base}{k}" in self._taken:
            k += 1
        self._next[base] = k + 1
        name = f"{base}{k}"
        self._taken.add(name)
        return name


class _Frame:
    """A scope being built: a function body or an If branch."""

    def __init__(self, names: NameSupply):
        self.names = names
        self.blocks: list[BindingBlock] = []
        self.bindings: list[Binding] | None = None
        self.is_dataflow = False
        # id(DataflowVar) -> the Var emit_output bound it to (see emit_func_output)
        self.exported: dict[int, Var] = {}


class _FunctionState:
    def __init__(self, name: str | None, params: list[Var] | None, attrs: dict, pure: bool,
                 private: bool):
        self.name = name
        self.params = params
        self.attrs = attrs
        self.pure = pure
        self.private = private
        self.done = False
        self.gvar: GlobalVar | None = None


class BlockBuilder:
    """Builds Relax functions into an IRModule (see the module docstring for the contract)."""

    _stack: list["BlockBuilder"] = []

    def __init__(self, mod: IRModule | None = None):
        # A copy (of the function table; functions are shared): TVM's IRModule is
        # copy-on-write, so a builder never changes the module its caller still holds.
        self._mod = mod.copy() if mod is not None else IRModule()
        self._global_names = NameSupply(list(self._mod))
        self._frames: list[_Frame] = []
        self._func: _FunctionState | None = None
        self._bound: dict[int, Expr] = {}  # id(var) -> value, for lookup_binding
        self._hash_memo: dict[int, tuple[Any, int]] = {}  # id(PrimFunc) -> (func, hash)
        self._span: Any = None  # tags calls normalised inside span_scope (relax.span.Span)

    # ---- scopes -------------------------------------------------------------------------------

    @staticmethod
    def current() -> "BlockBuilder | None":
        """The innermost BlockBuilder in a ``with`` (or ``function``) scope."""
        return BlockBuilder._stack[-1] if BlockBuilder._stack else None

    def __enter__(self) -> "BlockBuilder":
        BlockBuilder._stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        BlockBuilder._stack.pop()

    @contextlib.contextmanager
    def function(self, name: str, params: Sequence[Var] | Var | None = None,
                 attrs: dict | None = None, pure: bool = True,
                 private: bool = False) -> Iterator[None]:
        """A scope building function ``name``; end it with :meth:`emit_func_output`."""
        if self._func is not None:
            raise RuntimeError(f"BlockBuilder.function({name!r}): already building function "
                               f"{self._func.name!r}; nested function scopes are not supported")
        if name in self._mod:
            raise ValueError(f"BlockBuilder.function: the module already has a function named "
                             f"{name!r}")
        if isinstance(params, Var):
            params = [params]
        plist = None if params is None else self._check_params(list(params), name)
        self._func = _FunctionState(name, plist, dict(attrs or {}), pure, private)
        names = NameSupply([p.name_hint for p in plist or []])
        self._frames.append(_Frame(names))
        BlockBuilder._stack.append(self)
        try:
            yield
            if not self._func.done:
                raise RuntimeError(f"function {name!r}: the scope ended without "
                                   "BlockBuilder.emit_func_output")
        finally:
            BlockBuilder._stack.pop()
            self._frames.clear()
            self._func = None

    @staticmethod
    def _check_params(params: list[Any], fname: str) -> list[Var]:
        for i, p in enumerate(params):
            if not isinstance(p, Var):
                raise TypeError(f"function {fname!r}: parameter {i} must be a relax.Var, got "
                                f"{p!r}")
            if p.struct_info is None:
                raise ValueError(f"function {fname!r}: parameter {p.name_hint!r} needs struct "
                                 "info, e.g. relax.Var('x', relax.TensorStructInfo((2, 3), "
                                 "'float32'))")
        return params

    @contextlib.contextmanager
    def span_scope(self, span: Any) -> Iterator[None]:
        """Every call normalised inside the scope that has no span yet gets ``span`` (a
        :class:`workbench.relax.span.Span`, or None for no tagging): how importers record
        which model operation each emitted call implements, and how LegalizeOps hands a
        call's span to the ``call_tir`` s it becomes. Scopes nest; the innermost wins."""
        outer = self._span
        self._span = span
        try:
            yield
        finally:
            self._span = outer

    @contextlib.contextmanager
    def dataflow(self) -> Iterator[None]:
        """A dataflow block: emits make DataflowVars; ``emit_output`` makes the block's outputs."""
        self.begin_dataflow_block()
        try:
            yield
        finally:
            self.end_block()

    def begin_scope(self, taken_names: Sequence[str] = ()) -> None:
        """Open a function-body scope without a function (for mutators rebuilding a body);
        ``taken_names`` are names new variables must avoid."""
        self._frames.append(_Frame(NameSupply(taken_names)))

    def end_scope(self) -> tuple[BindingBlock, ...]:
        """Close the scope opened by :meth:`begin_scope`; returns its blocks."""
        f = self._frames.pop()
        self._close_block(f)
        return tuple(f.blocks)

    def _frame(self, what: str) -> _Frame:
        if not self._frames:
            raise RuntimeError(f"BlockBuilder.{what}: not inside a function scope "
                               "(use `with bb.function(name, params):`)")
        return self._frames[-1]

    def begin_dataflow_block(self) -> None:
        """Start a dataflow block (for mutators; users write ``with bb.dataflow():``)."""
        self._begin_block(True)

    def begin_binding_block(self) -> None:
        """Start a plain binding block (for mutators)."""
        self._begin_block(False)

    def _begin_block(self, dataflow: bool) -> None:
        f = self._frame("dataflow" if dataflow else "begin_binding_block")
        if f.is_dataflow and f.bindings is not None:
            raise RuntimeError("BlockBuilder: already inside a dataflow block")
        self._close_block(f)
        f.bindings = []
        f.is_dataflow = dataflow

    def end_block(self) -> BindingBlock | None:
        """End the current block; returns it (None when it had no bindings)."""
        f = self._frame("end_block")
        return self._close_block(f)

    def _close_block(self, f: _Frame) -> BindingBlock | None:
        block = None
        if f.bindings:
            block = (DataflowBlock if f.is_dataflow else BindingBlock)(tuple(f.bindings))
            f.blocks.append(block)
        f.bindings = None
        f.is_dataflow = False
        return block

    def _current_bindings(self, what: str) -> list[Binding]:
        f = self._frame(what)
        if f.bindings is None:
            f.bindings = []
            f.is_dataflow = False
        return f.bindings

    # ---- emitting -----------------------------------------------------------------------------

    def emit(self, expr: Any, name_hint: str = "") -> Var:
        """Bind the normalised ``expr`` to a new variable and return it."""
        expr = self.normalize(_as_expr(expr))
        f = self._frame("emit")
        return self._emit(expr, name_hint, dataflow=f.bindings is not None and f.is_dataflow)

    def emit_output(self, output: Any, name_hint: str = "") -> Var:
        """Bind ``output`` to a variable visible after the current dataflow block."""
        f = self._frame("emit_output")
        if not (f.bindings is not None and f.is_dataflow):
            raise RuntimeError("BlockBuilder.emit_output must be called inside "
                               "`with bb.dataflow():`")
        value = self.normalize(_as_expr(output))
        var = self._emit(value, name_hint, dataflow=False)
        if isinstance(value, DataflowVar):
            f.exported[id(value)] = var
        return var

    def _emit(self, expr: Expr, name_hint: str, dataflow: bool) -> Var:
        f = self._frames[-1]
        name = f.names.fresh(_sanitize(name_hint) or ("lv" if dataflow else "gv"))
        var = (DataflowVar if dataflow else Var)(name, expr.struct_info)
        self._current_bindings("emit").append(VarBinding(var, expr))
        self._bound[id(var)] = expr
        return var

    def match_cast(self, value: Expr, struct_info: StructInfo, name_hint: str = "") -> Var:
        """``var = R.match_cast(value, struct_info)``: a run-time check that also defines the
        symbolic dims of ``struct_info`` seen for the first time."""
        value = self._normalize_arg(self.normalize(_as_expr(value)))
        f = self._frame("match_cast")
        dataflow = f.bindings is not None and f.is_dataflow
        name = f.names.fresh(_sanitize(name_hint) or ("lv" if dataflow else "gv"))
        var = (DataflowVar if dataflow else Var)(name, struct_info)
        self._current_bindings("match_cast").append(MatchCast(var, value, struct_info))
        self._bound[id(var)] = value
        return var

    def emit_normalized(self, binding: Binding) -> None:
        """Append an already-normalised binding as is (for mutators that keep their vars)."""
        self._current_bindings("emit_normalized").append(binding)
        self._bound[id(binding.var)] = binding.value
        self._frames[-1].names.reserve(binding.var.name_hint)

    def lookup_binding(self, var: Var) -> Expr | None:
        """The value bound to ``var`` by this builder, or None."""
        return self._bound.get(id(var))

    def emit_func_output(self, output: Any, params: Sequence[Var] | Var | None = None
                         ) -> GlobalVar:
        """Finish the function: ``output`` is its result (a tuple/list becomes a Tuple)."""
        fs = self._func
        if fs is None:
            raise RuntimeError("BlockBuilder.emit_func_output: not inside a function scope")
        if fs.done:
            raise RuntimeError(f"function {fs.name!r}: emit_func_output was already called")
        f = self._frames[-1]
        if f.bindings is not None and f.is_dataflow:
            raise RuntimeError("BlockBuilder.emit_func_output must be called after the "
                               "dataflow block ends (outside `with bb.dataflow():`)")
        if params is not None:
            if fs.params is not None:
                raise ValueError(f"function {fs.name!r}: parameters were given both to "
                                 "function() and to emit_func_output()")
            fs.params = self._check_params([params] if isinstance(params, Var) else
                                           list(params), fs.name or "")
        if fs.params is None:
            raise ValueError(f"function {fs.name!r}: no parameters given (pass them to "
                             "bb.function or emit_func_output)")
        # TVM's own tutorials write `bb.emit_output(gv)` and then return `gv`, the DataflowVar;
        # TVM then builds a function returning a variable its block hides (ill-formed). The
        # intent is plain, so a DataflowVar that was exported stands for its exported Var.
        body = _exported(self.normalize(_as_expr(output)), f.exported)
        local = _dataflow_vars(body)
        if local:
            raise ValueError(f"function {fs.name!r}: the output uses dataflow variable(s) "
                             f"{local}, which are not visible outside their dataflow block; "
                             "bind the result with bb.emit_output inside the block")
        if not is_leaf(body):
            body = self.emit(body)
        self._close_block(f)
        attrs = dict(fs.attrs)
        if not fs.private and fs.name:
            attrs.setdefault("global_symbol", fs.name)
        func = Function(tuple(fs.params), SeqExpr(tuple(f.blocks), body), body.struct_info,
                        fs.pure, frozen(attrs))
        fs.done = True
        self._global_names.reserve(fs.name)
        self._mod[fs.name] = func
        fs.gvar = self._mod.get_global_var(fs.name)
        return fs.gvar

    # ---- module -------------------------------------------------------------------------------

    def add_func(self, func: Any, func_name: str) -> GlobalVar:
        """Add ``func`` under a unique name derived from ``func_name``; a structurally equal
        PrimFunc already in the module is reused (its GlobalVar is returned)."""
        from workbench.ir.structural import structural_equal
        from workbench.tir.function import PrimFunc
        if isinstance(func, PrimFunc):
            probe = _without_symbol(func)
            key = self._prim_key(func)
            for name, other in self._mod.items():
                if isinstance(other, PrimFunc) and self._prim_key(other) == key and \
                        structural_equal(probe, _without_symbol(other)):
                    return self._mod.get_global_var(name)
        name = self._global_names.fresh(_sanitize(func_name) or "func")
        if isinstance(func, PrimFunc):
            func = func.with_attr("global_symbol", name)
        self._mod[name] = func
        return self._mod.get_global_var(name)

    def _prim_key(self, func: Any) -> int:
        # Hash once per PrimFunc object (they are immutable): legalizing a big model adds
        # hundreds of kernels, each compared against the ones already there.
        from workbench.ir.structural import structural_hash
        got = self._hash_memo.get(id(func))
        if got is None or got[0] is not func:
            got = (func, structural_hash(_without_symbol(func)))
            self._hash_memo[id(func)] = got
        return got[1]

    def update_func(self, gv: GlobalVar | str, func: Any) -> None:
        """Replace the function named by ``gv``."""
        if gv not in self._mod:
            raise KeyError(f"update_func: the module has no function {gv!r}")
        self._mod[gv] = func

    def get(self) -> IRModule:
        """The module built so far (the builder's own object, as in TVM)."""
        return self._mod

    def get_unique_name(self, base: str) -> str:
        return self._global_names.fresh(base)

    # ---- normalisation ------------------------------------------------------------------------

    def normalize(self, expr: Any) -> Expr:
        """``expr`` with struct info filled in; non-leaf call arguments are emitted first when
        a block is open (A-normal form)."""
        expr = _as_expr(expr)
        rule = _NORMALIZE.lookup(type(expr))
        return rule(self, expr) if rule else expr

    def _normalize_arg(self, arg: Any) -> Expr:
        arg = self.normalize(_as_expr(arg))
        if isinstance(arg, Tuple) or is_leaf(arg):
            return arg
        if self._frames:  # inside a function: bind it (outside one, nested stays nested)
            return self.emit(arg)
        return arg

    def _infer_call(self, call: Call) -> StructInfo:
        from workbench.relax.op.registry import INFER_RULES, OpError
        op = call.op
        if isinstance(op, Op):
            rule = INFER_RULES.get(op.name)
            if rule is None:
                raise OpError(f"{op.name}: the op has no struct info inference rule")
            return rule(call, self)
        if isinstance(op, GlobalVar):
            func = self._mod[op] if op in self._mod else None
            if isinstance(func, Function):
                fsi = func.struct_info
                vmap: dict = {}
                for p, a in zip(fsi.params or (), call.args):
                    if a.struct_info is not None:
                        analysis.bind_symbolic(p, a.struct_info, vmap)
                return analysis.substitute_sinfo(fsi.ret, vmap)
            return call.sinfo_args[0] if call.sinfo_args else ObjectStructInfo()
        if isinstance(op, Var) and isinstance(op.struct_info, FuncStructInfo):
            return op.struct_info.ret
        return call.sinfo_args[0] if call.sinfo_args else ObjectStructInfo()

    def _normalize_branch(self, expr: Expr) -> Expr:
        if isinstance(expr, SeqExpr):
            return self.normalize(expr)
        parent = self._frame("If")
        frame = _Frame(parent.names)
        self._frames.append(frame)
        try:
            frame.bindings = []
            body = self.normalize(expr)
            if not is_leaf(body):
                body = self.emit(body)
            self._close_block(frame)
        finally:
            self._frames.pop()
        return SeqExpr(tuple(frame.blocks), body, body.struct_info)

    # ---- te -----------------------------------------------------------------------------------

    def call_te(self, func: Callable, *args: Any, **kwargs: Any) -> Expr:
        """``call_tir`` of the PrimFunc that ``func`` builds from te placeholders standing for
        the Relax tensor arguments (see :mod:`workbench.relax.te_bridge`)."""
        from workbench.relax.te_bridge import call_te
        return call_te(self, func, args, kwargs)

    def emit_te(self, func: Callable, *args: Any, **kwargs: Any) -> Var:
        """``emit(call_te(func, *args, **kwargs))``."""
        name_hint = kwargs.pop("name_hint", "")
        return self.emit(self.call_te(func, *args, **kwargs), name_hint)


# ---- normalisation rules, by expression type ---------------------------------------------------

def _norm_call(bb: BlockBuilder, call: Call) -> Expr:
    args = tuple(bb._normalize_arg(a) for a in call.args)
    same = all(a is b for a, b in zip(args, call.args))
    if bb._span is not None and call.span is None:
        call = call.replace(span=bb._span)
    if same and call.struct_info is not None:
        return call
    call = call.replace(args=args) if not same else call
    return call.replace(struct_info=bb._infer_call(call))


def _norm_tuple(bb: BlockBuilder, t: Tuple) -> Expr:
    fields = tuple(bb._normalize_arg(f) for f in t.fields)
    if all(a is b for a, b in zip(fields, t.fields)) and t.struct_info is not None:
        return t
    return Tuple(fields, TupleStructInfo(tuple(f.struct_info for f in fields)))


def _norm_get_item(bb: BlockBuilder, g: TupleGetItem) -> Expr:
    from workbench.relax.op.registry import OpError
    tup = bb._normalize_arg(g.tuple_value)
    si = tup.struct_info
    if not isinstance(si, TupleStructInfo):
        raise OpError(f"TupleGetItem: the value indexed must be a tuple, got {si}")
    if not -len(si.fields) <= g.index < len(si.fields):
        raise OpError(f"TupleGetItem: index {g.index} is out of range for a tuple of "
                      f"{len(si.fields)} fields")
    index = g.index % len(si.fields)
    if tup is g.tuple_value and g.struct_info is not None and index == g.index:
        return g
    return TupleGetItem(tup, index, si.fields[index])


def _norm_if(bb: BlockBuilder, e: If) -> Expr:
    cond = bb._normalize_arg(e.cond)
    t = bb._normalize_branch(e.true_branch)
    f = bb._normalize_branch(e.false_branch)
    return If(cond, t, f, _unify(t.struct_info, f.struct_info))


def _unify(a: StructInfo, b: StructInfo) -> StructInfo:
    from workbench.ir.structural import structural_equal
    if structural_equal(a, b, map_free_vars=False):
        return a
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
        return TensorStructInfo(None, a.dtype if a.dtype == b.dtype else "",
                                a.ndim if a.ndim == b.ndim else -1)
    return ObjectStructInfo()


def _norm_seq(bb: BlockBuilder, s: SeqExpr) -> Expr:
    if s.struct_info is not None:
        return s
    body = bb.normalize(s.body)
    return SeqExpr(s.blocks, body, body.struct_info)


def _norm_function(bb: BlockBuilder, f: Function) -> Expr:
    return f


_NORMALIZE: TypeTable[Callable[[BlockBuilder, Any], Expr]] = TypeTable({
    Call: _norm_call, Tuple: _norm_tuple, TupleGetItem: _norm_get_item, If: _norm_if,
    SeqExpr: _norm_seq, Function: _norm_function,
    # Leaves carry their struct info from construction.
    Var: lambda bb, e: e, Constant: lambda bb, e: e, ShapeExpr: lambda bb, e: e,
    PrimValue: lambda bb, e: e, StringImm: lambda bb, e: e, Op: lambda bb, e: e,
    ExternFunc: lambda bb, e: e, GlobalVar: lambda bb, e: e,
})


def _as_expr(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return Tuple(tuple(_as_expr(x) for x in v))
    if isinstance(v, (Expr, GlobalVar)):
        return v
    raise TypeError(f"expected a Relax expression, got {v!r} ({type(v).__name__})")


def _without_symbol(func: Any) -> Any:
    return func.replace(attrs=func.attrs.without("global_symbol"))


def _dataflow_vars(e: Any) -> list[str]:
    if isinstance(e, DataflowVar):
        return [e.name_hint]
    if isinstance(e, Tuple):
        return [n for f in e.fields for n in _dataflow_vars(f)]
    return []


def _exported(e: Any, exported: dict[int, Var]) -> Any:
    """``e`` (a leaf or a tuple of leaves) with exported DataflowVars replaced by their Vars."""
    if isinstance(e, DataflowVar):
        return exported.get(id(e), e)
    if isinstance(e, Tuple):
        fields = tuple(_exported(x, exported) for x in e.fields)
        if all(a is b for a, b in zip(fields, e.fields)):
            return e
        return Tuple(fields)
    return e


def _sanitize(name: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", name or "")
    return ("_" + name) if name[:1].isdigit() else name


__all__ = ["BlockBuilder", "NameSupply"]
