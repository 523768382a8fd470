"""Kernel scratch memory that stays mapped between calls.

A compiled kernel allocates its intermediate buffers (a padded input, Winograd's transformed
tiles) with ``aligned_alloc`` on every call and frees them on return. With glibc's defaults a
block above the (dynamic) mmap threshold is mapped and unmapped on every call, and a free that
leaves more than the trim threshold at the top of the heap hands the pages back to the system:
either way the next call touches fresh pages -- a page fault and a zeroed page per 4 KiB (a
3x3 Winograd convolution on 56x56 images spent 1.5 ms of its 2.9 ms there on a 2-core Zen 4).

:func:`keep_kernel_scratch` (run when the first compiled module is loaded; option
``kernel_heap``, on by default) raises both thresholds once, process-wide, with glibc's
``mallopt``: blocks up to 64 MiB come from the heap, and up to 512 MiB of free heap is kept.
Elsewhere than glibc it does nothing.
"""
from __future__ import annotations

import ctypes
import threading

__all__ = ["keep_kernel_scratch", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 512 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3      # glibc's malloc.h
_lock = threading.Lock()
_done = False


def keep_kernel_scratch() -> bool:
    """Set glibc's malloc thresholds once (see the module docstring); True when they are set
    (now or before), False when the option is off or the C library has no ``mallopt``."""
    global _done
    from workbench import options
    with _lock:
        if _done:
            return True
        if not options.get("kernel_heap"):
            return False
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            return False
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
            bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        return _done
