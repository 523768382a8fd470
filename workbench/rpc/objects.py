"""Client-side proxies of objects living in a remote session: devices, arrays, modules,
functions and time evaluators (TVM's remote ``Device``, ``NDArray``, ``Module``).

A proxy holds its session and a handle; using it sends one request to the session. Arrays
come back by value only when asked (``numpy()``); results of remote calls that are arrays stay
remote (:class:`RemoteNDArray`). When a proxy is collected, its handle is released with the
session's next request.
"""
from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from workbench.runtime.device import Device, kDLCPU
from workbench.runtime.evaluator import BenchmarkResult
from workbench.runtime.ndarray import NDArray, dtype_name, shape_tuple

if TYPE_CHECKING:  # pragma: no cover
    from workbench.rpc.session import RemoteSession

__all__ = ["RemoteDevice", "RemoteNDArray", "RemoteFunction", "RemoteModule",
           "RemoteObject", "RemoteTimeEvaluator"]


class RemoteDevice(Device):
    """A device of a remote session (``session.cpu(0)``), printed ``remote[i]:cpu(0)`` as in
    TVM. ``workbench.nd.array(x, dev)`` / ``nd.empty(shape, dtype, dev)`` make arrays on it.
    Equal only to the same device of the same session."""

    __slots__ = ("_session",)

    def __init__(self, session: "RemoteSession", device_type: int, device_id: int = 0) -> None:
        super().__init__(device_type, device_id)
        object.__setattr__(self, "_session", session)

    @property
    def session(self) -> "RemoteSession":
        return self._session

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RemoteDevice) and other._session is self._session
                and other.device_type == self.device_type
                and other.device_id == self.device_id)

    def __hash__(self) -> int:
        return hash((id(self._session), self.device_type, self.device_id))

    def __str__(self) -> str:
        return f"remote[{self._session.index}]:{super().__str__()}"

    __repr__ = __str__

    def __reduce__(self):
        raise TypeError("a RemoteDevice belongs to its session and cannot be pickled")

    @property
    def exist(self) -> bool:
        """True while the session is open (only cpu(0) exists on a worker)."""
        return self._session.alive and self.device_type == kDLCPU and self.device_id == 0

    @property
    def num_cores(self) -> int:
        return int(self._session.info["num_cores"])

    @property
    def max_threads(self) -> int:
        return self.num_cores

    @property
    def architecture(self) -> str:
        return str(self._session.info["machine"])

    def sync(self) -> None:
        """Remote kernels run synchronously: every call has finished when it returns."""
        self._session._check_alive()

    def _ref(self, session: "RemoteSession") -> Any:
        from workbench.rpc.protocol import DeviceRef

        if session is not self._session:
            raise ValueError(f"device {self} belongs to another session than {session}")
        return DeviceRef(self.device_type, self.device_id)


class _Remote:
    """Base of proxies that own a handle: released when collected."""

    __slots__ = ("_session", "_handle", "__weakref__")

    def _ref(self, session: "RemoteSession") -> Any:
        from workbench.rpc.protocol import Ref

        if session is not self._session:
            raise ValueError(f"{self!r} belongs to another session than {session}")
        return Ref(self._handle)

    @property
    def session(self) -> "RemoteSession":
        return self._session

    def __reduce__(self):
        raise TypeError(f"a {type(self).__name__} lives in its remote session and cannot be "
                        "pickled; use numpy() to fetch an array")

    def __del__(self) -> None:
        try:
            self._session._release(self._handle)
        except Exception:  # noqa: BLE001 - interpreter shutdown, half-built proxy
            pass


