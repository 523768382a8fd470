"""Relax functions of realistic shapes, one per kernel family, for the default-schedule tests.

Each case is ``(params, body, dims, rules)``: ``params`` name -> shape (symbolic dims as
strings), ``body(*vars)`` the Relax expression, ``dims`` the sizes of the symbolic dims for the
run, ``rules`` the set of rule names the kernels must get (so a rule that stops matching, or
falls back, fails the test).
"""
from __future__ import annotations

from typing import Any, Callable

from workbench import relax, tir
from workbench.relax import op as R

N = tir.SizeVar("n", "int64")


def _dim(d: Any) -> Any:
    return N if d == "n" else d


def make_module(params: list[tuple[str, tuple]], body: Callable[..., Any],
                dtypes: dict[str, str] | None = None) -> Any:
    vars_ = [relax.Var(name, relax.TensorStructInfo(tuple(_dim(d) for d in shape),
                                                    (dtypes or {}).get(name, "float32")))
             for name, shape in params]
    bb = relax.BlockBuilder()
    with bb.function("main", vars_):
        with bb.dataflow():
            out = bb.emit_output(body(*vars_))
        bb.emit_func_output(out)
    return bb.get()


def _conv(x, w, b, **kw):  # noqa: ANN001, ANN202
    return R.nn.relu(R.add(R.nn.conv2d(x, w, **kw), b))


