"""Where to tune next: each kernel of a profiled model against the machine's roofline.

:func:`roofline` joins a profiling ``Report`` of a Relax VM run with the kernels' PrimFuncs
(``exe.lowered_mod``) and the machine's measured limits
(:func:`workbench.runtime.machine_limits.machine_limits`). For every kernel it computes, over
all its calls in the report:

- ``FLOP``: :func:`estimate_tir_flops` of its PrimFunc (TVM's rule: every arithmetic op in a
  stored value times the loop trip counts; a fused ReLU's ``max`` counts, an inlined padding's
  bounds check does not) x calls;
- ``Bytes``: the sizes of its arguments (inputs and outputs, from the report's ``Argument
  Shapes``) x calls. That is a *lower bound* of the traffic: each byte read or written once,
  as if every reuse hit a cache;
- ``GFLOPS`` and ``GB/s`` achieved, ``Intensity`` = FLOP / byte, the roofline ``Bound
  (GFLOPS)`` = min(peak, intensity x bandwidth) -- the last-level cache's bandwidth for a
  kernel whose call moves no more than the cache holds, memory's otherwise
  (:meth:`MachineLimits.bandwidth_for`) --, which roof binds (``Limit``: "compute" /
  "memory"), ``% of bound`` = achieved / bound and ``Headroom`` = bound / achieved (how many
  times faster the roofline says it could run). Both are taken in time (the roofline's time
  max(FLOP / peak, bytes / bandwidth) against the measured one), so a kernel that only moves
  data (a reshape: no FLOPs) is held against the bandwidth;
- ``Score`` = its time in the report (us, all calls) x (1 - achieved / bound), clipped at 0:
  the time tuning could save if it reached the roof. The frame is sorted by it, highest first.

The kernels are the frame's index (named ``"Kernel"``); those names are the tuning tasks' names
or among their ``kernel_names``, so ``tune_relax(..., op_names=ranking)``,
``op_names=ranking.head(3)`` or ``op_names=tune_next(ranking, 3)`` tune exactly those kernels
(:func:`workbench.meta_schedule.relax_integration.select_tasks`).

Kernels with symbolic shapes get ``FLOP`` NaN (their PrimFunc's loop extents are not numbers)
and rank last.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

import numpy as np
import pandas as pd

from workbench.ir.module import IRModule
from workbench.runtime.machine_limits import MachineLimits, machine_limits
from workbench.runtime.profiling import Report
from workbench.runtime.profiling.metrics import ARGUMENT_SHAPES, COUNT, DURATION, NAME
from workbench.tir.expr import IntImm
from workbench.tir.function import PrimFunc
from workbench.meta_schedule.utils import estimate_tir_flops

__all__ = ["roofline", "tune_next", "kernel_funcs", "argument_bytes", "func_bytes",
           "ROOFLINE_COLUMNS", "KERNEL_INDEX"]

#: The index name of a roofline frame; ``tune_relax`` matches such names exactly.
KERNEL_INDEX = "Kernel"
ROOFLINE_COLUMNS = ("Calls", "Time (us)", "Percent", "FLOP", "Bytes", "GFLOPS", "GB/s",
                    "Intensity", "Bound (GFLOPS)", "Limit", "% of bound", "Headroom", "Score")

_ARG = re.compile(r"([A-Za-z_]\w*)\[([^\]]*)\]")


def _dtype_bytes(dtype: str) -> float:
    """Bytes of one element: ``float32`` 4, ``bfloat16`` 2, ``bool`` 1, ``int4`` 0.5."""
    if dtype == "bool":
        return 1.0
    bits = re.search(r"(\d+)(?:x(\d+))?$", dtype)
    if bits is None:
        raise ValueError(f"cannot size dtype {dtype!r}")
    return int(bits.group(1)) * int(bits.group(2) or 1) / 8


def argument_bytes(shapes: str) -> float:
    """Bytes of the tensors in a report's ``Argument Shapes`` text
    (``"float32[64, 512], float32[512, 64]"`` -> 262144.0)."""
    total = 0.0
    for dtype, dims in _ARG.findall(shapes):
        size = math.prod(int(d) for d in dims.replace(" ", "").split(",") if d)
        total += size * _dtype_bytes(dtype)
    return total


def func_bytes(func: PrimFunc) -> float:
    """Bytes of a PrimFunc's parameter buffers (each read or written once: a lower bound of
    its memory traffic); NaN when a shape is symbolic."""
    total = 0.0
    for buf in func.buffers:
        dims = [d.value if isinstance(d, IntImm) else d for d in buf.shape]
        if not all(isinstance(d, int) for d in dims):
            return math.nan
        total += math.prod(dims) * _dtype_bytes(str(buf.dtype))
    return total


def _is_static(func: PrimFunc) -> bool:
    return all(isinstance(d, (int, IntImm)) for b in func.buffers for d in b.shape)


def kernel_funcs(exe: Any) -> dict[str, PrimFunc]:
    """The kernels' PrimFuncs by name: from an Executable built by ``relax.build`` (its
    ``lowered_mod``) or from an IRModule (every PrimFunc in it)."""
    if isinstance(exe, IRModule):
        mod, names = exe, None
    else:
        mod = getattr(exe, "lowered_mod", None)
        names = getattr(exe, "kernel_names", None)
        if not isinstance(mod, IRModule):
            raise ValueError(
                f"roofline: {type(exe).__name__} carries no lowered module (an Executable "
                "loaded from a file does not keep it); pass the Executable relax.build "
                "returned, or the IRModule of its kernels")
    funcs = {str(n): f for n, f in mod.items() if isinstance(f, PrimFunc)}
    if names is not None:
        funcs = {n: f for n, f in funcs.items() if n in set(names)}
    return funcs


def roofline(report: Report, exe: Any, limits: MachineLimits | None = None) -> pd.DataFrame:
    """Each kernel called in ``report`` against the roofline of ``limits`` (default: this
    machine's, :func:`machine_limits`), sorted by ``Score`` (module docstring).

    ``exe``: the ``relax.build`` Executable the report profiled (or an IRModule of its
    kernels). ``frame.attrs`` holds ``limits`` (a dict), ``peak_gflops``, ``bandwidth_gbs``
    and ``total_us`` (all calls of the report, VM builtins included). ValueError when the
    report calls none of the kernels.
    """
    if not isinstance(report, Report):
        raise TypeError(f"roofline: report must be a profiling Report, got "
                        f"{type(report).__name__}")
    if limits is None:
        limits = machine_limits()
    elif not isinstance(limits, MachineLimits):
        raise TypeError(f"roofline: limits must be MachineLimits or None, got "
                        f"{type(limits).__name__}")
    funcs = kernel_funcs(exe)
    rows: dict[str, dict[str, float]] = {}
    flops: dict[str, float] = {}
    total_us = 0.0
    for call in report.calls:
        duration = call.get(DURATION)
        us = float(duration.value) if duration is not None else 0.0
        total_us += us
        name = str(call.get(NAME, ""))
        if name not in funcs:
            continue
        if name not in flops:
            func = funcs[name]
            flops[name] = float(estimate_tir_flops(func)) if _is_static(func) else math.nan
        count = int(call[COUNT].value) if COUNT in call else 1
        row = rows.setdefault(name, {"Calls": 0, "Time (us)": 0.0, "FLOP": 0.0, "Bytes": 0.0})
        row["Calls"] += count
        row["Time (us)"] += us
        row["FLOP"] += flops[name] * count
        row["Bytes"] += argument_bytes(str(call.get(ARGUMENT_SHAPES, ""))) * count
    if not rows:
        called = sorted({str(c.get(NAME, "")) for c in report.calls})
        raise ValueError(f"roofline: the report calls none of the executable's kernels "
                         f"(report: {called[:8]}{' ...' if len(called) > 8 else ''}; kernels: "
                         f"{sorted(funcs)[:8]}{' ...' if len(funcs) > 8 else ''}); profile "
                         "this executable with vm.profile(...)")
    frame = _frame(rows, limits, total_us)
    frame.attrs.update(limits=limits.to_dict(), peak_gflops=limits.peak_gflops,
                       bandwidth_gbs=limits.bandwidth_gbs, total_us=total_us)
    return frame


def _frame(rows: Mapping[str, Mapping[str, float]], limits: MachineLimits,
           total_us: float) -> pd.DataFrame:
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = KERNEL_INDEX
    secs = frame["Time (us)"].to_numpy(float) * 1e-6
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["Percent"] = frame["Time (us)"] / total_us * 100 if total_us > 0 else np.nan
        frame["GFLOPS"] = frame["FLOP"] / secs / 1e9
        frame["GB/s"] = frame["Bytes"] / secs / 1e9
        frame["Intensity"] = frame["FLOP"] / frame["Bytes"]
        per_call = (frame["Bytes"] / frame["Calls"]).to_numpy(float)
        frame["Bound (GFLOPS)"] = limits.bound_gflops(frame["Intensity"].to_numpy(float),
                                                      per_call)
        ridge = limits.peak_gflops / limits.bandwidth_for(per_call)
        frame["Limit"] = np.where(frame["Intensity"].isna(), "",
                                  np.where(frame["Intensity"] < ridge, "memory", "compute"))
        # Against the time the roofline allows: FLOP / bound GFLOPS for computing kernels,
        # bytes / bandwidth for those that only move data (a copy has no FLOPs to count).
        bound_s = pd.Series(limits.bound_seconds(frame["FLOP"].to_numpy(float),
                                                 frame["Bytes"].to_numpy(float),
                                                 frame["Calls"].to_numpy(float)),
                            index=frame.index)
        fraction = bound_s / secs
        frame["% of bound"] = fraction * 100
        frame["Headroom"] = 1 / fraction
        frame["Score"] = frame["Time (us)"] * (1 - fraction).clip(lower=0)
    frame["Calls"] = frame["Calls"].astype(int)
    frame = frame[list(ROOFLINE_COLUMNS)]
    # Highest score first; unknown scores (symbolic kernels) last, ties by time.
    return frame.sort_values(["Score", "Time (us)"], ascending=False, na_position="last",
                             kind="stable")


def tune_next(ranking: pd.DataFrame, n: int = 5) -> pd.Index:
    """The ``n`` kernels of a :func:`roofline` frame with the highest score (leaving out those
    already at the roof, score 0, and those without a score): ``tune_relax(...,
    op_names=tune_next(ranking, 3))`` tunes exactly them."""
    if not isinstance(ranking, pd.DataFrame) or ranking.index.name != KERNEL_INDEX or \
            "Score" not in ranking.columns:
        raise TypeError("tune_next: ranking must be the DataFrame roofline(report, exe) "
                        f"returns, got {type(ranking).__name__}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"tune_next: n must be an int >= 1, got {n!r}")
    scored = ranking[ranking["Score"] > 0].sort_values("Score", ascending=False, kind="stable")
    return scored.index[:n]
