"""The session process's side of a remote session: its objects and the operations on them.

This module runs in the session's child process on the worker (never in the Dask worker
itself, see :mod:`workbench.rpc.child`). Its state is process-global, one session per child:

- ``workdir``: a fresh temporary directory; ``upload``/``download``/``remove``/``listdir``
  and ``load_module`` take paths relative to it (as TVM's server does) and refuse paths that
  leave it; it is deleted when the session closes;
- ``objects``: handle -> object (arrays, modules, executables, VMs, functions) for every
  object the client holds a proxy of; the client releases handles it no longer uses.

:func:`serve_pickled` is the one job function the client's calls arrive at (as bytes the
worker only passes on): ``serve(op, args, releases)`` drops the released handles and runs
``OPS[op](state, *args)``. Arguments are
decoded (:class:`~workbench.rpc.protocol.Ref` -> the object, ``DeviceRef`` -> a Device) and
results encoded (arrays, functions and other objects stay here behind a
:class:`~workbench.rpc.protocol.Handle`).
"""
from __future__ import annotations

import os
import pickle
import platform
import shutil
import socket
import tempfile
import zipfile
from typing import Any, Callable

import numpy as np

from workbench.rpc.protocol import DeviceRef, Handle, Ref, walk

__all__ = ["serve", "serve_pickled", "OPS", "host_info"]


class SessionState:
    def __init__(self) -> None:
        self.workdir = tempfile.mkdtemp(prefix="workbench_rpc_session_")
        self.objects: dict[int, Any] = {}
        self._next = 1

    def put(self, obj: Any) -> int:
        handle = self._next
        self._next += 1
        self.objects[handle] = obj
        return handle

    def get(self, handle: int) -> Any:
        try:
            return self.objects[handle]
        except KeyError:
            raise KeyError(f"remote object #{handle} does not exist in this session (it was "
                           "released, or belongs to another session)") from None

    def path(self, name: str) -> str:
        """``name`` inside the work dir; ``ValueError`` for paths that leave it."""
        if not isinstance(name, str) or not name or os.path.isabs(name):
            raise ValueError(f"remote paths are relative to the session's directory, got "
                             f"{name!r}")
        full = os.path.normpath(os.path.join(self.workdir, name))
        if full != self.workdir and not full.startswith(self.workdir + os.sep):
            raise ValueError(f"remote path {name!r} leaves the session's directory")
        return full

    def close(self) -> None:
        self.objects.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


_STATE: SessionState | None = None


def _state() -> SessionState:
    global _STATE
    if _STATE is None:
        _STATE = SessionState()
    return _STATE


# ---- encoding -------------------------------------------------------------------------------

def _decode(state: SessionState, value: Any) -> Any:
    from workbench.runtime.device import Device

    def leaf(v: Any) -> Any:
        if isinstance(v, Ref):
            return state.get(v.handle)
        if isinstance(v, DeviceRef):
            return Device(v.device_type, v.device_id)
        return v
    return walk(value, leaf)


def _encode(state: SessionState, value: Any) -> Any:
    from workbench.runtime.ndarray import NDArray
    from workbench.runtime.relax_vm.objects import ShapeTuple

    def leaf(v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str, bytes, np.ndarray, np.generic,
                                       ShapeTuple)):
            return v
        if isinstance(v, NDArray):
            return Handle(state.put(v), "ndarray", {"shape": tuple(v.shape), "dtype": v.dtype})
        if callable(v):
            return Handle(state.put(v), "function",
                          {"name": getattr(v, "name", None) or getattr(v, "__name__", "")})
        return Handle(state.put(v), "object", {"type": type(v).__name__})
    return walk(value, leaf)


# ---- operations -----------------------------------------------------------------------------

def host_info() -> dict[str, Any]:
    """Facts about this machine: the host target (CPU name and features, cores) and more."""
    import workbench
    from workbench.runtime.device import cpu
    from workbench.target import Target

    host = Target("llvm")
    cores = cpu(0).num_cores
    target = Target({"kind": "llvm", "mtriple": host.triple, "mcpu": host.host_cpu,
                     "mattr": host.features, "num-cores": cores})
    return {"hostname": socket.gethostname(), "pid": os.getpid(), "target": str(target),
            "num_cores": cores, "machine": platform.machine(),
            "python": platform.python_version(), "workbench": workbench.__version__}


def _init(state: SessionState) -> dict[str, Any]:
    return dict(host_info(), workdir=state.workdir)


