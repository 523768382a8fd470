"""What the VM stepper records about each Call: value summaries, call records, the trace table.

No widgets here: these are plain data used by :mod:`workbench.widgets._stepping` (the stepping
core) and rendered by :mod:`workbench.widgets.vm_stepper`.

- :func:`describe` summarises one register value (a tensor's shape, dtype, min/max/mean of its
  finite elements, NaN and Inf counts, the first few values; anything else as short text).
  Summaries are copies: tensors are not kept, since memory planning reuses their storage and a
  kept tensor would later show another call's data.
- :class:`CallRecord` is one Call instruction as seen by the instrument.
- :func:`records_frame` / :func:`first_nonfinite` turn records into a DataFrame and find the
  first call whose values hold a NaN or Inf; :class:`Trace` bundles a finished run.
"""
from __future__ import annotations

import dataclasses
import html
from typing import Any, Sequence

import numpy as np
import pandas as pd

from workbench.runtime.ndarray import NDArray
from workbench.runtime.relax_vm import ShapeTuple, Storage, VirtualMachine, VMClosure

__all__ = ["ValueInfo", "CallRecord", "Trace", "describe", "records_frame", "first_nonfinite",
           "ALLOCATORS"]

PREVIEW = 6
# Results of these builtins are uninitialised (or stale, when storage is reused) memory: their
# NaNs say nothing about the program, so they are not counted as non-finite values.
ALLOCATORS = ("vm.builtin.alloc_storage", "vm.builtin.alloc_tensor")

FRAME_COLUMNS = ["call", "symbol", "layer", "function", "index", "pc", "depth", "status",
                 "arg_shapes", "arg_dtypes", "out_shape", "out_dtype", "out_min", "out_max",
                 "out_mean", "nan", "inf", "duration_us", "completed"]


@dataclasses.dataclass(frozen=True)
class ValueInfo:
    """A summary of one value. ``kind`` is "tensor", "none", "int", "float", "str", "shape",
    "tuple", "storage", "closure", "vm" or "object". For tensors: ``min``/``max``/``mean``
    are over the finite elements (None when there are none), ``nan``/``inf`` count the
    non-finite ones, ``preview`` holds the first values in row-major order."""

    kind: str
    text: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    nan: int = 0
    inf: int = 0
    preview: tuple = ()

    @property
    def nonfinite(self) -> int:
        return self.nan + self.inf


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _tensor_info(value: NDArray, preview: int) -> ValueInfo:
    arr = value.numpy(copy=False)   # read-only use; no copy of a large tensor
    shape, dtype = tuple(int(d) for d in value.shape), str(value.dtype)
    text = f"{dtype}[{', '.join(str(d) for d in shape)}]"
    nan = inf = 0
    values = arr
    if arr.dtype.kind == "f":
        nan_mask, inf_mask = np.isnan(arr), np.isinf(arr)
        nan, inf = int(nan_mask.sum()), int(inf_mask.sum())
        if nan or inf:
            values = arr[~(nan_mask | inf_mask)]
    elif arr.dtype.kind == "b":
        values = arr.astype(np.int8)
    lo = hi = mean = None
    if values.size:
        lo, hi = float(values.min()), float(values.max())
        mean = float(values.mean(dtype=np.float64))
    head = tuple(v.item() for v in arr.reshape(-1)[:preview])
    return ValueInfo("tensor", text, shape, dtype, lo, hi, mean, nan, inf, head)


def describe(value: Any, preview: int = PREVIEW) -> ValueInfo:
    """A :class:`ValueInfo` of ``value``; never raises (a failure becomes kind "object" with
    the error in ``text``), since it runs inside the VM's instrument."""
    try:
        if isinstance(value, NDArray):
            return _tensor_info(value, preview)
        if value is None:
            return ValueInfo("none", "None")
        if isinstance(value, bool):
            return ValueInfo("int", repr(value))
        if isinstance(value, (int, np.integer)):
            return ValueInfo("int", str(int(value)))
        if isinstance(value, (float, np.floating)):
            return ValueInfo("float", repr(float(value)))
        if isinstance(value, str):
            return ValueInfo("str", _short(str(value)))
        if isinstance(value, VirtualMachine):
            return ValueInfo("vm", "%vm")
        if isinstance(value, ShapeTuple):
            return ValueInfo("shape", f"shape({', '.join(str(d) for d in value)})")
        if isinstance(value, tuple):
            return ValueInfo("tuple", f"tuple({', '.join(describe(v).text for v in value)})"
                             if len(value) <= 4 else f"tuple of {len(value)}")
        if isinstance(value, Storage):
            return ValueInfo("storage", f"storage({value.nbytes} bytes)")
        if isinstance(value, VMClosure):
            return ValueInfo("closure", f"closure({value.func_name})")
        return ValueInfo("object", _short(value))
    except Exception as err:  # a summary must never break the run it observes
        return ValueInfo("object", f"<cannot summarise {type(value).__name__}: {err}>")


