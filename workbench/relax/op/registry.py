"""The operator registry and the per-op rule tables (JAX style: one dict per interpretation).

An operator is an :class:`~workbench.relax.expr.Op` with a registered name (``relax.add``).
Each op family module (``binary.py``, ``nn/convolution.py``, ...) defines, next to the op's
constructor, the op's rules, registered here:

- ``INFER_RULES[name](call, ctx) -> StructInfo``: struct info inference (shape and dtype), used
  by ``BlockBuilder.normalize``; raises :class:`OpError` naming the op, the argument and the
  shapes on a mismatch. ``ctx`` is the BlockBuilder (or None).
- ``LEGALIZE_RULES[name](bb, call) -> Expr``: the call rewritten into ``call_tir`` of
  PrimFuncs made with te/topi (``bb.call_te``), used by ``transform.LegalizeOps``. A rule may
  return ``call`` unchanged when it cannot legalize (e.g. unknown shapes).
- ``NUMPY_RULES[name](*args, **attrs) -> value``: a numpy implementation, used by the
  reference evaluator ``relax.testing.evaluate_numpy``. Arguments are numpy arrays (tensors),
  tuples of them (tuple arguments) or tuples of ints (shape arguments); ``attrs`` are the call's.

Adding an op is additive: register it and its rules in its family module.
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.relax.expr import Call, Op

_OPS: dict[str, Op] = {}
INFER_RULES: dict[str, Callable[[Call, Any], Any]] = {}
LEGALIZE_RULES: dict[str, Callable[[Any, Call], Any]] = {}
NUMPY_RULES: dict[str, Callable[..., Any]] = {}


class OpError(ValueError):
    """A Relax op was called with arguments it does not accept (shapes, dtypes, attributes)."""


def register_op(name: str) -> Op:
    """The Op named ``name``, created on first registration (the same object afterwards)."""
    op = _OPS.get(name)
    if op is None:
        op = _OPS[name] = Op(name)
    return op


def get_op(name: str) -> Op:
    """The registered Op ``name`` (``relax.add``); raises naming close candidates otherwise."""
    _load_all()
    op = _OPS.get(name)
    if op is None:
        import difflib
        close = difflib.get_close_matches(name, list(_OPS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"no Relax op named {name!r}{hint}")
    return op


def list_ops() -> list[str]:
    _load_all()
    return sorted(_OPS)


def _load_all() -> None:
    import workbench.relax.op  # noqa: F401  (registers every family)


def _decorator(table: dict, name: str) -> Callable[[Callable], Callable]:
    register_op(name)

    def deco(fn: Callable) -> Callable:
        table[name] = fn
        return fn
    return deco


def def_infer(name: str) -> Callable[[Callable], Callable]:
    """Decorator: ``fn(call, ctx) -> StructInfo`` is the inference rule of op ``name``."""
    return _decorator(INFER_RULES, name)


def def_legalize(name: str) -> Callable[[Callable], Callable]:
    """Decorator: ``fn(bb, call) -> Expr`` is the legalization rule of op ``name``."""
    return _decorator(LEGALIZE_RULES, name)


def def_numpy(name: str) -> Callable[[Callable], Callable]:
    """Decorator: ``fn(*args, **attrs)`` is the numpy implementation of op ``name``."""
    return _decorator(NUMPY_RULES, name)


def make_call(name: str, args: tuple, attrs: dict | None = None,
              sinfo_args: tuple = ()) -> Call:
    """A call of op ``name`` (not yet normalised: no struct info)."""
    from workbench.relax.expr import Expr
    for i, a in enumerate(args):
        if not isinstance(a, Expr):
            raise TypeError(f"{name}: argument {i} must be a Relax expression, got {a!r} "
                            f"({type(a).__name__}); wrap numbers with relax.const")
    return Call(register_op(name), tuple(args), attrs or {}, tuple(sinfo_args))


def op_constructor(name: str) -> Callable | None:
    """The Python constructor of op ``name`` (``relax.nn.conv2d`` -> ``relax.op.nn.conv2d``),
    or None for ops that are only registered (the VM-form builtins): TVMScript writes calls of
    those as plain calls, with their ``sinfo_args`` spelled out."""
    from workbench.relax import op as ops
    obj: Any = ops
    for part in name[len("relax."):].split(".") if name.startswith("relax.") else [None]:
        obj = getattr(obj, part, None) if part else None
        if obj is None:
            return None
    return obj if callable(obj) else None


def short_name(name: str) -> str:
    """``relax.nn.relu`` -> ``nn.relu`` (how errors and printers name ops)."""
    return name[len("relax."):] if name.startswith("relax.") else name


__all__ = ["register_op", "get_op", "list_ops", "def_infer", "def_legalize", "def_numpy",
           "make_call", "OpError", "INFER_RULES", "LEGALIZE_RULES", "NUMPY_RULES",
           "short_name"]
