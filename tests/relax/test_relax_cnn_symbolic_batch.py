"""CNNs exported from ``relax.frontend.nn`` with a symbolic batch: one compile runs at two batch
sizes and matches numpy, with fusion on and off; a symbolic spatial dim is refused clearly."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax, tir
from workbench.relax import op
from workbench.relax.frontend import nn

from relax_compile_models import input_for, make_cnn

BATCHES = (2, 5)
_CACHE: dict = {}


def _run(exe, x, params, func="forward"):
    vm = relax.VirtualMachine(exe, wb.cpu())
    return vm[func](wb.nd.array(x), *[wb.nd.array(p) for p in params]).numpy()


# ---- the shared CNN: conv (NCHW) + bias, batch_norm, relu, max_pool, reshape, linear ----------

def _cnn(fuse):
    key = ("cnn", fuse)
    if key not in _CACHE:
        mod, _, params, ref = make_cnn("n")
        _CACHE[key] = (relax.build(mod, "llvm", fuse=fuse), params, ref)
    return _CACHE[key]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_relax_cnn_symbolic_batch_matches_numpy(fuse):
    exe, params, ref = _cnn(fuse)
    for batch in BATCHES:  # one compile, two batch sizes
        x = input_for("cnn", batch)
        out = _run(exe, x, params)
        assert out.shape == (batch, 10)
        np.testing.assert_allclose(out, ref(x, params), rtol=1e-4, atol=1e-5)


def test_relax_cnn_symbolic_batch_kernels():
    fused, _, _ = _cnn(True)
    unfused, _, _ = _cnn(False)
    assert "fused_conv2d_add_batch_norm_relu" in fused.kernel_names
    assert not any(k.startswith("fused_") for k in unfused.kernel_names)
    assert {"conv2d", "batch_norm", "max_pool2d"} <= set(unfused.kernel_names)
    # The batch stays symbolic in the kernels: the conv kernel's data buffer starts with a var.
    conv = fused.lowered_mod["fused_conv2d_add_batch_norm_relu"]
    data = conv.buffer_map[conv.params[0]]
    assert isinstance(data.shape[0], tir.Var) and [d.value for d in data.shape[1:]] == [3, 8, 8]


# ---- a second CNN: grouped and depthwise NHWC convs, avg pool, adaptive avg pool ---------------

class GroupedCNN(nn.Module):
    def __init__(self) -> None:
        self.conv = nn.Conv2D(4, 6, 3, padding=1, groups=2, data_layout="NHWC")
        self.dw = nn.Conv2D(6, 6, 3, padding=1, groups=6, bias=False, data_layout="NHWC")
        self.fc = nn.Linear(6 * 2 * 2, 3)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = nn.relu(self.conv(x))                                   # (n, 8, 8, 6)
        y = nn.op.avg_pool2d(y, 2, layout="NHWC")                   # (n, 4, 4, 6)
        y = self.dw(y)                                              # depthwise
        y = nn.op.adaptive_avg_pool2d(y, 2, layout="NHWC")          # (n, 2, 2, 6)
        return self.fc(nn.op.reshape(y, [x.shape[0], 6 * 2 * 2]))


def _conv_nhwc(x, w, groups):
    """NHWC data, HWIO weight, padding 1, stride 1: explicit loops over the window."""
    n, h, wd, c = x.shape
    kh, kw, cg, o = w.shape
    xp = np.pad(x.astype("float64"), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, wd, o))
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, i:i + h, j:j + wd, g * cg:(g + 1) * cg]
                out[..., g * og:(g + 1) * og] += patch @ w[i, j, :, g * og:(g + 1) * og]
    return out


def _grouped_reference(x, p):
    cw, cb, dw, fw, fb = p
    n = x.shape[0]
    y = np.maximum(_conv_nhwc(x, cw, 2) + cb, 0)
    y = y.reshape(n, 4, 2, 4, 2, 6).mean(axis=(2, 4))
    y = _conv_nhwc(y, dw, 6)
    y = y.reshape(n, 2, 2, 2, 2, 6).mean(axis=(2, 4))
    return y.reshape(n, -1) @ fw.T + fb


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_relax_grouped_nhwc_cnn_symbolic_batch(fuse):
    model = GroupedCNN()
    mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor(("n", 8, 8, 4), "float32")}})
    rng = np.random.default_rng(3)
    params = [(rng.standard_normal(p.shape) * 0.3).astype("float32")
              for _, p in model.named_parameters()]
    assert [a.shape for a in params] == [(3, 3, 2, 6), (6,), (3, 3, 1, 6), (3, 24), (3,)]
    exe = relax.build(mod, "llvm", fuse=fuse)
    for batch in BATCHES:
        x = rng.standard_normal((batch, 8, 8, 4)).astype("float32")
        out = _run(exe, x, params)
        np.testing.assert_allclose(out, _grouped_reference(x, params), rtol=1e-4, atol=1e-5)


# ---- batch_norm + flatten, and the error for a symbolic spatial dim ---------------------------

def _function(params, body):
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(bb))
        bb.emit_func_output(out)
    return bb.get()


def test_relax_batch_norm_flatten_symbolic_batch():
    n = tir.SizeVar("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 3, 2, 2), "float32"))
    stats = [relax.Var(s, relax.TensorStructInfo((3,), "float32"))
             for s in ("g", "b", "mean", "var")]

    def body(bb):
        bn = bb.emit(op.nn.batch_norm(x, *stats, axis=1))
        return op.flatten(bb.emit(relax.TupleGetItem(bn, 0)))
    exe = relax.build(_function([x, *stats], body), "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(0)
    g, b, mean = (rng.standard_normal(3).astype("float32") for _ in range(3))
    var = np.abs(rng.standard_normal(3)).astype("float32") + 0.5
    s = (slice(None), None, None)
    for batch in BATCHES:
        xs = rng.standard_normal((batch, 3, 2, 2)).astype("float32")
        out = vm["main"](*[wb.nd.array(a) for a in (xs, g, b, mean, var)]).numpy()
        want = ((xs - mean[s]) / np.sqrt(var[s] + 1e-5) * g[s] + b[s]).reshape(-1)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_relax_conv_symbolic_spatial_dim_is_refused():
    n, h = tir.SizeVar("n", "int64"), tir.SizeVar("h", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 3, h, 8), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((4, 3, 3, 3), "float32"))
    mod = _function([x, w], lambda bb: op.nn.conv2d(x, w, padding=1))
    with pytest.raises(ValueError, match=r"conv2d_nchw: data: dimension 'H' .* is symbolic "
                                         r"\(h\); only 'N' may be symbolic"):
        relax.build(mod, "llvm")


# ---- relax.analysis.estimate_memory_usage (TVM's location) -------------------------------------

def test_relax_analysis_estimate_memory_usage_of_the_cnn():
    legal = relax.transform.LegalizeOps()
    mod = legal(make_cnn("n")[0])
    text = relax.analysis.estimate_memory_usage(mod, {"n": 4})
    assert text == relax.transform.estimate_memory_usage(mod, {"n": 4})
    assert text.startswith("Memory usage estimation:\n- Function forward:")
    # With the batch given a value, the unplanned total is that of the batch-4 model.
    static = relax.analysis.estimate_memory_usage(legal(make_cnn(4)[0]))
    unplanned = [line for line in text.splitlines() if "Without memory planning" in line]
    assert unplanned == [line for line in static.splitlines() if "Without" in line]
    assert "there are 10 constant-size" in unplanned[0]
