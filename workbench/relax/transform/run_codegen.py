"""``RunCodegen``: hand the functions annotated for a backend to its codegen (TVM's pass).

Contract: ``RunCodegen(target_options=None, entry_functions=None)(mod)`` returns a new module.

- The functions with a ``Codegen`` attr (``FuseOpsByPattern(annotate_codegen=True)`` makes
  them) are grouped by codegen name; for each name the global function
  ``relax.ext.<codegen>`` is called as ``codegen(functions, options, constant_names)`` --
  the annotated functions (each has a ``global_symbol``), ``target_options.get(codegen, {})``
  and ``{Constant: name}`` for the constants inside them -- and returns a list of runtime
  Modules that define those symbols (or registers them with ``workbench.register_func`` and
  returns an empty list). A missing codegen raises ``Codegen is not found: relax.ext.<name>``.
- Every call of such a function becomes ``R.call_dps_packed("<global_symbol>", (args...),
  out_sinfo=...)`` and the functions are removed. The returned modules are kept in the module
  attr ``external_mods`` (appended to any already there); ``relax.build`` imports them into
  the executable, where the VM finds the symbols (else it looks in the global registry).
  Constants handed to a codegen are recorded in ``const_name_to_constant``.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import Call, Constant, Function, SeqExpr, Tuple, VarBinding
from workbench.relax.op.base import call_dps_packed
from workbench.relax.struct_info import TupleStructInfo
from workbench.relax.transform._util import referenced_functions
from workbench.runtime.module import Module
from workbench.runtime.registry import get_global_func


def _constants(func: Function) -> list[Constant]:
    """The Constants inside ``func`` in order of appearance (each once)."""
    found: list[Constant] = []

    def walk(e: Any) -> None:
        if isinstance(e, Constant):
            if not any(c is e for c in found):
                found.append(e)
        elif isinstance(e, Function):
            walk(e.body)
        elif isinstance(e, SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    walk(b.value)
            walk(e.body)
        elif isinstance(e, Call):
            for a in e.args:
                walk(a)
        elif isinstance(e, Tuple):
            for f in e.fields:
                walk(f)
    walk(func)
    return found


def _codegen_functions(mod: IRModule) -> dict[str, list[tuple[str, Function]]]:
    by_codegen: dict[str, list[tuple[str, Function]]] = {}
    for name, func in sorted(mod.items()):
        if isinstance(func, Function) and "Codegen" in func.attrs:
            by_codegen.setdefault(str(func.attrs["Codegen"]), []).append((name, func))
    return by_codegen


def _invoke(codegen: str, funcs: list[Function], options: Mapping[str, Any],
            constant_names: dict[Constant, str]) -> list[Module]:
    key = f"relax.ext.{codegen}"
    fn = get_global_func(key, allow_missing=True)
    if fn is None:
        raise RuntimeError(f"Codegen is not found: {key} (register a function under that name "
                           f"with workbench.register_func to compile the "
                           f"{len(funcs)} function(s) annotated with Codegen={codegen!r})")
    result = fn(list(funcs), dict(options), dict(constant_names))
    mods = [] if result is None else list(result) if isinstance(result, (list, tuple)) \
        else [result]
    for m in mods:
        if not isinstance(m, Module):
            raise TypeError(f"{key} returned {type(m).__name__}; a codegen returns a list of "
                            f"runtime Modules (e.g. from workbench.build), or an empty list "
                            f"when it registered its functions with workbench.register_func")
    return mods


def _rewrite_calls(func: Function, symbols: Mapping[str, str]) -> Function:
    if not isinstance(func.body, SeqExpr):
        return func

    def rewrite(b: Any) -> Any:
        v = b.value if isinstance(b, VarBinding) else None
        if isinstance(v, Call) and isinstance(v.op, GlobalVar) and v.op.name_hint in symbols:
            # A function with several results writes each into its own output tensor.
            outs = list(v.struct_info.fields) if isinstance(v.struct_info, TupleStructInfo) \
                else v.struct_info
            call = call_dps_packed(symbols[v.op.name_hint], v.args, outs)
            return b.replace(value=call.replace(struct_info=v.struct_info, span=v.span))
        return b
    blocks = []
    for block in func.body.blocks:
        new = tuple(rewrite(b) for b in block.bindings)
        blocks.append(block if all(x is y for x, y in zip(new, block.bindings))
                      else type(block)(new))
    if all(x is y for x, y in zip(blocks, func.body.blocks)):
        return func
    return func.replace(body=func.body.replace(blocks=tuple(blocks)))


class _RunCodegen(Pass):
    name = "RunCodegen"

    def __init__(self, target_options: Mapping[str, Mapping[str, Any]],
                 entry_functions: list[str]):
        self.target_options = target_options
        self.entry_functions = entry_functions

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        for name in self.entry_functions:
            if name not in mod:
                raise ValueError(f"RunCodegen: entry function {name!r} is not in the module")
        by_codegen = _codegen_functions(mod)
        if not by_codegen:
            return mod
        constant_names: dict[Constant, str] = {}
        for codegen, funcs in by_codegen.items():
            for name, func in funcs:
                symbol = func.attrs.get("global_symbol", name)
                for k, c in enumerate(_constants(func)):
                    constant_names[c] = f"{symbol}_{codegen}_const_{k}"
        ext_mods: list[Module] = []
        for codegen, funcs in by_codegen.items():
            ext_mods += _invoke(codegen, [f for _, f in funcs],
                                self.target_options.get(codegen, {}), constant_names)
        symbols = {name: str(f.attrs.get("global_symbol", name))
                   for funcs in by_codegen.values() for name, f in funcs}
        out = mod.copy()
        for name, func in mod.items():
            if isinstance(func, Function) and "Codegen" not in func.attrs:
                out[name] = _rewrite_calls(func, symbols)
        still_used = set()
        for name, func in out.items():
            if name not in symbols:
                still_used |= referenced_functions(func)
        for name in symbols:
            if name not in still_used and name not in self.entry_functions:
                del out[name]
        attrs: dict[str, Any] = {}
        if ext_mods:
            attrs["external_mods"] = tuple(mod.attrs.get("external_mods", ())) + tuple(ext_mods)
        if constant_names:
            attrs["const_name_to_constant"] = {n: c.data for c, n in constant_names.items()}
        return out.with_attrs(attrs) if attrs else out


def RunCodegen(target_options: Mapping[str, Mapping[str, Any]] | None = None,
               entry_functions: Sequence[str] | None = None) -> Pass:
    """The pass (see the module docstring): ``target_options`` maps a codegen name to the
    options its codegen receives; ``entry_functions`` names functions to keep."""
    if target_options is not None and not isinstance(target_options, Mapping):
        raise TypeError(f"RunCodegen: target_options must map codegen names to option dicts, "
                        f"got {target_options!r}")
    if entry_functions is not None and (isinstance(entry_functions, str) or not all(
            isinstance(n, str) for n in entry_functions)):
        raise TypeError(f"RunCodegen: entry_functions must be a list of function names, got "
                        f"{entry_functions!r}")
    return _RunCodegen(dict(target_options or {}), list(entry_functions or []))


__all__ = ["RunCodegen"]
