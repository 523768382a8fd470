"""Text forms of IR: the printer registry and the generic entry points.

Each IR layer registers its printers here (``workbench.tir`` does on import; relax will), so
this floor-1 module never imports the layers above it:

- ``register_script(cls, fn)``: ``fn(obj) -> str``, the full text of an object (``script``).
- ``register_function_printer(cls, fn)``: ``fn(func, name) -> str``, a function's text as it
  appears inside ``@I.ir_module class Module:`` (unindented; the module indents it).
- ``register_short_repr(cls, fn)``: ``fn(node) -> str``, a one-line form for ``repr``.

Lookups follow the class's MRO, so registering a base class covers its subclasses.
"""
from __future__ import annotations

import contextlib
import contextvars
import html
import json
import re
from typing import Any, Callable, Iterator

from workbench.ir.dispatch import TypeTable
from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.node import FrozenDict, Node, field_names

_SCRIPT: TypeTable[Callable[[Any], str]] = TypeTable()
_FUNCTION: TypeTable[Callable[[Any, str], str]] = TypeTable()
_SHORT: TypeTable[Callable[[Any], str]] = TypeTable()


def register_script(cls: type, fn: Callable[[Any], str] | None = None):
    """Register ``fn(obj) -> str`` as the full text form of ``cls``; usable as a decorator."""
    return _SCRIPT.register(cls, fn)


def register_function_printer(cls: type, fn: Callable[[Any, str], str] | None = None):
    """Register ``fn(func, name) -> str`` to print a function of type ``cls`` in a module."""
    return _FUNCTION.register(cls, fn)


def register_short_repr(cls: type, fn: Callable[[Any], str] | None = None):
    """Register ``fn(node) -> str`` as the one-line ``repr`` of ``cls``."""
    return _SHORT.register(cls, fn)


# ---- entry points -----------------------------------------------------------------------------

def script(obj: Any, show_meta: bool = False) -> str:
    """The full text form of ``obj`` (an IRModule, a function, a statement, ...).

    ``show_meta``: for a module, append the metadata section (the values that print as
    ``metadata["relax.expr.Constant"][0]``), so ``workbench.script.from_source`` reads the text
    back whole; without it a comment says the metadata was left out.
    """
    if isinstance(obj, IRModule):
        return module_script(obj, show_meta)
    fn = _SCRIPT.lookup(type(obj))
    if fn is not None:
        return fn(obj)
    return short_repr(obj) if isinstance(obj, Node) else repr(obj)


def script_or_repr(obj: Any) -> str:
    """``script(obj)`` for IR, ``repr`` otherwise; never raises (used in error messages)."""
    try:
        if isinstance(obj, (Node, IRModule)):
            return script(obj)
        return format_value(obj)
    except Exception:  # noqa: BLE001 - an error message must not fail while being built
        return object.__repr__(obj)


def short_repr(node: Any) -> str:
    """A one-line readable form of ``node``; never raises (it backs ``Node.__repr__``)."""
    fn = _SHORT.lookup(type(node))
    if fn is not None:
        try:
            return fn(node)
        except Exception:  # noqa: BLE001 - fall back to the generic form below
            pass
    return generic_repr(node)


def generic_repr(node: Any, limit: int = 200) -> str:
    """``ClassName(field=value, ...)`` built from the dataclass fields, cut at ``limit``."""
    try:
        parts = ", ".join(f"{n}={format_value(getattr(node, n))}"
                          for n in field_names(type(node)))
    except Exception:  # noqa: BLE001
        return object.__repr__(node)
    text = f"{type(node).__name__}({parts})"
    return text if len(text) <= limit else text[:limit - 4] + " ...)"


def quote(s: str) -> str:
    """A double-quoted Python string literal (as TVMScript writes them)."""
    return json.dumps(s, ensure_ascii=False)


def format_value(v: Any, node_fmt: Callable[[Any], str] | None = None) -> str:
    """A Python-literal text of an attribute value; nodes go through ``node_fmt``."""
    fmt = node_fmt or short_repr
    t = type(v)
    if t is str:
        return quote(v)
    if t is float:
        return repr(v) if v == v and v not in (float("inf"), float("-inf")) else f'float("{v}")'
    if isinstance(v, Node):
        return fmt(v)
    if t is tuple:
        inner = ", ".join(format_value(x, node_fmt) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if t is list:
        return "[" + ", ".join(format_value(x, node_fmt) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{format_value(k, node_fmt)}: {format_value(x, node_fmt)}"
                               for k, x in v.items()) + "}"
    rule = _ATTR_VALUES.lookup(t)
    return rule(v) if rule is not None else repr(v)


# Attribute values that are not IR and print some other way than repr (runtime modules in a
# module's external_mods print as metadata references): registered by the layer that knows them.
_ATTR_VALUES: TypeTable[Callable[[Any], str]] = TypeTable()


def register_attr_value(cls: type, text: Callable[[Any], str]) -> None:
    """Print attribute values of type ``cls`` as ``text(value)``."""
    _ATTR_VALUES.register(cls, text)


def indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line if line else line for line in text.split("\n"))


