"""IRModule: functions (PrimFuncs, graph functions) by global name, plus module attrs."""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from workbench.ir.node import FrozenDict, Node, frozen, merge_attrs, node


@node
class GlobalVar(Node):
    """The name of a function in an IRModule; compared by name inside a module."""

    name_hint: str
    __hash__ = object.__hash__


class IRModule:
    """A collection of functions keyed by name.

    ``mod["main"]`` returns a function; ``mod["f"] = func`` adds or replaces one (the module is
    a container, like TVM's; the functions in it are immutable). Iteration order is insertion
    order, which printing and hashing keep.

    ``_shash`` memoizes :func:`~workbench.ir.structural.structural_hash` (a few ms for a
    scheduled kernel, asked for several times per tuning candidate, in several processes):
    every mutator gives the module a fresh memo, :meth:`copy` shares it with the original
    until either changes, and a pickled module carries it (the hash is process-independent).
    """

    def __init__(self, functions: Mapping[Any, Any] | None = None,
                 attrs: Mapping[str, Any] | None = None):
        self._funcs: dict[str, Any] = {}
        self._gvars: dict[str, GlobalVar] = {}
        for key, func in (functions or {}).items():
            self[key] = func
        self.attrs = frozen(attrs)

    @property
    def attrs(self) -> FrozenDict:
        return self._attrs

    @attrs.setter
    def attrs(self, value: FrozenDict) -> None:
        self._attrs = value
        self._shash = {}

    def __setstate__(self, state: dict) -> None:
        # modules pickled before the memo (their attrs a plain attribute) load as well
        if "attrs" in state:
            state = dict(state)
            state["_attrs"] = state.pop("attrs")
        state.setdefault("_shash", {})
        self.__dict__.update(state)

    @staticmethod
    def from_expr(func: Any, name: str = "main") -> "IRModule":
        if isinstance(func, IRModule):
            return func
        attrs = getattr(func, "attrs", None) or {}
        return IRModule({attrs.get("global_symbol", name): func})

    def _name(self, key: Any) -> str:
        if isinstance(key, GlobalVar):
            return key.name_hint
        if isinstance(key, str):
            return key
        raise TypeError(f"IRModule keys are names or GlobalVars, got {key!r}")

    def __getitem__(self, key: Any) -> Any:
        name = self._name(key)
        if name not in self._funcs:
            raise KeyError(f"IRModule has no function {name!r}; it has {list(self._funcs)}")
        return self._funcs[name]

    def __setitem__(self, key: Any, func: Any) -> None:
        name = self._name(key)
        if name not in self._gvars:
            self._gvars[name] = key if isinstance(key, GlobalVar) else GlobalVar(name)
        self._funcs[name] = func
        self._shash = {}

    def __delitem__(self, key: Any) -> None:
        name = self._name(key)
        del self._funcs[name]
        del self._gvars[name]
        self._shash = {}

    def __contains__(self, key: Any) -> bool:
        return self._name(key) in self._funcs

    def __iter__(self) -> Iterator[str]:
        return iter(self._funcs)

    def __len__(self) -> int:
        return len(self._funcs)

    def items(self):
        return self._funcs.items()

    @property
    def functions(self) -> dict[GlobalVar, Any]:
        return {self._gvars[n]: f for n, f in self._funcs.items()}

    def functions_items(self) -> list[tuple[GlobalVar, Any]]:
        """``(GlobalVar, function)`` pairs sorted by name (TVM's order, stable across runs)."""
        return sorted(self.functions.items(), key=lambda item: item[0].name_hint)

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self._gvars:
            raise KeyError(f"IRModule has no function {name!r}; it has {list(self._funcs)}")
        return self._gvars[name]

    def get_global_vars(self) -> list[GlobalVar]:
        return list(self._gvars.values())

    def update_func(self, gv: Any, func: Any) -> None:
        self[gv] = func

    def copy(self) -> "IRModule":
        new = IRModule(attrs=self.attrs)
        new._funcs = dict(self._funcs)
        new._gvars = dict(self._gvars)
        new._shash = self._shash
        return new

    def with_attr(self, key: str, value: Any) -> "IRModule":
        """A copy with module attribute ``key`` set to ``value``."""
        if not isinstance(key, str):
            raise TypeError(f"IRModule.with_attr: the key must be a string, got {key!r}")
        new = self.copy()
        new.attrs = self.attrs.set(key, value)
        return new

    def with_attrs(self, attrs: Mapping[str, Any]) -> "IRModule":
        """A copy with every ``key: value`` of ``attrs`` set."""
        new = self.copy()
        new.attrs = merge_attrs(self.attrs, attrs, "IRModule.with_attrs")
        return new

    def script(self, show_meta: bool = False) -> str:
        """TVMScript text; ``show_meta`` adds the metadata section (large constants) so that
        ``workbench.script.from_source`` reads the text back whole."""
        from workbench.ir.printer import script
        return script(self, show_meta)

    def show(self, style: str | None = None, black_format: bool = False) -> None:
        """Print the module's script, highlighted when Pygments is installed."""
        from workbench.ir.highlight import cprint
        cprint(self.script(), style=style, black_format=black_format)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return self.script()

    def _repr_html_(self) -> str:
        from workbench.ir.printer import html_highlight
        return html_highlight(self.script())
