"""The global function registry (TVM's ``register_func`` / ``get_global_func``).

Names map to :class:`PackedFunc`s wrapping Python callables. ``time_evaluator``'s
``f_preproc`` and the VM's builtins are looked up here.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from .packed_func import PackedFunc

__all__ = ["register_func", "get_global_func", "list_global_func_names", "remove_global_func",
           "resolve_func"]

_FUNCS: dict[str, PackedFunc] = {}
_LOCK = threading.Lock()


def register_func(func_name: str | Callable | None = None, f: Callable | None = None,
                  override: bool = False) -> Any:
    """Register a global function. Forms, as in TVM::

        register_func("name", f)             # returns f
        @register_func("name")               # decorator with a name
        @register_func                       # decorator, name = f.__name__

    Registering an existing name raises ``ValueError`` unless ``override=True``.
    """
    if callable(func_name) and f is None:
        f, func_name = func_name, func_name.__name__
    if not isinstance(func_name, str) or not func_name:
        raise TypeError(f"register_func: func_name must be a non-empty str, got {func_name!r}")
    name = func_name

    def register(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_func({name!r}): expected a callable, got {fn!r}")
        with _LOCK:
            if name in _FUNCS and not override:
                raise ValueError(f"global function {name!r} is already registered; pass "
                                 "override=True to replace it")
            _FUNCS[name] = fn if isinstance(fn, PackedFunc) else PackedFunc(fn, name)
        return fn

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The registered function ``name``; None if missing and ``allow_missing``, else
    ``ValueError``."""
    func = _FUNCS.get(name)
    if func is None and not allow_missing:
        raise ValueError(f"Cannot find global function {name!r}")
    return func


def resolve_func(f: Callable | str | None, default: Callable) -> Callable:
    """A user-supplied hook as a callable: ``default`` for None, the registered function for
    a name (``ValueError`` if none is), else ``f`` itself (the builders' and runners' ``f_*``
    arguments take all three)."""
    if f is None:
        return default
    if isinstance(f, str):
        return get_global_func(f)
    return f


def list_global_func_names() -> list[str]:
    return sorted(_FUNCS)


def remove_global_func(name: str) -> None:
    """Unregister ``name`` (no error if absent)."""
    with _LOCK:
        _FUNCS.pop(name, None)
