"""The machine's roofline limits: fp32 FMA peak and memory bandwidth, measured once and cached.

A kernel's speed means little alone; against what the machine can do it says whether tuning
it can still pay. :func:`machine_limits` answers with a :class:`MachineLimits`:

- ``per_core_gflops``: fp32 multiply-adds (2 flops each) of one thread, from
  :mod:`.peak_loops` (independent accumulator chains of the widest FMA the CPU has), and
  ``peak_gflops``: ``cores`` x that, or the measured all-core figure when higher (as
  ``benchmarks/bench_peak.py`` compares: on a loaded machine the cores are rarely free at
  the same moment, so the all-core loop under-reads -- a 2-core Zen 4 read 118 GFLOPS on both
  cores, one core's worth, while a tuned convolution ran at 209);
- ``bandwidth_gbs``: a STREAM "add" (``c = a + b``, 3 arrays x 4 bytes per element, write
  allocation not counted) on ``cores`` threads over arrays 4x the last-level cache (at least
  64 MiB each), so the data streams from memory, not from a cache;
- ``cache_bandwidth_gbs``: the same loop over arrays that together fill half the last-level
  cache (``cache_bytes``, from sysfs), repeated so they stay there. A kernel whose arguments
  fit in that cache is held against this roof, not memory's: a tuning candidate runs again
  and again on the same warm data (as a kernel inside a model often reads what the one before
  it wrote), and against DRAM's roof a 20 us product read "294% of the roofline".
  :meth:`MachineLimits.bandwidth_for` picks the roof by the bytes a call moves (above the
  cache's size, a blend: what the cache holds at its bandwidth, the rest at memory's).

Each figure is the best round within a short budget (about 2 s for all four): on a shared
machine that is a moment when the cores were free, as the kernels' best calls are.

The result is cached as JSON in ``<cache_dir>/machine_limits.json`` (the option
``cache_dir``, environment ``WORKBENCH_CACHE_DIR``, default ``~/.cache/workbench``) under a
key made of the CPU model, the core count, the fp32 loop and a hash of the CPU feature set, so
a home directory shared by several machines keeps one entry per machine. Later calls read it;
``refresh=True`` measures again. A cache file that cannot be read is reported and replaced.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from workbench import options

from . import peak_loops

__all__ = ["MachineLimits", "machine_limits", "cached_machine_limits", "limits_cache_path"]

logger = logging.getLogger("workbench.runtime")

CACHE_FILE = "machine_limits.json"
_FORMAT = 1
_CACHE_FILL = 0.5                  # of the last-level cache, for its bandwidth
_MIN_STREAM_BYTES = 64 << 20       # per array, when the last-level cache is not known / small
_MAX_STREAM_BYTES = 256 << 20      # per array: 3 arrays stay under 1 GiB
_PEAK_BUDGET_S = 0.3               # per peak figure (one thread, all threads)
_STREAM_BUDGET_S = 0.5


@dataclass(frozen=True)
class MachineLimits:
    """Measured limits of one machine (see the module docstring). ``key`` is the cache key,
    ``kind`` the fp32 loop measured (``"fp32"`` = AVX-512, ``"fp32-avx2"``, ...), and
    ``measured_at`` an ISO-8601 UTC time."""

    peak_gflops: float
    per_core_gflops: float
    bandwidth_gbs: float
    cores: int
    cpu: str
    kind: str
    measured_at: str
    key: str
    #: GB/s of the same stream over data that stays in the last-level cache (0: unknown).
    cache_bandwidth_gbs: float = 0.0
    #: The last-level cache's size in bytes (0: unknown; then every kernel meets memory's roof).
    cache_bytes: int = 0

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte where the two roofs meet: kernels below it are bound by memory."""
        return self.peak_gflops / self.bandwidth_gbs

    def bandwidth_for(self, nbytes: Any) -> Any:
        """The bandwidth roof (GB/s) for a call that moves ``nbytes`` (a number or a numpy
        array; NaN or None: memory's): the last-level cache's when they fit in it; above,
        the first ``cache_bytes`` at the cache's bandwidth and the rest at memory's (repeated
        calls find as much of their data in the cache as it holds). Not a cliff at the
        cache's size: ResNet-18's 7x7 Winograd kernel, its 37.7 MB weight just above a 32 MB
        cache, read "173% of the roofline" against memory's roof alone."""
        if nbytes is None:
            return self.bandwidth_gbs
        n = np.asarray(nbytes, dtype=float)
        if not self.cache_bandwidth_gbs > 0:
            out = np.full_like(n, self.bandwidth_gbs)
        else:
            inside = np.minimum(n, self.cache_bytes)
            beyond = np.maximum(n - self.cache_bytes, 0.0)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = n / (inside / self.cache_bandwidth_gbs + beyond / self.bandwidth_gbs)
            out = np.where(n > self.cache_bytes, out, self.cache_bandwidth_gbs)
            out = np.where(np.isnan(n), self.bandwidth_gbs, out)
        return float(out) if out.ndim == 0 else out

    def bound_gflops(self, intensity: Any, nbytes: Any = None) -> Any:
        """The roofline: ``min(peak, intensity x bandwidth)`` GFLOPS for an arithmetic
        intensity in FLOP/byte (a number or a numpy array); ``nbytes``, the bytes one call
        moves, picks the bandwidth roof (:meth:`bandwidth_for`; None: memory's)."""
        return np.minimum(self.peak_gflops, np.asarray(intensity, dtype=float)
                          * self.bandwidth_for(nbytes))

    def bound_seconds(self, flop: Any, nbytes: Any, calls: Any = 1) -> Any:
        """The roofline's time for ``calls`` calls doing ``flop`` FLOPs and moving ``nbytes``
        bytes in all: ``max(flop / peak, nbytes / bandwidth)``, the bandwidth picked by the
        bytes of one call. Numbers or numpy arrays."""
        flop, nbytes = np.asarray(flop, dtype=float), np.asarray(nbytes, dtype=float)
        bw = self.bandwidth_for(nbytes / np.asarray(calls, dtype=float))
        out = np.maximum(flop / (self.peak_gflops * 1e9), nbytes / (np.asarray(bw) * 1e9))
        return float(out) if out.ndim == 0 else out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MachineLimits":
        """Rebuild from :meth:`to_dict`; ValueError names a missing or malformed field."""
        names = [f.name for f in fields(cls)]
        optional = {"cache_bandwidth_gbs", "cache_bytes"}
        missing = [n for n in names if n not in d and n not in optional]
        if missing:
            raise ValueError(f"MachineLimits: missing fields {missing}")
        limits = cls(**{n: d[n] for n in names if n in d})
        for name in ("peak_gflops", "per_core_gflops", "bandwidth_gbs"):
            value = getattr(limits, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"MachineLimits: {name} must be a positive number, got "
                                 f"{value!r}")
        for name in ("cache_bandwidth_gbs", "cache_bytes"):
            value = getattr(limits, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"MachineLimits: {name} must be a number >= 0, got {value!r}")
        return limits

    def __str__(self) -> str:
        return (f"{self.cpu} ({self.cores} cores, {self.kind}): {self.peak_gflops:.1f} GFLOPS "
                f"({self.per_core_gflops:.1f} per core), {self.bandwidth_gbs:.1f} GB/s, ridge "
                f"{self.ridge_intensity:.1f} FLOP/byte{self._cache_text()}; measured "
                f"{self.measured_at}")

    def _cache_text(self) -> str:
        if not self.cache_bandwidth_gbs > 0:
            return ""
        return (f"; {self.cache_bandwidth_gbs:.1f} GB/s within the "
                f"{self.cache_bytes / (1 << 20):.0f} MiB last-level cache")


