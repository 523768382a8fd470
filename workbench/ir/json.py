"""Save IR to JSON and load it back exactly, keeping which objects are shared.

Format (version 1) — a node table plus references, so a Var or Buffer used in many places is one
entry and one object again after loading::

    {"format": "workbench.ir", "version": 1,
     "root": <value>,
     "nodes": [{"type": "Var", "fields": {"name": "i", "dtype": "int32"}}, ...]}

Nodes are listed children first, so every reference points to an earlier entry (loading is one
pass and a cycle cannot be expressed). A value is one of:

- ``null``, ``true``/``false``, an integer, a string: itself;
- ``[v, ...]``: a tuple;
- ``{"ref": n}``: node ``n`` of the table;
- ``{"float": "0.5"}``: a float by its exact ``repr`` (also ``"inf"``, ``"-inf"``, ``"nan"``,
  ``"-0.0"``, which bare JSON numbers cannot hold);
- ``{"bytes": "<base64>"}``: a bytes value (a Relax constant's data);
- ``{"list": [...]}``, ``{"fdict": [[k, v], ...]}`` (FrozenDict), ``{"dict": [[k, v], ...]}``:
  the other containers, dict keys kept in order and free to be nodes;
- ``{"module": {"functions": [[{"ref": gv}, v], ...], "attrs": v}}``: an IRModule.

A node's ``type`` is its class name in ``NODE_REGISTRY``; a class whose name is taken by another
class is written ``module:QualName`` instead.
"""
from __future__ import annotations

import base64

import importlib
import json
from typing import Any, Iterator

from workbench.ir.module import IRModule
from workbench.ir.node import NODE_REGISTRY, FrozenDict, Node, field_names

FORMAT = "workbench.ir"
VERSION = 1


# ---- save -------------------------------------------------------------------------------------

def save_json(obj: Any) -> str:
    """Serialise a node, an IRModule or a container of them; ``load_json`` gives it back.

    Raises ``TypeError`` naming the node and field when a value cannot be represented.
    """
    order = _children_first(obj)
    ids = {id(n): i for i, n in enumerate(order)}
    entries = []
    for n in order:
        cls = type(n)
        where = f"{cls.__name__} node"
        fields = {f: _encode(getattr(n, f), ids, f"{where} field {f!r}") for f in field_names(cls)}
        entries.append(json.dumps({"type": _type_key(cls), "fields": fields},
                                  separators=(",", ":"), allow_nan=False, ensure_ascii=False))
    root = json.dumps(_encode(obj, ids, "root"), separators=(",", ":"), allow_nan=False,
                      ensure_ascii=False)
    # One node per line: readable in a diff, still a single JSON document.
    return (f'{{"format":"{FORMAT}","version":{VERSION},"root":{root},"nodes":[\n'
            + ",\n".join(entries) + "\n]}")


def _type_key(cls: type) -> str:
    if NODE_REGISTRY.get(cls.__name__) is cls:
        return cls.__name__
    return f"{cls.__module__}:{cls.__qualname__}"


def _nodes_in(v: Any) -> Iterator[Node]:
    """The nodes directly inside ``v``, looking through containers (not through nodes)."""
    if isinstance(v, Node):
        yield v
    elif type(v) is tuple or type(v) is list:
        for x in v:
            yield from _nodes_in(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _nodes_in(k)
            yield from _nodes_in(x)
    elif isinstance(v, IRModule):
        yield from _nodes_in(v.attrs)
        for gv, func in v.functions.items():
            yield gv
            yield from _nodes_in(func)


def _children_first(obj: Any) -> list[Node]:
    """Every node reachable from ``obj`` once, each after all the nodes it refers to.

    Iterative, so a deep expression does not hit the recursion limit.
    """
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(n, False) for n in reversed(list(_nodes_in(obj)))]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        children = [c for f in field_names(type(n)) for c in _nodes_in(getattr(n, f))]
        stack.extend((c, False) for c in reversed(children) if id(c) not in seen)
    return order


def _encode(v: Any, ids: dict[int, int], where: str) -> Any:
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return {"float": repr(v)}
    if t is bytes:
        return {"bytes": base64.b64encode(v).decode("ascii")}
    if isinstance(v, Node):
        return {"ref": ids[id(v)]}
    if t is tuple:
        return [_encode(x, ids, where) for x in v]
    if t is list:
        return {"list": [_encode(x, ids, where) for x in v]}
    if t is FrozenDict or t is dict:
        key = "fdict" if t is FrozenDict else "dict"
        return {key: [[_encode(k, ids, where), _encode(x, ids, where)] for k, x in v.items()]}
    if t is IRModule:
        return {"module": {
            "functions": [[{"ref": ids[id(gv)]}, _encode(f, ids, where)]
                          for gv, f in v.functions.items()],
            "attrs": _encode(v.attrs, ids, where)}}
    raise TypeError(f"save_json: cannot represent {v!r} ({t.__name__}) in {where}; "
                    "values must be IR nodes, IRModules, tuples, lists, dicts, str, bytes, int, float, "
                    "bool or None")


# ---- load -------------------------------------------------------------------------------------

