"""``LocalSession``: TVM's RPC session interface over this very process.

Code written for a remote device (upload, load_module, ``session.cpu()``, time_evaluator)
runs unchanged against the local machine, which is how TVM's tutorials try RPC without a
board. Files go to a private temporary directory (paths are relative to it, as on a server);
modules, devices and arrays are the ordinary local ones, so ``session.cpu()`` is ``cpu(0)``
and ``nd.array(x, session.cpu())`` is a plain NDArray.
"""
from __future__ import annotations

import os
from typing import Any

from workbench.contrib.utils import TempDirectory
from workbench.rpc.session_ops import _is_executable_archive, _is_object_file
from workbench.runtime.device import STR2MASK, Device, kDLCPU
from workbench.runtime.module import Module, load_module
from workbench.runtime.registry import get_global_func

__all__ = ["LocalSession"]


class LocalSession:
    """An RPC session backed by the local process (TVM's ``rpc.LocalSession()``)."""

    def __init__(self) -> None:
        self._temp = TempDirectory()
        self._workdir = os.path.realpath(self._temp.temp_dir)

    def _path(self, name: str) -> str:
        """``name`` inside the session's directory; ``ValueError`` for paths that leave it
        (as a server would refuse them, so code tried here behaves the same remotely)."""
        if not isinstance(name, str) or not name or os.path.isabs(name):
            raise ValueError(f"LocalSession: paths are relative to the session's directory, "
                             f"got {name!r}")
        full = os.path.normpath(os.path.join(self._workdir, name))
        if full != self._workdir and not full.startswith(self._workdir + os.sep):
            raise ValueError(f"LocalSession: path {name!r} leaves the session's directory")
        return full

    # -- devices -------------------------------------------------------------------------------
    def device(self, dev_type: int | str, dev_id: int = 0) -> Device:
        """A local device (only the CPU exists)."""
        if isinstance(dev_type, str):
            name = dev_type.split()[0] if dev_type.split() else dev_type
            if name not in STR2MASK:
                raise ValueError(f"LocalSession.device: unknown device type {dev_type!r}; "
                                 f"expected one of {sorted(STR2MASK)}")
            dev_type = STR2MASK[name]
        return Device(dev_type, dev_id)

    def cpu(self, dev_id: int = 0) -> Device:
        return Device(kDLCPU, dev_id)

    # -- files and modules (paths relative to the session's directory) ----------------------
    def upload(self, data: Any, target: str | None = None) -> str:
        """Copy a file (a path, or bytes with ``target`` naming it) into the session's
        directory; returns its name there."""
        if isinstance(data, (str, os.PathLike)):
            with open(os.fspath(data), "rb") as f:
                blob = f.read()
            target = target or os.path.basename(os.fspath(data))
        elif isinstance(data, (bytes, bytearray, memoryview)):
            if not target:
                raise ValueError("LocalSession.upload: target (the file name) is required "
                                 "for bytes")
            blob = bytes(data)
        else:
            raise TypeError(f"LocalSession.upload: data must be a path or bytes, got "
                            f"{type(data).__name__}")
        path = self._path(target)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(blob)
        return target

    def download(self, path: str) -> bytes:
        """The bytes of a file in the session's directory."""
        with open(self._path(path), "rb") as f:
            return f.read()

    def remove(self, path: str) -> None:
        """Delete a file of the session's directory."""
        os.remove(self._path(path))

    def listdir(self, path: str = ".") -> list[str]:
        """The names in a directory of the session's directory."""
        return sorted(os.listdir(self._path(path)))

    def load_module(self, path: str) -> Any:
        """Load an uploaded file: object code, a shared library (``export_library``), or a
        VM Executable archive."""
        full = self._path(path)
        if not os.path.isfile(full):
            raise FileNotFoundError(f"LocalSession.load_module: no file {path!r} in the "
                                    f"session's directory (it has: "
                                    f"{', '.join(self.listdir()) or 'nothing'})")
        if _is_executable_archive(full):
            from workbench.runtime.relax_vm import Executable
            return Executable.load(full)
        with open(full, "rb") as f:
            data = f.read()
        return Module.from_object(data) if _is_object_file(data) else load_module(full)

    def get_function(self, name: str) -> Any:
        """A global function (``register_func``) of this process."""
        return get_global_func(name)

    # -- facts and lifetime ----------------------------------------------------------------------
    @property
    def target(self) -> Any:
        """The host CPU as a Target."""
        from workbench.target import Target  # floor 3, below rpc
        return Target("llvm")

    def close(self) -> None:
        """Delete the session's directory."""
        self._temp.remove()

    def __enter__(self) -> "LocalSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<LocalSession {self._temp.temp_dir}>"
