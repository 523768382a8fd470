"""Saving and loading an :class:`Executable` as one file.

The file is a zip archive (so it can be inspected with any zip tool) holding:

- ``executable.json`` -- ``{"format": "workbench.relax_vm.Executable", "version": 1,
  "functions": [VMFuncInfo as JSON], "constants": [entry], "instr_offset": [...],
  "instr_data": [...], "libs": ["lib0.so", ...], "call_origins": [[function, index, layer,
  module, op_type], ...]}`` (``call_origins`` may be absent: older files). A constant entry
  is ``{"kind": k, ...}`` with k one of ``tensor`` (``"key"`` names an array in
  ``constants.npz``), ``shape``, ``dtype``, ``str``, ``int`` or ``float`` (``"value"``;
  floats as ``float.hex`` text so inf/nan survive strict JSON).
- ``constants.npz`` -- the tensor constants (numpy's format, loaded without pickle).
- ``lib<i>.so`` -- each kernel library, written by ``Module.export_library`` (a shared
  library that embeds its metadata and sources), loaded back with ``load_module``.

The bytecode keeps TVM's word encoding, so ``as_text()``/``stats()`` and results are identical
after a round trip, in this or a fresh process.
"""
from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from typing import Any, Callable

import numpy as np

from ..module import load_module
from ..ndarray import NDArray, tensor
from .call_origin import CallOrigin
from .executable import Executable, VMFuncInfo, constant_kind
from .objects import DataType, ShapeTuple

__all__ = ["save_executable", "load_executable", "FORMAT", "VERSION"]

FORMAT = "workbench.relax_vm.Executable"
VERSION = 1

# kind -> (tag, encode(value, arrays) -> entry fields); arrays collects tensors for the npz.
_ENCODE: dict[type, tuple[str, Callable[[Any, dict], dict]]] = {
    NDArray: ("tensor", lambda v, arrays: {"key": _add_array(arrays, v)}),
    ShapeTuple: ("shape", lambda v, arrays: {"value": list(v)}),
    DataType: ("dtype", lambda v, arrays: {"value": str(v)}),
    str: ("str", lambda v, arrays: {"value": str(v)}),
    int: ("int", lambda v, arrays: {"value": int(v)}),
    float: ("float", lambda v, arrays: {"value": float(v).hex()}),
}
_DECODE: dict[str, Callable[[dict, Any], Any]] = {
    "tensor": lambda e, npz: tensor(npz[e["key"]]),
    "shape": lambda e, npz: ShapeTuple(e["value"]),
    "dtype": lambda e, npz: DataType(e["value"]),
    "str": lambda e, npz: str(e["value"]),
    "int": lambda e, npz: int(e["value"]),
    "float": lambda e, npz: float.fromhex(e["value"]),
}


def _add_array(arrays: dict, value: NDArray) -> str:
    key = f"c{len(arrays)}"
    arrays[key] = value.numpy()
    return key


def save_executable(exe: Executable, path: str | os.PathLike) -> None:
    """Write ``exe`` (bytecode, constants and kernel libraries) to ``path``."""
    path = os.fspath(path)
    arrays: dict[str, np.ndarray] = {}
    constants = []
    for value in exe.constants:
        tag, encode = _ENCODE[constant_kind(value)]
        constants.append({"kind": tag, **encode(value, arrays)})
    lib_names = [f"lib{i}.so" for i in range(len(exe.imported_modules))]
    doc = {"format": FORMAT, "version": VERSION,
           "functions": [f.to_json() for f in exe.func_table], "constants": constants,
           "instr_offset": list(exe.instr_offset), "instr_data": list(exe.instr_data),
           "libs": lib_names,
           "call_origins": [[func, index, *origin.to_json()]
                            for (func, index), origin in exe.call_origins.items()]}
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    tmp = f"{path}.{os.getpid()}.tmp"
    with tempfile.TemporaryDirectory(prefix="wb_vm_save_") as work:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("executable.json", json.dumps(doc))
            zf.writestr("constants.npz", npz.getvalue())
            for name, lib in zip(lib_names, exe.imported_modules):
                lib_path = os.path.join(work, name)
                lib.export_library(lib_path)
                zf.write(lib_path, name)
    os.replace(tmp, path)  # a reader never sees a half-written file


def load_executable(path: str | os.PathLike) -> Executable:
    """Read an executable written by :func:`save_executable`."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Executable.load: no such file {path!r}")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"Executable.load: {path!r} is not a saved VM executable (expected a "
                         "zip archive written by Executable.save)")
    with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory(prefix="wb_vm_load_") as work:
        try:
            doc = json.loads(zf.read("executable.json"))
        except KeyError:
            raise ValueError(f"Executable.load: {path!r} has no executable.json") from None
        if doc.get("format") != FORMAT or doc.get("version") != VERSION:
            raise ValueError(f"Executable.load: {path!r} has format {doc.get('format')!r} "
                             f"version {doc.get('version')!r}; expected {FORMAT!r} version "
                             f"{VERSION}")
        with np.load(io.BytesIO(zf.read("constants.npz")), allow_pickle=False) as npz:
            constants = [_DECODE[e["kind"]](e, npz) for e in doc["constants"]]
        libs = []
        for name in doc["libs"]:
            lib_path = zf.extract(name, work)
            libs.append(load_module(lib_path))  # the loader keeps its own copy of the file
    exe = Executable([VMFuncInfo.from_json(f) for f in doc["functions"]], constants,
                     doc["instr_offset"], doc["instr_data"], libs)
    # Absent in files written before call origins were saved: nothing to restore.
    for entry in doc.get("call_origins", []):
        if not (isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str)
                and isinstance(entry[1], int)):
            raise ValueError(f"Executable.load: {path!r} has a malformed call origin {entry!r}")
        exe.call_origins[(entry[0], entry[1])] = CallOrigin.from_json(entry[2:])
    return exe
