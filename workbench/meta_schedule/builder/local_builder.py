"""LocalBuilder: compile candidates in worker processes with a per-job time limit.

Each job runs ``f_build(mod, target, params)`` then ``f_export(built) -> path`` in a worker of
a persistent :class:`workbench.workers.WorkerPool` (fresh interpreters that never run the
user's ``__main__``); the pool survives between ``build`` calls (TVM makes a fresh pool per
call, which here would cost a second of start-up per batch). Results, as in TVM:

- success: ``BuilderResult(artifact_path, None)``; the artifact is a file in a fresh temp dir
  (``RemoveBuildArtifact`` deletes the dir);
- a job past ``timeout_sec``: ``"LocalBuilder: Timeout, killed after N seconds"`` (only its
  worker is killed and replaced);
- an exception: ``"LocalBuilder: An exception occurred\\n<traceback>"``;
- a worker that dies: ``"LocalBuilder: The worker process crashed: <signal>"``.

With the default ``f_build`` and ``f_export`` (Workbench), a module structurally equal to one
built before, or to another of the same batch, is built once: the others get a copy of its
object code in their own temp dir (:class:`~.build_cache.BuildCache`; ``cache=False`` turns it
off). The confirmation after a search re-measures its leaders this way without rebuilding.

If no worker process can start at all, one warning says why and the builder compiles in the
tuning process from then on (no time limit, no crash isolation).

The default build strips the weight layout-rewrite blocks ``RewriteLayout`` added (TVM's
``RemoveWeightLayoutRewriteBlock``: the kernel takes pre-packed weights, and a packing
function per packed weight is compiled alongside for the runner's output check; see
:func:`default_build`), then lowers and compiles to object code
(``workbench.codegen.compile_to_object``, with its on-disk cache); the default export writes
the bytes to ``<tmpdir>/workbench_mod.o``, which ``workbench.runtime.load_module`` loads with
MCJIT: no C linker per candidate. A custom ``f_build`` may return a runtime Module instead;
the default export then calls
``export_library`` (``.o`` when the module has object code, else ``.so``).
"""
from __future__ import annotations

import logging
import os
import tempfile
from typing import Any, Callable, Sequence

from workbench.ir.module import IRModule
from workbench.ir.structural import structural_equal
from workbench.meta_schedule.builder.build_cache import BuildCache
from workbench.meta_schedule.builder.builder import BuilderInput, BuilderResult, PyBuilder
from workbench.runtime.registry import resolve_func
from workbench.target import Target
from workbench.workers import Chain, WorkerPool

__all__ = ["LocalBuilder", "default_build", "default_export"]

T_BUILD = Callable[[IRModule, Target, Any], Any]
T_EXPORT = Callable[[Any], str]
ARTIFACT_NAME = "workbench_mod"


def default_build(mod: IRModule, target: Target, params: dict | None) -> Any:
    """Strip weight layout-rewrite blocks, then lower and compile ``mod`` to object code (a
    ``CompiledObject``).

    As in TVM, ``RemoveWeightLayoutRewriteBlock`` runs first: a weight that the
    ``RewriteLayout`` postproc re-laid out becomes a packed parameter, so the measured kernel
    does not pay for packing (``ArgInfo.from_entry_func(mod, remove_preproc=True)`` gives the
    packed shapes the runner allocates). For each packed parameter ``i`` of the entry function
    ``f``, the object code also holds ``f__layout_pack_i(src, dst)``, which packs an
    original-layout weight: the runner's output check uses it to feed the candidate the
    packed reference inputs.
    """
    from workbench.codegen import compile_to_object
    from workbench.tir.function import PrimFunc
    from workbench.tir.transform.remove_weight_layout_rewrite_block import (
        RemoveWeightLayoutRewriteBlock, add_layout_pack_funcs,
    )

    if params:
        raise ValueError("LocalBuilder's default build does not bind params; pass a custom "
                         "f_build to use them")
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_expr(mod)
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return compile_to_object(add_layout_pack_funcs(mod), target)


def default_export(built: Any) -> str:
    """Write ``built`` (object code, bytes, or a runtime Module) into a fresh temp dir."""
    tmp = tempfile.mkdtemp(prefix="workbench_ms_build_")
    obj = getattr(built, "obj", built)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        path = os.path.join(tmp, ARTIFACT_NAME + ".o")
        with open(path, "wb") as f:
            f.write(bytes(obj))
        return path
    if hasattr(built, "export_library"):
        has_object = getattr(built, "type_key", "llvm") == "llvm"
        path = os.path.join(tmp, ARTIFACT_NAME + (".o" if has_object else ".so"))
        built.export_library(path)
        return path
    raise TypeError(f"default_export: cannot export a {type(built).__name__}; f_build should "
                    "return object code or a workbench runtime Module")


def _build_job(mod: IRModule, target: Target, params: Any, f_build: Any, f_export: Any) -> str:
    built = resolve_func(f_build, default_build)(mod, target, params)
    return resolve_func(f_export, default_export)(built)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _warm_up() -> None:
    import workbench.codegen  # noqa: F401 - import cost paid at start-up, not per job


