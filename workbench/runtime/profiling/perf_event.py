"""Linux ``perf_event_open`` counters as a MetricCollector (no PAPI, no perf binary).

Each event is opened once per thread of this process (``/proc/self/task``) with ``inherit`` set,
so work on threads that already exist (an OpenMP pool started during warm-up) and on threads
started later is counted. Counters run freely; ``start`` and ``stop`` read them with ``os.read``
and report the difference, scaled for multiplexing (time enabled / time running).

An event that cannot be opened (no PMU in a virtual machine: ENOENT/EOPNOTSUPP; not allowed:
EACCES/EPERM) is marked unavailable with one warning per event per process, and the other events
still report. ``PerfEventCollector.unavailable`` says which and why.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

from .collectors import MetricCollector
from .metrics import Count, DeviceWrapper, Duration, MetricValue, Ratio

_SYSCALL_NUMBERS = {"x86_64": 298, "amd64": 298, "aarch64": 241, "arm64": 241}

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1
_FORMAT_TOTAL_TIME_ENABLED, _FORMAT_TOTAL_TIME_RUNNING = 1 << 0, 1 << 1
_FLAG_INHERIT, _FLAG_EXCLUDE_KERNEL, _FLAG_EXCLUDE_HV = 1 << 1, 1 << 5, 1 << 6
_PERF_FLAG_FD_CLOEXEC = 1 << 3
_READ_LAYOUT = struct.Struct("QQQ")  # value, time_enabled, time_running


class PerfEventAttr(ctypes.Structure):
    """``struct perf_event_attr`` up to ``sig_data`` (PERF_ATTR_SIZE_VER7, 128 bytes).

    The bit-field word after ``read_format`` is kept as one u64 (``flags``); the bits we use are
    the ``_FLAG_*`` constants (disabled=0, inherit=1, ..., exclude_kernel=5, exclude_hv=6).
    """

    _fields_ = [
        ("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16), ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32), ("reserved_3", ctypes.c_uint32),
        ("sig_data", ctypes.c_uint64),
    ]


assert ctypes.sizeof(PerfEventAttr) == 128, "perf_event_attr layout is wrong"


@dataclass(frozen=True)
class PerfEvent:
    """One countable event: perf's name, its (type, config) and how its count is reported."""

    name: str
    type: int
    config: int
    metric: str
    to_metric: Callable[[float], MetricValue]


def _count(x: float) -> Count:
    return Count(round(x))


EVENTS: dict[str, PerfEvent] = {e.name: e for e in (
    PerfEvent("task-clock", PERF_TYPE_SOFTWARE, 1, "task-clock (us)",
              lambda ns: Duration(ns / 1e3)),
    PerfEvent("page-faults", PERF_TYPE_SOFTWARE, 2, "page-faults", _count),
    PerfEvent("context-switches", PERF_TYPE_SOFTWARE, 3, "context-switches", _count),
    PerfEvent("cpu-migrations", PERF_TYPE_SOFTWARE, 4, "cpu-migrations", _count),
    PerfEvent("cycles", PERF_TYPE_HARDWARE, 0, "cycles", _count),
    PerfEvent("instructions", PERF_TYPE_HARDWARE, 1, "instructions", _count),
    PerfEvent("cache-references", PERF_TYPE_HARDWARE, 2, "cache-references", _count),
    PerfEvent("cache-misses", PERF_TYPE_HARDWARE, 3, "cache-misses", _count),
    PerfEvent("branches", PERF_TYPE_HARDWARE, 4, "branches", _count),
    PerfEvent("branch-misses", PERF_TYPE_HARDWARE, 5, "branch-misses", _count),
)}
SOFTWARE_EVENTS = ("task-clock", "page-faults", "context-switches")
HARDWARE_EVENTS = ("cycles", "instructions", "cache-misses", "branch-misses")
DEFAULT_EVENTS = SOFTWARE_EVENTS + HARDWARE_EVENTS
IPC_METRIC = "IPC"  # instructions per cycle, added when both counters are available

_WARNED: set[str] = set()  # events already warned about in this process
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _paranoid_level() -> str:
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def _explain(err: OSError) -> str:
    code = err.errno
    if code in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return (f"not supported here ({errno.errorcode.get(code, code)}); hardware counters "
                "are often missing in virtual machines")
    if code in (errno.EACCES, errno.EPERM):
        return (f"permission denied ({errno.errorcode[code]}); "
                f"/proc/sys/kernel/perf_event_paranoid is {_paranoid_level()}")
    return f"perf_event_open failed: {err.strerror or err}"


def _warn_once(event: str, reason: str) -> None:
    if event in _WARNED:
        return
    _WARNED.add(event)
    # Point the warning at the user's line, however deep inside this package we are.
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"perf event {event!r} is unavailable: {reason}. It is left out of the "
                  "metrics; the other events are still reported.", RuntimeWarning,
                  stacklevel=level)


class _Syscall:
    """``perf_event_open`` through libc's ``syscall``; raises OSError like os functions do."""

    def __init__(self) -> None:
        machine = platform.machine().lower()
        if not sys.platform.startswith("linux") or machine not in _SYSCALL_NUMBERS:
            raise OSError(errno.ENOSYS, f"perf_event_open needs Linux on x86_64/aarch64, "
                                        f"not {sys.platform}/{machine}")
        self.number = _SYSCALL_NUMBERS[machine]
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long

    def open(self, event: PerfEvent, tid: int, user_only: bool) -> int:
        attr = PerfEventAttr(type=event.type, size=ctypes.sizeof(PerfEventAttr),
                             config=event.config,
                             read_format=_FORMAT_TOTAL_TIME_ENABLED | _FORMAT_TOTAL_TIME_RUNNING)
        attr.flags = _FLAG_INHERIT | (_FLAG_EXCLUDE_KERNEL | _FLAG_EXCLUDE_HV if user_only else 0)
        fd = self.libc.syscall(ctypes.c_long(self.number), ctypes.byref(attr), ctypes.c_long(tid),
                               ctypes.c_long(-1), ctypes.c_long(-1),
                               ctypes.c_ulong(_PERF_FLAG_FD_CLOEXEC))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return fd


