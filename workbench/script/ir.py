"""``I``: the module-level names of TVMScript (``from workbench.script import ir as I``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.ir.module import GlobalVar as _GlobalVar
from workbench.script.parser.core import Directive


def ir_module(cls: type | None = None, *, check_well_formed: bool = True) -> Any:
    """``@I.ir_module class M: ...``: parse the class's ``@T.prim_func`` / ``@R.function``
    members into an IRModule (they may refer to each other as ``cls.name``).
    ``@I.ir_module(check_well_formed=False)`` is accepted, as in TVM."""
    from workbench.script.parser.entry import ir_module as parse
    return parse(cls) if cls is not None else parse


@dataclass(frozen=True)
class ModuleAttrs(Directive):
    attrs: dict


def module_attrs(attrs: dict) -> ModuleAttrs:
    """``I.module_attrs({...})`` in a module class body: the module's attrs."""
    return ModuleAttrs(dict(attrs))


def load_metadata(text: str) -> Any:
    """The metadata section ``IRModule.script(show_meta=True)`` writes: values by kind. The
    ``"runtime.NDArray"`` table (tensor values of function attrs, stored as constants) reads
    back as NDArrays, the ``"runtime.Module"`` one (compiled modules in module attrs, stored
    as their code) as runtime Modules."""
    from workbench.ir.json import load_json
    from workbench.relax.printer import MODULE_METADATA, NDARRAY_METADATA
    from workbench.runtime.module import Module
    from workbench.runtime.ndarray import array
    tables = load_json(text)
    if isinstance(tables, dict) and NDARRAY_METADATA in tables:
        tables = dict(tables)
        tables[NDARRAY_METADATA] = [array(c.data.numpy()) for c in tables[NDARRAY_METADATA]]
    if isinstance(tables, dict) and MODULE_METADATA in tables:
        tables = dict(tables)
        tables[MODULE_METADATA] = [Module.deserialize(kind, data)
                                   for kind, data in tables[MODULE_METADATA]]
    return tables


def GlobalVar(name: str) -> _GlobalVar:  # noqa: N802 - TVMScript's name
    return _GlobalVar(name)


__all__ = ["ir_module", "module_attrs", "ModuleAttrs", "GlobalVar", "load_metadata"]