def limits_cache_path() -> Path:
    """Where the measured limits are cached (follows the option ``cache_dir``)."""
    return Path(options.get("cache_dir")) / CACHE_FILE


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("model name", "Model name")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _host_features() -> str:
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    return llvm.get_host_cpu_features().flatten()


class _HostFeatures:
    """``has_feature`` of the host, for :func:`peak_loops.fp32_kind` when no target is given
    (the runtime does not import the target package)."""

    def __init__(self, features: str) -> None:
        self._features = set(features.split(","))

    def has_feature(self, feature: str) -> bool:
        return f"+{feature.lstrip('+')}" in self._features


def _describe(target: Any) -> tuple[str, int, str, str]:
    """(CPU model, cores, fp32 loop kind, cache key) for ``target`` (None: the host)."""
    if target is not None and not callable(getattr(target, "has_feature", None)):
        raise TypeError(f"machine_limits: target must be a workbench Target or None, got "
                        f"{type(target).__name__}")
    cores = int(getattr(target, "num_cores", 0) or 0) or int(options.get("num_threads"))
    features = _host_features()
    kind = peak_loops.fp32_kind(target if target is not None else _HostFeatures(features))
    if kind is None:
        raise RuntimeError("machine_limits: the CPU has no fp32 FMA loop to measure the peak "
                           "with (needs avx512f, fma or neon)")
    cpu = _cpu_model()
    digest = hashlib.sha1(features.encode()).hexdigest()[:12]
    # "v2": the peak became cores x the per-core figure (entries before it under-read);
    # "v3": the last-level cache's bandwidth joined
    return cpu, cores, kind, f"v3|{cpu}|{cores} cores|{kind}|{digest}"


