"""``connect`` and ``RemoteSession``: TVM's RPC session, on a Dask worker.

A session lives on one worker of the cluster, in a child process of that worker (its
``SessionServer`` actor holds it; :mod:`workbench.rpc.server`). The client talks to the actor
directly, one request at a time per session:

    session = workbench.rpc.connect("tcp://host:8786", key="workbench-x86-avx512")
    target = session.target                     # the worker's CPU, for cross-compiling
    lib = workbench.build(mod, target)
    lib.export_library("kernels.o")
    session.upload("kernels.o")
    rlib = session.load_module("kernels.o")
    dev = session.cpu(0)
    a = workbench.nd.array(np_a, dev); b = workbench.nd.empty((n,), "float32", dev)
    rlib["main"](a, b)                          # runs on the worker
    b.numpy()                                   # fetched
    rlib.time_evaluator("main", dev, number=10)(a, b)   # timed on the worker

Failures: a remote exception is re-raised here with its type when it is a built-in one
(``ValueError``, ``TypeError``, ...; the remote traceback is attached as a note), as
:class:`~workbench.rpc.base.RPCError` otherwise. A crash of the session process (a segfaulting
kernel), a ``session_timeout`` that ran out, or the worker leaving the cluster end the
session: that call and every later one raise :class:`~workbench.rpc.base.SessionLost` saying
which it was. The worker itself is not affected by a crash.
"""
from __future__ import annotations

import itertools
import os
import pickle
import tempfile
import threading
import weakref
from typing import Any

import numpy as np

from workbench.rpc.base import NoMatchingWorker, RPCError, SessionLost
from workbench.rpc.cluster import Cluster, WorkerInfo, get_cluster
from workbench.rpc.objects import (
    RemoteDevice, RemoteFunction, RemoteModule, RemoteNDArray, RemoteObject, check_shape_dtype,
)
from workbench.rpc.protocol import Handle, walk
from workbench.runtime.device import STR2MASK, Device, kDLCPU
from workbench.runtime.ndarray import NDArray

__all__ = ["RemoteSession", "RPCSession", "connect", "connect_tracker", "TrackerSession"]

_BUILTIN_ERRORS = {cls.__name__: cls for cls in (
    ValueError, TypeError, KeyError, IndexError, AttributeError, FileNotFoundError,
    NotImplementedError, ZeroDivisionError, OSError, MemoryError)}
_INDEX = itertools.count()
_ROUND_ROBIN: dict[tuple, Any] = {}


def _remote_error(exc: Any, op: str, where: str) -> Exception:
    cls = _BUILTIN_ERRORS.get(exc.type_name)
    if cls is KeyError:
        err: Exception = KeyError(exc.message.strip("'\""))
    elif cls is not None:
        err = cls(exc.message)
    else:
        err = RPCError(f"{exc.type_name}: {exc.message}")
    err.add_note(f"(raised in the remote session on {where} during {op!r}; remote "
                 f"traceback follows)\n{exc.traceback}")
    return err


def _release_remote(future: Any) -> None:
    # Dropping the actor's key deletes the SessionServer on its worker, which kills the
    # session's process and removes its directory (a collected, unclosed session).
    try:
        future.release()
    except Exception:  # noqa: BLE001 - the worker or the client may be gone already
        pass


