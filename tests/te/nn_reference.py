"""Plain numpy references for the nn operators (float64 accumulation, explicit loops)."""
from __future__ import annotations

import numpy as np


def conv2d_nchw(x, w, stride, pad, dilation, groups=1):
    """x: NCHW, w: OIHW (I = C / groups), pad: (top, left, bottom, right)."""
    sh, sw = stride
    dh, dw = dilation
    t, l, b, r = pad
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (t, b), (l, r)))
    n, c, h, wd = xp.shape
    o, cg, kh, kw = w.shape
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (wd - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        ocs, ics = slice(g * og, (g + 1) * og), slice(g * cg, (g + 1) * cg)
        for ky in range(kh):
            for kx in range(kw):
                patch = xp[:, ics, ky * dh: ky * dh + (oh - 1) * sh + 1: sh,
                           kx * dw: kx * dw + (ow - 1) * sw + 1: sw]
                out[:, ocs] += np.einsum("nchw,oc->nohw", patch, w[ocs, :, ky, kx])
    return out


def conv2d_nhwc(x, w, stride, pad, dilation, groups=1):
    """x: NHWC, w: HWIO."""
    y = conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), stride, pad, dilation,
                    groups)
    return y.transpose(0, 2, 3, 1)


def depthwise_nchw(x, w, stride, pad, dilation):
    """w: (C, multiplier, KH, KW)."""
    c, m, kh, kw = w.shape
    return conv2d_nchw(x, w.reshape(c * m, 1, kh, kw), stride, pad, dilation, groups=c)


def depthwise_nhwc(x, w, stride, pad, dilation):
    """w: (KH, KW, C, multiplier)."""
    y = depthwise_nchw(x.transpose(0, 3, 1, 2), w.transpose(2, 3, 0, 1), stride, pad, dilation)
    return y.transpose(0, 2, 3, 1)


def pool2d_nchw(x, kernel, stride, dilation, pad, pool_type, ceil_mode=False,
                count_include_pad=True):
    """PyTorch's pooling rules, written out element by element."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    t, l, b, r = pad

    def out_size(size, lo, hi, k, s, d):
        span = size + lo + hi - ((k - 1) * d + 1)
        o = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= size + lo:
            o -= 1
        return o
    oh, ow = out_size(h, t, b, kh, sh, dh), out_size(w, l, r, kw, sw, dw)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = [i * sh - t + ky * dh for ky in range(kh)]
            cols = [j * sw - l + kx * dw for kx in range(kw)]
            vr = [y for y in rows if 0 <= y < h]
            vc = [z for z in cols if 0 <= z < w]
            window = x[:, :, vr][:, :, :, vc].astype("float64")
            if pool_type == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                if count_include_pad:
                    cnt = (sum(1 for y in rows if y < h + b) * sum(1 for z in cols if z < w + r))
                else:
                    cnt = len(vr) * len(vc)
                out[:, :, i, j] = window.sum(axis=(2, 3)) / cnt
    return out


def adaptive_pool_nchw(x, out_size, pool_type):
    n, c, h, w = x.shape
    oh, ow = out_size
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        h0, h1 = i * h // oh, -(-(i + 1) * h // oh)
        for j in range(ow):
            w0, w1 = j * w // ow, -(-(j + 1) * w // ow)
            win = x[:, :, h0:h1, w0:w1].astype("float64")
            out[:, :, i, j] = win.max(axis=(2, 3)) if pool_type == "max" else win.mean(axis=(2, 3))
    return out


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def layer_norm(x, gamma, beta, axes, eps):
    x = x.astype("float64")
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y
