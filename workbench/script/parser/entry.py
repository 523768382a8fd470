"""Where parsing starts: the decorators, ``@I.ir_module`` classes and ``from_source``.

A ``@T.prim_func`` / ``@R.function`` on a plain function parses it at once. The same
decorators on members of an ``@I.ir_module`` class only mark them (Python runs the class body
before the class decorator): the module parse then reads the whole class, so members can refer
to each other as ``cls.name``.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.node import frozen
from workbench.script.errors import ParserError
from workbench.script.parser.core import Parser, Source, python_env


@dataclass(frozen=True)
class Deferred:
    """A decorated member of an ``@I.ir_module`` class, parsed with its module."""

    func: Callable
    kind: str  # "tir" or "relax"
    opts: dict = field(default_factory=dict)


class ModuleRef:
    """``cls`` (or the class name) inside a module: ``cls.f`` is the GlobalVar of ``f``."""

    def __init__(self, gvars: dict[str, GlobalVar]) -> None:
        self._gvars = gvars

    def __getattr__(self, name: str) -> GlobalVar:
        try:
            return self._gvars[name]
        except KeyError:
            raise AttributeError(f"the module has no function {name!r}; it has "
                                 f"{sorted(self._gvars)}") from None


def _in_class(f: Callable) -> bool:
    parts = f.__qualname__.split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def deferred_or_parse(f: Callable, kind: str, **opts: Any) -> Any:
    """The decorators' body: parse ``f`` now, or mark it for its module's parse."""
    if isinstance(f, Deferred):
        raise ParserError(f"{f.func.__qualname__}: decorated twice")
    if _in_class(f):
        return Deferred(f, kind, opts)
    source = Source.of(f)
    fdef = _single(source.parse(), ast.FunctionDef, source)
    return parse_function(fdef, kind, source, python_env(f), opts)


def parse_function(fdef: ast.FunctionDef, kind: str, source: Source, env: dict[str, Any],
                   opts: dict, mod: IRModule | None = None) -> Any:
    """A PrimFunc (``kind`` "tir") or Relax Function; ``mod``: its module so far."""
    if kind == "tir":
        from workbench.script.parser.tir import parse_prim_func
        return parse_prim_func(fdef, source, env, private=opts.get("private", False))
    from workbench.script.parser.relax import parse_relax_function
    return parse_relax_function(fdef, source, env, mod=mod, **opts)


def ir_module(cls: type) -> IRModule:
    """``@I.ir_module``: the class's decorated members as an IRModule."""
    if not isinstance(cls, type):
        raise ParserError(f"@I.ir_module decorates a class, got {cls!r}")
    source = Source.of(cls)
    cdef = _single(source.parse(), ast.ClassDef, source)
    return parse_module(cdef, source, python_env(cls))


def _single(tree: ast.Module, kind: type, source: Source) -> Any:
    for node in tree.body:
        if isinstance(node, kind):
            return node
    raise ParserError(f"expected a {kind.__name__[:-3].lower()} definition",
                      source.filename, source.first_line)


def _decorator_kind(p: Parser, fdef: ast.FunctionDef) -> tuple[str, dict] | None:
    """``("tir" | "relax", options)`` from a member's decorator, or None when undecorated."""
    from workbench.script import relax as R, tir as T
    for deco in fdef.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        fn = p.eval(target)
        kind = "tir" if fn is T.prim_func else "relax" if fn is R.function else None
        if kind is None:
            raise p.error(deco, f"unsupported decorator in an ir_module: {ast.unparse(deco)} "
                                "(use @T.prim_func or @R.function)")
        opts = {k.arg: p.eval(k.value) for k in deco.keywords} if isinstance(deco, ast.Call) \
            else {}
        return kind, opts
    return None


def parse_module(cdef: ast.ClassDef, source: Source, env: dict[str, Any]) -> IRModule:
    """The IRModule of an ``@I.ir_module`` class definition."""
    from workbench.script import ir as I
    p = Parser(source, env)
    members: list[tuple[ast.FunctionDef, str, dict]] = []
    attrs: dict[str, Any] = {}
    for node in cdef.body:
        if isinstance(node, ast.FunctionDef):
            kind = _decorator_kind(p, node)
            if kind is None:
                raise p.error(node, f"{node.name}: a module member needs @T.prim_func or "
                                    "@R.function")
            members.append((node, *kind))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        elif isinstance(node, ast.Expr):
            value = p.eval(node.value)
            if not isinstance(value, I.ModuleAttrs):
                raise p.error(node, f"unsupported statement in an ir_module: "
                                    f"{ast.unparse(node)}")
            attrs.update(value.attrs)
        elif not isinstance(node, ast.Pass):
            raise p.error(node, f"unsupported statement in an ir_module: "
                                f"{type(node).__name__}")
    gvars = {fdef.name: GlobalVar(fdef.name) for fdef, _, _ in members}
    env = dict(env)
    env["cls"] = env[cdef.name] = ModuleRef(gvars)
    mod = IRModule(attrs=frozen(attrs))
    for fdef, kind, opts in members:
        mod[gvars[fdef.name]] = parse_function(fdef, kind, source, env, opts, mod)
    return mod


def from_source(text: str, env: dict[str, Any] | None = None, filename: str = "<string>"
                ) -> Any:
    """Parse TVMScript text (what ``.script()`` prints): an ``@I.ir_module`` class gives an
    IRModule, a lone ``@T.prim_func`` / ``@R.function`` its function. ``T``, ``R`` and ``I``
    are predefined; ``env`` adds names the text may use."""
    from workbench.script import ir as I, relax as R, tir as T
    if not isinstance(text, str):
        raise TypeError(f"from_source expects TVMScript text, got {type(text).__name__}")
    source = Source(text, filename)
    names = {"T": T, "R": R, "I": I, **(env or {})}
    p = Parser(source, names)
    result = None
    tree = source.parse()
    # Top-level assignments (Python values the script uses; the metadata section, which
    # follows the module it serves) are read first.
    for node in tree.body:
        if isinstance(node, ast.Assign):
            if not all(isinstance(t, ast.Name) for t in node.targets):
                raise p.error(node, "top-level assignments bind plain names")
            value = p.eval(node.value)
            for t in node.targets:
                names[t.id] = value
    for node in tree.body:
        if isinstance(node, ast.Assign):
            continue
        if isinstance(node, ast.ClassDef):
            result = parse_module(node, source, names)
        elif isinstance(node, ast.FunctionDef):
            kind = _decorator_kind(p, node)
            if kind is None:
                raise p.error(node, f"{node.name}: expected @T.prim_func or @R.function")
            result = parse_function(node, kind[0], source, names, kind[1])
        elif not isinstance(node, (ast.Import, ast.ImportFrom)):
            raise p.error(node, f"unsupported top-level statement: {type(node).__name__}")
    if result is None:
        raise ParserError("no @I.ir_module class or decorated function in the text", filename)
    return result


__all__ = ["Deferred", "ModuleRef", "deferred_or_parse", "ir_module", "parse_module",
           "parse_function", "from_source"]