class RemoteNDArray(_Remote):
    """An array in a remote session (TVM's remote NDArray): ``numpy()`` fetches it,
    ``copyfrom`` sends data, ``copyto`` copies to a device or another array."""

    __slots__ = ("_shape", "_dtype", "_device")

    def __init__(self, session: "RemoteSession", handle: int, shape: Sequence[int],
                 dtype: str, device: RemoteDevice) -> None:
        self._session, self._handle = session, handle
        self._shape, self._dtype, self._device = tuple(int(d) for d in shape), str(dtype), device

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    device = property(lambda self: self._device)
    ndim = property(lambda self: len(self._shape))

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self._dtype).itemsize

    def numpy(self) -> np.ndarray:
        """The contents, fetched from the session (a new numpy array)."""
        return self._session._call("numpy", self._handle)

    asnumpy = numpy

    def copyfrom(self, source: Any) -> "RemoteNDArray":
        """Copy ``source`` (numpy, lists, a local NDArray, or an array of this session) into
        this array; shapes must match, numpy data is cast to this dtype."""
        if isinstance(source, RemoteNDArray):
            if (source.shape, source.dtype) != (self._shape, self._dtype):
                raise ValueError(f"copyfrom: source is {source.dtype}{list(source.shape)}, this "
                                 f"array is {self._dtype}{list(self._shape)}")
            self._session._call("copyfrom", self._handle, source._ref(self._session))
            return self
        if isinstance(source, NDArray):
            source = source.numpy()
        try:
            data = np.asarray(source, dtype=self._dtype)
        except (TypeError, ValueError) as err:
            raise TypeError(f"copyfrom: cannot convert {type(source).__name__} to "
                            f"{self._dtype}: {err}") from None
        if data.shape != self._shape:
            raise ValueError(f"copyfrom: source shape {data.shape} does not match this array's "
                             f"shape {self._shape}")
        self._session._call("copyfrom", self._handle, data)
        return self

    def copyto(self, target: Any) -> Any:
        """Copy into ``target``: a local Device (a new local NDArray), a device of this
        session (a new remote array), or an array (returned)."""
        from workbench.runtime.ndarray import tensor

        if isinstance(target, (RemoteNDArray, NDArray)):
            return target.copyfrom(self if isinstance(target, RemoteNDArray) else self.numpy())
        if isinstance(target, RemoteDevice):
            out = target._session._empty(self._shape, self._dtype, target)
            return out.copyfrom(self if target._session is self._session else self.numpy())
        if isinstance(target, Device):
            return tensor(self.numpy(), target)
        raise TypeError(f"copyto: target must be an array or a Device, got {target!r}")

    def __setitem__(self, key: Any, value: Any) -> None:
        if not (isinstance(key, slice) and key == slice(None)):
            raise ValueError("RemoteNDArray only supports whole-array assignment a[:] = value")
        if np.isscalar(value):
            value = np.full(self._shape, value, dtype=self._dtype)
        self.copyfrom(value)

    def __repr__(self) -> str:
        return (f"<workbench.rpc.RemoteNDArray shape={self._shape}, dtype={self._dtype}, "
                f"{self._device}>")

    def _repr_html_(self) -> str:
        return (f"<div class='workbench-ndarray'><b>RemoteNDArray</b> "
                f"<code>shape={html.escape(str(self._shape))}</code> "
                f"<code>dtype={self._dtype}</code> <code>{html.escape(str(self._device))}"
                f"</code> (call <code>numpy()</code> to fetch)</div>")


class RemoteObject(_Remote):
    """Any other remote object a call returned (kept alive remotely, passed back by
    reference)."""

    __slots__ = ("type_name",)

    def __init__(self, session: "RemoteSession", handle: int, type_name: str) -> None:
        self._session, self._handle, self.type_name = session, handle, type_name

    def __repr__(self) -> str:
        return f"<remote {self.type_name} #{self._handle} in {self._session}>"


class RemoteFunction:
    """A function in a remote session: a kernel of a module, a VM function or method, a
    global function, or a function a call returned. Calling it runs it remotely; arguments
    are remote arrays (by reference) or plain values (copied); array results stay remote."""

    __slots__ = ("_session", "_spec", "name", "_owner", "__weakref__")

    def __init__(self, session: "RemoteSession", spec: tuple, name: str,
                 owner: Any = None) -> None:
        self._session, self._spec, self.name = session, spec, name
        self._owner = owner  # keeps the module / VM / object alive remotely

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._session._call("call", self._spec, self._session._encode(args),
                                   {k: self._session._encode(v) for k, v in kwargs.items()})

    def _ref(self, session: "RemoteSession") -> Any:
        if self._spec[0] != "object" or session is not self._session:
            raise ValueError(f"{self!r} cannot be passed as an argument here")
        return self._owner._ref(session)

    def __repr__(self) -> str:
        return f"<RemoteFunction {self.name} in {self._session}>"


