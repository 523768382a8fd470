"""Shared helpers for the relax tests: build one-op functions and random inputs."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from workbench import relax, tir
from workbench.relax import op as R


def tensor(shape: Sequence[Any], dtype: str = "float32") -> relax.TensorStructInfo:
    return relax.TensorStructInfo(tuple(shape), dtype)


def one_op_module(params: Sequence[tuple[str, relax.StructInfo]],
                  body: Callable[..., Any], name: str = "main") -> Any:
    """A module whose ``main`` emits ``body(*param_vars)`` in a dataflow block."""
    vars_ = [relax.Var(n, si) for n, si in params]
    bb = relax.BlockBuilder()
    with bb.function(name, vars_):
        with bb.dataflow():
            out = bb.emit_output(body(*vars_))
        bb.emit_func_output(out)
    return bb.get()


def inputs_for(mod: Any, dims: dict[str, int] | None = None, seed: int = 0) -> list:
    from workbench.relax.testing import random_inputs
    return random_inputs(mod["main"], dims, seed)


N = tir.SizeVar("n", "int64")

# name -> (params, body, input overrides (index -> array) or None)
OP_CASES: dict[str, tuple[list, Callable, dict | None]] = {
    "add_broadcast": ([("x", tensor((2, 3))), ("y", tensor((3,)))], R.add, None),
    "subtract": ([("x", tensor((2, 3))), ("y", tensor((2, 1)))], R.subtract, None),
    "multiply_sym": ([("x", tensor((N, 3))), ("y", tensor((1, 3)))], R.multiply, None),
    "divide": ([("x", tensor((4,))), ("y", tensor((4,)))], R.divide,
               {1: np.array([1.5, -2.0, 3.0, 0.5], "float32")}),
    "power": ([("x", tensor((4,))), ("y", tensor((4,)))], R.power,
              {0: np.array([1.5, 2.0, 3.0, 0.5], "float32")}),
    "maximum": ([("x", tensor((2, 3))), ("y", tensor((2, 3)))], R.maximum, None),
    "minimum": ([("x", tensor((2, 3))), ("y", tensor((3,)))], R.minimum, None),
    "less": ([("x", tensor((2, 3))), ("y", tensor((2, 3)))], R.less, None),
    "equal_int": ([("x", tensor((5,), "int32")), ("y", tensor((5,), "int32"))], R.equal, None),
    "greater_equal": ([("x", tensor((2, 3))), ("y", tensor((1,)))], R.greater_equal, None),
    "exp": ([("x", tensor((2, 3)))], R.exp, None),
    "log": ([("x", tensor((2, 3)))], R.log, {0: np.abs(np.arange(1, 7, dtype="float32").reshape(2, 3))}),
    "sqrt": ([("x", tensor((6,)))], R.sqrt, {0: np.arange(1, 7, dtype="float32")}),
    "rsqrt": ([("x", tensor((6,)))], R.rsqrt, {0: np.arange(1, 7, dtype="float32")}),
    "tanh": ([("x", tensor((2, 3)))], R.tanh, None),
    "sigmoid": ([("x", tensor((N, 3)))], R.sigmoid, None),
    "erf": ([("x", tensor((2, 3)))], R.erf, None),
    "negative": ([("x", tensor((2, 3)))], R.negative, None),
    "abs": ([("x", tensor((2, 3)))], R.abs, None),
    "square": ([("x", tensor((2, 3)))], R.square, None),
    "clip": ([("x", tensor((2, 3)))], lambda x: R.clip(x, -0.5, 0.5), None),
    "matmul_2d": ([("x", tensor((3, 4))), ("w", tensor((4, 5)))], R.matmul, None),
    "matmul_batched_bcast": ([("x", tensor((2, 3, 4))), ("w", tensor((4, 5)))], R.matmul, None),
    "matmul_batch_both": ([("x", tensor((2, 1, 3, 4))), ("w", tensor((5, 4, 2)))], R.matmul,
                          None),
    "matmul_vec": ([("x", tensor((4,))), ("w", tensor((4, 5)))], R.matmul, None),
    "matmul_sym": ([("x", tensor((N, 4))), ("w", tensor((4, 5)))], R.matmul, None),
    "linear": ([("x", tensor((3, 4))), ("w", tensor((5, 4))), ("b", tensor((5,)))],
               R.linear, None),
    "relu": ([("x", tensor((N, 4)))], R.nn.relu, None),
    "gelu": ([("x", tensor((2, 4)))], R.nn.gelu, None),
    "gelu_tanh": ([("x", tensor((2, 4)))], R.nn.gelu_tanh, None),
    "silu": ([("x", tensor((2, 4)))], R.nn.silu, None),
    "softmax": ([("x", tensor((2, 5)))], R.nn.softmax, None),
    "softmax_axis0": ([("x", tensor((3, 4)))], lambda x: R.nn.softmax(x, axis=0), None),
    "log_softmax": ([("x", tensor((2, 5)))], R.nn.log_softmax, None),
    "layer_norm": ([("x", tensor((2, 3, 4))), ("g", tensor((4,))), ("b", tensor((4,)))],
                   lambda x, g, b: R.nn.layer_norm(x, g, b, axes=-1), None),
    "rms_norm": ([("x", tensor((N, 4))), ("w", tensor((4,)))],
                 lambda x, w: R.nn.rms_norm(x, w, axes=-1), None),
    "batch_norm": ([("x", tensor((2, 3, 4, 4))), ("g", tensor((3,))), ("b", tensor((3,))),
                    ("m", tensor((3,))), ("v", tensor((3,)))],
                   lambda x, g, b, m, v: R.nn.batch_norm(x, g, b, m, v, axis=1)[0],
                   {4: np.array([0.5, 1.0, 2.0], "float32")}),
    "conv2d_nchw": ([("x", tensor((1, 3, 6, 6))), ("w", tensor((4, 3, 3, 3)))],
                    lambda x, w: R.nn.conv2d(x, w, padding=1), None),
    "conv2d_strided_groups": ([("x", tensor((1, 4, 7, 7))), ("w", tensor((6, 2, 3, 3)))],
                              lambda x, w: R.nn.conv2d(x, w, strides=2, groups=2), None),
    "conv2d_nhwc": ([("x", tensor((1, 6, 6, 3))), ("w", tensor((3, 3, 3, 4)))],
                    lambda x, w: R.nn.conv2d(x, w, padding=(1, 0), data_layout="NHWC"), None),
    "max_pool2d": ([("x", tensor((1, 2, 6, 6)))],
                   lambda x: R.nn.max_pool2d(x, pool_size=2, strides=2), None),
    "avg_pool2d_pad": ([("x", tensor((1, 2, 5, 5)))],
                       lambda x: R.nn.avg_pool2d(x, pool_size=3, strides=2, padding=1), None),
    "adaptive_avg_pool2d": ([("x", tensor((1, 2, 5, 7)))],
                            lambda x: R.nn.adaptive_avg_pool2d(x, (2, 3)), None),
    "pad_constant": ([("x", tensor((2, 3, 4)))],
                     lambda x: R.nn.pad(x, [(0, 1), (2, 0), (1, 3)], "constant", 1.5), None),
    "pad_edge": ([("x", tensor((2, 3, 4)))],
                 lambda x: R.nn.pad(x, [(1, 0), (0, 0), (3, 2)], "edge"), None),
    "pad_reflect": ([("x", tensor((2, 3, 4)))],
                    lambda x: R.nn.pad(x, [(0, 1), (2, 2), (3, 1)], "reflect"), None),
    "pad_wrap": ([("x", tensor((2, 3, 4)))],
                 lambda x: R.nn.pad(x, [(2, 1), (0, 4), (1, 0)], "wrap"), None),
    "pad_edge_sym": ([("x", tensor((N, 3)))],
                     lambda x: R.nn.pad(x, [(0, 0), (2, 1)], "edge"), None),
    "gather_elements": ([("x", tensor((3, 4))), ("i", tensor((3, 2), "int64"))],
                        lambda x, i: R.gather_elements(x, i, axis=1),
                        {1: np.array([[0, 3], [-1, 2], [1, 1]], "int64")}),
    "gather_nd": ([("x", tensor((2, 3, 4))), ("i", tensor((2, 2, 1), "int64"))],
                  lambda x, i: R.gather_nd(x, i, batch_dims=1),
                  {1: np.array([[[2], [0]], [[-1], [1]]], "int64")}),
    "scatter_elements": ([("x", tensor((3, 4))), ("i", tensor((2, 4), "int64")),
                          ("u", tensor((2, 4)))],
                         lambda x, i, u: R.scatter_elements(x, i, u, axis=0, reduction="add"),
                         {1: np.array([[0, 2, -1, 1], [0, 0, 2, 1]], "int64")}),
    "scatter_nd": ([("x", tensor((4, 3))), ("i", tensor((2, 1), "int64")), ("u", tensor((2, 3)))],
                   lambda x, i, u: R.scatter_nd(x, i, u),
                   {1: np.array([[3], [-4]], "int64")}),
    "cumsum_exclusive_reverse": ([("x", tensor((3, 5)))],
                                 lambda x: R.cumsum(x, 1, exclusive=True, reverse=True), None),
    "cumprod": ([("x", tensor((4, 3)))], lambda x: R.cumprod(x, 0), None),
    "topk": ([("x", tensor((3, 6)))], lambda x: R.topk(x, 3, axis=1), None),
    "topk_smallest_axis0": ([("x", tensor((5, 2)))],
                            lambda x: R.topk(x, 2, axis=0, largest=False, ret_type="indices"),
                            None),
    "einsum_matmul": ([("a", tensor((2, 3, 4))), ("b", tensor((2, 4, 5)))],
                      lambda a, b: R.einsum((a, b), "bij,bjk->bik"), None),
    "einsum_diag_ellipsis": ([("a", tensor((3, 3))), ("b", tensor((2, 1, 3)))],
                             lambda a, b: R.einsum((a, b), "ii,...i"), None),
    "resize2d_linear": ([("x", tensor((1, 2, 4, 5)))],
                        lambda x: R.image.resize2d(x, (7, 3)), None),
    "resize2d_cubic_exclude": ([("x", tensor((1, 2, 4, 5)))],
                               lambda x: R.image.resize2d(
                                   x, (6, 8), method="cubic", cubic_alpha=-0.5,
                                   cubic_exclude=1,
                                   coordinate_transformation_mode="align_corners"), None),
    "resize2d_nearest_scales": ([("x", tensor((1, 2, 4, 5)))],
                                lambda x: R.image.resize2d(
                                    x, (6, 7), method="nearest_neighbor",
                                    coordinate_transformation_mode="asymmetric",
                                    rounding_method="round_prefer_ceil", scales=(1.5, 1.5)),
                                None),
    **{f"grid_sample_{m}_{p}": ([("x", tensor((1, 2, 4, 5))), ("g", tensor((1, 3, 6, 2)))],
                                lambda x, g, m=m, p=p: R.image.grid_sample(
                                    x, g, m, padding_mode=p, align_corners=p == "border"),
                                {1: np.random.default_rng(7).uniform(-1.4, 1.4, (1, 3, 6, 2))
                                 .astype("float32")})
       for m in ("nearest", "bilinear", "bicubic") for p in ("zeros", "border", "reflection")},
    "roi_align_max": ([("x", tensor((2, 2, 6, 7))), ("r", tensor((3, 4))),
                       ("b", tensor((3,), "int64"))],
                      lambda x, r, b: R.vision.roi_align(x, r, b, (2, 3), 0.9, 2, mode="max"),
                      {1: np.array([[0.5, 1, 5, 4.5], [-1, 2, 8, 9], [2, 2, 2.5, 3]], "float32"),
                       2: np.array([1, 0, 1], "int64")}),
    "roi_align_adaptive": ([("x", tensor((1, 2, 6, 7))), ("r", tensor((2, 4))),
                            ("b", tensor((2,), "int64"))],
                           lambda x, r, b: R.vision.roi_align(x, r, b, (2, 2), aligned=False,
                                                              max_grid=(3, 4)),
                           {1: np.array([[0.5, 1, 5, 4.5], [1, 0, 7.5, 5]], "float32"),
                            2: np.array([0, 0], "int64")}),
    "roi_pool": ([("x", tensor((2, 2, 6, 7))), ("r", tensor((2, 5)))],
                 lambda x, r: R.vision.roi_pool(x, r, (2, 3), 0.5),
                 {1: np.array([[1, 1, 0, 9, 8], [0, 4, 6, 4.6, 6]], "float32")}),
    # Clustered boxes, corners in either order, tied scores: some boxes kept, some
    # suppressed, some below the score threshold, and zero rows after the selections.
    "all_class_nms": ([("b", tensor((2, 9, 4))), ("s", tensor((2, 3, 9))),
                       ("m", tensor((1,), "int64")), ("i", tensor((1,))), ("t", tensor((1,)))],
                      lambda b, s, m, i, t: R.vision.all_class_non_max_suppression(
                          b, s, m, i, t, max_keep=4),
                      {0: np.array([[[0, 0, 2, 2], [2, 2, 0.2, 0.1], [0, 1, 2, 3],
                                     [5, 5, 7, 6], [5.2, 5.5, 7, 6.5], [9, 0, 8, 1],
                                     [0, 0, 1, 1], [3, 3, 4, 4], [3.1, 3, 4, 4.2]]] * 2,
                                   "float32") * np.array([1, 1.5], "float32")[:, None, None],
                       1: (np.floor(np.random.default_rng(3).uniform(0, 5, (2, 3, 9))) / 5)
                       .astype("float32"),
                       2: np.array([3], "int64"), 3: np.array([0.3], "float32"),
                       4: np.array([0.1], "float32")}),
    "all_class_nms_center": ([("b", tensor((1, 6, 4))), ("s", tensor((1, 2, 6))),
                              ("m", tensor((1,), "int64")), ("i", tensor((1,))),
                              ("t", tensor((1,)))],
                             lambda b, s, m, i, t: R.vision.all_class_non_max_suppression(
                                 b, s, m, i, t, center_point_box=1),
                             {0: np.array([[[1, 1, 2, 2], [1.2, 1, 2, -2], [1.5, 1.5, 2, 2],
                                            [5, 5, 1, 1], [5, 5.1, 1, 1.2], [9, 9, 0, 1]]],
                                          "float32"),
                              1: np.random.default_rng(4).uniform(0, 1, (1, 2, 6))
                              .astype("float32"),
                              2: np.array([9], "int64"), 3: np.array([0.4], "float32"),
                              4: np.array([-np.inf], "float32")}),
    "max_pool2d_with_indices": ([("x", tensor((2, 3, 7, 6)))],
                                lambda x: R.nn.max_pool2d_with_indices(
                                    x, (3, 2), (2, 2), (1, 0, 1, 1), (1, 2), ceil_mode=True),
                                None),
    "reshape": ([("x", tensor((2, 3, 4)))], lambda x: R.reshape(x, (6, -1)), None),
    "reshape_sym": ([("x", tensor((N, 6)))], lambda x: R.reshape(x, (N, 2, 3)), None),
    "permute_dims": ([("x", tensor((2, 3, 4)))], lambda x: R.permute_dims(x, [2, 0, 1]), None),
    "transpose_default": ([("x", tensor((2, 3)))], R.permute_dims, None),
    "flatten": ([("x", tensor((2, 3, 2)))], R.flatten, None),
    "flatten_sym": ([("x", tensor((N, 3)))], R.flatten, None),
    "reshape_sym_merge": ([("x", tensor((N, 2, 3)))], lambda x: R.reshape(x, (-1, 3)), None),
    "expand_dims": ([("x", tensor((2, 3)))], lambda x: R.expand_dims(x, [0, 3]), None),
    "squeeze": ([("x", tensor((2, 1, 3, 1)))], lambda x: R.squeeze(x, [1]), None),
    "concat": ([("x", tensor((2, 3))), ("y", tensor((2, 2)))],
               lambda x, y: R.concat([x, y], axis=1), None),
    "split_sections": ([("x", tensor((6, 2)))], lambda x: R.split(x, 3)[1], None),
    "split_indices": ([("x", tensor((2, 7)))], lambda x: R.split(x, [2, 5], axis=1)[2], None),
    "strided_slice": ([("x", tensor((5, 6)))],
                      lambda x: R.strided_slice(x, [0, 1], [1, 5], [4, 0], [1, -2]), None),
    "take": ([("x", tensor((5, 3))), ("i", tensor((4,), "int64"))],
             lambda x, i: R.take(x, i, axis=0), {1: np.array([4, 0, 2, 2], "int64")}),
    "broadcast_to": ([("x", tensor((3, 1)))], lambda x: R.broadcast_to(x, (2, 3, 4)), None),
    "astype": ([("x", tensor((2, 3)))], lambda x: R.astype(x, "int32"), None),
    "sum": ([("x", tensor((2, 3, 4)))], lambda x: R.sum(x, axis=[0, 2]), None),
    "mean_keepdims": ([("x", tensor((2, 3, 4)))], lambda x: R.mean(x, axis=1, keepdims=True),
                      None),
    "max_all": ([("x", tensor((3, 4)))], R.max, None),
    "min_axis": ([("x", tensor((3, 4)))], lambda x: R.min(x, axis=-1), None),
    "argmax": ([("x", tensor((3, 4)))], lambda x: R.argmax(x, axis=1), None),
    "where": ([("c", tensor((2, 3), "bool")), ("x", tensor((2, 3))), ("y", tensor((3,)))],
              R.where, None),
    "attention": ([("q", tensor((1, 3, 2, 4))), ("k", tensor((1, 5, 2, 4))),
                   ("v", tensor((1, 5, 2, 3)))], R.nn.attention, None),
    "attention_causal_gqa": ([("q", tensor((2, 4, 4, 4))), ("k", tensor((2, 4, 2, 4))),
                              ("v", tensor((2, 4, 2, 4)))],
                             lambda q, k, v: R.nn.attention(q, k, v, scale=0.3,
                                                            causal_mask="TopLeft"), None),
    "attention_bottom_right": ([("q", tensor((1, 2, 1, 4))), ("k", tensor((1, 5, 1, 4))),
                                ("v", tensor((1, 5, 1, 4)))],
                               lambda q, k, v: R.nn.attention(q, k, v,
                                                              causal_mask="BottomRight"), None),
}


def case_module(name: str) -> tuple[Any, list]:
    params, body, overrides = OP_CASES[name]
    mod = one_op_module(params, body)
    args = inputs_for(mod, {"n": 3})
    for i, arr in (overrides or {}).items():
        args[i] = arr
    return mod, args