class LocalBuilder(PyBuilder):
    """Builds in local worker processes (see the module docstring).

    ``max_workers`` defaults to the CPU count; ``f_build`` / ``f_export`` are callables (or
    names of registered global functions) pickled to the workers, so they must be importable
    module-level functions; ``initializer`` runs once in each worker. ``cache`` (Workbench):
    keep the object code of what was built, so that a module structurally equal to one built
    before is not built again (:class:`~.build_cache.BuildCache`, :attr:`build_cache`; only
    with the default ``f_build`` and ``f_export``).
    """

    def __init__(self, max_workers: int | None = None, timeout_sec: float = 30.0,
                 f_build: T_BUILD | str | None = None, f_export: T_EXPORT | str | None = None,
                 initializer: Callable[[], None] | None = None, cache: bool = True) -> None:
        if max_workers is None:
            max_workers = os.cpu_count() or 1
        if max_workers < 1:
            raise ValueError(f"LocalBuilder: max_workers must be >= 1, got {max_workers}")
        if timeout_sec is not None and timeout_sec <= 0:
            raise ValueError(f"LocalBuilder: timeout_sec must be > 0, got {timeout_sec}")
        self.max_workers = max_workers
        self.timeout_sec = timeout_sec
        self.f_build = f_build
        self.f_export = f_export
        self.initializer = initializer
        # structurally equal modules built once (default f_build / f_export only); None: off
        self.build_cache: BuildCache | None = BuildCache() if cache else None
        self._pool = WorkerPool(max_workers, Chain(_warm_up, initializer), name="wb-build",
                                label="LocalBuilder",
                                fallback="building in this process from now on (no time "
                                         "limit, no crash isolation)",
                                logger=logging.getLogger("workbench.meta_schedule"))

    def build(self, build_inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        """One result per input, in order. With the default ``f_build`` and ``f_export`` a
        module structurally equal to one built before (or to another of the batch) is built
        once: the others get a fresh copy of its object code (see :attr:`build_cache`)."""
        if not self._cacheable():
            return self._build_in_workers(list(build_inputs))
        results: list[BuilderResult | None] = [None] * len(build_inputs)
        todo: list[BuilderInput] = []
        todo_keys: list[tuple[int, str] | None] = []
        copies: list[tuple[int, int]] = []   # (input position, position in todo it repeats)
        for i, bi in enumerate(build_inputs):
            if bi.params:      # built with the batch, never shared (params are not in the key)
                todo.append(bi)
                todo_keys.append(None)
                copies.append((i, len(todo) - 1))
                continue
            key = self.build_cache.key(bi.mod, bi.target)
            obj = self.build_cache.get(key, bi.mod)
            if obj is not None:
                results[i] = BuilderResult(default_export(obj), None)
                continue
            same = next((k for k, (tk, tb) in enumerate(zip(todo_keys, todo))
                         if tk == key and structural_equal(tb.mod, bi.mod)), None)
            if same is None:
                todo.append(bi)
                todo_keys.append(key)
                same = len(todo) - 1
            copies.append((i, same))
        built = self._build_in_workers(todo)
        for bi, key, res in zip(todo, todo_keys, built):
            if res.error_msg is None and key is not None:
                self.build_cache.put(key, bi.mod, _read(res.artifact_path))
        first_use: set[int] = set()
        for i, k in copies:
            res = built[k]
            if res.error_msg is None and k in first_use:
                res = BuilderResult(default_export(_read(res.artifact_path)), None)
            first_use.add(k)
            results[i] = res
        return results  # type: ignore[return-value]

    def _cacheable(self) -> bool:
        # A custom f_build / f_export may depend on more than the module (or export something
        # other than object code): always built.
        return self.f_build is None and self.f_export is None and self.build_cache is not None

    def _build_in_workers(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        jobs = [(bi.mod, bi.target, bi.params, self.f_build, self.f_export)
                for bi in build_inputs]
        if not jobs:
            return []
        outcomes = self._pool.run(_build_job, jobs, self.timeout_sec)
        results = []
        for out in outcomes:
            if out.kind == "ok":
                results.append(BuilderResult(out.value, None))
            elif out.kind == "timeout":
                results.append(BuilderResult(
                    None, f"LocalBuilder: Timeout, killed after {self.timeout_sec} seconds"))
            elif out.kind == "error":
                results.append(BuilderResult(None, f"LocalBuilder: An exception occurred\n"
                                                   f"{out.value}"))
            else:
                results.append(BuilderResult(None, f"LocalBuilder: The worker process "
                                                   f"crashed: {out.value}"))
        return results

    @property
    def worker_startup_seconds(self) -> float | None:
        """How long the last pool start took (None before the first build)."""
        return self._pool.startup_seconds

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live build workers."""
        return self._pool.pids

    def prestart(self) -> None:
        """Start the build worker processes in the background, without waiting for them (the
        task scheduler does so as a run begins: their start-up, ~1 s of imports each, then
        overlaps the design spaces and the first search, which leave a core idle, instead of
        delaying the first batch)."""
        self._pool.prestart()

    def shutdown(self) -> None:
        """Stop the worker processes now (they also stop when the builder is collected)."""
        self._pool.shutdown()

    def __repr__(self) -> str:
        return f"LocalBuilder(max_workers={self.max_workers}, timeout_sec={self.timeout_sec})"

