"""PyTorch converters: convolution, normalisation, pooling, linear algebra, embedding,
attention, dropout."""
from __future__ import annotations

import operator
from typing import Any, Sequence

from workbench.relax import op as R
from workbench.relax.expr import Expr, TupleGetItem
from workbench.relax.frontend.torch._registry import Unavailable, converter
from workbench.relax.frontend.windows import conv_nd, conv_transpose_nd, pool_nd
from workbench.relax.frontend.torch._util import (
    const, ndim, norm_dims, operand, shape_of, sinfo,
)


def _pair(v: Any, n: int = 2) -> list[int]:
    v = [int(v)] if isinstance(v, int) else [int(x) for x in v]
    return v * n if len(v) == 1 else v


# ---- convolution ----------------------------------------------------------------------------------

_CONV_RANK = {"conv1d.default": 1, "conv2d.default": 2, "conv3d.default": 3,
              "conv_transpose1d.default": 1, "conv_transpose2d.input": 2,
              "conv_transpose3d.input": 3}


def _conv_check(imp: Any, node: Any) -> str | None:
    args = list(node.args) + [None] * 9
    name = node.target.__name__
    rank = _CONV_RANK.get(name) or (len(args[3]) if args[3] is not None else 2)
    if rank not in (1, 2, 3):
        return f"{rank}-d convolution (1-, 2- and 3-d are supported)"
    padding = node.kwargs.get("padding", args[4])
    if isinstance(padding, str) and padding not in ("valid",):
        return f"padding={padding!r}"
    return None


def _conv(imp: Any, x: Expr, w: Expr, bias: Expr | None, stride: Any, padding: Any,
          dilation: Any, groups: int, transposed: bool = False,
          output_padding: Any = 0) -> Expr:
    """An N-d (transposed) convolution on the shared decompositions (relax.frontend.windows);
    PyTorch's padding is symmetric per dim."""
    r = ndim(x) - 2
    if padding == "valid":
        padding = 0
    pads = _pair(padding, r)
    args = (_pair(stride, r), pads + pads, _pair(dilation, r), int(groups))
    if transposed:
        out = conv_transpose_nd(imp.emit, x, w, *args, _pair(output_padding, r))
    else:
        out = conv_nd(imp.emit, x, w, *args)
    if bias is not None:
        out = imp.emit(R.add(out, imp.emit(R.reshape(bias, [1, -1] + [1] * r))))
    return out


@converter("convolution.default", check=_conv_check)
def _convolution(imp: Any, node: Any, x: Expr, w: Expr, bias: Any, stride: Any, padding: Any,
                 dilation: Any, transposed: bool, output_padding: Any, groups: int) -> Expr:
    return _conv(imp, x, w, bias, stride, padding, dilation, groups, bool(transposed),
                 output_padding)