CASES: dict[str, tuple[list, Callable, dict, set]] = {
    # ---- outer products: matmul, batch matmul, dense, conv2d (register-tiled) -------------
    "matmul_nn": ([("a", (64, 96)), ("b", (96, 80))], R.matmul, {}, {"Matmul"}),
    "matmul_odd": ([("a", (37, 29)), ("b", (29, 45))], R.matmul, {}, {"Matmul"}),
    "matmul_nt": ([("a", (48, 64)), ("b", (72, 64))],
                  lambda a, b: R.matmul(a, R.permute_dims(b)), {}, {"Matmul", "Injective"}),
    "matmul_tn": ([("a", (64, 48)), ("b", (64, 40))],
                  lambda a, b: R.matmul(R.permute_dims(a), b), {}, {"Matmul", "Injective"}),
    "batch_matmul": ([("a", (3, 40, 32)), ("b", (3, 32, 48))], R.matmul, {}, {"Matmul"}),
    "batch_matmul_bcast": ([("a", (2, 3, 20, 32)), ("b", (32, 36))], R.matmul, {},
                           {"Matmul"}),
    "dense_bias_gelu": ([("x", (2, 24, 64)), ("w", (96, 64)), ("b", (96,))],
                        lambda x, w, b: R.nn.gelu(R.linear(x, w, b)), {},
                        {"Matmul", "Injective"}),
    "matmul_sym": ([("x", ("n", 37)), ("w", (37, 48))], R.matmul, {"n": 11}, {"Matmul"}),
    "conv_nchw_s1": ([("x", (1, 16, 14, 14)), ("w", (32, 16, 3, 3)), ("b", (1, 32, 1, 1))],
                     lambda x, w, b: _conv(x, w, b, padding=1), {}, {"Matmul"}),
    "conv_nchw_s2": ([("x", (2, 8, 15, 15)), ("w", (16, 8, 3, 3)), ("b", (1, 16, 1, 1))],
                     lambda x, w, b: _conv(x, w, b, strides=2, padding=1), {}, {"Matmul"}),
    "conv_nchw_1x1_sym": ([("x", ("n", 24, 7, 7)), ("w", (40, 24, 1, 1)),
                           ("b", (1, 40, 1, 1))],
                          lambda x, w, b: _conv(x, w, b), {"n": 3}, {"Matmul"}),
    "conv_nchw_7x7_s2": ([("x", (1, 3, 32, 32)), ("w", (16, 3, 7, 7)), ("b", (1, 16, 1, 1))],
                         lambda x, w, b: _conv(x, w, b, strides=2, padding=3), {}, {"Matmul"}),
    "conv_nhwc": ([("x", (1, 12, 12, 16)), ("w", (3, 3, 16, 32)), ("b", (32,))],
                  lambda x, w, b: _conv(x, w, b, padding=1, data_layout="NHWC",
                                        kernel_layout="HWIO"), {}, {"Matmul"}),
    "conv_nhwc_s2": ([("x", (2, 13, 13, 8)), ("w", (3, 3, 8, 24)), ("b", (24,))],
                     lambda x, w, b: _conv(x, w, b, strides=2, padding=1, data_layout="NHWC",
                                           kernel_layout="HWIO"), {}, {"Matmul"}),
    # ---- spatial reductions: grouped / depthwise conv, pooling, leading-axis reductions ---
    "conv_grouped": ([("x", (1, 16, 12, 12)), ("w", (32, 4, 3, 3)), ("b", (1, 32, 1, 1))],
                     lambda x, w, b: _conv(x, w, b, padding=1, groups=4), {},
                     {"SpatialReduction"}),
    "depthwise_nchw": ([("x", (1, 32, 16, 16)), ("w", (32, 1, 3, 3)), ("b", (1, 32, 1, 1))],
                       lambda x, w, b: _conv(x, w, b, padding=1, groups=32), {},
                       {"SpatialReduction"}),
    "depthwise_nchw_s2": ([("x", (1, 24, 15, 15)), ("w", (24, 1, 3, 3)),
                           ("b", (1, 24, 1, 1))],
                          lambda x, w, b: _conv(x, w, b, strides=2, padding=1, groups=24), {},
                          {"SpatialReduction"}),
    "depthwise_nhwc": ([("x", (1, 10, 10, 48)), ("w", (3, 3, 1, 48)), ("b", (48,))],
                       lambda x, w, b: _conv(x, w, b, padding=1, groups=48,
                                             data_layout="NHWC", kernel_layout="HWIO"), {},
                       {"SpatialReduction"}),
    "max_pool": ([("x", (1, 16, 20, 20))],
                 lambda x: R.nn.max_pool2d(x, pool_size=3, strides=2, padding=1), {},
                 {"SpatialReduction"}),
    "avg_pool": ([("x", ("n", 8, 12, 12))],
                 lambda x: R.nn.avg_pool2d(x, pool_size=2, strides=2), {"n": 2},
                 {"SpatialReduction"}),
    # Windows that start at x * 9 // 3: no single-stage rule fits an index like that.
    "adaptive_pool": ([("x", (2, 16, 7, 9))],
                      lambda x: R.nn.adaptive_avg_pool2d(x, (2, 3)), {}, {"Chain"}),
    "global_avg_pool": ([("x", (1, 64, 7, 7))],
                        lambda x: R.nn.adaptive_avg_pool2d(x, (1, 1)), {}, {"RowReduction"}),
    "sum_axis0": ([("x", (40, 48))], lambda x: R.sum(x, axis=0), {}, {"SpatialReduction"}),
    "mean_axis1_keepdims": ([("x", (4, 30, 64))], lambda x: R.mean(x, axis=1, keepdims=True),
                            {}, {"SpatialReduction"}),
    # ---- row reductions: softmax, norms, trailing-axis reductions ---------------------------
    "sum_last": ([("x", (24, 96))], lambda x: R.sum(x, axis=-1), {}, {"RowReduction"}),
    "sum_last_keepdims": ([("x", (6, 5, 64))], lambda x: R.sum(x, axis=-1, keepdims=True),
                          {}, {"RowReduction"}),
    "max_all": ([("x", (9, 40))], R.max, {}, {"RowReduction"}),
    # a partial reduction over two axes with the lanes rfactored out (with 8 and 16 lanes)
    "max_all_wide": ([("x", (5, 64))], R.max, {}, {"RowReduction"}),
    "mean_last_two": ([("x", (3, 8, 6, 10))], lambda x: R.mean(x, axis=[2, 3]), {},
                      {"RowReduction"}),
    "softmax": ([("x", (3, 10, 64))], lambda x: R.nn.softmax(x, axis=-1), {}, {"RowReduction"}),
    "softmax_odd_sym": ([("x", ("n", 37))], lambda x: R.nn.softmax(x, axis=-1), {"n": 5},
                        {"RowReduction"}),
    "log_softmax": ([("x", (8, 48))], R.nn.log_softmax, {}, {"RowReduction"}),
    "softmax_axis0": ([("x", (40, 24))], lambda x: R.nn.softmax(x, axis=0), {}, {"Chain"}),
    # static shapes: the keys transposed, then the fused streaming kernel (topi.nn.attention)
    # scheduled by its own rule
    "attention_causal": ([("q", (2, 16, 4, 32)), ("k", (2, 16, 4, 32)), ("v", (2, 16, 4, 32))],
                         lambda q, k, v: R.nn.attention(q, k, v, causal_mask="TopLeft"), {},
                         {"Attention", "Injective"}),
    "layer_norm": ([("x", (2, 16, 96)), ("g", (96,)), ("b", (96,))],
                   lambda x, g, b: R.nn.layer_norm(x, g, b, axes=-1), {}, {"RowReduction"}),
    "rms_norm_sym": ([("x", ("n", 64)), ("w", (64,))],
                     lambda x, w: R.nn.rms_norm(x, w, axes=-1), {"n": 3}, {"RowReduction"}),
    # ---- data-parallel: elementwise, broadcast, transpose, reshape, concat, gather -----------
    "add_relu_bcast": ([("x", (8, 33, 64)), ("y", (64,))],
                       lambda x, y: R.nn.relu(R.add(x, y)), {}, {"Injective"}),
    "mul_sym": ([("x", ("n", 48)), ("y", (1, 48))], R.multiply, {"n": 5}, {"Injective"}),
    "transpose_2d": ([("x", (48, 64))], R.permute_dims, {}, {"Injective"}),
    "transpose_3d": ([("x", (4, 20, 32))], lambda x: R.permute_dims(x, [2, 0, 1]), {},
                     {"Injective"}),
    "reshape": ([("x", (6, 40))], lambda x: R.reshape(x, (4, 3, 20)), {}, {"Injective"}),
    "concat": ([("x", (5, 16)), ("y", (5, 32))], lambda x, y: R.concat([x, y], axis=1), {},
               {"Injective"}),
    "take": ([("x", (50, 64)), ("i", (9,))], lambda x, i: R.take(x, i, axis=0), {},
             {"Injective"}),
    "where": ([("x", (12, 40)), ("y", (40,))],
              lambda x, y: R.where(R.greater(x, y), x, y), {}, {"Injective"}),
    "gelu_tanh": ([("x", (7, 100))], R.nn.gelu_tanh, {}, {"Injective"}),
}

#: The dtypes of parameters that are not float32.
DTYPES = {"take": {"i": "int64"}}