@dataclasses.dataclass
class CallRecord:
    """One Call instruction executed by the VM.

    ``index``: order of the before-events (0-based); ``site``: ``CallSite(function, index,
    pc)`` of the instruction (None if the VM does not report it); ``depth``: 0 for calls in
    the entry function, +1 inside each VM function call; ``args``: the arguments before the
    call; ``args_after``: after it (destination-passing kernels write their outputs into
    their last arguments); ``result``: the return value; ``output``: the return value, or for
    a call returning None the last tensor argument after the call (where kernels write);
    ``status``: "pending" (paused before it), "running", "done", "skipped", "error" (the run
    raised while it was open) or "stopped"; ``duration``: seconds from just before the call
    to just after it (nested VM functions include their instrument work); ``completed``:
    order of the after-events (inner calls complete before the outer one); ``layer``: the
    model layers the call implements (``"layer1.0.conv1 + bn1 + relu"``; the executable's
    call origin, ``""`` when it has none).
    """

    index: int
    symbol: str
    site: Any
    depth: int
    args: tuple[ValueInfo, ...]
    status: str = "running"
    layer: str = ""
    args_after: tuple[ValueInfo, ...] | None = None
    result: ValueInfo | None = None
    output: ValueInfo | None = None
    duration: float | None = None
    completed: int | None = None

    @property
    def function(self) -> str | None:
        return self.site.function if self.site is not None else None

    @property
    def position(self) -> str:
        """``main[12]`` (VM function and instruction index), or "?" if unknown."""
        return f"{self.site.function}[{self.site.index}]" if self.site is not None else "?"

    def values_after(self) -> tuple[ValueInfo, ...]:
        """The values the call left behind: arguments after the call, and the result unless
        it is fresh memory from an allocator."""
        if self.args_after is None:
            return ()
        extra = () if self.result is None or self.symbol in ALLOCATORS else (self.result,)
        return self.args_after + extra

    @property
    def nan(self) -> int:
        return sum(v.nan for v in self.values_after())

    @property
    def inf(self) -> int:
        return sum(v.inf for v in self.values_after())

    def finish(self, result: ValueInfo, args_after: tuple[ValueInfo, ...], duration: float,
               completed: int) -> None:
        self.result, self.args_after = result, args_after
        self.duration, self.completed = duration, completed
        self.output = result
        if result.kind == "none":
            tensors = [v for v in args_after if v.kind == "tensor"]
            self.output = tensors[-1] if tensors else result
        self.status = "done"


def _row(rec: CallRecord) -> dict[str, Any]:
    out = rec.output
    site = rec.site
    return {
        "call": rec.index, "symbol": rec.symbol, "layer": rec.layer,
        "function": site.function if site is not None else None,
        "index": site.index if site is not None else None,
        "pc": site.pc if site is not None else None,
        "depth": rec.depth, "status": rec.status,
        "arg_shapes": tuple(a.shape for a in rec.args),
        "arg_dtypes": tuple(a.dtype for a in rec.args),
        "out_shape": out.shape if out is not None else None,
        "out_dtype": out.dtype if out is not None else None,
        "out_min": out.min if out is not None else None,
        "out_max": out.max if out is not None else None,
        "out_mean": out.mean if out is not None else None,
        "nan": rec.nan, "inf": rec.inf,
        "duration_us": rec.duration * 1e6 if rec.duration is not None else None,
        "completed": rec.completed,
    }


def records_frame(records: Sequence[CallRecord]) -> pd.DataFrame:
    """One row per call, in call order, with :data:`FRAME_COLUMNS` (``nan``/``inf`` count the
    non-finite values the call left in its arguments and result; ``out_*`` describe
    :attr:`CallRecord.output`; ``duration_us`` in microseconds)."""
    frame = pd.DataFrame([_row(r) for r in records], columns=FRAME_COLUMNS)
    for column in ("index", "pc", "completed"):
        frame[column] = frame[column].astype("Int64")
    for column in ("out_min", "out_max", "out_mean", "duration_us"):
        frame[column] = frame[column].astype("float64")
    return frame


def first_nonfinite(records: Sequence[CallRecord]) -> CallRecord | None:
    """The first call, in completion order, that left a NaN or Inf in its arguments or result
    (allocators' fresh memory excluded), or None. Completion order matters for nested VM
    functions: the kernel inside is found, not the enclosing call."""
    hits = [r for r in records if r.completed is not None and r.nan + r.inf > 0]
    return min(hits, key=lambda r: r.completed) if hits else None


class Trace:
    """A finished traced run: ``records`` (CallRecords), ``frame`` (DataFrame, see
    :func:`records_frame`), ``result`` (the VM function's return value, None unless
    ``status == "finished"``), ``status`` ("finished", "error" or "stopped"), ``error`` and
    ``error_traceback`` (the exception the run raised, as object and text)."""

    def __init__(self, records: Sequence[CallRecord], result: Any, status: str,
                 error: BaseException | None = None, error_traceback: str = "") -> None:
        self.records = list(records)
        self.result, self.status = result, status
        self.error, self.error_traceback = error, error_traceback
        self._frame: pd.DataFrame | None = None

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            self._frame = records_frame(self.records)
        return self._frame

    def first_nonfinite(self) -> pd.Series | None:
        """The frame row (labelled by call index) of the first call that left a NaN or Inf
        behind (see :func:`first_nonfinite`), or None if every value stayed finite."""
        hit = first_nonfinite(self.records)
        if hit is None:
            return None
        frame = self.frame
        return frame[frame["call"] == hit.index].iloc[0]

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"<Trace {self.status}: {len(self.records)} calls>"

    def _repr_html_(self) -> str:
        head = f"<b>VM trace</b>: {html.escape(self.status)}, {len(self.records)} calls"
        if self.error is not None:
            head += f"; error: <code>{html.escape(repr(self.error))}</code>"
        return f"<div>{head}</div>" + self.frame.to_html(max_rows=60, border=0)