# ---- IRModule ---------------------------------------------------------------------------------

# ---- metadata: values too big to print inline ----------------------------------------------

class Metadata:
    """The values of one printout that print as ``metadata["<kind>"][k]`` (TVM's form)."""

    def __init__(self) -> None:
        self.tables: dict[str, list[Any]] = {}
        self._index: dict[int, tuple[str, int]] = {}

    def ref(self, kind: str, value: Any) -> str:
        key = self._index.get(id(value))
        if key is None:
            table = self.tables.setdefault(kind, [])
            key = self._index[id(value)] = (kind, len(table))
            table.append(value)
        return f"metadata[{quote(key[0])}][{key[1]}]"


_METADATA: contextvars.ContextVar[Metadata | None] = contextvars.ContextVar(
    "workbench_printer_metadata", default=None)


@contextlib.contextmanager
def metadata_scope() -> Iterator[Metadata]:
    """The printout's metadata table: the enclosing one (a module's), else a new one."""
    outer = _METADATA.get()
    if outer is not None:
        yield outer
        return
    meta = Metadata()
    token = _METADATA.set(meta)
    try:
        yield meta
    finally:
        _METADATA.reset(token)


def metadata_ref(kind: str, value: Any) -> str:
    """The text referring to ``value`` in the current printout's metadata table."""
    with metadata_scope() as meta:
        return meta.ref(kind, value)


_META_OMITTED = "# Metadata omitted. Use show_meta=True in script() method to show it."


def module_script(mod: IRModule, show_meta: bool = False) -> str:
    """``@I.ir_module class Module:`` with each function printed by its registered printer;
    values printed as metadata references follow as ``metadata = I.load_metadata(...)`` when
    ``show_meta``, else a comment says they were left out."""
    with metadata_scope() as meta:
        text = _module_body(mod)
    if not meta.tables:
        return text
    if not show_meta:
        return _META_OMITTED + "\n" + text
    from workbench.ir.json import save_json
    return text + '\n\nmetadata = I.load_metadata(r"""' + save_json(meta.tables) + '""")'


def _module_body(mod: IRModule) -> str:
    out = ["@I.ir_module", "class Module:"]
    if mod.attrs:
        out.append(f"    I.module_attrs({format_value(dict(mod.attrs))})")
    for name, func in mod.items():
        fn = _FUNCTION.lookup(type(func))
        text = fn(func, name) if fn is not None else f"{name} = {short_repr(func)}"
        if len(out) > 2:
            out.append("")
        out.append(indent(text))
    if len(out) == 2:
        out.append("    pass")
    return "\n".join(out)


register_script(IRModule, module_script)
register_short_repr(GlobalVar, lambda gv: f"I.GlobalVar({quote(gv.name_hint)})")
register_short_repr(FrozenDict, lambda d: repr(d))


# ---- HTML -------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<comment>\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<decorator>@[\w.]+)
  | (?P<keyword>\b(?:def|class|for|in|with|if|elif|else|while|assert|return|and|or|not|as
                   |pass|True|False|None|lambda)\b)
  | (?P<namespace>\b[TI]\.[\w.]+)
  | (?P<number>\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?\b)
""", re.VERBOSE)

_STYLE = {
    "comment": "color:#6a737d;font-style:italic", "string": "color:#032f62",
    "decorator": "color:#6f42c1", "keyword": "color:#d73a49;font-weight:bold",
    "namespace": "color:#005cc5", "number": "color:#098658",
}


def html_highlight(text: str) -> str:
    """``text`` as an HTML ``<pre>`` block with simple Python-style syntax colouring.

    Styles are inline so the output renders the same in Jupyter, VS Code and static HTML.
    """
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        kind = m.lastgroup or ""
        out.append(f'<span style="{_STYLE[kind]}">{html.escape(m.group())}</span>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return ('<pre class="workbench-script" style="font-family:monospace;font-size:12px;'
            'line-height:1.35">' + "".join(out) + "</pre>")


__all__ = ["script", "short_repr", "html_highlight", "register_script",
           "register_function_printer", "register_short_repr", "format_value", "quote",
           "generic_repr", "script_or_repr", "module_script", "indent", "Metadata", "metadata_ref",
           "metadata_scope", "register_attr_value"]
