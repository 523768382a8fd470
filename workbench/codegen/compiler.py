"""LLVM IR text -> optimised object code, with a content-addressed disk cache.

The cache key covers the IR text, the target (triple, CPU, features, options) and the LLVM
version, so a cached object is only reused for exactly the same compilation.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from workbench.target import Target

_LOCK = threading.Lock()
_MACHINES: dict[str, llvm.TargetMachine] = {}


def _target_machine(target: Target) -> llvm.TargetMachine:
    key = f"{target.triple}|{target.host_cpu}|{target.features}|{target.opt_level}"
    with _LOCK:
        tm = _MACHINES.get(key)
        if tm is None:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            tm = llvm.Target.from_triple(target.triple).create_target_machine(
                cpu=target.host_cpu, features=target.features, opt=min(target.opt_level, 3),
                reloc="pic", codemodel="default")
            _MACHINES[key] = tm
    return tm


def cache_dir() -> Path:
    from workbench import options
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

    def cache_key(self, ll: str) -> str:
        h = hashlib.sha256()
        for part in (ll, str(self.target), self.target.triple, self.target.host_cpu,
                     self.target.features, ".".join(map(str, llvm.llvm_version_info))):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def compile(self, ll: str) -> CompiledObject:
        key = self.cache_key(ll)
        path = cache_dir() / key[:2] / f"{key}.o"
        if self.use_cache and path.exists():
            return CompiledObject(path.read_bytes(), ll, True)
        obj = self._compile(ll)
        if self.use_cache:
            _atomic_write(path, obj)
        return CompiledObject(obj, ll, False)

    def optimized_module(self, ll: str) -> llvm.ModuleRef:
        tm = _target_machine(self.target)
        mod = llvm.parse_assembly(ll)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=min(self.target.opt_level, 3))
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return mod

    def _compile(self, ll: str) -> bytes:
        mod = self.optimized_module(ll)
        return _target_machine(self.target).emit_object(mod)

    def assembly(self, ll: str) -> str:
        return _target_machine(self.target).emit_assembly(self.optimized_module(ll))


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
