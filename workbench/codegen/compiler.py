"""LLVM IR text -> optimised object code, with a content-addressed disk cache.

The cache key covers the IR text, the target (triple, CPU, features, options) and the LLVM
version, so a cached object is only reused for exactly the same compilation. The cache is
looked up in-process; only a miss runs LLVM, by default in a helper process
(:mod:`workbench.codegen.isolation`, option ``compile_isolation``), where a crash of LLVM
raises :class:`~workbench.codegen.isolation.LLVMCrashError` instead of ending this process.
The LLVM stages themselves are in :mod:`workbench.codegen.llvm_stages`.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from workbench import options
from workbench.codegen import isolation, llvm_stages
from workbench.codegen.llvm_stages import TargetSpec
from workbench.target import Target

_SPECS: dict[Target, tuple[TargetSpec, str]] = {}
_SPECS_LOCK = threading.Lock()


def _spec(target: Target) -> tuple[TargetSpec, str]:
    """(target spec, the target's part of the cache key), computed once per target: asking
    LLVM for the host's features takes about a millisecond, which a cache hit should not pay."""
    got = _SPECS.get(target)
    if got is None:
        spec = (target.triple, target.host_cpu, target.features, target.opt_level)
        key_part = "\0".join((str(target), spec[0], spec[1], spec[2],
                              ".".join(map(str, llvm.llvm_version_info))))
        got = (spec, key_part)
        with _SPECS_LOCK:
            _SPECS[target] = got
    return got


def cache_dir() -> Path:
    return Path(options.get("cache_dir")) / "objects"


@dataclass
class CompiledObject:
    """Object code and the texts a user may want to look at."""

    obj: bytes
    ll: str
    cache_hit: bool
    asm: str | None = None


class LLVMCompiler:
    """Compiles LLVM IR text for one target at its opt level; thread-safe."""

    def __init__(self, target: Target, use_cache: bool = True) -> None:
        self.target = target
        self.use_cache = use_cache

    @property
    def spec(self) -> TargetSpec:
        """(triple, CPU, features, opt level): what the LLVM stages need of the target."""
        return _spec(self.target)[0]

    def cache_key(self, ll: str) -> str:
        h = hashlib.sha256()
        h.update(ll.encode())
        h.update(b"\0")
        h.update(_spec(self.target)[1].encode())
        h.update(b"\0")
        return h.hexdigest()

    def compile(self, ll: str) -> CompiledObject:
        """Object code of ``ll``: from the cache, else from LLVM (isolated unless option
        ``compile_isolation`` is off; an LLVM crash raises ``LLVMCrashError``)."""
        key = self.cache_key(ll)
        path = cache_dir() / key[:2] / f"{key}.o"
        if self.use_cache and path.exists():
            return CompiledObject(path.read_bytes(), ll, True)
        obj = self._run("object", ll)
        if self.use_cache:
            _atomic_write(path, obj)
        return CompiledObject(obj, ll, False)

    def assembly(self, ll: str) -> str:
        """The optimised module's assembly text (isolated like :meth:`compile`; not cached)."""
        return self._run("assembly", ll)

    def optimized_module(self, ll: str) -> llvm.ModuleRef:
        """The optimised LLVM module, in this process (not isolated: a ModuleRef cannot cross
        processes). For inspection; compiling goes through :meth:`compile`."""
        return llvm_stages.optimized_module(ll, self.spec)

    def _run(self, kind: str, ll: str) -> bytes | str:
        if options.get("compile_isolation"):
            return isolation.run(kind, ll, self.spec)
        return llvm_stages.run(kind, ll, self.spec)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so a reader never sees half an object."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or full cache only costs speed