def _last_level_cache_bytes() -> int:
    """The largest cache of CPU 0 in sysfs (0 when unknown)."""
    largest = 0
    for size in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = size.read_text().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            largest = max(largest, int(text.rstrip("KMG")) * scale)
        except (OSError, ValueError):
            continue
    return largest


def _stream_bytes() -> int:
    """Bytes per array: 4x the largest cache, clamped to 64 .. 256 MiB."""
    return int(min(_MAX_STREAM_BYTES, max(_MIN_STREAM_BYTES, 4 * _last_level_cache_bytes())))


def _measure_bandwidth(cores: int, array_bytes: int) -> float:
    """GB/s of ``c = a + b`` (numpy releases the GIL) over arrays of ``array_bytes`` on
    ``cores`` threads, each on its own contiguous share of the arrays."""
    n = max(array_bytes // 4, cores * 1024)
    a, b = np.ones(n, np.float32), np.full(n, 2.0, np.float32)
    c = np.zeros(n, np.float32)   # touched now, so page faults are not timed
    bounds = np.linspace(0, n, cores + 1).astype(int)
    parts = [(a[lo:hi], b[lo:hi], c[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]

    def work(k: int) -> None:
        x, y, out = parts[k]
        np.add(x, y, out=out)

    span = peak_loops.best_span(work, cores, _STREAM_BUDGET_S, min_rounds=4)
    return 3 * 4 * n / span / 1e9


def _measure(cpu: str, cores: int, kind: str, key: str) -> MachineLimits:
    peak = peak_loops.measure(kind, cores, budget=_PEAK_BUDGET_S, min_rounds=5)
    bandwidth = _measure_bandwidth(cores, _stream_bytes())
    llc = _last_level_cache_bytes()
    # Three arrays filling half the cache: repeated rounds find them there.
    in_cache = _measure_bandwidth(cores, int(llc * _CACHE_FILL) // 3) if llc else 0.0
    return MachineLimits(
        peak_gflops=max(peak.all_cores, peak.per_core * cores) / 1e9,
        per_core_gflops=peak.per_core / 1e9, bandwidth_gbs=bandwidth, cores=cores, cpu=cpu,
        kind=kind, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), key=key,
        # a cache slower than memory reads as noise: then memory's roof serves for both
        cache_bandwidth_gbs=max(in_cache, bandwidth) if llc else 0.0, cache_bytes=llc)


def _read_cache(path: Path) -> dict[str, Any]:
    """The cached entries by key; an unreadable file is reported and counts as empty."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        logger.warning("machine_limits: ignoring unreadable cache %s (%s)", path, err)
        return {}
    if not isinstance(data, dict) or data.get("format") != _FORMAT or \
            not isinstance(data.get("machines"), dict):
        logger.warning("machine_limits: ignoring cache %s in an unknown layout", path)
        return {}
    return data["machines"]


def _write_cache(path: Path, limits: MachineLimits) -> None:
    machines = _read_cache(path)
    machines[limits.key] = limits.to_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole to a temporary file and renamed, so a reader never sees half a file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".machine_limits.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": _FORMAT, "machines": machines}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached_machine_limits(target: Any = None) -> MachineLimits | None:
    """The cached limits of this machine (and ``target``'s cores), or None when they were
    never measured; never measures."""
    _, _, _, key = _describe(target)
    entry = _read_cache(limits_cache_path()).get(key)
    if entry is None:
        return None
    try:
        return MachineLimits.from_dict(entry)
    except (TypeError, ValueError) as err:
        logger.warning("machine_limits: ignoring a malformed cache entry (%s)", err)
        return None


def machine_limits(target: Any = None, refresh: bool = False) -> MachineLimits:
    """This machine's fp32 FMA peak and memory bandwidth (module docstring), from the cache
    when measured before, else measured now (about 2 s) and cached.

    ``target``: a workbench ``Target`` whose ``-num-cores`` (default: the option
    ``num_threads``) sets how many threads the limits are for, and whose features choose the
    FMA width (``llvm -mcpu=haswell`` on an AVX-512 machine: the AVX2 peak). ``refresh=True``
    measures again and replaces the cached entry.
    """
    if not isinstance(refresh, bool):
        raise TypeError(f"machine_limits: refresh must be a bool, got {refresh!r}")
    cpu, cores, kind, key = _describe(target)
    path = limits_cache_path()
    if not refresh:
        cached = cached_machine_limits(target)
        if cached is not None:
            return cached
    limits = _measure(cpu, cores, kind, key)
    try:
        _write_cache(path, limits)
    except OSError as err:  # a read-only home still gets its numbers, just not cached
        logger.warning("machine_limits: could not cache the limits in %s: %s", path, err)
    return limits