@converter("conv2d.default", "conv1d.default", "conv3d.default", check=_conv_check)
def _conv2d(imp: Any, node: Any, x: Expr, w: Expr, bias: Any = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Expr:
    return _conv(imp, x, w, bias, stride, padding, dilation, groups)


@converter("conv_transpose1d.default", "conv_transpose2d.input", "conv_transpose3d.input",
           check=_conv_check)
def _conv_transpose(imp: Any, node: Any, x: Expr, w: Expr, bias: Any = None, stride: Any = 1,
                    padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                    dilation: Any = 1) -> Expr:
    return _conv(imp, x, w, bias, stride, padding, dilation, groups, True, output_padding)


# ---- normalisation --------------------------------------------------------------------------------

def _batch_norm(imp: Any, x: Expr, weight: Any, bias: Any, mean: Expr, var: Expr,
                eps: float) -> Expr:
    dtype = sinfo(x).dtype
    channels = sinfo(mean).values
    gamma = weight if weight is not None else imp.emit(R.broadcast_to(const(1, dtype), channels))
    beta = bias if bias is not None else imp.emit(R.broadcast_to(const(0, dtype), channels))
    out = imp.emit(R.nn.batch_norm(x, gamma, beta, mean, var, axis=1, epsilon=float(eps)))
    return imp.emit(out[0])


def _batch_stats_norm(imp: Any, x: Expr, weight: Any, bias: Any, eps: float) -> Expr:
    """Training-mode batch norm's forward: normalised by the batch's own statistics (over N
    and the spatial dims, biased variance); the running statistics' update is not computed."""
    axes = [0] + list(range(2, ndim(x)))
    mean = imp.emit(R.mean(x, axes))
    centred = imp.emit(R.subtract(x, imp.emit(R.mean(x, axes, keepdims=True))))
    var = imp.emit(R.mean(imp.emit(R.multiply(centred, centred)), axes))
    return _batch_norm(imp, x, weight, bias, mean, var, eps)


@converter("_native_batch_norm_legit.default", "_native_batch_norm_legit.no_stats")
def _bn_batch_stats(imp: Any, node: Any, x: Expr, weight: Any, bias: Any, *rest: Any) -> tuple:
    return (_batch_stats_norm(imp, x, weight, bias, float(rest[-1])),
            Unavailable("batch norm's saved mean"), Unavailable("batch norm's saved rstd"))


@converter("_native_batch_norm_legit_no_training.default")
def _bn_no_training(imp: Any, node: Any, x: Expr, weight: Any, bias: Any, mean: Expr,
                    var: Expr, momentum: float, eps: float) -> tuple:
    return (_batch_norm(imp, x, weight, bias, mean, var, eps),
            Unavailable("batch norm's saved mean"), Unavailable("batch norm's saved rstd"))


def _bn_check(imp: Any, node: Any) -> str | None:
    training = node.args[5] if len(node.args) > 5 else node.kwargs.get("training", False)
    if not training and node.args[3] is None:
        return "batch norm without running statistics"
    return None


@converter("batch_norm.default", check=_bn_check)
def _batch_norm_default(imp: Any, node: Any, x: Expr, weight: Any, bias: Any, mean: Any,
                        var: Any, training: bool, momentum: float, eps: float,
                        cudnn_enabled: bool = True) -> Expr:
    if training:
        return _batch_stats_norm(imp, x, weight, bias, eps)
    return _batch_norm(imp, x, weight, bias, mean, var, eps)


def _layer_norm(imp: Any, x: Expr, normalized_shape: Sequence[int], weight: Any, bias: Any,
                eps: float) -> Expr:
    dtype = sinfo(x).dtype
    k = len(normalized_shape)
    axes = list(range(ndim(x) - k, ndim(x)))
    shape = [imp.prim(d) for d in normalized_shape]
    gamma = weight if weight is not None else const(1, dtype)
    beta = bias if bias is not None else const(0, dtype)
    if weight is None:
        gamma = imp.emit(R.broadcast_to(gamma, shape))
    if bias is None:
        beta = imp.emit(R.broadcast_to(beta, shape))
    return imp.emit(R.nn.layer_norm(x, gamma, beta, axes, float(eps)))


@converter("native_layer_norm.default")
def _native_layer_norm(imp: Any, node: Any, x: Expr, normalized_shape: Any, weight: Any,
                       bias: Any, eps: float) -> tuple:
    return (_layer_norm(imp, x, normalized_shape, weight, bias, eps),
            Unavailable("layer norm's mean"), Unavailable("layer norm's rstd"))


@converter("layer_norm.default")
def _layer_norm_default(imp: Any, node: Any, x: Expr, normalized_shape: Any,
                        weight: Any = None, bias: Any = None, eps: float = 1e-5,
                        cudnn_enable: bool = True) -> Expr:
    return _layer_norm(imp, x, normalized_shape, weight, bias, eps)


def _group_norm(imp: Any, x: Expr, groups: int, weight: Any, bias: Any, eps: float) -> Expr:
    dims = shape_of(x)
    dtype = sinfo(x).dtype
    grouped = imp.emit(R.reshape(x, [dims[0], int(groups), -1]))
    mean = imp.emit(R.mean(grouped, [2], keepdims=True))
    centred = imp.emit(R.subtract(grouped, mean))
    var = imp.emit(R.mean(imp.emit(R.multiply(centred, centred)), [2], keepdims=True))
    normed = imp.emit(R.multiply(centred, imp.emit(R.rsqrt(imp.emit(
        R.add(var, const(float(eps), dtype)))))))
    out = imp.emit(R.reshape(normed, list(dims)))
    per_channel = [1, -1] + [1] * (len(dims) - 2)
    if weight is not None:
        out = imp.emit(R.multiply(out, imp.emit(R.reshape(weight, per_channel))))
    if bias is not None:
        out = imp.emit(R.add(out, imp.emit(R.reshape(bias, per_channel))))
    return out


@converter("native_group_norm.default")
def _native_group_norm(imp: Any, node: Any, x: Expr, weight: Any, bias: Any, n: Any, c: Any,
                       hw: Any, groups: int, eps: float) -> tuple:
    return (_group_norm(imp, x, groups, weight, bias, eps),
            Unavailable("group norm's mean"), Unavailable("group norm's rstd"))


@converter("group_norm.default")
def _group_norm_default(imp: Any, node: Any, x: Expr, groups: int, weight: Any = None,
                        bias: Any = None, eps: float = 1e-5, cudnn_enabled: bool = True) -> Expr:
    return _group_norm(imp, x, groups, weight, bias, eps)


# ---- pooling ---------------------------------------------------------------------------------------

def _max_pool(imp: Any, x: Expr, kernel: Any, stride: Any, padding: Any, dilation: Any,
              ceil_mode: bool) -> Expr:
    kernel = _pair(kernel)
    stride = _pair(stride) if stride else kernel
    return R.nn.max_pool2d(x, kernel, stride, _pair(padding), _pair(dilation), bool(ceil_mode))


@converter("max_pool2d_with_indices.default")
def _max_pool2d_with_indices(imp: Any, node: Any, x: Expr, kernel: Any, stride: Any = (),
                             padding: Any = 0, dilation: Any = 1,
                             ceil_mode: bool = False) -> tuple:
    """The maxima and PyTorch's indices: the flat position within each (n, c) plane. The
    indices are computed only when the program reads them (``nn.MaxPool2d`` exports this op
    and reads only the maxima): a plain max pool stays one the blocked layout takes."""
    if not any(getattr(u, "target", None) is operator.getitem and u.args[1] == 1
               for u in node.users):
        out = imp.emit(_max_pool(imp, x, kernel, stride, padding, dilation, ceil_mode))
        return (out, Unavailable("max pooling's indices (the program does not read them)"))
    kernel = _pair(kernel)
    stride = _pair(stride) if stride else kernel
    both = imp.emit(R.nn.max_pool2d_with_indices(x, kernel, stride, _pair(padding),
                                                 _pair(dilation), bool(ceil_mode)))
    values, flat = imp.emit(TupleGetItem(both, 0)), imp.emit(TupleGetItem(both, 1))
    h, w = shape_of(x)[2:]
    plane = const(int(h.value) * int(w.value), "int64")
    return (values, imp.emit(R.floor_mod(flat, plane)))


@converter("max_pool2d.default")
def _max_pool2d(imp: Any, node: Any, x: Expr, kernel: Any, stride: Any = (), padding: Any = 0,
                dilation: Any = 1, ceil_mode: bool = False) -> Expr:
    return _max_pool(imp, x, kernel, stride, padding, dilation, ceil_mode)


def _avg_check(imp: Any, node: Any) -> str | None:
    args = list(node.args) + [None] * 7
    if node.kwargs.get("divisor_override", args[6]) is not None:
        return "avg_pool2d with divisor_override"
    return None


@converter("avg_pool2d.default", check=_avg_check)
def _avg_pool2d(imp: Any, node: Any, x: Expr, kernel: Any, stride: Any = (), padding: Any = 0,
                ceil_mode: bool = False, count_include_pad: bool = True,
                divisor_override: Any = None) -> Expr:
    kernel = _pair(kernel)
    stride = _pair(stride) if stride else kernel
    return R.nn.avg_pool2d(x, kernel, stride, _pair(padding), (1, 1), bool(ceil_mode),
                           bool(count_include_pad))


@converter("adaptive_avg_pool2d.default", "_adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(imp: Any, node: Any, x: Expr, output_size: Any) -> Expr:
    size = _pair(output_size)
    if size == [1, 1]:  # the common global pool: a mean, which fuses like a reduction
        return R.mean(x, [2, 3], keepdims=True)
    return R.nn.adaptive_avg_pool2d(x, size)


def _window_nd(imp: Any, kind: str, x: Expr, kernel: Any, stride: Any, padding: Any,
               dilation: Any, ceil_mode: bool, count_include_pad: bool = True) -> Expr:
    """A 1-d or 3-d pool on the shared decompositions (relax.frontend.windows)."""
    r = ndim(x) - 2
    kernel = _pair(kernel, r)
    stride = _pair(stride, r) if stride else kernel
    pads = _pair(padding, r)
    return pool_nd(imp.emit, kind, x, kernel, stride, pads + pads, _pair(dilation, r),
                   bool(ceil_mode), bool(count_include_pad))


@converter("max_pool1d.default", "max_pool3d.default")
def _max_pool_nd(imp: Any, node: Any, x: Expr, kernel: Any, stride: Any = (), padding: Any = 0,
                 dilation: Any = 1, ceil_mode: bool = False) -> Expr:
    return _window_nd(imp, "max", x, kernel, stride, padding, dilation, ceil_mode)


@converter("max_pool3d_with_indices.default")
def _max_pool3d_with_indices(imp: Any, node: Any, x: Expr, kernel: Any, stride: Any = (),
                             padding: Any = 0, dilation: Any = 1,
                             ceil_mode: bool = False) -> tuple:
    return (_window_nd(imp, "max", x, kernel, stride, padding, dilation, ceil_mode),
            Unavailable("3-d max pooling's indices"))


@converter("avg_pool1d.default", "avg_pool3d.default", check=_avg_check)
def _avg_pool_nd(imp: Any, node: Any, x: Expr, kernel: Any, stride: Any = (), padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: Any = None) -> Expr:
    return _window_nd(imp, "avg", x, kernel, stride, padding, 1, ceil_mode, count_include_pad)


@converter("adaptive_avg_pool3d.default", "_adaptive_avg_pool3d.default",
           "adaptive_avg_pool1d.default")
def _adaptive_avg_pool_nd(imp: Any, node: Any, x: Expr, output_size: Any) -> Expr:
    """Global (output 1) or evenly dividing bins: a mean, or an average pool of stride and
    window ``in / out``."""
    r = ndim(x) - 2
    size = _pair(output_size, r)
    dims = [int(d.value) for d in shape_of(x)[2:]]
    if size == [1] * r:
        return R.mean(x, list(range(2, 2 + r)), keepdims=True)
    if any(d % s for d, s in zip(dims, size)):
        raise NotImplementedError(f"adaptive average pooling of {dims} to {size} (bins of "
                                  "unequal size)")
    kernel = [d // s for d, s in zip(dims, size)]
    return _window_nd(imp, "avg", x, kernel, kernel, 0, 1, False)


# ---- linear algebra --------------------------------------------------------------------------------

@converter("mm.default", "bmm.default", "matmul.default")
def _matmul(imp: Any, node: Any, a: Expr, b: Expr) -> Expr:
    dtype = imp.out_dtype(node)
    return R.matmul(operand(imp, a, dtype), operand(imp, b, dtype))


@converter("addmm.default")
def _addmm(imp: Any, node: Any, bias: Expr, a: Expr, b: Expr, beta: Any = 1,
           alpha: Any = 1) -> Expr:
    dtype = imp.out_dtype(node)
    out = imp.emit(R.matmul(a, b))
    if alpha != 1:
        out = imp.emit(R.multiply(out, const(alpha, dtype)))
    if beta == 0:
        return out
    if beta != 1:
        bias = imp.emit(R.multiply(operand(imp, bias, dtype), const(beta, dtype)))
    return R.add(out, operand(imp, bias, dtype))


@converter("baddbmm.default")
def _baddbmm(imp: Any, node: Any, bias: Expr, a: Expr, b: Expr, beta: Any = 1,
             alpha: Any = 1) -> Expr:
    return _addmm(imp, node, bias, a, b, beta, alpha)


@converter("linear.default")
def _linear(imp: Any, node: Any, x: Expr, w: Expr, bias: Any = None) -> Expr:
    wt = imp.emit(R.permute_dims(w, [1, 0]))
    out = R.matmul(x, wt)
    return R.add(imp.emit(out), bias) if bias is not None else out


@converter("t.default", "numpy_T.default")
def _t(imp: Any, node: Any, x: Expr) -> Expr:
    return R.permute_dims(x, None) if ndim(x) == 2 else x


# ---- embedding, dropout ----------------------------------------------------------------------------

@converter("embedding.default")
def _embedding(imp: Any, node: Any, weight: Expr, indices: Expr, padding_idx: int = -1,
               scale_grad_by_freq: bool = False, sparse: bool = False) -> Expr:
    return R.take(weight, indices, axis=0)


@converter("dropout.default", "dropout_.default", "feature_dropout.default",
           "alpha_dropout.default")
def _dropout(imp: Any, node: Any, x: Expr, *args: Any, **kwargs: Any) -> Expr:
    return x  # inference: the identity


@converter("native_dropout.default")
def _native_dropout(imp: Any, node: Any, x: Expr, p: float, train: Any) -> tuple:
    return (x, Unavailable("dropout's mask"))


# ---- attention -------------------------------------------------------------------------------------

def _sdpa_check(imp: Any, node: Any) -> str | None:
    args = list(node.args) + [None] * 7
    p = node.kwargs.get("dropout_p", args[4])
    if p:
        return f"attention dropout (dropout_p={p})"
    return None


@converter("scaled_dot_product_attention.default", check=_sdpa_check)
def _sdpa(imp: Any, node: Any, q: Expr, k: Expr, v: Expr, attn_mask: Any = None,
          dropout_p: float = 0.0, is_causal: bool = False, scale: Any = None,
          enable_gqa: bool = False) -> Expr:
    """PyTorch's (..., heads, seq, dim) attention through Relax's BSNH ``nn.attention``.
    ``enable_gqa``: key/value heads shared by groups of query heads, as the op does (query
    head ``n`` reads kv head ``n // (N / N_kv)``, PyTorch's ``repeat_interleave``)."""
    rank = ndim(q)
    if rank == 3:
        q, k, v = (imp.emit(R.expand_dims(t, 0)) for t in (q, k, v))
    bsnh = [0, 2, 1, 3]
    q, k, v = (imp.emit(R.permute_dims(t, bsnh)) for t in (q, k, v))
    bias = None
    if attn_mask is not None:
        dtype = sinfo(q).dtype
        if sinfo(attn_mask).dtype == "bool":
            attn_mask = imp.emit(R.where(attn_mask, const(0, dtype),
                                         const(float("-inf"), dtype)))
        bias = operand(imp, attn_mask, dtype)
    out = imp.emit(R.nn.attention(q, k, v, bias, scale,
                                  "TopLeft" if is_causal else None))
    out = imp.emit(R.permute_dims(out, bsnh))
    return R.squeeze(out, [0]) if rank == 3 else out


# ---- reductions --------------------------------------------------------------------------------------

def _reduce(fn: Any) -> Any:
    def convert(imp: Any, node: Any, x: Expr, dims: Any = None, keepdim: bool = False,
                *rest: Any, **kwargs: Any) -> Expr:
        dtype = imp.out_dtype(node)
        x = operand(imp, x, dtype)
        axes = None if dims is None or dims == [] else norm_dims(dims, ndim(x))
        return fn(x, axes, keepdim)
    return convert


converter("mean.dim", "mean.default")(_reduce(R.mean))
converter("sum.dim_IntList", "sum.default")(_reduce(R.sum))
converter("amax.default")(_reduce(R.max))
converter("amin.default")(_reduce(R.min))
converter("prod.dim_int", "prod.default")(_reduce(R.prod))


def _var(imp: Any, x: Expr, dims: Any, correction: float, keepdim: bool) -> Expr:
    """The variance over ``dims`` with ``correction`` (Bessel's: 1) subtracted from the
    count."""
    axes = list(range(ndim(x))) if dims is None or dims == [] else norm_dims(dims, ndim(x))
    count = 1
    for a in axes:
        count *= int(shape_of(x)[a].value)
    dtype = sinfo(x).dtype
    centred = imp.emit(R.subtract(x, imp.emit(R.mean(x, axes, keepdims=True))))
    total = imp.emit(R.sum(imp.emit(R.multiply(centred, centred)), axes, keepdim))
    return R.divide(total, const(max(count - correction, 0), dtype))


@converter("var.dim")
def _var_dim(imp: Any, node: Any, x: Expr, dims: Any = None, unbiased: bool = True,
             keepdim: bool = False) -> Expr:
    return _var(imp, operand(imp, x, imp.out_dtype(node)), dims, 1.0 if unbiased else 0.0,
                keepdim)


@converter("var.correction")
def _var_correction(imp: Any, node: Any, x: Expr, dims: Any = None, *,
                    correction: Any = None, keepdim: bool = False) -> Expr:
    return _var(imp, operand(imp, x, imp.out_dtype(node)), dims,
                1.0 if correction is None else float(correction), keepdim)


def _bool_reduce(fn: Any, want: int) -> Any:
    def convert(imp: Any, node: Any, x: Expr, dims: Any = None, keepdim: bool = False) -> Expr:
        ints = imp.emit(R.astype(operand(imp, x, "bool"), "int32"))
        axes = None if dims is None else norm_dims(dims, ndim(x))
        return R.equal(imp.emit(fn(ints, axes, keepdim)), const(want, "int32"))
    return convert


converter("any.dim", "any.dims", "any.default")(_bool_reduce(R.max, 1))
converter("all.dim", "all.dims", "all.default")(_bool_reduce(R.min, 1))


@converter("argmax.default", "argmin.default")
def _argmax(imp: Any, node: Any, x: Expr, dim: Any = None, keepdim: bool = False) -> Expr:
    fn = R.argmax if node.target.__name__ == "argmax.default" else R.argmin
    return fn(x, dim, keepdim)


@converter("max.dim", "min.dim")
def _max_dim(imp: Any, node: Any, x: Expr, dim: int, keepdim: bool = False) -> tuple:
    is_max = node.target.__name__ == "max.dim"
    values = imp.emit((R.max if is_max else R.min)(x, dim, keepdim))
    indices = imp.emit((R.argmax if is_max else R.argmin)(x, dim, keepdim))
    return (values, indices)


@converter("max.default", "min.default")
def _max_all(imp: Any, node: Any, x: Expr) -> Expr:
    return (R.max if node.target.__name__ == "max.default" else R.min)(x)


__all__: list[str] = []