def _upload(state: SessionState, name: str, data: bytes) -> None:
    path = state.path(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _download(state: SessionState, name: str) -> bytes:
    with open(state.path(name), "rb") as f:
        return f.read()


def _remove(state: SessionState, name: str) -> None:
    path = state.path(name)
    if os.path.isdir(path) and path != state.workdir:
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def _listdir(state: SessionState, name: str = ".") -> list[str]:
    return sorted(os.listdir(state.path(name)))


def _is_executable_archive(path: str) -> bool:
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return "executable.json" in z.namelist()


def _is_object_file(data: bytes) -> bool:
    # ELF with e_type ET_REL (1): relocatable object code, loaded with MCJIT.
    return data[:4] == b"\x7fELF" and len(data) > 17 and int.from_bytes(data[16:18],
                                                                          "little") == 1


def _load_module(state: SessionState, name: str) -> Handle:
    from workbench.runtime.module import Module, load_module
    from workbench.runtime.relax_vm import Executable

    path = state.path(name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_module: no file {name!r} in the session's directory "
                                f"(uploaded: {', '.join(_listdir(state)) or 'nothing'})")
    if _is_executable_archive(path):
        exe = Executable.load(path)
        from workbench.runtime.relax_vm import VMFuncKind
        funcs = [f.name for f in exe.func_table if f.kind == VMFuncKind.VM_FUNC]
        return Handle(state.put(exe), "executable", {"functions": funcs})
    with open(path, "rb") as f:
        data = f.read()
    mod = Module.from_object(data) if _is_object_file(data) else load_module(path)
    return Handle(state.put(mod), "module", {"entry": mod.entry_name,
                                             "functions": mod.function_names,
                                             "type_key": mod.type_key})


def _empty(state: SessionState, shape: tuple, dtype: str, device: DeviceRef) -> Handle:
    from workbench.runtime.ndarray import empty

    return _encode(state, empty(shape, dtype, _decode(state, device)))


def _array(state: SessionState, data: np.ndarray, device: DeviceRef) -> Handle:
    from workbench.runtime.ndarray import tensor

    return _encode(state, tensor(data, _decode(state, device)))


def _numpy(state: SessionState, handle: int) -> np.ndarray:
    return state.get(handle).numpy()


def _copyfrom(state: SessionState, handle: int, source: Any) -> None:
    state.get(handle).copyfrom(_decode(state, source))


def _callee(state: SessionState, spec: tuple) -> Callable[..., Any]:
    from workbench.runtime.registry import get_global_func

    kind = spec[0]
    if kind == "global":
        return get_global_func(spec[1])
    if kind == "object":
        return state.get(spec[1])
    if kind in ("module", "vm"):
        return state.get(spec[1])[spec[2]]
    raise ValueError(f"unknown callee {spec!r}")


def _call(state: SessionState, spec: tuple, args: tuple, kwargs: dict) -> Any:
    func = _callee(state, spec)
    return _encode(state, func(*_decode(state, args), **_decode_kwargs(state, kwargs)))


def _decode_kwargs(state: SessionState, kwargs: dict) -> dict:
    return {k: _decode(state, v) for k, v in kwargs.items()}


def _time(state: SessionState, spec: tuple, options: dict, args: tuple) -> dict[str, Any]:
    from workbench.runtime.evaluator import time_evaluator

    options = _decode_kwargs(state, options)
    dev = options.pop("dev")
    if spec[0] in ("module", "vm"):
        evaluator = state.get(spec[1]).time_evaluator(spec[2], dev, **options)
    else:
        evaluator = time_evaluator(_callee(state, spec), dev, **options)
    result = evaluator(*_decode(state, args))
    return {"results": [float(r) for r in result.results], "number": evaluator.number}


def _vm_create(state: SessionState, exe_handle: int, devices: Any, memory_cfg: Any,
               profile: bool) -> Handle:
    from workbench.runtime.relax_vm import VirtualMachine

    exe = state.get(exe_handle)
    if isinstance(memory_cfg, tuple):  # {device: kind} travels as pairs
        memory_cfg = dict(_decode(state, memory_cfg))
    vm = VirtualMachine(exe, _decode(state, devices), memory_cfg=memory_cfg, profile=profile)
    return Handle(state.put(vm), "object", {"type": "VirtualMachine"})


#: VM methods a client may call; everything else (set_instrument: a callback would have to
#: run on the client) is refused.
VM_METHODS = frozenset({"set_input", "invoke_stateful", "get_outputs", "save_function",
                        "profile", "get_function_arity", "get_function_param_name"})


def _vm_call(state: SessionState, vm_handle: int, method: str, args: tuple,
             kwargs: dict) -> Any:
    if method not in VM_METHODS:
        raise AttributeError(f"VirtualMachine.{method} is not available over RPC")
    vm = state.get(vm_handle)
    out = getattr(vm, method)(*_decode(state, args), **_decode_kwargs(state, kwargs))
    if method == "profile":
        return {"report_json": out.json()}
    return _encode(state, out)


def _has_global(state: SessionState, name: str) -> bool:
    from workbench.runtime.registry import get_global_func

    return get_global_func(name, allow_missing=True) is not None


def _close(state: SessionState) -> None:
    global _STATE
    state.close()
    _STATE = None


OPS: dict[str, Callable[..., Any]] = {
    "init": _init, "upload": _upload, "download": _download, "remove": _remove,
    "listdir": _listdir, "load_module": _load_module, "empty": _empty, "array": _array,
    "numpy": _numpy, "copyfrom": _copyfrom, "call": _call, "time": _time,
    "vm_create": _vm_create, "vm_call": _vm_call, "has_global": _has_global, "close": _close,
}


def serve_pickled(op: str, payload: bytes) -> bytes:
    """:func:`serve` on a request pickled by the client, ``(args, releases)``; the result
    goes back pickled too (the worker in between only moves bytes)."""
    args, releases = pickle.loads(payload)
    return pickle.dumps(serve(op, args, releases), protocol=pickle.HIGHEST_PROTOCOL)


def serve(op: str, args: tuple, releases: tuple = ()) -> Any:
    """The job every session call runs in the session process (module docstring)."""
    state = _state()
    for handle in releases:
        state.objects.pop(handle, None)
    handler = OPS.get(op)
    if handler is None:
        raise ValueError(f"unknown session operation {op!r}")
    return handler(state, *args)
