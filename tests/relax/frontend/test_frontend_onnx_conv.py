"""Convolutions, transposed convolutions, pools and padding over 1, 2 and 3 spatial dims
against onnxruntime, over their attributes; one graph (one compile) per family."""
from __future__ import annotations

import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402
from onnx_graph import F32, Graph, check, rand  # noqa: E402

pytestmark = pytest.mark.slow


def _inputs(*shapes):
    return [helper.make_tensor_value_info(f"x{len(s) - 2}", F32, list(s)) for s in shapes]


def test_conv_and_pool_3d():
    g = Graph()
    x = "x3"
    w = g.const(rand(6, 4, 3, 3, 2, seed=1))
    g("Conv", x, w, g.const(rand(6, seed=2)), pads=[1, 1, 0, 1, 0, 1])
    g("Conv", x, w, strides=[2, 1, 2], dilations=[1, 2, 1])
    g("Conv", x, g.const(rand(4, 2, 2, 3, 3, seed=3)), group=2, auto_pad="SAME_UPPER")
    g("Conv", x, g.const(rand(8, 1, 3, 1, 3, seed=4)), group=4, pads=[2, 0, 1, 1, 0, 2],
      strides=[1, 2, 1])
    g("MaxPool", x, kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0])
    g("MaxPool", x, kernel_shape=[2, 3, 2], strides=[2, 2, 2], dilations=[2, 1, 2],
      ceil_mode=1)
    g("AveragePool", x, kernel_shape=[3, 3, 3], pads=[1, 1, 1, 1, 1, 1], count_include_pad=1,
      strides=[2, 2, 2])
    g("AveragePool", x, kernel_shape=[2, 3, 2], strides=[2, 2, 2], ceil_mode=1,
      pads=[1, 0, 1, 0, 1, 1])
    g("AveragePool", x, kernel_shape=[3, 3, 3], auto_pad="SAME_LOWER")
    model = g.model(_inputs((1, 4, 5, 6, 5)), opset=19)
    check(model, {"x3": rand(1, 4, 5, 6, 5, seed=9)})


def test_conv_transpose_1d_2d_3d():
    g = Graph()
    w1 = g.const(rand(4, 3, 3, seed=1))
    g("ConvTranspose", "x1", w1, g.const(rand(3, seed=2)))
    g("ConvTranspose", "x1", w1, strides=[2], pads=[1, 0], output_padding=[1])
    g("ConvTranspose", "x1", g.const(rand(4, 2, 2, seed=3)), group=2, dilations=[2],
      strides=[3])
    w2 = g.const(rand(4, 2, 3, 3, seed=4))
    g("ConvTranspose", "x2", w2, strides=[2, 1], pads=[0, 1, 2, 0], dilations=[1, 2])
    g("ConvTranspose", "x2", w2, strides=[2, 2], output_padding=[1, 0], group=2)
    g("ConvTranspose", "x2", w2, strides=[2, 2], output_shape=[15, 13])
    g("ConvTranspose", "x2", w2, strides=[2, 3], auto_pad="SAME_UPPER")
    g("ConvTranspose", "x2", w2, strides=[2, 2], auto_pad="SAME_LOWER", group=2)
    g("ConvTranspose", "x3", g.const(rand(4, 2, 2, 3, 2, seed=5)), g.const(rand(2, seed=6)),
      strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 0])
    model = g.model(_inputs((1, 4, 7), (1, 4, 7, 6), (1, 4, 3, 4, 3)), opset=19)
    check(model, {"x1": rand(1, 4, 7, seed=7), "x2": rand(1, 4, 7, 6, seed=8),
                  "x3": rand(1, 4, 3, 4, 3, seed=9)})


def test_lp_pools_max_pool_indices_and_max_unpool():
    g = Graph()
    g("LpPool", "x2", kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], p=2)
    g("LpPool", "x2", kernel_shape=[2, 2], strides=[2, 2], p=1, ceil_mode=1)
    g("LpPool", "x2", kernel_shape=[3, 3], p=3, auto_pad="SAME_UPPER")
    g("LpPool", "x1", kernel_shape=[3], strides=[2], p=2)
    g("LpPool", "x3", kernel_shape=[2, 2, 2], p=2)
    g("GlobalLpPool", "x2")
    g("GlobalLpPool", "x3", p=1)
    pooled, where = g("MaxPool", "x2", kernel_shape=[2, 2], strides=[2, 2], outputs=2)
    g("MaxUnpool", pooled, where, g.const([1, 4, 7, 6], "int64"), kernel_shape=[2, 2],
      strides=[2, 2])
    square = g("Slice", "x2", g.const([0], "int64"), g.const([6], "int64"),
               g.const([2], "int64"), out=False)                 # 6 x 6: no remainder
    pooled, where = g("MaxPool", square, kernel_shape=[2, 2], strides=[2, 2], outputs=2,
                      out=False)
    g("MaxUnpool", pooled, where, kernel_shape=[2, 2], strides=[2, 2])
    # Overlapping windows (a scatter) and 1-d windows.
    pooled, where = g("MaxPool", "x2", kernel_shape=[3, 3], strides=[2, 2], outputs=2,
                      out=False)
    g("MaxUnpool", pooled, where, g.const([1, 4, 7, 6], "int64"), kernel_shape=[3, 3],
      strides=[2, 2])
    pooled, where = g("MaxPool", "x1", kernel_shape=[2], strides=[2], outputs=2, out=False)
    g("MaxUnpool", pooled, where, g.const([1, 4, 7], "int64"), kernel_shape=[2], strides=[2])
    g("MaxPool", "x2", kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1],
      dilations=[1, 2], ceil_mode=1, outputs=2)
    g("MaxPool", "x2", kernel_shape=[2, 3], storage_order=1, outputs=2)
    g("MaxPool", "x1", kernel_shape=[3], strides=[2], pads=[1, 1], outputs=2)
    model = g.model(_inputs((1, 4, 7), (1, 4, 7, 6), (1, 4, 3, 4, 3)), opset=18)
    check(model, {"x1": rand(1, 4, 7, seed=7), "x2": rand(1, 4, 7, 6, seed=8),
                  "x3": rand(1, 4, 3, 4, 3, seed=9)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(mode):
    g = Graph()
    x = "x2"
    g("Pad", x, g.const([0, 1, 2, 1, 0, 0, 1, 2], "int64"), mode=mode)
    g("Pad", x, g.const([1, 2, 0, 3], "int64"), g.const(0.5, "float32"), g.const([-1, 2],
                                                                                  "int64"),
      mode=mode)
    g("Pad", x, g.const([0, 0, -1, 2, 0, 0, 2, -2], "int64"), mode=mode)
    model = g.model(_inputs((2, 3, 4, 5)), opset=19)
    check(model, {"x2": rand(2, 3, 4, 5, seed=3)})
