"""Evict given arrays from every cache level, line by line (x86 ``clflush``), as TVM's
``cache_flush_cpu_non_first_arg`` does before a timed call.

Why per array and not "touch a buffer larger than the last-level cache": a kernel inside a
model reads its input just after the kernel before it wrote it (warm), while its weights,
read once per inference, come from memory or a far cache level (cold). Flushing the arguments
after the first reproduces that; a big-buffer sweep also evicts the input, and on a host with
a large shared last-level cache (480 MB on one Sapphire Rapids VM) it costs a second per call.

:func:`flush` is a loop of ``clflushopt`` (``clflush`` on CPUs without it) over each
array's cache lines and one ``mfence``, compiled once per process with llvmlite.
:func:`available` says whether this process can run it (x86-64); elsewhere callers fall back
to sweeping a buffer.
"""
from __future__ import annotations

import ctypes
import platform
import threading
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["available", "flush", "LINE_BYTES"]

#: The flush stride: the cache line of every x86-64 CPU.
LINE_BYTES = 64

_IR = """
declare void @llvm.x86.sse2.clflush(i8*)
declare void @llvm.x86.clflushopt(i8*)
declare void @llvm.x86.sse2.mfence()

define void @flush_lines(i8* %p, i64 %n) {
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %q = getelementptr i8, i8* %p, i64 %i
  call void @llvm.x86.{insn}(i8* %q)
  %next = add i64 %i, {line}
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %fence
fence:
  call void @llvm.x86.sse2.mfence()
  br label %done
done:
  ret void
}
"""

_lock = threading.Lock()
_compiled: list = []  # [the compiled flush_lines]


def available() -> bool:
    """Whether :func:`flush` can run in this process (an x86-64 CPU)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def _flush_lines() -> Callable[[int, int], None]:
    with _lock:
        if not _compiled:
            import llvmlite.binding as llvm

            from .loader import jit_host_ir
            # clflushopt (Skylake, Zen and later) is not ordered with the other flushes,
            # so the lines are evicted in parallel: several times faster than clflush.
            opt = llvm.get_host_cpu_features().get("clflushopt", False)
            ir = _IR.replace("{insn}", "clflushopt" if opt else "sse2.clflush")
            _compiled.append(jit_host_ir(ir.replace("{line}", str(LINE_BYTES)), "flush_lines",
                                         ctypes.CFUNCTYPE(None, ctypes.c_void_p,
                                                          ctypes.c_int64)))
        return _compiled[0]


def _span(i: int, array: Any) -> tuple[int, int]:
    """(address, bytes) of a contiguous workbench NDArray or numpy array."""
    if hasattr(array, "data_ptr") and hasattr(array, "is_contiguous"):
        if not array.is_contiguous():
            raise ValueError(f"cache_flush.flush: array {i} is not contiguous")
        return int(array.data_ptr), int(array.nbytes)
    if isinstance(array, np.ndarray):
        if not (array.flags.c_contiguous or array.flags.f_contiguous):
            raise ValueError(f"cache_flush.flush: array {i} is not contiguous (a strided "
                             f"numpy view, shape {array.shape}); flush its base array")
        return int(array.ctypes.data), int(array.nbytes)
    raise TypeError(f"cache_flush.flush: array {i} must be a workbench NDArray or a numpy "
                    f"array, got {type(array).__name__}")


def flush(arrays: Iterable[Any]) -> None:
    """Write back and evict every cache line of each array (contiguous workbench NDArrays or
    numpy arrays) from all cache levels of every core; the contents do not change. Raises
    ``RuntimeError`` where :func:`available` is False, ``TypeError`` / ``ValueError`` (naming
    the array's position) for anything else or a strided view."""
    if not available():
        raise RuntimeError(f"cache_flush.flush: clflush needs an x86-64 CPU, this one is "
                           f"{platform.machine()!r}")
    spans = [_span(i, a) for i, a in enumerate(arrays)]    # all checked before any flush
    fn = _flush_lines()
    for ptr, nbytes in spans:
        if nbytes:
            fn(*_line_span(ptr, nbytes))


def _line_span(ptr: int, nbytes: int) -> tuple[int, int]:
    """(start, length) for ``flush_lines``, which flushes ``start``, ``start + 64``, ...
    below ``start + length``: from the line holding the first byte (an array need not start
    on a line), so the line holding the last byte is reached too."""
    start = ptr - ptr % LINE_BYTES
    return start, ptr + nbytes - start
