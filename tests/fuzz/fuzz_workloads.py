"""The workloads of the schedule fuzzer (sched_fuzz.py), each with a numpy reference.

Small te/topi programs covering the shapes of work a schedule meets: a matmul, convolutions in
both layouts with stride and padding (a padding stage to inline or move), a depthwise
convolution, max and average pooling, softmax and layer norm (chains of reductions and
elementwise stages), reductions with keepdims, broadcast chains of elementwise stages, and an
argmax (a two-value reducer). Extents are small and composite, so tiles divide some loops and
not others (predicates). The output is always the last parameter.

``LOWP_WORKLOADS`` are for *tuner* cases only: uint8 x int8 -> int32 and bfloat16 -> float32
matmuls and an int8 conv2d (layout-free weights), shaped so that the tensorizing rules match --
AMX and AVX-512 VNNI / BF16 micro-kernels (weights packed in the design space), the dot-product
intrinsics where the CPU lacks them -- and tile some output loops narrower than the output, so
that write caches are compacted. Each lists the llvm targets a case draws from: the host, and
where the host has AMX, the host without it (the VNNI / AVX512-BF16 spaces).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from workbench import te, topi


@dataclass(frozen=True)
class Workload:
    name: str
    build: Callable[[], Any]                     # -> PrimFunc, output last
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]
    tol: float = 1e-4
    targets: tuple[str, ...] = ("llvm",)


def _rand(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.standard_normal(shape).astype("float32")


def _ints(dtype: str, *shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    info = np.iinfo(dtype)
    return lambda rng: rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _bf16(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    def make(rng: np.random.Generator) -> np.ndarray:
        import ml_dtypes  # imported on first use: it takes about a second
        return rng.uniform(-1, 1, shape).astype(ml_dtypes.bfloat16)
    return make


def _inputs(*makers: Callable) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [m(rng) for m in makers]


def _func(*tensors: Any) -> Any:
    return te.create_prim_func(list(tensors))


# ---- numpy references -------------------------------------------------------------------------

def _pad_hw(x: np.ndarray, hw: tuple[int, int], p: int, value: float = 0.0) -> np.ndarray:
    width = [(p, p) if d in hw else (0, 0) for d in range(x.ndim)]
    return np.pad(x.astype("float64"), width, constant_values=value)


def conv2d_nchw_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    xp = _pad_hw(x, (2, 3), pad)
    n, _, h, wd = xp.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for ry in range(kh):
        for rx in range(kw):
            patch = xp[:, :, ry:ry + stride * oh:stride, rx:rx + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, ry, rx])
    return out


def conv2d_nhwc_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    xt = x.transpose(0, 3, 1, 2)
    wt = w.transpose(3, 2, 0, 1)                  # HWIO -> OIHW
    return conv2d_nchw_ref(xt, wt, stride, pad).transpose(0, 2, 3, 1)


def depthwise_nchw_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    xp = _pad_hw(x, (2, 3), pad)
    n, c, h, wd = xp.shape
    kh, kw = w.shape[2:]
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, c, oh, ow))
    for ry in range(kh):
        for rx in range(kw):
            patch = xp[:, :, ry:ry + stride * oh:stride, rx:rx + stride * ow:stride]
            out += patch * w[:, 0, ry, rx][None, :, None, None]
    return out


def pool_ref(x: np.ndarray, k: int, stride: int, pad: int, kind: str) -> np.ndarray:
    fill = -np.inf if kind == "max" else 0.0
    xp = _pad_hw(x, (2, 3), pad, fill)
    n, c, h, wd = xp.shape
    oh, ow = (h - k) // stride + 1, (wd - k) // stride + 1
    windows = np.stack([xp[:, :, ry:ry + stride * oh:stride, rx:rx + stride * ow:stride]
                        for ry in range(k) for rx in range(k)])
    return windows.max(axis=0) if kind == "max" else windows.sum(axis=0) / (k * k)


def softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm_ref(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = x.astype("float64")
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * g + b


# ---- te programs ----------------------------------------------------------------------------

def _matmul() -> Any:
    a, b = te.placeholder((8, 12), name="A"), te.placeholder((12, 10), name="B")
    return _func(a, b, topi.matmul(a, b))


def _conv_nhwc() -> Any:
    x, w = te.placeholder((1, 7, 6, 3), name="X"), te.placeholder((3, 3, 3, 4), name="W")
    return _func(x, w, topi.nn.conv2d_nhwc(x, w, 2, 1, 1))


def _conv_nchw() -> Any:
    x, w = te.placeholder((1, 3, 7, 6), name="X"), te.placeholder((4, 3, 3, 3), name="W")
    return _func(x, w, topi.nn.conv2d_nchw(x, w, 2, 1, 1))


def _depthwise() -> Any:
    x, w = te.placeholder((1, 4, 6, 5), name="X"), te.placeholder((4, 1, 3, 3), name="W")
    return _func(x, w, topi.nn.depthwise_conv2d_nchw(x, w, 1, 1, 1))


def _pool(kind: str) -> Callable[[], Any]:
    def build() -> Any:
        x = te.placeholder((1, 3, 7, 6), name="X")
        return _func(x, topi.nn.pool2d(x, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), kind))
    return build


def _softmax() -> Any:
    x = te.placeholder((4, 6), name="X")
    return _func(x, topi.nn.softmax(x))


def _layer_norm() -> Any:
    x, g, b = (te.placeholder((4, 6), name="X"), te.placeholder((6,), name="g"),
               te.placeholder((6,), name="b"))
    return _func(x, g, b, topi.nn.layer_norm(x, g, b, axis=[1]))


def _sum_keepdims() -> Any:
    x = te.placeholder((4, 6, 5), name="X")
    return _func(x, topi.sum(x, axis=1, keepdims=True))


def _max_keepdims_scaled() -> Any:
    x = te.placeholder((6, 4), name="X")
    m = topi.max(x, axis=0, keepdims=True)
    return _func(x, topi.multiply(topi.subtract(x, m), 2.0))


def _broadcast_chain() -> Any:
    p, q, r = (te.placeholder((4, 6), name="P"), te.placeholder((6,), name="Q"),
               te.placeholder((4, 1), name="R"))
    return _func(p, q, r, topi.add(topi.nn.relu(topi.exp(topi.subtract(
        topi.multiply(p, 0.5), q))), r))


def _elementwise() -> Any:
    x, y, z = (te.placeholder((4, 6), name="X"), te.placeholder((6,), name="Y"),
               te.placeholder((4, 1), name="Z"))
    return _func(x, y, z, topi.subtract(topi.nn.relu(topi.add(topi.multiply(x, 2.0), y)), z))


def _argmax() -> Any:
    x = te.placeholder((5, 6), name="X")
    return _func(x, topi.argmax(x, axis=1))


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("matmul", _matmul, _inputs(_rand(8, 12), _rand(12, 10)), lambda a, b: a @ b),
    Workload("conv2d_nhwc_s2", _conv_nhwc, _inputs(_rand(1, 7, 6, 3), _rand(3, 3, 3, 4)),
             lambda x, w: conv2d_nhwc_ref(x, w, 2, 1)),
    Workload("conv2d_nchw_s2", _conv_nchw, _inputs(_rand(1, 3, 7, 6), _rand(4, 3, 3, 3)),
             lambda x, w: conv2d_nchw_ref(x, w, 2, 1)),
    Workload("depthwise_nchw", _depthwise, _inputs(_rand(1, 4, 6, 5), _rand(4, 1, 3, 3)),
             lambda x, w: depthwise_nchw_ref(x, w, 1, 1)),
    Workload("max_pool", _pool("max"), _inputs(_rand(1, 3, 7, 6)),
             lambda x: pool_ref(x, 3, 2, 1, "max")),
    Workload("avg_pool", _pool("avg"), _inputs(_rand(1, 3, 7, 6)),
             lambda x: pool_ref(x, 3, 2, 1, "avg")),
    Workload("softmax", _softmax, _inputs(_rand(4, 6)), softmax_ref),
    Workload("layer_norm", _layer_norm, _inputs(_rand(4, 6), _rand(6), _rand(6)),
             layer_norm_ref),
    Workload("sum_keepdims", _sum_keepdims, _inputs(_rand(4, 6, 5)),
             lambda x: x.astype("float64").sum(axis=1, keepdims=True)),
    Workload("max_keepdims", _max_keepdims_scaled, _inputs(_rand(6, 4)),
             lambda x: (x - x.max(axis=0, keepdims=True)) * 2.0),
    Workload("broadcast_chain", _broadcast_chain, _inputs(_rand(4, 6), _rand(6), _rand(4, 1)),
             lambda p, q, r: np.maximum(np.exp(p * 0.5 - q), 0) + r),
    Workload("elementwise", _elementwise, _inputs(_rand(4, 6), _rand(6), _rand(4, 1)),
             lambda x, y, z: np.maximum(x * 2 + y, 0) - z),
    Workload("argmax", _argmax, _inputs(_rand(5, 6)), lambda x: x.argmax(axis=1), 0.0),
]}


# ---- low-precision workloads (tuner cases) -----------------------------------------------------

def host_targets() -> tuple[str, ...]:
    """``"llvm"`` and, where the host has AMX, the host's features without AMX (so the tuner's
    space holds the AVX-512 VNNI / BF16 kernels instead of the AMX ones)."""
    import llvmlite.binding as llvm
    feats = [f for f, on in llvm.get_host_cpu_features().items() if on]
    if not any(f.startswith("amx") for f in feats):
        return ("llvm",)
    no_amx = ",".join(f"+{f}" for f in sorted(feats) if not f.startswith("amx"))
    return ("llvm", f"llvm -mcpu={llvm.get_host_cpu_name()} -mattr={no_amx}")


def _matmul_lowp(m: int, k: int, n: int, a_t: str, b_t: str, acc: str) -> Callable[[], Any]:
    def build() -> Any:
        a, b = te.placeholder((m, k), a_t, name="A"), te.placeholder((k, n), b_t, name="B")
        return _func(a, b, topi.nn.matmul(a, b, out_dtype=acc))
    return build


def _conv_u8i8() -> Any:
    x = te.placeholder((1, 8, 16, 64), "uint8", name="X")
    w = te.placeholder((3, 3, 64, 32), "int8", name="W")
    return _func(x, w, topi.nn.conv2d_nhwc(x, w, 1, 1, 1, out_dtype="int32"))


def _exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype("int64") @ b.astype("int64")


def _f64_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype("float64") @ b.astype("float64")


LOWP_WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("matmul_u8i8", _matmul_lowp(32, 128, 128, "uint8", "int8", "int32"),
             _inputs(_ints("uint8", 32, 128), _ints("int8", 128, 128)), _exact_matmul, 0.0,
             host_targets()),
    Workload("matmul_bf16", _matmul_lowp(32, 64, 128, "bfloat16", "bfloat16", "float32"),
             _inputs(_bf16(32, 64), _bf16(64, 128)), _f64_matmul, 1e-3, host_targets()),
    Workload("conv2d_nhwc_u8i8", _conv_u8i8,
             _inputs(_ints("uint8", 1, 8, 16, 64), _ints("int8", 3, 3, 64, 32)),
             lambda x, w: conv2d_nhwc_ref(x, w, 1, 1), 0.0, host_targets()),
]}
