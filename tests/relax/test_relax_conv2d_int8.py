"""The blocked uint8 x int8 convolution (``relax.nn.conv2d_nchwc_int8``) and its default
schedule (``dlight.cpu.Conv2dInt8``): exact against a plain numpy convolution of the unpacked
operands, on the VNNI dot product for AVX-512 VNNI targets and on its plain-vector equivalent
elsewhere; code built for targets this host lacks is checked by its assembly, run where the
host has the features."""
from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench import relax, te
from workbench.dlight.cpu import Conv2dInt8
from workbench.relax import op as R
from workbench.target import Target
from workbench.topi.nn.conv2d_nchwc_int8 import (
    conv2d_nchwc_int8, conv2d_nchwc_int8_numpy, int8_weight_sums, pack_int8_weight,
)


def _plain_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int, pad_value: int
                ) -> np.ndarray:
    """int64 NCHW convolution of plain operands, padding with ``pad_value``."""
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)),
                constant_values=pad_value)
    o, _, kh, kw = w.shape
    oh = (xp.shape[2] - kh) // stride + 1
    ow = (xp.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], o, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, i, j].astype(np.int64))
    return out


def _blocked(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // 16, 16, h, w).transpose(0, 1, 3, 4, 2))


@pytest.mark.parametrize("c, o, hw, k, stride, pad", [
    (32, 48, 9, 3, 1, 1), (16, 16, 8, 1, 1, 0), (64, 32, 14, 3, 2, 1), (16, 64, 7, 1, 2, 0),
])
def test_int8_conv_matches_a_plain_convolution(c, o, hw, k, stride, pad):
    rng = np.random.default_rng(c + o + hw)
    x = rng.integers(0, 256, (1, c, hw, hw)).astype(np.uint8)
    w = rng.integers(-128, 128, (o, c, k, k)).astype(np.int8)
    pad_value = 131
    want = _plain_conv(x, w, stride, pad, pad_value)
    wp = pack_int8_weight(w)
    xb = _blocked(x)
    np.testing.assert_array_equal(conv2d_nchwc_int8_numpy(xb, wp, (stride,) * 2, (pad,) * 4,
                                                          (1, 1), pad_value),
                                  _blocked(want).astype(np.int32))
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorStructInfo(xb.shape, "uint8"))
    with bb.function("main", [xv]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.conv2d_nchwc_int8(xv, relax.const(wp), stride, pad, 1,
                                                        pad_value=pad_value))
        bb.emit_func_output(out)
    exe = relax.build(bb.get(), "llvm")
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(xb)).numpy()
    np.testing.assert_array_equal(got, _blocked(want).astype(np.int32))


def test_weight_packing_and_sums():
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, (20, 24, 3, 3)).astype(np.int8)
    p = pack_int8_weight(w)
    assert p.shape == (2, 2, 3, 3, 4, 16, 4)
    # one 64-byte tile: output channels 16..31 x input channels 4..7 of block 1, at (1, 2)
    tile = p[1, 1, 1, 2, 1]
    np.testing.assert_array_equal(tile[:4], w[16:20, 16 + 4:16 + 8, 1, 2])
    assert not tile[4:].any()                   # padding output channels
    np.testing.assert_array_equal(int8_weight_sums(w), w.astype(np.int64).sum((1, 2, 3)))
    with pytest.raises(ValueError, match="int8 OIHW"):
        pack_int8_weight(w.astype(np.int16))


def _scheduled(target: str):  # noqa: ANN202
    x = te.placeholder((1, 2, 10, 12, 16), "uint8", name="x")
    w = te.placeholder((3, 2, 3, 3, 4, 16, 4), "int8", name="w")
    y = conv2d_nchwc_int8(x, w, 1, 1, 1, 9)
    f = te.create_prim_func([x, w, y])
    sch = Conv2dInt8().apply(f, Target(target), False)
    assert sch is not None
    return sch


@pytest.mark.parametrize("mcpu, pattern, wide", [("sapphirerapids", r"vpdpbusd\s+%zmm", True),
                                                 ("znver4", r"vpdpbusd\s+%zmm", True),
                                                 ("haswell", r"vpmaddwd\s+.*%ymm", False)])
def test_default_schedule_uses_the_dot_product_of_the_target(mcpu, pattern, wide):
    target = Target(f"llvm -mcpu={mcpu} -num-cores=2")
    sch = _scheduled(str(target))
    text = str(sch.mod["main"])
    assert ("vpdpbusd" in text) == wide
    lib = wb.build(sch.mod, target=target)
    asm = lib.get_source("asm")
    assert re.search(pattern, asm), f"{mcpu}: no {pattern}"
    if not wide:
        assert "zmm" not in asm
    if not target.runs_on() or target.has_feature("amx-tile"):
        return                                  # built and checked; this host cannot run it
    rng = np.random.default_rng(1)
    xb = rng.integers(0, 256, (1, 2, 10, 12, 16)).astype(np.uint8)
    wp = rng.integers(-128, 128, (3, 2, 3, 3, 4, 16, 4)).astype(np.int8)
    out = wb.nd.empty((1, 3, 10, 12, 16), "int32")
    lib(wb.nd.array(xb), wb.nd.array(wp), out)
    np.testing.assert_array_equal(out.numpy(), conv2d_nchwc_int8_numpy(
        xb, wp, (1, 1), (1, 1, 1, 1), (1, 1), 9))


def test_op_checks_its_operands():
    x = relax.Var("x", relax.TensorStructInfo((1, 2, 8, 8, 16), "int8"))
    w = relax.const(np.zeros((1, 2, 3, 3, 4, 16, 4), np.int8))
    bb = relax.BlockBuilder()
    with pytest.raises(Exception, match="uint8 data"):
        with bb.function("main", [x]):
            bb.emit_func_output(bb.emit(R.nn.conv2d_nchwc_int8(x, w, 1, 1)))
    with pytest.raises(ValueError, match="pad_value"):
        R.nn.conv2d_nchwc_int8(x, w, pad_value=300)
