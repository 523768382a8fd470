"""runtime.Module: compiled kernels, loaded and callable, exportable to a file.

A Module is made by codegen with :meth:`Module.from_object` (object code + optional sources)
or by :func:`load_module` from a file written by :meth:`Module.export_library`. Everything it
needs to call a kernel is in the compiled code itself (the ``__workbench_metadata`` global), so
a reloaded module runs without the IR.

Export formats, chosen by the file name:

- ``*.o``: the raw object code (metadata inside; sources are not kept);
- anything else (``*.so`` usually): a shared library linked by the system C compiler
  (``cc -shared ... -lm [-lgomp]``) that also embeds the sources as ``__workbench_sources``,
  so ``get_source`` still works after :func:`load_module`.
"""
from __future__ import annotations

import html
import os
from typing import Any, Callable

from . import cpu_state, loader
from .device import Device
from .evaluator import TimeEvaluator, time_evaluator as _time_evaluator
from .packed_func import PackedFunc, ParamInfo, make_kernel_func, parse_params

__all__ = ["Module", "load_module", "enabled"]

_SOURCE_ALIASES = {"": None, "ll": "ll", "llvm": "ll", "asm": "asm", "s": "asm"}


class Module:
    """A loaded set of compiled kernels: ``mod["name"]`` gives a checked PackedFunc."""

    def __init__(self, code: loader.LoadedCode, *, object_code: bytes | None = None,
                 library: bytes | None = None, sources: dict[str, str] | None = None,
                 uses_gomp: bool = False) -> None:
        """Internal: use :meth:`from_object` or :func:`load_module`."""
        meta = loader.read_metadata(code)
        for state in meta.get("cpu_state", ()):
            cpu_state.require(state)   # e.g. AMX: before any of this code can run
        self._code = code
        self._object = object_code
        self._library = library
        self._sources = dict(sources or {})
        self._uses_gomp = uses_gomp
        self._meta = meta
        self._specs: dict[str, tuple[tuple[ParamInfo, ...], tuple[str, ...], int]] = {}
        for fmeta in meta["functions"]:
            name, params, shape_vars = parse_params(fmeta)
            address = code.address(name)
            if not address:
                raise ValueError(f"kernel {name!r} is listed in {loader.METADATA_SYMBOL} but "
                                 "the compiled code does not define it")
            self._specs[name] = (params, shape_vars, address)
        entry = meta.get("entry") or (next(iter(self._specs)) if self._specs else "")
        self._entry = entry
        self._funcs: dict[str, PackedFunc] = {}

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_object(cls, obj: bytes, sources: dict[str, str] | None = None) -> "Module":
        """Load object code for the host (ABI of docs/internals.md) with MCJIT. ``sources``
        maps a format ("ll", "asm") to text for :meth:`get_source`."""
        if sources is not None and not (isinstance(sources, dict) and all(
                isinstance(k, str) and (isinstance(v, str) or callable(v))
                for k, v in sources.items())):
            raise TypeError("Module.from_object: sources must map str to str (or to a "
                            "zero-argument callable producing the text on first use)")
        obj = bytes(obj)
        code = loader.load_object(obj)
        return cls(code, object_code=obj, sources=sources, uses_gomp=loader.uses_gomp(obj))

    @classmethod
    def _from_library_bytes(cls, data: bytes, origin: str) -> "Module":
        code = loader.load_shared(data, origin)
        return cls(code, library=data, sources=loader.read_sources(code),
                   uses_gomp=b"GOMP_" in data)

    def serialize(self) -> tuple[str, bytes]:
        """``(kind, bytes)`` from which :meth:`deserialize` rebuilds this module: its object
        code (``"object"``), or the shared library it was loaded from (``"library"``)."""
        if self._object is not None:
            return ("object", self._object)
        return ("library", self._library)

    @classmethod
    def deserialize(cls, kind: str, data: bytes) -> "Module":
        """The module :meth:`serialize` described."""
        if kind == "object":
            return cls.from_object(data)
        if kind == "library":
            return cls._from_library_bytes(bytes(data), "<serialized module>")
        raise ValueError(f"Module.deserialize: kind must be 'object' or 'library', got {kind!r}")

    def __reduce__(self):
        # Lets a Module cross process boundaries (tuner workers) without a file.
        if self._object is not None:
            return (Module.from_object, (self._object, self._resolved_sources() or None))
        return (Module._from_library_bytes, (self._library, self._code.origin))

    # -- functions -----------------------------------------------------------------------------
    @property
    def entry_name(self) -> str:
        """The name of the entry function (``mod(*args)`` calls it)."""
        return self._entry

    @property
    def type_key(self) -> str:
        return "llvm" if self._object is not None else "library"

    @property
    def function_names(self) -> list[str]:
        return list(self._specs)

    @property
    def metadata(self) -> dict:
        """The decoded ``__workbench_metadata`` (a copy)."""
        import copy

        return copy.deepcopy(self._meta)

    @property
    def imported_modules(self) -> list["Module"]:
        return []

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        return name in self._specs

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def get_function(self, name: str, query_imports: bool = False) -> PackedFunc:
        """The checked PackedFunc of kernel ``name``; ``AttributeError`` if there is none."""
        func = self._funcs.get(name)
        if func is not None:
            return func
        spec = self._specs.get(name)
        if spec is None:
            raise AttributeError(f"Module has no function {name!r}; it has "
                                 f"{', '.join(self._specs) or 'no functions'}")
        params, shape_vars, address = spec
        func = make_kernel_func(name, params, shape_vars, address, self._code,
                                threads=self._uses_gomp)
        func._keepalive = (self, func._keepalive)   # the module (and its code) outlive func
        self._funcs[name] = func
        return func

    def __getitem__(self, name: str) -> PackedFunc:
        if not isinstance(name, str):
            raise TypeError(f"Module[...] takes a function name (str), got {name!r}")
        return self.get_function(name)

    def __call__(self, *args: Any) -> Any:
        if not self._entry:
            raise AttributeError("Module has no entry function")
        return self.get_function(self._entry)(*args)

    # -- sources -------------------------------------------------------------------------------
    def _resolved_sources(self) -> dict[str, str]:
        """Every source as text (lazy ones are produced now)."""
        return {k: self.get_source(k) for k in self._sources}

    def get_source(self, fmt: str = "") -> str:
        """The source text in ``fmt``: "ll" (LLVM IR, the default) or "asm"."""
        if fmt not in _SOURCE_ALIASES:
            raise ValueError(f"get_source: unknown format {fmt!r}; expected 'll' or 'asm'")
        key = _SOURCE_ALIASES[fmt] or ("ll" if "ll" in self._sources
                                       else next(iter(self._sources), "ll"))
        if key not in self._sources:
            have = ", ".join(repr(k) for k in self._sources) or "none"
            raise ValueError(f"get_source: the {key!r} source is not available for this module "
                             f"(available: {have}; modules loaded from '.o' files or built "
                             "without sources carry none)")
        text = self._sources[key]
        if callable(text):  # produced lazily: assembly costs a second code generation
            text = self._sources[key] = text()
        return text

    # -- export --------------------------------------------------------------------------------
    def export_library(self, file_name: str | os.PathLike, **kwargs: Any) -> None:
        """Write the module to ``file_name``: raw object code for ``*.o``, otherwise a shared
        library (needs a C compiler; see the module docstring). Load it back with
        :func:`load_module`."""
        if kwargs:
            raise TypeError(f"export_library: unsupported options {sorted(kwargs)}")
        path = os.fspath(file_name)
        if not isinstance(path, str) or not path:
            raise TypeError(f"export_library: file_name must be a path, got {file_name!r}")
        if path.endswith(".o"):
            if self._object is None:
                raise ValueError("export_library: this module was loaded from a shared "
                                 "library and has no object code to write to a '.o' file")
            _atomic_write(path, self._object)
            return
        if self._object is None:
            _atomic_write(path, self._library)
            return
        objects = [self._object]
        if self._sources:
            objects.append(loader.sources_object(self._resolved_sources()))
        loader.link_shared(objects, path, need_gomp=self._uses_gomp)

    def save(self, file_name: str | os.PathLike, fmt: str = "") -> None:
        """Write one artefact: ``fmt``/suffix "o" (object code), "ll" or "s"/"asm" (sources)."""
        path = os.fspath(file_name)
        kind = fmt or os.path.splitext(path)[1].lstrip(".")
        if kind == "o":
            if self._object is None:
                raise ValueError("save: this module has no object code")
            _atomic_write(path, self._object)
        else:
            _atomic_write(path, self.get_source(kind).encode("utf-8"))

    # -- timing --------------------------------------------------------------------------------
    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, limit_zero_time_iterations: int = 100,
                       cooldown_interval_ms: float = 0, repeats_to_cooldown: int = 1,
                       cache_flush_bytes: int = 0,
                       f_preproc: str | Callable[..., Any] = "") -> TimeEvaluator:
        """An evaluator timing ``func_name`` (looked up in this module, then in the global
        registry): ``evaluator(*args) -> BenchmarkResult`` in seconds. Semantics as TVM's, see
        :mod:`workbench.runtime.evaluator`."""
        if func_name in self._specs:
            func: Callable[..., Any] = self.get_function(func_name)
        else:
            from .registry import get_global_func

            func = get_global_func(func_name, allow_missing=True)
            if func is None:
                raise AttributeError(f"time_evaluator: cannot find {func_name!r} in the module "
                                     f"(functions: {', '.join(self._specs) or 'none'}) or in "
                                     "the global registry")
        return _time_evaluator(func, dev, number, repeat, min_repeat_ms,
                               limit_zero_time_iterations, cooldown_interval_ms,
                               repeats_to_cooldown, cache_flush_bytes, f_preproc)

    # -- display -------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (f"Module({self.type_key}, entry={self._entry!r}, "
                f"functions={list(self._specs)})")

    def _repr_html_(self) -> str:
        rows = []
        for name, (params, _, _) in self._specs.items():
            sig = ", ".join(f"{p.name}: {p.describe()}" for p in params)
            star = " (entry)" if name == self._entry else ""
            rows.append(f"<li><code>{html.escape(name)}({html.escape(sig)})</code>{star}</li>")
        srcs = ", ".join(self._sources) or "none"
        return (f"<div class='workbench-module'><b>runtime.Module</b> ({self.type_key}), "
                f"sources: {html.escape(srcs)}<ul>{''.join(rows)}</ul></div>")


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def load_module(path: str | os.PathLike, fmt: str = "") -> Module:
    """Load a module written by :meth:`Module.export_library`: a shared library, or a ``.o``
    object file (loaded with MCJIT)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_module: no such file {path!r}")
    with open(path, "rb") as f:
        data = f.read()
    if fmt == "o" or path.endswith(".o"):
        return Module.from_object(data)
    return Module._from_library_bytes(data, os.path.abspath(path))


def enabled(target: str) -> bool:
    """Can the runtime run code for ``target`` (a device or target kind, e.g. ``"llvm"``,
    ``"cpu"``, ``"cuda"``, ``"gpu"``; options after the kind are ignored)? TVM's
    ``runtime.enabled``: here only the host CPU (``"cpu"``, ``"llvm"``) is."""
    if not isinstance(target, str):
        raise TypeError(f"enabled: target must be a string, got {type(target).__name__}")
    kind = target.split()[0] if target.split() else ""
    return kind in ("cpu", "llvm")
