"""NDArray (alias Tensor): a compact, row-major, 64-byte-aligned array on a Device.

The storage is a numpy ``uint8`` buffer over-allocated by 63 bytes and offset to the next
64-byte boundary, then viewed with the array's dtype and shape. That view is kept in ``_view``
and is what every read goes through; the kernel ABI (docs/internals.md) relies on the data
pointer being 64-byte aligned and the layout compact.

Copy semantics, decided against TVM's:

- ``numpy()`` returns a **copy**, as in TVM; ``numpy(copy=False)`` returns a zero-copy,
  writable view that shares memory with the NDArray (and keeps it alive). That is always safe
  on the CPU: the view can outlive the NDArray, and the storage is never reallocated.
- ``np.asarray(nd)`` (the ``__array__`` protocol) gives the zero-copy view too, unless numpy
  asks for a copy.
- ``copyfrom(numpy_or_list)`` casts to this array's dtype like TVM (``np.asarray(x, dtype)``),
  but the shape must match exactly; ``copyfrom(NDArray)`` requires equal shape *and* dtype.

The hot fields are plain slots read by the packed-function call path: ``_shape`` (tuple of
ints), ``_dtype`` (str), ``_ptr`` (int data address).
"""
from __future__ import annotations

import html
from typing import Any, Sequence

import numpy as np

from .device import Device, cpu

__all__ = ["NDArray", "Tensor", "tensor", "array", "empty", "from_dlpack", "SUPPORTED_DTYPES",
           "numpy_dtype"]

ALIGNMENT = 64
SUPPORTED_DTYPES = frozenset({
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16",
})


def numpy_dtype(dtype: Any) -> np.dtype:
    """``np.dtype(dtype)``, also for ``"bfloat16"``: bfloat16 arrays are numpy arrays of
    ``ml_dtypes.bfloat16``, imported on first use (it takes about a second to import)."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def dtype_name(dtype: Any, param: str = "dtype") -> str:
    """Normalise a dtype (string, numpy dtype or type) to its name, e.g. ``"float32"``;
    TypeError naming ``param`` when it is not a supported dtype."""
    try:
        name = numpy_dtype(dtype).name
    except TypeError:
        raise TypeError(f"{param}: {dtype!r} is not a dtype") from None
    if name not in SUPPORTED_DTYPES:
        raise TypeError(f"{param}: dtype {name!r} is not supported; expected one of "
                        f"{sorted(SUPPORTED_DTYPES)}")
    return name


def shape_tuple(shape: Any) -> tuple[int, ...]:
    """An int or a sequence of non-negative ints as a tuple of ints (TypeError / ValueError
    naming the bad dimension otherwise)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    out = []
    for i, d in enumerate(dims):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"shape[{i}] must be an int, got {d!r} in shape {shape!r}")
        if d < 0:
            raise ValueError(f"shape[{i}] must be >= 0, got {d} in shape {shape!r}")
        out.append(int(d))
    return tuple(out)


def _check_device(dev: Any) -> Device:
    if dev is None:
        return cpu(0)
    if not isinstance(dev, Device):
        raise TypeError(f"device must be a workbench Device such as workbench.cpu(0), "
                        f"got {dev!r}")
    if not dev.exist:
        raise ValueError(f"device {dev} is not available: Workbench only has cpu(0)")
    return dev


