"""What the runner worker does with arguments: seeded random inputs, allocation, timing, and
the cache flush (TVM's ``runner/utils.py`` plus ``random_fill_for_measure``).

Random inputs are a pure function of the arguments' JSON form: the same ``args_info`` always
gives the same arrays (seed = BLAKE2b of the JSON), in this process or another, which is what
lets a reference computed once per task be compared with every candidate. Values are chosen so
that any schedule computes them safely: floats uniform in [-1, 1), integers in [1, 4] (no zero
divisors; small enough not to overflow products), booleans 0/1.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from workbench import options
from workbench.runtime import Device, NDArray, cache_flush, register_func
from workbench.runtime.settle import settle_team
from workbench.runtime.ndarray import tensor

__all__ = ["args_seed", "random_arguments", "default_alloc_argument", "default_run_evaluator",
           "default_cleanup", "CACHE_FLUSH_FUNC"]

CACHE_FLUSH_FUNC = "cache_flush_cpu_non_first_arg"

options.register("ms_cache_flush_bytes", int, 0, env="WORKBENCH_MS_CACHE_FLUSH_BYTES",
                 doc="Bytes the runner's cache flush touches when enable_cpu_cache_flush is "
                     "on and the CPU has no clflush (not x86-64); 0 means twice the "
                     "last-level cache (64 MiB if unknown).")

_ARG_CACHE: "OrderedDict[str, list[np.ndarray]]" = OrderedDict()
_ARG_CACHE_SIZE = 2


def _as_json_list(args_info: Sequence[Any]) -> list:
    return [a.as_json() if hasattr(a, "as_json") else list(a) for a in args_info]


def args_seed(args_info: Sequence[Any]) -> int:
    """The seed of the random inputs for ``args_info`` (ArgInfo objects or their JSON)."""
    text = json.dumps(_as_json_list(args_info), separators=(",", ":"))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _fill(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bfloat16":
        from workbench.runtime.ndarray import numpy_dtype
        return rng.uniform(-1.0, 1.0, size=shape).astype(numpy_dtype(dtype))
    np_dtype = np.dtype(dtype)
    if np_dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=shape).astype(np_dtype)
    if np_dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(np_dtype)
    if np_dtype.kind in "iu":
        return rng.integers(1, 5, size=shape).astype(np_dtype)
    raise ValueError(f"cannot make random data of dtype {dtype!r}")


def random_arguments(args_info: Sequence[Any]) -> list[np.ndarray]:
    """Deterministic random arrays for ``args_info``; the caller must not modify them (a small
    cache shares them between candidates of the same task)."""
    info = _as_json_list(args_info)
    key = json.dumps(info, separators=(",", ":"))
    arrays = _ARG_CACHE.get(key)
    if arrays is None:
        rng = np.random.default_rng(args_seed(info))
        arrays = []
        for entry in info:
            tag, dtype, shape = entry
            if tag != "TENSOR":
                raise ValueError(f"cannot allocate argument {entry!r}: only TENSOR is supported")
            arr = _fill(rng, dtype, tuple(int(d) for d in shape))
            arr.setflags(write=False)
            arrays.append(arr)
        _ARG_CACHE[key] = arrays
        while len(_ARG_CACHE) > _ARG_CACHE_SIZE:
            _ARG_CACHE.popitem(last=False)
    else:
        _ARG_CACHE.move_to_end(key)
    return arrays


def default_alloc_argument(device: Device, args_info: Sequence[Any],
                           alloc_repeat: int) -> list[list[NDArray]]:
    """``alloc_repeat`` independent sets of arguments, each filled with the seeded data."""
    base = random_arguments(args_info)
    return [[tensor(a, device) for a in base] for _ in range(alloc_repeat)]


def default_run_evaluator(rt_mod: Any, device: Device, evaluator_config: Any,
                          repeated_args: Sequence[Sequence[NDArray]]) -> list[float]:
    """Time the entry function once per argument set with TVM's time_evaluator protocol;
    the seconds of every repeat of every set, flattened."""
    evaluator = rt_mod.time_evaluator(
        rt_mod.entry_name, device,
        number=evaluator_config.number,
        repeat=evaluator_config.repeat,
        min_repeat_ms=evaluator_config.min_repeat_ms,
        f_preproc=CACHE_FLUSH_FUNC if evaluator_config.enable_cpu_cache_flush else "",
    )
    costs: list[float] = []
    for args in repeated_args:
        device.sync()
        costs.extend(float(s) for s in evaluator(*args).results)
    return costs


def default_cleanup() -> None:
    """Nothing to release: arguments are freed with their arrays."""


# ---- cache flush ------------------------------------------------------------------------------

_FLUSH: list[np.ndarray] = []


def _llc_bytes() -> int:
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = 0
    try:
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip().upper()
            except OSError:
                continue
            mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
            digits = text.rstrip("KMG")
            if digits.isdigit():
                best = max(best, int(digits) * mult)
    except OSError:
        pass
    return best


def _flush_cpu_caches(*args: Any) -> None:
    """TVM's ``cache_flush_cpu_non_first_arg``: evict every argument but the first from the
    caches (``clflush`` line by line, :mod:`workbench.runtime.cache_flush`). The first is
    the kernel's input, which inside a model the kernel before it has just written; the rest
    (weights, read once per inference; the output) come from memory there, as they do here.
    Where ``clflush`` is not available, a buffer of twice the last-level cache is written
    instead (option ``ms_cache_flush_bytes``), which evicts the input too.

    The kernel's thread team is woken last, and kept running until its parallel regions are
    fast (:func:`workbench.runtime.settle.settle_team`, at most ``timing_team_settle_ms``):
    in a model its threads spin between kernels, but they fall asleep during a long flush,
    and the timed call would pay their wake-up (50-60 us a call on ResNet-18's kernels with
    megabytes to flush, 7-13% of their time; one wake-up alone left a 16 us kernel measured
    at up to 664 us on a VM whose vCPUs came back slowly, see :mod:`workbench.runtime.settle`)."""
    if cache_flush.available():
        cache_flush.flush(args[1:])
    else:
        if not _FLUSH:
            size = options.get("ms_cache_flush_bytes") or 2 * (_llc_bytes() or 32 * 1024 ** 2)
            _FLUSH.append(np.zeros(max(1, size // 8), dtype=np.int64))
        _FLUSH[0] += 1
    settle_team()


try:
    register_func(CACHE_FLUSH_FUNC, _flush_cpu_caches)
except ValueError:  # already registered (a reload, or another provider): keep it
    pass