class RemoteSession:
    """A session on one worker (module docstring); TVM's ``RPCSession``. Make one with
    :func:`connect`. ``info`` has the worker's facts (host name, target, cores, versions)."""

    def __init__(self, cluster: Cluster, worker: WorkerInfo, key: str | None = None,
                 session_timeout: float = 0, startup_timeout: float = 120.0) -> None:
        from workbench.rpc.server import SessionServer

        self.cluster = cluster
        self.worker = worker
        self.key = key
        self.session_timeout = session_timeout
        self.index = next(_INDEX)
        self._lock = threading.Lock()
        self._releases: list[int] = []
        self._dead: str | None = None
        future = cluster.client.submit(SessionServer, session_timeout, actor=True, pure=False,
                                       workers=[worker.address], allow_other_workers=False)
        try:
            # An actor proxy binds to the "current" Dask client; ours is not the default
            # one (set_as_default=False), so make it current while the proxy is built.
            with cluster.client.as_current():
                actor = future.result(timeout=startup_timeout)
        except Exception as err:  # noqa: BLE001 - start-up failures of every kind
            future.release()
            raise RPCError(f"cannot start a session on worker {worker.address}: {err}") from err
        if getattr(actor, "_client", None) is None:  # bound nowhere: bind it to our client
            actor._client, actor._future = cluster.client, future
        self._actor = actor
        self._finalizer = weakref.finalize(self, _release_remote, future)
        self.info: dict[str, Any] = self._call("init")

    # -- requests ------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._dead is None

    def _check_alive(self) -> None:
        if self._dead is not None:
            raise SessionLost(f"{self}: {self._dead}")

    def _release(self, handle: int) -> None:
        with self._lock:
            self._releases.append(handle)

    def _call(self, op: str, *args: Any) -> Any:
        self._check_alive()
        with self._lock:
            releases, self._releases = self._releases, []
        try:  # pickled here: what cannot travel fails now, with the session untouched
            payload = pickle.dumps((args, tuple(releases)), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:  # noqa: BLE001 - pickling raises all sorts
            with self._lock:
                self._releases[:0] = releases
            raise TypeError(f"cannot send {op!r} to the session {self}: {err} (arguments are "
                            "remote objects of the session, arrays, numbers, strings and "
                            "tuples of these)") from err
        try:
            status, value = self._actor.call(op, payload).result()
        except Exception as err:  # noqa: BLE001 - sorted out below
            if self._reachable():  # a passing comm failure; the session is still there
                raise RPCError(f"{self}: cannot send {op!r} to the session: "
                               f"{type(err).__name__}: {err}") from err
            self._dead = (f"the worker {self.worker.address} holding the session left the "
                          f"cluster or cannot be reached ({type(err).__name__}: {err})")
            self._finalizer.detach()
            raise SessionLost(f"{self}: {self._dead}") from err
        if status == "ok":
            return self._wrap(pickle.loads(value))
        if status == "error":
            raise _remote_error(value, op, self.worker.address)
        self._dead = str(value)
        raise SessionLost(f"{self}: {self._dead}")

    def _reachable(self) -> bool:
        try:
            self._actor.info().result(timeout=30)
            return True
        except Exception:  # noqa: BLE001 - any failure means the actor is gone
            return False

    def _wrap(self, value: Any) -> Any:
        def leaf(v: Any) -> Any:
            if not isinstance(v, Handle):
                return v
            if v.kind == "ndarray":
                return RemoteNDArray(self, v.handle, v.meta["shape"], v.meta["dtype"],
                                     self.cpu(0))
            if v.kind in ("module", "executable"):
                return RemoteModule(self, v.handle, v.kind, v.meta, "")
            if v.kind == "function":
                owner = RemoteObject(self, v.handle, "function")
                return RemoteFunction(self, ("object", v.handle), v.meta.get("name", ""), owner)
            return RemoteObject(self, v.handle, v.meta.get("type", v.kind))
        return walk(value, leaf)

    def _encode(self, value: Any) -> Any:
        """Arguments for the session: proxies of this session by reference, local values by
        value (a local NDArray arrives as an NDArray, a numpy array as numpy); a local device
        is refused (it is not the worker's)."""
        def leaf(v: Any) -> Any:
            if hasattr(v, "_ref") and hasattr(v, "_session"):
                return v._ref(self)
            if isinstance(v, Device):
                raise ValueError(f"argument {v} is a device of this machine; use a device of "
                                 f"the session, e.g. session.cpu(0)")
            return v
        return walk(value, leaf)

    # -- devices and arrays --------------------------------------------------------------------
    def device(self, dev_type: int | str, dev_id: int = 0) -> RemoteDevice:
        """A device of the session (only the CPU exists on a worker)."""
        if isinstance(dev_type, str):
            name = dev_type.split()[0] if dev_type.split() else dev_type
            if name not in STR2MASK:
                raise ValueError(f"device: unknown device type {dev_type!r}")
            dev_type = STR2MASK[name]
        return RemoteDevice(self, dev_type, dev_id)

    def cpu(self, dev_id: int = 0) -> RemoteDevice:
        return RemoteDevice(self, kDLCPU, dev_id)

    def _empty(self, shape: Any, dtype: Any, device: RemoteDevice) -> RemoteNDArray:
        shape, dtype = check_shape_dtype(shape, dtype)
        return self._call("empty", shape, dtype, device._ref(self))

    def _array(self, data: Any, device: RemoteDevice) -> RemoteNDArray:
        if isinstance(data, RemoteNDArray):
            return data.copyto(device)
        if isinstance(data, NDArray):
            data = data.numpy()
        return self._call("array", np.asarray(data), device._ref(self))

    # -- files and modules (paths relative to the session's directory) ----------------------
    def upload(self, data: Any, target: str | None = None) -> str:
        """Send a file to the session's directory: ``data`` is a local path, bytes (then
        ``target``, the remote name, is required), or a runtime Module / VM Executable
        (written with ``export_library``; ``target`` required, e.g. ``"model.vmexe"``).
        Returns the remote name."""
        if isinstance(data, (str, os.PathLike)):
            path = os.fspath(data)
            with open(path, "rb") as f:
                blob = f.read()
            target = target or os.path.basename(path)
        elif isinstance(data, (bytes, bytearray, memoryview)):
            if not target:
                raise ValueError("upload: target (the remote file name) is required for bytes")
            blob = bytes(data)
        elif hasattr(data, "export_library"):
            if not target:
                raise ValueError("upload: target (the remote file name, e.g. 'model.vmexe' or "
                                 "'kernels.o') is required for a module")
            with tempfile.TemporaryDirectory(prefix="workbench_upload_") as tmp:
                path = os.path.join(tmp, os.path.basename(target))
                data.export_library(path)
                with open(path, "rb") as f:
                    blob = f.read()
        else:
            raise TypeError(f"upload: data must be a path, bytes or a module, got "
                            f"{type(data).__name__}")
        self._call("upload", target, blob)
        return target

    def download(self, path: str) -> bytes:
        """The bytes of a file in the session's directory."""
        return self._call("download", path)

    def remove(self, path: str) -> None:
        """Delete a file (or directory) of the session's directory."""
        self._call("remove", path)

    def listdir(self, path: str = ".") -> list[str]:
        """The names in a directory of the session's directory."""
        return self._call("listdir", path)

    def load_module(self, path: str) -> RemoteModule:
        """Load an uploaded file: object code (``.o``), a shared library, or a VM
        Executable archive (``Executable.export_library``); see :class:`RemoteModule`."""
        module = self._call("load_module", path)
        module.path = path
        return module

    def get_function(self, name: str) -> RemoteFunction:
        """A global function registered on the worker (``register_func``)."""
        if not self._call("has_global", name):
            raise AttributeError(f"the worker has no global function {name!r}")
        return RemoteFunction(self, ("global", name), name)

    # -- facts ---------------------------------------------------------------------------------
    @property
    def target(self) -> Any:
        """The worker's CPU as a :class:`~workbench.target.Target` (triple, CPU, features,
        cores), detected on the worker: compile for it and the code runs there."""
        from workbench.target import Target

        return Target(self.info["target"])

    def close(self, timeout: float = 10.0) -> None:
        """End the session (its process and files go); later calls raise SessionLost."""
        if self._dead is None:
            self._dead = "the session was closed"
            try:  # the actor closes its session before its key is released
                self._actor.close().result(timeout=timeout)
            except Exception:  # noqa: BLE001 - the worker or the client may be gone
                pass
        self._finalizer()

    def __enter__(self) -> "RemoteSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "" if self._dead is None else ", closed"
        return f"<RemoteSession[{self.index}] on {self.worker.address}{state}>"


RPCSession = RemoteSession  # TVM's name


def connect(address: Any = None, key: str | None = None, *, session_timeout: float = 0,
            security: Any = None, worker: str | None = None,
            timeout: float = 30.0) -> RemoteSession:
    """A :class:`RemoteSession` on a worker of a Dask cluster.

    ``address``: the scheduler (``"tcp://host:8786"``, ``"host:8786"``, a
    ``distributed.Client``), or None for this process's in-process cluster (started on first
    use). ``key``: only workers offering this Dask resource (``dask worker ... --resources
    "KEY=1"``; TVM's tracker key); None for any worker. ``worker`` picks one by address;
    otherwise sessions go round-robin over the matching workers. ``session_timeout``: the
    session ends after that many seconds (0: never), as TVM's. ``security``: a
    ``distributed.Security`` (TLS), passed to Dask as is. ``timeout``: seconds to wait for the
    scheduler and for a matching worker.

    A cluster runs the code sent to it: connect only to clusters you trust.
    """
    cluster = get_cluster(address, security, timeout)
    workers = cluster.wait_for_workers(key, timeout)
    if worker is not None:
        chosen = next((w for w in workers if w.address == worker or w.name == worker), None)
        if chosen is None:
            raise NoMatchingWorker(f"worker {worker!r} is not among the workers offering key "
                                   f"{key!r}: {[w.address for w in workers]}")
    else:
        rr = _ROUND_ROBIN.setdefault((cluster.address, key), itertools.count())
        chosen = workers[next(rr) % len(workers)]
    return RemoteSession(cluster, chosen, key, session_timeout)


class TrackerSession:
    """TVM's ``TrackerSession`` over a Dask scheduler: ``request(key)`` opens a session on a
    worker offering ``key``; ``summary()`` lists the workers and their keys."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def request(self, key: str | None, priority: int = 1, session_timeout: float = 0,
                max_retry: int = 5, timeout: float = 30.0) -> RemoteSession:
        """A session on a worker offering ``key`` (``priority`` is accepted for TVM's
        signature; Dask has no session queue). Retries start-up failures ``max_retry``
        times."""
        last: Exception | None = None
        for _ in range(max(1, max_retry)):
            try:
                return connect(self.cluster.client, key, session_timeout=session_timeout,
                               timeout=timeout)
            except NoMatchingWorker:
                raise
            except RPCError as err:
                last = err
        raise RPCError(f"cannot open a session for key {key!r} after {max_retry} tries: {last}")

    def summary(self) -> dict[str, Any]:
        """``server_info``: one entry per worker (address, name, host, keys, threads);
        ``queue_info``: per key, how many workers offer it."""
        workers = self.cluster.workers()
        keys: dict[str, int] = {}
        for w in workers:
            for k in w.resources:
                keys[k] = keys.get(k, 0) + 1
        return {"server_info": [dict(w._asdict(), key=",".join(sorted(w.resources)))
                                for w in workers],
                "queue_info": {k: {"free": n, "pending": 0} for k, n in sorted(keys.items())}}

    def text_summary(self) -> str:
        info = self.summary()
        lines = [f"Cluster {self.cluster.address}: {len(info['server_info'])} worker(s)",
                 f"{'address':<28}{'host':<16}{'threads':>8}  keys"]
        for w in info["server_info"]:
            lines.append(f"{w['address']:<28}{w['host']:<16}{w['nthreads']:>8}  {w['key']}")
        return "\n".join(lines)

    def close(self) -> None:
        """Nothing to release: the Dask client is shared (see ``workbench.rpc.shutdown``)."""


def connect_tracker(url: Any = None, port: int | None = None, *, security: Any = None,
                    timeout: float = 30.0) -> TrackerSession:
    """TVM's ``connect_tracker(url, port)``: here the "tracker" is the Dask scheduler."""
    address = url if port is None else f"{url}:{int(port)}"
    return TrackerSession(get_cluster(address, security, timeout))