def _aligned_view(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    itemsize = numpy_dtype(dtype).itemsize
    nbytes = itemsize
    for d in shape:
        nbytes *= d
    raw = np.empty(max(nbytes, 1) + ALIGNMENT - 1, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    # np.ndarray(buffer=, offset=) keeps the exact address even for zero-size arrays (a
    # zero-length slice would not) and keeps ``raw`` alive as the view's base.
    return np.ndarray(shape, dtype=dtype, buffer=raw, offset=offset)


class NDArray:
    """An n-dimensional array in Workbench memory. Build with :func:`tensor` / :func:`empty`."""

    __slots__ = ("_view", "_shape", "_dtype", "_ptr", "_device", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("NDArray is not built directly; use workbench.runtime.tensor(arr), "
                        "workbench.nd.array(arr) or workbench.nd.empty(shape, dtype)")

    @classmethod
    def _new(cls, shape: tuple[int, ...], dtype: str, device: Device) -> "NDArray":
        self = object.__new__(cls)
        view = _aligned_view(shape, dtype)
        self._view = view
        self._shape = shape
        self._dtype = dtype
        self._ptr = view.ctypes.data
        self._device = device
        return self

    # -- attributes ----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def device(self) -> Device:
        return self._device

    ctx = device  # older TVM name

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(self._view.size)

    @property
    def nbytes(self) -> int:
        return int(self._view.nbytes)

    @property
    def data_ptr(self) -> int:
        """The address of the first element (64-byte aligned)."""
        return self._ptr

    @property
    def byte_offset(self) -> int:
        return 0

    def is_contiguous(self) -> bool:
        return True

    # -- conversion ----------------------------------------------------------------------------
    def numpy(self, copy: bool = True) -> np.ndarray:
        """The contents as numpy: a copy (TVM's behaviour) or, with ``copy=False``, a writable
        zero-copy view sharing this array's memory."""
        return self._view.copy() if copy else self._view

    def asnumpy(self) -> np.ndarray:
        """Deprecated TVM name of :meth:`numpy`; returns a copy."""
        return self._view.copy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self._view
        if dtype is not None and np.dtype(dtype) != out.dtype:
            if copy is False:
                raise ValueError(f"cannot view a {self._dtype} NDArray as {np.dtype(dtype)} "
                                 "without a copy")
            return out.astype(dtype)
        return out.copy() if copy else out

    # DLPack: numpy's own export of the view, so np.from_dlpack / torch.from_dlpack share
    # this array's memory (zero copy) and keep it alive.
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._view.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._view.__dlpack_device__()

    def to_dlpack(self) -> Any:
        """A DLPack capsule sharing this array's memory (TVM's ``to_dlpack``)."""
        return self._view.__dlpack__()

    def copyfrom(self, source: Any) -> "NDArray":
        """Copy ``source`` (NDArray, numpy array, or nested lists) into this array; returns
        self. Shapes must match; numpy/list data is cast to this dtype, NDArrays must match."""
        if isinstance(source, NDArray):
            if source._shape != self._shape or source._dtype != self._dtype:
                raise ValueError(
                    f"copyfrom: source is {source._dtype}{list(source._shape)}, this array is "
                    f"{self._dtype}{list(self._shape)}; shape and dtype must match")
            np.copyto(self._view, source._view)
            return self
        try:
            src = np.asarray(source, dtype=self._dtype)
        except (TypeError, ValueError) as err:
            raise TypeError(f"copyfrom: cannot convert {type(source).__name__} to "
                            f"{self._dtype}: {err}") from None
        if src.shape != self._shape:
            raise ValueError(f"copyfrom: source shape {src.shape} does not match this array's "
                             f"shape {self._shape}")
        np.copyto(self._view, src)
        return self

    def copyto(self, target: "NDArray | Device") -> "NDArray":
        """Copy into ``target`` (an NDArray of the same shape and dtype, returned) or onto a
        device (a new NDArray is returned)."""
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        if isinstance(target, Device):
            out = NDArray._new(self._shape, self._dtype, _check_device(target))
            np.copyto(out._view, self._view)
            return out
        raise TypeError(f"copyto: target must be an NDArray or a Device, got {target!r}")

    def __setitem__(self, key: Any, value: Any) -> None:
        """Only whole-array assignment ``a[:] = value`` (as in TVM)."""
        if not (isinstance(key, slice) and key == slice(None)):
            raise ValueError("NDArray only supports whole-array assignment a[:] = value")
        if isinstance(value, NDArray):
            self.copyfrom(value)
        elif np.isscalar(value):
            self._view[...] = value
        else:
            self.copyfrom(value)

    def same_as(self, other: Any) -> bool:
        return self is other

    def __reduce__(self):
        return (tensor, (self._view.copy(), self._device))

    # -- display -------------------------------------------------------------------------------
    def _header(self) -> str:
        return f"<workbench.nd.NDArray shape={self._shape}, dtype={self._dtype}, {self._device}>"

    def __repr__(self) -> str:
        return self._header() + "\n" + np.array2string(self._view, threshold=100, edgeitems=3,
                                                       prefix="")

    __str__ = __repr__

    def _repr_html_(self) -> str:
        preview = np.array2string(self._view, threshold=100, edgeitems=3)
        return (
            "<div class='workbench-ndarray'><b>NDArray</b> "
            f"<code>shape={html.escape(str(self._shape))}</code> "
            f"<code>dtype={self._dtype}</code> <code>{self._device}</code>"
            f"<pre style='margin:4px 0'>{html.escape(preview)}</pre></div>"
        )


Tensor = NDArray  # TVM 0.21+ name


def _remote_session(device: Any) -> Any:
    """The session of a remote device (``workbench.rpc``), None for a local one. A device
    that carries a ``_session`` makes its arrays through it: the runtime stays unaware of
    how remote arrays are made (docs/internals.md, "Remote sessions")."""
    return getattr(device, "_session", None)


def empty(shape: int | Sequence[int], dtype: Any = "float32",
          device: Device | None = None) -> NDArray:
    """An uninitialised array of ``shape`` and ``dtype`` on ``device`` (default cpu(0)); on a
    remote device, an array of its session."""
    session = _remote_session(device)
    if session is not None:
        return session._empty(shape, dtype, device)
    return NDArray._new(shape_tuple(shape), dtype_name(dtype), _check_device(device))


def tensor(arr: Any, device: Device | None = None) -> NDArray:
    """A new NDArray holding a copy of ``arr`` (numpy array, NDArray, scalar or nested lists),
    with ``arr``'s dtype (numpy's inference for lists) on ``device`` (default cpu(0)); on a
    remote device, an array of its session."""
    session = _remote_session(device)
    if session is not None:
        return session._array(arr, device)
    dev = _check_device(device)
    if isinstance(arr, NDArray):
        return arr.copyto(dev)
    src = arr if isinstance(arr, np.ndarray) else np.asarray(arr)
    out = NDArray._new(src.shape, dtype_name(src.dtype, "arr"), dev)
    np.copyto(out._view, src)
    return out


array = tensor  # TVM's workbench.nd.array spelling


def from_dlpack(ext_tensor: Any) -> NDArray:
    """An NDArray sharing the memory of ``ext_tensor`` (anything with ``__dlpack__``: a torch
    tensor, a numpy array, another NDArray; or a DLPack capsule), without a copy, as TVM's
    ``runtime.from_dlpack``. As in TVM the data must be on the CPU, C-contiguous and 64-byte
    aligned (the kernel ABI relies on it): copy with ``tensor(np.asarray(x))`` otherwise."""
    if isinstance(ext_tensor, NDArray):
        return ext_tensor
    try:
        if hasattr(ext_tensor, "__dlpack__"):
            view = np.from_dlpack(ext_tensor)
        else:  # a bare capsule: numpy reads it through a one-method wrapper
            view = np.from_dlpack(_Capsule(ext_tensor))
    except (TypeError, BufferError, RuntimeError, ValueError) as err:
        raise ValueError(f"from_dlpack: cannot import {type(ext_tensor).__name__} through "
                         f"DLPack: {err}") from None
    dtype = dtype_name(view.dtype, "ext_tensor")
    if not view.flags.c_contiguous:
        raise ValueError(f"from_dlpack: the tensor (shape {view.shape}, strides "
                         f"{view.strides}) is not C-contiguous; make it contiguous first")
    if view.ctypes.data % ALIGNMENT:
        raise ValueError(f"from_dlpack: the data at {view.ctypes.data:#x} is not "
                         f"{ALIGNMENT}-byte aligned; copy it with workbench.nd.array(...)")
    out = object.__new__(NDArray)
    out._view = view
    out._shape = tuple(int(d) for d in view.shape)
    out._dtype = dtype
    out._ptr = view.ctypes.data
    out._device = cpu(0)
    return out


class _Capsule:
    """Presents a raw DLPack capsule to ``np.from_dlpack`` (which wants ``__dlpack__``)."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU: a capsule from a non-CPU device fails in numpy with a reason
