"""ONNX's own backend test cases, shipped inside the ``onnx`` wheel
(``onnx/backend/test/data/<suite>/<case>/``: ``model.onnx`` and ``test_data_set_*/{input,
output}_*.pb``), read as they are: the model at its own opset, the inputs in the order of the
graph's inputs that are not initializers, the expected outputs in the graph's output order.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The suites of small whole models (the per-op ``node`` suite is not among them).
SUITES = ("simple", "pytorch-operator", "pytorch-converted")


def data_root() -> str:
    import onnx.backend.test
    return os.path.join(os.path.dirname(onnx.backend.test.__file__), "data")


@dataclass(frozen=True)
class Case:
    suite: str
    name: str
    path: str

    @property
    def id(self) -> str:
        return f"{self.suite}/{self.name}"

    def model(self) -> Any:
        import onnx
        return onnx.load(os.path.join(self.path, "model.onnx"))

    def data_sets(self) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
        """Each ``test_data_set_*`` as ``(inputs, expected outputs)``."""
        out = []
        for d in sorted(glob.glob(os.path.join(self.path, "test_data_set_*"))):
            out.append((_read_all(d, "input"), _read_all(d, "output")))
        return out


def _read_all(directory: str, kind: str) -> list[np.ndarray]:
    import onnx
    from onnx import numpy_helper
    values = []
    files = sorted(glob.glob(os.path.join(directory, f"{kind}_*.pb")),
                   key=lambda f: int(f.rsplit("_", 1)[1].split(".")[0]))
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        values.append(numpy_helper.to_array(t))
    return values


def _numeric(path: str) -> bool:
    """Whether the case has test data and all of it is numbers (not strings)."""
    import onnx
    files = glob.glob(os.path.join(path, "test_data_set_*", "*.pb"))
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        if t.data_type == onnx.TensorProto.STRING:
            return False
    return bool(files)


def cases(suites: tuple[str, ...] = SUITES) -> list[Case]:
    """Every case of the suites that has numeric test data."""
    root = data_root()
    out = []
    for suite in suites:
        for name in sorted(os.listdir(os.path.join(root, suite))):
            path = os.path.join(root, suite, name)
            if _numeric(path):
                out.append(Case(suite, name, path))
    return out
