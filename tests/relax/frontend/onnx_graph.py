"""Small ONNX graphs for the converter tests, built node by node, and the check that runs one
through ``from_onnx`` + the VM and compares every output with onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import workbench as wb
from workbench import relax
from workbench.relax.frontend.onnx import from_onnx

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


class Graph:
    """Builds a graph node by node; every node's output is a graph output too."""

    def __init__(self):
        self.nodes, self.inits, self.outputs = [], [], []
        self.types: dict[str, int] = {}
        self.k = 0

    def const(self, value, dtype=None) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def __call__(self, op: str, *inputs: str, outputs: int = 1, out: bool = True,
                 out_type: int | None = None, **attrs) -> str | list[str]:
        """Add a node; ``out_type`` is its outputs' element type where ONNX's shape
        inference cannot tell (contrib ops; float32 otherwise)."""
        self.k += 1
        names = [f"{op.lower()}{self.k}_{i}" for i in range(outputs)]
        if out_type is not None:
            self.types.update((n, out_type) for n in names)
        self.nodes.append(helper.make_node(op, list(inputs), names, name=f"{op}_{self.k}",
                                           **attrs))
        if out:
            self.outputs += [n for n in names if n]
        return names[0] if outputs == 1 else names

    def model(self, inputs, opset: int = 20):
        graph = helper.make_graph(self.nodes, "g", inputs, [], self.inits)
        # Other domains' ops (com.microsoft contrib ops) import version 1 of their domain.
        domains = sorted({n.domain for n in self.nodes if n.domain not in ("", "ai.onnx")})
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] +
                              [helper.make_opsetid(d, 1) for d in domains])
        m.ir_version = 9
        # The outputs' types, from ONNX's shape inference (onnxruntime wants them).
        inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
        # (Ops defined as ONNX functions and contrib ops get none: the node's out_type or
        # float32, of unknown shape.)
        m.graph.output.extend(inferred.get(o) or helper.make_tensor_value_info(
            o, self.types.get(o, TensorProto.FLOAT), None) for o in self.outputs)
        return m


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(model, feeds, exe=None):
    exe = exe or relax.build(from_onnx(model), "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    out = vm["main"](*[wb.nd.array(v) for v in feeds.values()])
    got = [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]
    want = ort_run(model, feeds)
    assert len(got) == len(want)
    names = [o.name for o in model.graph.output]
    for name, g, w in zip(names, got, want):
        assert g.shape == w.shape and str(g.dtype) == str(w.dtype), (name, g.shape, w.shape,
                                                                      g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=name)
    return exe


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")
