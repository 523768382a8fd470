"""CPU state a kernel needs the operating system to grant before it runs.

Compiled modules list such state in their metadata (``"cpu_state": ["amx"]``, written by
codegen when a kernel calls an intrinsic that needs it); :func:`require` is called for each
entry when a :class:`workbench.runtime.Module` is loaded.

- ``"amx"``: the AMX tile registers (``tileloadd``, ``tdpbf16ps``, ...). Linux (>= 5.16) keeps
  their 8 KiB of state out of every process until it asks with
  ``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``; an AMX instruction run before that
  kills the process with SIGILL. The permission is process-wide (all threads, the OpenMP pool
  included) and is requested once.
"""
from __future__ import annotations

import ctypes
import sys
import threading

__all__ = ["require", "available", "granted", "CPU_STATES"]

_SYS_ARCH_PRCTL = 158          # x86-64 syscall number
_ARCH_GET_XCOMP_PERM = 0x1022
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18

_lock = threading.Lock()
_granted: dict[str, str | None] = {}   # state -> None when granted, else the reason it is not


def _request_amx() -> str | None:
    """None when the process may use AMX tiles, else why not."""
    if not sys.platform.startswith("linux"):
        return f"AMX tiles need Linux's arch_prctl permission; this is {sys.platform}"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError) as e:
        return f"cannot call arch_prctl: {e}"
    syscall.restype = ctypes.c_long
    if syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) != 0:
        err = ctypes.get_errno()
        return (f"arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed with errno {err} "
                "(the kernel is older than 5.16 or the CPU/hypervisor does not offer AMX)")
    mask = ctypes.c_uint64(0)
    if syscall(_SYS_ARCH_PRCTL, _ARCH_GET_XCOMP_PERM, ctypes.byref(mask)) != 0 or \
            not mask.value >> _XFEATURE_XTILEDATA & 1:
        return "arch_prctl granted AMX but the permitted feature mask does not include it"
    return None


CPU_STATES = {"amx": _request_amx}


def require(state: str) -> None:
    """Make sure this process may use ``state`` (requesting it once); raises RuntimeError
    naming the reason when the system refuses, ValueError for an unknown state."""
    if state not in CPU_STATES:
        raise ValueError(f"compiled code needs CPU state {state!r}, which this runtime does "
                         f"not know (known: {sorted(CPU_STATES)})")
    with _lock:
        if state not in _granted:
            _granted[state] = CPU_STATES[state]()
        reason = _granted[state]
    if reason is not None:
        raise RuntimeError(f"this module's kernels use {state.upper()}, which the process "
                           f"cannot enable: {reason}")


def granted(state: str) -> bool:
    """Has ``state`` been requested and granted in this process?"""
    return _granted.get(state, "") is None


def available(state: str) -> bool:
    """Can this process use ``state`` (requesting it once, like :func:`require`)?"""
    try:
        require(state)
    except RuntimeError:
        return False
    return True