def _threads() -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir("/proc/self/task"))
    except OSError:
        return [0]  # 0 = the calling thread


def _read(fd: int) -> tuple[int, int, int]:
    return _READ_LAYOUT.unpack(os.read(fd, _READ_LAYOUT.size))


class PerfEventCollector(MetricCollector):
    """Counts Linux perf events around each call on the CPU.

    ``events``: names from :data:`EVENTS` (default: task-clock, page-faults, context-switches,
    cycles, instructions, cache-misses, branch-misses). task-clock is reported as a Duration
    ``"task-clock (us)"``; the others as Counts named like the event; ``IPC`` (a Ratio) when
    cycles and instructions both count.
    """

    def __init__(self, events: Sequence[str] | None = None, all_threads: bool = True) -> None:
        events = list(DEFAULT_EVENTS if events is None else events)
        unknown = [e for e in events if e not in EVENTS]
        if unknown or isinstance(events, str):
            raise ValueError(f"PerfEventCollector: unknown event(s) {unknown or events!r}; "
                             f"known: {sorted(EVENTS)}")
        self.events = [EVENTS[e] for e in events]
        self.all_threads = all_threads
        self.unavailable: dict[str, str] = {}
        self._fds: dict[str, list[int]] = {}
        self._initialised = False

    @property
    def available(self) -> list[str]:
        """Events that opened and are being counted (valid after ``init``)."""
        return list(self._fds)

    def init(self, devices: Sequence[DeviceWrapper]) -> None:
        self.close()
        self._initialised = True
        try:
            syscall = _Syscall()
        except OSError as err:
            for event in self.events:
                self._mark_unavailable(event.name, str(err.strerror))
            return
        threads = _threads() if self.all_threads else [0]
        for event in self.events:
            if event.name in self.unavailable:
                continue  # failed before in this collector: do not retry every init
            self._open_event(syscall, event, threads)

    def _open_event(self, syscall: _Syscall, event: PerfEvent, threads: list[int]) -> None:
        fds: list[int] = []
        user_only = False
        for tid in threads:
            try:
                fds.append(syscall.open(event, tid, user_only))
            except OSError as err:
                if err.errno == errno.ESRCH:
                    continue  # the thread ended since we listed it
                if err.errno in (errno.EACCES, errno.EPERM) and not user_only:
                    user_only = True  # unprivileged: count user space only and retry
                    try:
                        fds.append(syscall.open(event, tid, user_only))
                        continue
                    except OSError as err2:
                        err = err2
                for fd in fds:
                    os.close(fd)
                self._mark_unavailable(event.name, _explain(err))
                return
        self._fds[event.name] = fds

    def _mark_unavailable(self, event: str, reason: str) -> None:
        self.unavailable[event] = reason
        _warn_once(event, reason)

    def start(self, device: DeviceWrapper) -> dict[str, list[tuple[int, int, int]]] | None:
        if not self._initialised:
            raise RuntimeError("PerfEventCollector.start called before init(devices)")
        if device.device_type != 1:
            return None  # counts CPU work only
        return {name: [_read(fd) for fd in fds] for name, fds in self._fds.items()}

    def stop(self, state: dict[str, list[tuple[int, int, int]]]) -> dict[str, MetricValue]:
        totals: dict[str, float] = {}
        for name, before in state.items():
            after = [_read(fd) for fd in self._fds[name]]
            totals[name] = sum(_scaled_delta(b, a) for b, a in zip(before, after))
        metrics: dict[str, MetricValue] = {EVENTS[n].metric: EVENTS[n].to_metric(v)
                                           for n, v in totals.items()}
        if totals.get("cycles", 0) > 0 and "instructions" in totals:
            metrics[IPC_METRIC] = Ratio(totals["instructions"] / totals["cycles"])
        return metrics

    def close(self) -> None:
        """Close every counter (also done by the next ``init`` and on garbage collection)."""
        for fds in self._fds.values():
            for fd in fds:
                os.close(fd)
        self._fds = {}

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: os may be gone already
            pass

    def __repr__(self) -> str:
        return f"PerfEventCollector(events={[e.name for e in self.events]!r})"


def _scaled_delta(before: tuple[int, int, int], after: tuple[int, int, int]) -> float:
    value = after[0] - before[0]
    enabled, running = after[1] - before[1], after[2] - before[2]
    # Multiplexed counters ran only part of the time: extrapolate, as perf stat does.
    if 0 < running < enabled:
        return value * enabled / running
    return float(value)


def perf_events_status(events: Sequence[str] = DEFAULT_EVENTS) -> dict[str, str]:
    """Try to open each event on this thread: ``{event: "available" | reason}`` (no warnings)."""
    status: dict[str, str] = {}
    try:
        syscall = _Syscall()
    except OSError as err:
        return {e: str(err.strerror) for e in events}
    for name in events:
        try:
            os.close(syscall.open(EVENTS[name], 0, False))
            status[name] = "available"
        except OSError as err:
            status[name] = _explain(err)
    return status
