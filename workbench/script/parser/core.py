"""The shared part of the TVMScript parser: source locations, scopes and the expression walk.

TVMScript is read, never run: the decorated function's source is parsed with :mod:`ast` and
walked here. Expressions evaluate to Python values (numbers, strings, IR nodes, the builtins
of ``T``/``R``/``I``); the dialect parsers (``tir.py``, ``relax.py``) say what operators mean
for their values and what each statement builds.

Names resolve innermost scope first, then the user's globals and closure (so Python values
such as a ``dtype`` string or a shape constant can parameterise the script), then Python's
builtins. Every error becomes a :class:`~workbench.script.ParserError` at the node's line.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import linecache
import operator
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from workbench.script.errors import ParserError


@dataclass(frozen=True)
class Source:
    """Script text with where it came from: line 1 of ``text`` is ``first_line`` of the file."""

    text: str
    filename: str = "<string>"
    first_line: int = 1

    @staticmethod
    def of(obj: Any) -> "Source":
        """The source of a function or class, as ``inspect`` finds it (dedented)."""
        try:
            lines, start = inspect.getsourcelines(obj)
            filename = inspect.getsourcefile(obj) or inspect.getfile(obj)
        except (OSError, TypeError) as exc:
            # A class whose module has no file (a notebook cell, code run with exec) is found
            # through its methods, whose code objects know their file and line.
            found = _class_lines(obj) if isinstance(obj, type) else None
            if found is None:
                raise ParserError(
                    f"cannot read the source of {getattr(obj, '__qualname__', obj)!r} ({exc}); "
                    "TVMScript needs the text of the definition (use "
                    "workbench.script.from_source for a string)") from None
            lines, start, filename = found
        return Source(textwrap.dedent("".join(lines)), filename, max(start, 1))

    def line(self, lineno: int) -> str | None:
        lines = self.text.splitlines()
        return lines[lineno - 1] if 0 < lineno <= len(lines) else None

    def parse(self) -> ast.Module:
        try:
            return ast.parse(self.text)
        except SyntaxError as exc:
            raise ParserError(f"invalid Python syntax: {exc.msg}", self.filename,
                              (exc.lineno or 1) + self.first_line - 1,
                              self.line(exc.lineno or 1)) from None


def _class_lines(cls: type) -> tuple[list[str], int, str] | None:
    """``(lines, first line, filename)`` of a class definition, found from its methods."""
    codes = [f.__code__ for f in (getattr(v, "func", v) for v in vars(cls).values())
             if inspect.isfunction(f)]
    if not codes:
        return None
    filename = codes[0].co_filename
    text = linecache.getlines(filename)
    first = min(c.co_firstlineno for c in codes) - 1
    head = re.compile(rf"\s*class\s+{re.escape(cls.__name__)}\b")
    start = next((k for k in range(min(first, len(text) - 1), -1, -1) if head.match(text[k])),
                 None)
    if start is None:
        return None
    indent = len(text[start]) - len(text[start].lstrip())
    while start > 0 and text[start - 1].strip().startswith("@"):
        start -= 1  # the class's decorators
    end = first + 1
    while end < len(text) and (not text[end].strip() or
                               len(text[end]) - len(text[end].lstrip()) > indent):
        end += 1
    return text[start:end], start + 1, filename


class Directive:
    """A value of a builtin call that is an instruction to the parser, not an IR value
    (``T.reads(...)``, ``T.axis.remap(...)``, ``R.output(...)``): the statement holding it
    decides what it does. Outside a parse such values are inert."""

    __slots__ = ()


# What building IR from a bad script raises; reported at the script's line.
_BUILD_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError,
                 NotImplementedError, ZeroDivisionError)

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.MatMult: operator.matmul,
}
_COMPARES: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
    ast.Not: operator.not_,
}


class Parser:
    """Scopes, errors and the expression walk; the dialects override the operator hooks."""

    def __init__(self, source: Source, env: dict[str, Any]) -> None:
        self.source = source
        self.env = env
        self.scopes: list[dict[str, Any]] = [{}]

    # ---- errors -------------------------------------------------------------------------------

    def error(self, node: Any, reason: str) -> ParserError:
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return ParserError(reason, self.source.filename)
        return ParserError(reason, self.source.filename, lineno + self.source.first_line - 1,
                           self.source.line(lineno), getattr(node, "col_offset", None))

    @contextlib.contextmanager
    def located(self, node: Any) -> Iterator[None]:
        """Errors raised while building ``node``'s IR are reported at its line."""
        try:
            yield
        except ParserError:
            raise
        except _BUILD_ERRORS as exc:
            raise self.located_error(node, exc) from None

    def located_error(self, node: Any, exc: Exception) -> ParserError:
        reason = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) \
            else str(exc)
        return self.error(node, f"{type(exc).__name__}: {reason}")

    # ---- scopes -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def scope(self) -> Iterator[dict[str, Any]]:
        self.scopes.append({})
        try:
            yield self.scopes[-1]
        finally:
            self.scopes.pop()

    def define(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def lookup(self, name: str, node: Any) -> Any:
        for frame in reversed(self.scopes):
            if name in frame:
                return frame[name]
        if name in self.env:
            return self.env[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        hint = " (print the module with script(show_meta=True) to include its metadata)" \
            if name == "metadata" else ""
        raise self.error(node, f"name {name!r} is not defined{hint}")

    # ---- expressions --------------------------------------------------------------------------

    def eval(self, node: ast.AST) -> Any:
        handler = _EXPR.get(type(node))
        if handler is None:
            raise self.error(node, f"unsupported expression: {type(node).__name__} "
                                   f"({ast.unparse(node)})")
        try:  # (inline rather than `located`: this runs for every node)
            return handler(self, node)
        except ParserError:
            raise
        except _BUILD_ERRORS as exc:
            raise self.located_error(node, exc) from None

    def eval_call(self, node: ast.Call) -> Any:
        func = self.eval(node.func)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.eval(a.value))
            else:
                args.append(self.eval(a))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(self.eval(k.value))
            else:
                kwargs[k.arg] = self.eval(k.value)
        return self.call(func, args, kwargs, node)

    def call(self, func: Callable, args: list, kwargs: dict, node: ast.Call) -> Any:
        """Call a builtin or Python function; a wrong arity is reported at the call."""
        if not callable(func):
            raise self.error(node, f"{ast.unparse(node.func)} is not callable")
        try:
            return func(*args, **kwargs)
        except TypeError:
            # Was it the call itself (arity, keywords)? Say so; else it came from inside.
            sig = _signature(func)
            if sig is not None:
                try:
                    sig.bind(*args, **kwargs)
                except TypeError as exc:
                    name = ast.unparse(node.func)
                    raise self.error(node, f"wrong arguments to {name}: {exc}") from None
            raise

    # Operator hooks: Python's meaning by default; the dialects build IR instead.
    def binop(self, op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        return _BINOPS[type(op)](a, b)

    def unaryop(self, op: ast.unaryop, a: Any, node: ast.AST) -> Any:
        return _UNARY[type(op)](a)

    def compare(self, op: ast.cmpop, a: Any, b: Any, node: ast.AST) -> Any:
        return _COMPARES[type(op)](a, b)

    def boolop(self, op: ast.boolop, values: list[Any], node: ast.AST) -> Any:
        result = values[0]
        for v in values[1:]:
            result = (result and v) if isinstance(op, ast.And) else (result or v)
        return result

    def subscript(self, value: Any, index: Any, node: ast.Subscript) -> Any:
        return value[index]

    def attribute(self, value: Any, attr: str, node: ast.Attribute) -> Any:
        try:
            return getattr(value, attr)
        except AttributeError:
            owner = ast.unparse(node.value)
            raise self.error(node, f"{owner} has no attribute {attr!r}") from None


_SIGNATURES: dict[Any, inspect.Signature | None] = {}


def _signature(func: Callable) -> inspect.Signature | None:
    """``inspect.signature``, remembered per callable (it dominated parse time uncached)."""
    try:
        return _SIGNATURES[func]
    except KeyError:
        pass
    except TypeError:  # an unhashable callable
        return _compute_signature(func)
    sig = _SIGNATURES[func] = _compute_signature(func)
    return sig


def _compute_signature(func: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def _compare(p: Parser, node: ast.Compare) -> Any:
    left = p.eval(node.left)
    result = None
    for op, right_node in zip(node.ops, node.comparators):
        right = p.eval(right_node)
        value = p.compare(op, left, right, node)
        result = value if result is None else p.boolop(ast.And(), [result, value], node)
        left = right
    return result


def _slice(p: Parser, node: ast.Slice) -> slice:
    return slice(*(None if x is None else p.eval(x) for x in (node.lower, node.upper, node.step)))


def _dict(p: Parser, node: ast.Dict) -> dict:
    out: dict = {}
    for k, v in zip(node.keys, node.values):
        if k is None:
            out.update(p.eval(v))
        else:
            out[p.eval(k)] = p.eval(v)
    return out


def _lambda(p: Parser, node: ast.Lambda) -> Callable[..., Any]:
    """A Python function whose call evaluates the body with the parameters bound (what
    ``T.index_map(lambda i, j: ...)`` takes); positional parameters only."""
    a = node.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        raise p.error(node, "a lambda here takes plain positional parameters only")
    names = [x.arg for x in a.args]

    def call(*args: Any) -> Any:
        with p.scope():
            for name, value in zip(names, args):
                p.define(name, value)
            return p.eval(node.body)

    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    return call


def _if_exp(p: Parser, node: ast.IfExp) -> Any:
    return p.eval(node.body) if p.eval(node.test) else p.eval(node.orelse)


_EXPR: dict[type, Callable[[Parser, Any], Any]] = {
    ast.Constant: lambda p, n: n.value,
    ast.Name: lambda p, n: p.lookup(n.id, n),
    ast.Attribute: lambda p, n: p.attribute(p.eval(n.value), n.attr, n),
    ast.Call: lambda p, n: p.eval_call(n),
    ast.Subscript: lambda p, n: p.subscript(p.eval(n.value), p.eval(n.slice), n),
    ast.Slice: _slice,
    ast.Tuple: lambda p, n: tuple(p.eval(e) for e in n.elts),
    ast.List: lambda p, n: [p.eval(e) for e in n.elts],
    ast.Dict: _dict,
    ast.BinOp: lambda p, n: p.binop(n.op, p.eval(n.left), p.eval(n.right), n),
    ast.UnaryOp: lambda p, n: p.unaryop(n.op, p.eval(n.operand), n),
    ast.BoolOp: lambda p, n: p.boolop(n.op, [p.eval(v) for v in n.values], n),
    ast.Compare: _compare,
    ast.IfExp: _if_exp,
    ast.Lambda: _lambda,
}


def python_env(obj: Any) -> dict[str, Any]:
    """The names a decorated function or class can see: its globals, then its closure."""
    env: dict[str, Any] = {}
    funcs = [obj] if inspect.isfunction(obj) else [
        v for v in vars(obj).values() if inspect.isfunction(getattr(v, "func", v))]
    funcs = [getattr(f, "func", f) for f in funcs]
    globals_ = funcs[0].__globals__ if funcs else vars(inspect.getmodule(obj) or builtins)
    env.update(globals_)
    for f in funcs:
        try:
            env.update(inspect.getclosurevars(f).nonlocals)
        except (TypeError, ValueError):
            pass
    return env


__all__ = ["Source", "Parser", "Directive", "python_env"]
