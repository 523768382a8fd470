"""Tensor intrinsics: a description of a small computation and an implementation of it.

``TensorIntrin.register(name, desc, impl)`` puts a pair of PrimFuncs in a process-wide table;
``Schedule.tensorize(block_or_loop, name)`` matches ``desc`` structurally against a block and
replaces the block's body by ``impl``'s (see :mod:`workbench.tir.schedule.primitive.tensorize`).

Both PrimFuncs take the same number of buffer parameters, in the same order and with the same
dtypes; the body of each is one root ``BlockRealize``. ``desc`` holds the loops and blocks the
workload must have; ``impl`` holds the code that replaces them (it may call LLVM intrinsics with
``tir.call_llvm_pure_intrin``). An ``impl`` buffer without ``strides`` is a compact view: the
workload region it is bound to must be contiguous. One with ``strides`` (variables) may bind a
strided region and must index each dimension within its extent.

The built-in intrinsics (``workbench.tir.tensor_intrin.x86``) register themselves the first time
a name is looked up, so importing Workbench stays cheap. Families whose shape is part of the
name (``avx512_fp32_mk_<MR>x<NR>x<KC>``) are built by a factory on first use
(:func:`register_intrin_factory`), so a trace naming one replays in any process.
"""
from __future__ import annotations

import importlib
import re
import threading
from dataclasses import dataclass
from typing import Callable

from workbench.tir.function import PrimFunc
from workbench.tir.stmt import BlockRealize

__all__ = ["TensorIntrin", "list_intrins", "register_intrin_factory"]

_TABLE: dict[str, "TensorIntrin"] = {}
_LOCK = threading.Lock()
# Modules that register built-in intrinsics when imported.
_BUILTIN_MODULES = ("workbench.tir.tensor_intrin.x86", "workbench.tir.tensor_intrin.amx")
_builtins_loaded = False


def _load_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    for mod in _BUILTIN_MODULES:
        importlib.import_module(mod)


@dataclass(frozen=True, eq=False)
class TensorIntrin:
    """A tensor intrinsic: ``desc`` (what it computes) and ``impl`` (how)."""

    desc: PrimFunc
    impl: PrimFunc

    def __post_init__(self) -> None:
        _check_pair(self.desc, self.impl)

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> None:
        """Register ``TensorIntrin(desc, impl)`` as ``name``; a taken name raises
        ``ValueError`` unless ``override``."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"TensorIntrin.register: the name must be a non-empty string, got "
                            f"{name!r}")
        intrin = TensorIntrin(desc, impl)
        with _LOCK:
            if name in _TABLE and not override:
                raise ValueError(f"TensorIntrin.register: {name!r} is already registered "
                                 "(pass override=True to replace it)")
            _TABLE[name] = intrin

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> "TensorIntrin | None":
        """The intrinsic registered as ``name``; a missing name raises ``ValueError`` (listing
        the known ones) unless ``allow_missing``, which returns None."""
        if name not in _TABLE:
            _load_builtins()
            _from_factory(name)
        intrin = _TABLE.get(name)
        if intrin is None and not allow_missing:
            raise ValueError(f"TensorIntrin.get: no tensor intrinsic named {name!r}; "
                             f"registered: {sorted(_TABLE)}")
        return intrin


# Families of intrinsics whose shape is part of the name (``avx512_fp32_mk_8x32x64``): a
# factory builds and registers one the first time its name is asked for.
_FACTORIES: list[tuple["re.Pattern[str]", Callable[..., tuple[PrimFunc, PrimFunc]]]] = []


def register_intrin_factory(pattern: str, build: Callable[..., tuple[PrimFunc, PrimFunc]]
                            ) -> None:
    """Names matching the regular expression ``pattern`` (in full) are built on demand by
    ``build(**match.groupdict())``, which returns ``(desc, impl)`` (or raises ValueError for
    an unsupported shape)."""
    _FACTORIES.append((re.compile(pattern), build))


def _from_factory(name: str) -> None:
    for pattern, build in _FACTORIES:
        m = pattern.fullmatch(name)
        if m is None:
            continue
        try:
            desc, impl = build(**m.groupdict())
        except ValueError as e:
            raise ValueError(f"TensorIntrin.get: {name!r}: {e}") from None
        with _LOCK:
            _TABLE.setdefault(name, TensorIntrin(desc, impl))
        return


def list_intrins() -> list[str]:
    """Names of every registered intrinsic (built-ins included)."""
    _load_builtins()
    return sorted(_TABLE)


def _check_pair(desc: PrimFunc, impl: PrimFunc) -> None:
    for role, f in (("desc", desc), ("impl", impl)):
        if not isinstance(f, PrimFunc):
            raise TypeError(f"TensorIntrin: {role} must be a PrimFunc, got {type(f).__name__}")
        if not isinstance(f.body, BlockRealize) or f.body.iter_values:
            raise ValueError(f"TensorIntrin: the body of {role} must be one root block "
                             "(a BlockRealize without iter vars)")
        if len(f.buffers) != len(f.params):
            raise ValueError(f"TensorIntrin: every parameter of {role} must be a buffer")
    if len(desc.buffers) != len(impl.buffers):
        raise ValueError(f"TensorIntrin: desc takes {len(desc.buffers)} buffers but impl takes "
                         f"{len(impl.buffers)}")
    for k, (d, i) in enumerate(zip(desc.buffers, impl.buffers)):
        if d.dtype != i.dtype or len(d.shape) != len(i.shape):
            raise ValueError(f"TensorIntrin: parameter {k} is {d.dtype} {len(d.shape)}-d "
                             f"{d.name!r} in desc but {i.dtype} {len(i.shape)}-d {i.name!r} in "
                             "impl")