def load_json(text: str) -> Any:
    """Rebuild what :func:`save_json` wrote: equal structure, names, sharing and identity.

    Raises ``ValueError`` saying where the document is malformed (``nodes[12].fields.body: ...``).
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"load_json: not valid JSON: {e.msg} at line {e.lineno} "
                         f"column {e.colno}") from None
    except TypeError as e:
        raise ValueError(f"load_json: expected a JSON string, got {type(text).__name__}") from e
    if not isinstance(doc, dict):
        raise ValueError("load_json: the document must be a JSON object with "
                         "'format', 'version', 'root' and 'nodes'")
    if doc.get("format") != FORMAT:
        raise ValueError(f"load_json: format is {doc.get('format')!r}, expected {FORMAT!r}")
    version = doc.get("version")
    if type(version) is not int or not 1 <= version <= VERSION:
        raise ValueError(f"load_json: unsupported version {version!r}; this build reads "
                         f"versions 1..{VERSION}")
    entries = doc.get("nodes")
    if not isinstance(entries, list):
        raise ValueError("load_json: 'nodes' must be a list")
    if "root" not in doc:
        raise ValueError("load_json: the document has no 'root'")
    built: list[Node] = []
    for i, entry in enumerate(entries):
        built.append(_build_node(entry, built, f"nodes[{i}]"))
    return _decode(doc["root"], built, "root")


def _resolve_type(key: Any, where: str) -> type:
    if not isinstance(key, str):
        raise ValueError(f"{where}.type: expected a class name, got {key!r}")
    if ":" in key:
        module, _, qualname = key.partition(":")
        # Only the project's own modules: a document must not make us import arbitrary code.
        if module != "workbench" and not module.startswith("workbench."):
            raise ValueError(f"{where}.type: {key!r} is not a workbench node class")
        try:
            cls: Any = importlib.import_module(module)
            for part in qualname.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError):
            raise ValueError(f"{where}.type: no node class {key!r}") from None
    else:
        cls = NODE_REGISTRY.get(key)
    if not (isinstance(cls, type) and issubclass(cls, Node)):
        raise ValueError(f"{where}.type: unknown node type {key!r}")
    return cls


def _build_node(entry: Any, built: list[Node], where: str) -> Node:
    if not isinstance(entry, dict) or set(entry) != {"type", "fields"}:
        raise ValueError(f"{where}: a node entry is {{\"type\": ..., \"fields\": {{...}}}}, "
                         f"got {_preview(entry)}")
    cls = _resolve_type(entry["type"], where)
    fields = entry["fields"]
    if not isinstance(fields, dict):
        raise ValueError(f"{where}.fields: expected an object, got {_preview(fields)}")
    names = field_names(cls)
    unknown = [f for f in fields if f not in names]
    if unknown:
        raise ValueError(f"{where}.fields: {cls.__name__} has no field(s) {unknown}; "
                         f"its fields are {list(names)}")
    kwargs = {f: _decode(v, built, f"{where}.fields.{f}") for f, v in fields.items()}
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ValueError(f"{where}: cannot build {cls.__name__}: {e}") from None


def _decode(v: Any, built: list[Node], where: str) -> Any:
    if v is None or isinstance(v, (bool, int, str, float)):
        return v
    if isinstance(v, list):
        return tuple(_decode(x, built, f"{where}[{i}]") for i, x in enumerate(v))
    if not isinstance(v, dict) or len(v) != 1:
        raise ValueError(f"{where}: expected a value, got {_preview(v)}")
    (tag, body), = v.items()
    if tag == "ref":
        if type(body) is not int or not 0 <= body < len(built):
            raise ValueError(f"{where}: reference {body!r} does not name an earlier node "
                             f"(0..{len(built) - 1})")
        return built[body]
    if tag == "float":
        try:
            return float(body)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: bad float {body!r}") from None
    if tag == "bytes":
        try:
            return base64.b64decode(body, validate=True)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: bad base64 bytes {_preview(body)}") from None
    if tag == "list":
        if not isinstance(body, list):
            raise ValueError(f"{where}.list: expected a list, got {_preview(body)}")
        return [_decode(x, built, f"{where}.list[{i}]") for i, x in enumerate(body)]
    if tag in ("fdict", "dict"):
        pairs = _decode_pairs(body, built, f"{where}.{tag}")
        return FrozenDict(pairs) if tag == "fdict" else dict(pairs)
    if tag == "module":
        return _decode_module(body, built, f"{where}.module")
    raise ValueError(f"{where}: unknown value tag {tag!r}")


def _decode_pairs(body: Any, built: list[Node], where: str) -> list[tuple[Any, Any]]:
    if not isinstance(body, list):
        raise ValueError(f"{where}: expected a list of [key, value] pairs, got {_preview(body)}")
    pairs = []
    for i, kv in enumerate(body):
        if not isinstance(kv, list) or len(kv) != 2:
            raise ValueError(f"{where}[{i}]: expected [key, value], got {_preview(kv)}")
        key = _decode(kv[0], built, f"{where}[{i}][0]")
        try:
            hash(key)
        except TypeError:
            raise ValueError(f"{where}[{i}][0]: key {_preview(kv[0])} is not hashable") from None
        pairs.append((key, _decode(kv[1], built, f"{where}[{i}][1]")))
    return pairs


def _decode_module(body: Any, built: list[Node], where: str) -> IRModule:
    if not isinstance(body, dict) or set(body) != {"functions", "attrs"}:
        raise ValueError(f"{where}: expected {{\"functions\": [...], \"attrs\": ...}}")
    attrs = _decode(body["attrs"], built, f"{where}.attrs")
    if not isinstance(attrs, dict):
        raise ValueError(f"{where}.attrs: expected a dict value")
    mod = IRModule(attrs=attrs)
    for key, func in _decode_pairs(body["functions"], built, f"{where}.functions"):
        try:
            mod[key] = func
        except TypeError as e:
            raise ValueError(f"{where}.functions: {e}") from None
    return mod


def _preview(v: Any) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["save_json", "load_json", "FORMAT", "VERSION"]