class RemoteTimeEvaluator:
    """``evaluator(*args) -> BenchmarkResult``: timing happens in the session process (TVM's
    protocol, :mod:`workbench.runtime.evaluator`); the seconds come back. Like TVM's, a
    ``number`` grown for ``min_repeat_ms`` is kept for the next call."""

    def __init__(self, session: "RemoteSession", spec: tuple, dev: RemoteDevice,
                 owner: Any, **options: Any) -> None:
        if not isinstance(dev, RemoteDevice):
            raise TypeError(f"time_evaluator: dev must be a device of the session "
                            f"(session.cpu(0)), got {dev!r}")
        f_preproc = options.get("f_preproc", "")
        if not isinstance(f_preproc, str):
            raise TypeError("time_evaluator: over RPC, f_preproc must be the name of a "
                            "global function registered on the worker")
        self._session, self._spec, self._owner = session, spec, owner
        self.dev = dev
        self.options = options
        self.number = options.get("number", 10)

    def __call__(self, *args: Any) -> BenchmarkResult:
        session = self._session
        options = dict(self.options, number=self.number, dev=self.dev._ref(session))
        out = session._call("time", self._spec, options, session._encode(args))
        self.number = out["number"]
        return BenchmarkResult(tuple(out["results"]))


class RemoteModule(_Remote):
    """A module loaded in a remote session (``session.load_module(path)``): kernels
    (``mod["name"](...)``, ``mod.time_evaluator``) or, for an uploaded VM Executable, the
    program for ``relax.VirtualMachine(mod, session.cpu())``."""

    __slots__ = ("kind", "entry_name", "function_names", "path")

    def __init__(self, session: "RemoteSession", handle: int, kind: str, meta: dict,
                 path: str) -> None:
        self._session, self._handle, self.kind, self.path = session, handle, kind, path
        self.entry_name = meta.get("entry", "")
        self.function_names = list(meta.get("functions", ()))

    type_key = property(lambda self: "rpc")

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        return self.kind == "module" and name in self.function_names

    def get_function(self, name: str, query_imports: bool = False) -> RemoteFunction:
        if self.kind != "module":
            raise AttributeError(f"{self.path!r} is a VM executable: run it with "
                                 "relax.VirtualMachine(mod, session.cpu())")
        if name not in self.function_names:
            raise AttributeError(f"Module has no function {name!r}; it has "
                                 f"{', '.join(self.function_names) or 'no functions'}")
        return RemoteFunction(self._session, ("module", self._handle, name), name, self)

    def __getitem__(self, name: str) -> RemoteFunction:
        if not isinstance(name, str):
            raise TypeError(f"Module[...] takes a function name (str), got {name!r}")
        return self.get_function(name)

    def __call__(self, *args: Any) -> Any:
        if not self.entry_name:
            raise AttributeError("Module has no entry function")
        return self.get_function(self.entry_name)(*args)

    def time_evaluator(self, func_name: str, dev: RemoteDevice, number: int = 10,
                       repeat: int = 1, min_repeat_ms: float = 0,
                       limit_zero_time_iterations: int = 100, cooldown_interval_ms: float = 0,
                       repeats_to_cooldown: int = 1, cache_flush_bytes: int = 0,
                       f_preproc: str = "") -> RemoteTimeEvaluator:
        """A remote evaluator of ``func_name`` (see ``runtime.Module.time_evaluator``)."""
        self.get_function(func_name)  # a clear error for a wrong name, before any timing
        return RemoteTimeEvaluator(
            self._session, ("module", self._handle, func_name), dev, self, number=number,
            repeat=repeat, min_repeat_ms=min_repeat_ms,
            limit_zero_time_iterations=limit_zero_time_iterations,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown, cache_flush_bytes=cache_flush_bytes,
            f_preproc=f_preproc)

    def _make_virtual_machine(self, device: Any, memory_cfg: Any = None,
                              profile: bool = False) -> Any:
        """``relax.VirtualMachine(remote_module, dev)`` lands here (runtime's hook)."""
        from workbench.rpc.vm import RemoteVirtualMachine

        return RemoteVirtualMachine(self, device, memory_cfg=memory_cfg, profile=profile)

    def __repr__(self) -> str:
        if self.kind == "executable":
            return (f"RemoteModule(executable {self.path!r}, functions={self.function_names}, "
                    f"{self._session})")
        return (f"RemoteModule({self.path!r}, entry={self.entry_name!r}, "
                f"functions={self.function_names}, {self._session})")


def check_shape_dtype(shape: Any, dtype: Any) -> tuple[tuple[int, ...], str]:
    """Validate ``nd.empty`` arguments on the client, with the runtime's messages."""
    return shape_tuple(shape), dtype_name(dtype)
