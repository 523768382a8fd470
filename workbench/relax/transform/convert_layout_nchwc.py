"""``ConvertLayoutNCHWc``: convolutional networks run in a channel-blocked layout chosen once for
the whole graph (onnxruntime's NchwcTransformer in effect, TVM's AlterOpLayout in spirit).

Contract: ``ConvertLayoutNCHWc(target)(mod)`` returns a module computing the same values,
where in every Relax function the float32 convolutions with constant weights, and the ops
between them, work on ``NCHW{B}c`` tensors (``[N][C/B][H][W][B]``), ``B`` the target's float32
vector lanes (16 with AVX-512, 8 with AVX2):

- **convolutions** (NCHW/OIHW or NHWC/HWIO) become blocked ``conv2d`` calls whose weight is
  reordered here, at compile time, into ``OIHW{B}i{B}o`` (or ``OIHW{B}o`` for depthwise ones and
  for a stem whose input has fewer than ``B`` channels, which reads the plain input directly);
  output channels are padded with zero weights up to a multiple of ``B``. A 3x3 stride-1
  convolution of enough channels on an image up to 112x112 becomes ``conv2d_winograd``
  instead (Winograd F(4x4, 3x3), or F(2x2, 3x3) on small images, its weight transformed
  here; option ``winograd``, see :data:`WINOGRAD_TILES`). An unpadded 1x1 convolution with
  stride s > 1 reads a blocked ``strided_slice`` of its input with stride 1
  (:data:`SUBSAMPLE_STRIDED_1X1`). On AVX-512 VNNI targets, a QDQ
  model's convolution (dequantized blocked int8 data, a dequantized int8 weight) becomes a
  uint8 x int8 one on the VNNI dot product, rescaled after
  (:mod:`~workbench.relax.transform.convert_layout_int8`; option ``int8_conv``), and so does
  a uint8 x int8 -> int32 convolution with a constant weight (an imported QLinearConv /
  ConvInteger). Grouped convolutions whose per-group channels are not multiples of ``B``,
  and depthwise ones with a channel multiplier, stay as they are;
- **elementwise ops** (activations; add, subtract, multiply, maximum, minimum; divide by a
  constant), **pools** (max, average, adaptive average), **means / sums over H and W** that keep
  their dimensions (squeeze-and-excite) and **channel concats** of block-aligned tensors take
  blocked operands as they are, and so do **quantize / dequantize** with one scale and zero
  point (a QDQ model's activations: its int8 tensors stay blocked); a constant operand (a
  bias, a per-channel scale) is reordered at compile time, a run-time one through a
  ``layout_transform``;
- everything else (a flatten, a matmul, the function's outputs) reads the plain layout again,
  through one ``layout_transform`` per tensor that every such use shares, created where the
  first use needs it (and one per tensor entering the blocked region likewise).

Padding channels (the output channels added to reach a multiple of ``B``) never reach a plain
tensor: the reorders back crop them, a convolution reading them has zero weights for them, and
the elementwise ops allowed on blocked tensors keep them finite (a constant divisor is padded
with ones). ``layout_transform`` legalizes to an unfused kernel of its own and the pass tags
each reorder with :data:`LAYOUT_SPAN`, so profiles show every reorder as a kernel row of layer
"layout" (op type ``layout_transform``): what the layout costs. After a call, ``converted``
counts the convolutions that changed layout, ``winograd_convs`` those of them that became
Winograd convolutions, ``int8_convs`` those that became integer ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    Call, Constant, DataflowVar, Expr, ShapeExpr, Tuple, Var, VarBinding,
)
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.op import _infer as I
from workbench.relax.op.layout import layout_transform, to_layout_numpy
from workbench.relax.op.registry import NUMPY_RULES, get_op, make_call
from workbench.relax.span import Source, Span
from workbench.relax.struct_info import TensorStructInfo
from workbench.relax.transform._util import is_primitive, relax_functions
from workbench.relax.transform.convert_layout_int8 import int8_conv2d, integer_conv2d
from workbench.topi.nn.conv2d_winograd import winograd_weight_transform

__all__ = ["ConvertLayoutNCHWc", "block_for_target", "winograd_rule", "LAYOUT_SPAN"]

_KERNEL = {"NCHW": "OIHW", "NHWC": "HWIO"}
_UNARY = {"relax.nn.relu", "relax.clip", "relax.sigmoid", "relax.tanh", "relax.nn.silu",
          "relax.nn.gelu", "relax.nn.gelu_tanh", "relax.nn.leaky_relu", "relax.negative",
          "relax.abs", "relax.erf", "relax.square", "relax.round", "relax.astype"}
_BINARY = {"relax.add", "relax.subtract", "relax.multiply", "relax.maximum", "relax.minimum",
           "relax.divide"}
_POOLS = {"relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d"}
_SPATIAL_REDUCE = {"relax.mean", "relax.sum", "relax.max"}
_QDQ = {"relax.quantize", "relax.dequantize"}


def block_for_target(target: Any = None) -> int:
    """The channel block of ``target``: its float32 lanes in one vector register (16 with
    AVX-512, 8 with AVX2)."""
    from workbench.dlight.base import CPUInfo
    from workbench.target import Target
    t = target if isinstance(target, Target) else Target(target or "llvm")
    return CPUInfo.of(t).lanes("float32")


def _op(e: Any) -> str:
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""


def _static_shape(e: Expr) -> tuple | None:
    """The shape of a tensor expression, dims as ints (None for a symbolic one), or None."""
    si = e.struct_info
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        return None
    return tuple(I.const_int(d) for d in si.values)


#: What profiles call a reorder the pass adds: layer "layout", op type "layout_transform".
LAYOUT_SPAN = Span((Source("workbench", "layout", "layout_transform"),))


def _reorder(x: Expr, src: str, dst: str, channels: int | None = None) -> Call:
    c = layout_transform(x, src, dst, channels)
    return c.replace(span=LAYOUT_SPAN)


@dataclass
class _Blocked:
    var: Var           # the tensor in NCHW{B}c
    channels: int      # logical channels (the blocked tensor may carry padding)
    plain: str         # the layout the rest of the graph sees it in: NCHW or NHWC


class _Converter(ExprMutator):
    def __init__(self, mod: IRModule, block: int, winograd: "_WinogradChoice", int8: bool
                 ) -> None:
        super().__init__(mod)
        self.B = block
        self.winograd = winograd
        self.int8 = int8
        self.candidates = 0     # convolutions either implementation fits, in visit order
        self.decisions: list[bool] = []     # per candidate: made a Winograd convolution
        self.tiles: list[int] = []          # per candidate: its 4x4 output tiles
        self.winograd_convs = 0
        self.int8_convs = 0
        self.layout = f"NCHW{block}c"
        self.values: dict[int, Expr] = {}
        self.blocked: dict[int, _Blocked] = {}
        self.plain_of: dict[int, Var] = {}      # blocked tensor -> its plain reorder
        self.blocked_in: dict[int, Var] = {}    # plain tensor -> its blocked reorder
        self.converted = 0

    # ---- what a var holds -----------------------------------------------------------------

    def constant(self, e: Any) -> np.ndarray | None:
        """The value of ``e`` when it is known here: a constant, a dequantized constant (a QDQ
        model's weight or bias, folded with the op's numpy reference as FoldConstant would),
        or a known value reshaped."""
        if isinstance(e, Var):
            e = self.values.get(id(e))
        if isinstance(e, Constant):
            return e.data.numpy()
        if _op(e) == "relax.dequantize":
            args = [self.constant(a) for a in e.args]
            if all(a is not None for a in args):
                return np.asarray(NUMPY_RULES["relax.dequantize"](*args, **e.attrs))
        if _op(e) == "relax.reshape" and isinstance(e.args[1], ShapeExpr):
            data = self.constant(e.args[0])
            shape = [I.const_int(d) for d in e.args[1].values]
            if data is not None and all(d is not None for d in shape):
                return data.reshape(shape)      # a bias reshaped to broadcast
        return None

    def visit_Var_(self, v: Var) -> Expr:
        """A plain use: a blocked tensor is reordered back (once, shared by every use)."""
        b = self.blocked.get(id(v))
        if b is None:
            return super().visit_Var_(v)
        pv = self.plain_of.get(id(v))
        if pv is None:
            pv = self.builder_.emit(_reorder(b.var, self.layout, b.plain, b.channels),
                                    name_hint=f"{v.name_hint}_{b.plain.lower()}")
            self.plain_of[id(v)] = pv
        return pv

    def to_blocked(self, e: Expr, plain: str, dtypes: tuple[str, ...] = ("float32",)
                   ) -> tuple[Expr, int] | None:
        """``e`` (a 4-d tensor in ``plain`` of one of ``dtypes``) in the blocked layout, and
        its channels."""
        if isinstance(e, Var) and id(e) in self.blocked:
            b = self.blocked[id(e)]
            return (b.var, b.channels) if b.plain == plain else None
        shape = _static_shape(e)
        if shape is None or len(shape) != 4 or shape[plain.index("C")] is None or \
                e.struct_info.dtype not in dtypes:
            return None
        key = id(e)
        if isinstance(e, Var) and key in self.blocked_in:
            return self.blocked_in[key], shape[plain.index("C")]
        var = self.builder_.emit(_reorder(self.visit_expr(e), plain, self.layout),
                                 name_hint=f"{getattr(e, 'name_hint', 'x')}_nchwc")
        if isinstance(e, Var):
            self.blocked_in[key] = var
        return var, shape[plain.index("C")]

    # ---- bindings -------------------------------------------------------------------------

    def visit_var_binding(self, b: VarBinding) -> None:
        self.values[id(b.var)] = b.value
        rule = _RULES.get(_op(b.value))
        out = rule(self, b.value) if rule is not None else None
        if out is None:
            super().visit_var_binding(b)
            return
        call, channels, plain = out
        var = self.builder_.emit(call, name_hint=b.var.name_hint)
        self.blocked[id(b.var)] = _Blocked(var, channels, plain)
        if not isinstance(b.var, DataflowVar):
            # A value leaving the dataflow block is bound to its own var, in its own layout.
            self.reemit_binding(b, _reorder(var, self.layout, plain, channels))
            del self.blocked[id(b.var)]

    def emit_blocked_call(self, src: Call, name: str, args: tuple, attrs: dict) -> Call:
        return Call(get_op(name), args, attrs, (), span=src.span)

    # ---- rules: each returns (blocked call, channels, plain layout) or None -----------------

    def conv2d(self, call: Call) -> tuple | None:
        a = call.attrs
        plain = a["data_layout"]
        if a["out_dtype"] == "int32":
            return integer_conv2d(self, call) if self.int8 else None
        if plain not in _KERNEL or a["kernel_layout"] != _KERNEL[plain] or \
                a["out_layout"] != plain or a["out_dtype"] not in ("void", "float32"):
            return None
        if self.int8:
            out = int8_conv2d(self, call)
            if out is not None:
                return out
        x, w_expr = call.args
        w = self.constant(w_expr)
        shape = _static_shape(x)
        if w is None or w.dtype != np.float32 or shape is None or len(shape) != 4 or \
                any(d is None for d in shape[1:]) or x.struct_info.dtype != "float32":
            return None
        if plain == "NHWC":
            w = w.transpose(3, 2, 0, 1)                 # HWIO -> OIHW
        B, g = self.B, int(a["groups"])
        c = shape[plain.index("C")]
        o, icg = w.shape[0], w.shape[1]
        op_ = -(-o // B) * B
        src_blocked = isinstance(x, Var) and id(x) in self.blocked and \
            self.blocked[id(x)].plain == plain
        if g > 1 and g == c == o and icg == 1:           # depthwise
            data = self.to_blocked(x, plain)
            if data is None:
                return None
            cp = -(-c // B) * B
            wt = to_layout_numpy(np.pad(w, ((0, cp - o), (0, 0), (0, 0), (0, 0))), "OIHW",
                                 f"OIHW{B}o")
            attrs = dict(a, groups=cp, data_layout=self.layout, kernel_layout=f"OIHW{B}o",
                         out_layout=self.layout)
            args = (data[0], Constant(wt))
        elif g == 1 and c < B and not src_blocked:      # stem: plain NCHW input
            data_expr = self.visit_expr(x)
            if plain == "NHWC":
                data_expr = self.builder_.emit(_reorder(data_expr, "NHWC", "NCHW"),
                                               name_hint="x_nchw")
            wt = to_layout_numpy(np.pad(w, ((0, op_ - o), (0, 0), (0, 0), (0, 0))), "OIHW",
                                 f"OIHW{B}o")
            attrs = dict(a, data_layout="NCHW", kernel_layout=f"OIHW{B}o",
                         out_layout=self.layout)
            args = (data_expr, Constant(wt))
        elif g == 1 or (icg % B == 0 and (o // g) % B == 0 and c % B == 0):
            data = self.to_blocked(x, plain)
            if data is None:
                return None
            cp = -(-data[1] // B) * B
            pad_i = (cp - icg) if g == 1 else 0
            tile = self.choose_winograd_tile(a, w.shape, shape, plain, cp, op_)
            if tile:
                self.converted += 1
                self.winograd_convs += 1
                wp = np.pad(w, ((0, op_ - o), (0, pad_i), (0, 0), (0, 0)))
                attrs = {"padding": a["padding"], "data_layout": self.layout,
                         "out_layout": self.layout, "out_dtype": a["out_dtype"]}
                args = (data[0], Constant(winograd_weight_transform(wp, B, tile)))
                return self.emit_blocked_call(call, "relax.nn.conv2d_winograd", args, attrs), \
                    o, plain
            wt = to_layout_numpy(np.pad(w, ((0, op_ - o), (0, pad_i), (0, 0), (0, 0))),
                                 "OIHW", f"OIHW{B}i{B}o")
            attrs = dict(a, data_layout=self.layout, kernel_layout=f"OIHW{B}i{B}o",
                         out_layout=self.layout)
            args = (data[0], Constant(wt))
            step = _subsample_step(a, w.shape)
            if step:
                hw = (shape[plain.index("H")], shape[plain.index("W")])
                sub = make_call("relax.strided_slice", (data[0],),
                                {"axes": (2, 3), "begin": (0, 0), "end": hw,
                                 "strides": (step, step), "assume_inbound": True})
                args = (self.builder_.emit(sub.replace(span=call.span), name_hint="subsampled"),
                        args[1])
                attrs["strides"] = (1, 1)
        else:
            return None
        self.converted += 1
        return self.emit_blocked_call(call, "relax.nn.conv2d", args, attrs), o, plain

    def choose_winograd_tile(self, a: dict, wshape: tuple, shape: tuple, plain: str, cp: int,
                             op_: int) -> int:
        """The output tile m of the Winograd F(m x m, 3x3) this blocked convolution becomes,
        or 0 to stay direct; numbers the candidates."""
        tiles = _winograd_tiles(a, shape, plain) if \
            _winograd_candidate(a, wshape, shape, cp, op_) else 0
        if tiles < 1:
            return 0
        index = self.candidates
        self.candidates += 1
        self.tiles.append(tiles)
        self.decisions.append(self.winograd.use(index, tiles, self.B))
        return winograd_tile(tiles, self.B) if self.decisions[-1] else 0

    def unary(self, call: Call) -> tuple | None:
        x = call.args[0]
        b = self.blocked.get(id(x)) if isinstance(x, Var) else None
        if b is None or len(call.args) != 1:
            return None
        return self.emit_blocked_call(call, call.op.name, (b.var,), dict(call.attrs)), \
            b.channels, b.plain

    def binary(self, call: Call) -> tuple | None:
        lhs, rhs = call.args
        found = [self.blocked[id(e)] for e in (lhs, rhs) if isinstance(e, Var) and
                 id(e) in self.blocked]
        if not found:
            return None
        ref = found[0]
        if any(f.plain != ref.plain or f.channels != ref.channels for f in found):
            return None
        args = []
        for k, e in enumerate((lhs, rhs)):
            divisor = call.op.name == "relax.divide" and k == 1
            arg = self.blocked_operand(e, ref, divisor)
            if arg is None:
                return None
            args.append(arg)
        return self.emit_blocked_call(call, call.op.name, tuple(args), dict(call.attrs)), \
            ref.channels, ref.plain

    def blocked_operand(self, e: Expr, ref: _Blocked, divisor: bool) -> Expr | None:
        """One operand of an elementwise op whose other operand is blocked like ``ref``."""
        if isinstance(e, Var) and id(e) in self.blocked:
            return None if divisor else self.blocked[id(e)].var
        const = self.constant(e)
        if const is not None:
            if const.ndim == 0 or const.size == 1:
                if divisor and not np.all(const != 0):
                    return None
                return Constant(const.reshape(())) if const.ndim else self.visit_expr(e)
            blocked = self.blocked_constant(const, ref, divisor)
            return None if blocked is None else Constant(blocked)
        if divisor:
            return None
        shape = _static_shape(e)
        if shape is None or len(shape) != 4 or e.struct_info.dtype != "float32":
            return None
        ci = ref.plain.index("C")
        if shape[ci] == 1:
            if ref.plain != "NCHW":
                return None
            return self.builder_.emit(make_call("relax.expand_dims", (self.visit_expr(e),),
                                                {"axis": (4,)}), name_hint="bcast")
        if shape[ci] != ref.channels:
            return None
        out = self.to_blocked(e, ref.plain)
        return None if out is None else out[0]

    def blocked_constant(self, const: np.ndarray, ref: _Blocked, divisor: bool
                         ) -> np.ndarray | None:
        """A constant broadcast against a 4-d tensor in ``ref.plain``, reordered to match its
        blocked form (padding channels of a divisor are ones)."""
        if const.ndim > 4:
            return None
        c4 = const.reshape((1,) * (4 - const.ndim) + const.shape)
        if ref.plain == "NHWC":
            c4 = c4.transpose(0, 3, 1, 2)
        if c4.shape[1] == 1:
            return np.ascontiguousarray(c4[..., None])
        if c4.shape[1] != ref.channels:
            return None
        B = self.B
        cp = -(-ref.channels // B) * B
        if divisor:
            if not np.all(c4 != 0):
                return None
            c4 = np.pad(c4, ((0, 0), (0, cp - ref.channels), (0, 0), (0, 0)),
                        constant_values=1)
        return to_layout_numpy(c4, "NCHW", self.layout)

    def qdq(self, call: Call) -> tuple | None:
        """``quantize`` / ``dequantize`` with one scale and zero point for the whole tensor
        (a QDQ model's activations) are elementwise: the int8 tensor stays blocked, and a
        padding channel (0.0) quantizes to the zero point and dequantizes back to 0.0."""
        x, scale, zp = call.args
        b = self.blocked.get(id(x)) if isinstance(x, Var) else None
        if b is None or any(self.constant(p) is None or self.constant(p).size != 1
                            for p in (scale, zp)):
            return None
        args = (b.var, self.visit_expr(scale), self.visit_expr(zp))
        return self.emit_blocked_call(call, call.op.name, args, dict(call.attrs, axis=-1)), \
            b.channels, b.plain

    def pool(self, call: Call) -> tuple | None:
        x = call.args[0]
        b = self.blocked.get(id(x)) if isinstance(x, Var) else None
        if b is None or call.attrs["layout"] != b.plain:
            return None
        attrs = dict(call.attrs, layout=self.layout, out_layout=self.layout)
        return self.emit_blocked_call(call, call.op.name, (b.var,), attrs), b.channels, b.plain

    def spatial_reduce(self, call: Call) -> tuple | None:
        x = call.args[0]
        b = self.blocked.get(id(x)) if isinstance(x, Var) else None
        axis = call.attrs.get("axis")
        if b is None or not call.attrs.get("keepdims") or axis is None:
            return None
        hw = {b.plain.index("H"), b.plain.index("W")}
        if {int(ax) % 4 for ax in axis} != hw:
            return None
        attrs = dict(call.attrs, axis=(2, 3))
        return self.emit_blocked_call(call, call.op.name, (b.var,), attrs), b.channels, b.plain

    def concat(self, call: Call) -> tuple | None:
        tup = call.args[0]
        if not isinstance(tup, Tuple) or not tup.fields:
            return None
        parts = [self.blocked.get(id(f)) if isinstance(f, Var) else None for f in tup.fields]
        if any(p is None for p in parts):
            return None
        plain = parts[0].plain
        if any(p.plain != plain for p in parts) or \
                int(call.attrs["axis"]) % 4 != plain.index("C") or \
                any(p.channels % self.B for p in parts[:-1]):
            return None
        fields = Tuple(tuple(p.var for p in parts))
        return self.emit_blocked_call(call, "relax.concat", (fields,), {"axis": 1}), \
            sum(p.channels for p in parts), plain


#: Winograd replaces a blocked 3x3 stride-1 convolution when both channel counts are at least
#: this, and the image has between these many 4x4 output tiles: F(4x4, 3x3) from
#: :data:`WINOGRAD_F4_MIN_TILES` tiles, F(2x2, 3x3) below (:func:`winograd_tile`). Measured on
#: a 2-core Zen 4: F(4x4) 2.6-2.8x faster than the direct kernel on 128 x 28^2 and 256 x 14^2
#: (49 and 16 tiles); on 64 x 56^2 (196 tiles) ResNet-18 ran 16.7 -> 13.3 ms and ResNet-50
#: 44.5 -> 42.5 ms (in turns); three 64 x 112^2 layers (784 tiles) ran 1.4x faster (less: the
#: transformed tiles, 7 MB, leave the caches between the stages). With 4 tiles (512 x 7^2 in
#: ResNet-18) F(4x4) made the model slower (16.7 -> 17.1 ms): its transformed weight, 4x the
#: direct one (37.7 MB), is read for too little work; F(2x2)'s is 16/9 of it, and the stage
#: ran 1.40x faster alone (1.10x with flushed caches), ResNet-18 11.89 -> 10.73 ms and
#: ResNet-50 35.4 -> 34.3 ms end to end, in turns. TVM picks F(4x4) for 64 < channels < 512
#: (AVX-512 ResNet profiles). This rule decides where no measurement does: with a tuning
#: database, each candidate takes the implementation whose tuned kernel ran faster
#: (``choose``; the tuner tunes both).
WINOGRAD_MIN_CHANNELS = 64
WINOGRAD_TILES = (1, 784)
WINOGRAD_F4_MIN_TILES = 9
#: With 16-channel blocks (AVX-512) an image of fewer 4x4 tiles than this stays direct: the
#: direct kernel on a 7x7 plane runs its reduction in chunks of a kernel row that stay in L1
#: (:func:`workbench.dlight.cpu.tiling._reduction_chunks`) and reads 9/16 of F(2x2)'s
#: weight. In ResNet-50 on a 2-core Sapphire Rapids, profiled in turns, its 512 x 7^2
#: convolutions took 866 us a call direct against 1,003 with F(2x2); ResNet-18 ran 0.97x
#: the time end to end. With 8-channel blocks (AVX2) the direct kernel has no such chunks
#: and the measurement above (Zen 4) stands.
WINOGRAD_WIDE_MIN_TILES = 5
#: With 16-channel blocks, F(4x4, 3x3) from this many tiles (F(2x2, 3x3) below): on a 14x14
#: image (16 tiles) F(4x4)'s transformed weight (256 x 256 channels: 9.4 MB, 2.25x
#: F(2x2)'s) is read for too little work -- its kernel ran 440 us warm and 636 with its
#: weight flushed, as it is in the model. In turns on Sapphire Rapids, F(2x2) there ran
#: ResNet-18 0.97x and ResNet-50 0.98x the time end to end (0.977x and 0.984-0.989x in an
#: earlier session); F(2x2) on 28x28 too (49 tiles) made both 1.02x slower.
WINOGRAD_WIDE_F4_MIN_TILES = 17


#: A 1x1 convolution with stride s > 1 and no padding reads every s-th pixel of every s-th
#: row: with a 16-channel block a pixel is one cache line, and the kernel reads its input
#: planes once per group of output-channel blocks, so the lines between (which the L2
#: prefetcher fetches with them) are read again and again. The pass subsamples the input
#: once (a ``strided_slice``, a kernel of its own in the convolution's layer) and the
#: convolution runs with stride 1. ResNet-50's three such downsampling convolutions in its
#: profile on a 2-core Sapphire Rapids (256 -> 512 channels on 56x56, 512 -> 1024 on 28x28,
#: 1024 -> 2048 on 14x14): 757 / 715 / 767 us strided, 543 + 47 / 555 + 35 / 707 + 23 us
#: (convolution + slice) subsampled; with Haswell code the first 1,353 -> 991 + 55 us, the
#: others within 3%.
SUBSAMPLE_STRIDED_1X1 = True


def _subsample_step(a: dict, wshape: tuple) -> int:
    """The stride of a convolution that :data:`SUBSAMPLE_STRIDED_1X1` runs on a subsampled
    input (1x1, equal strides above 1, no padding, no dilation, not grouped); 0 for others."""
    sh, sw = (int(v) for v in a["strides"])
    if not SUBSAMPLE_STRIDED_1X1 or tuple(wshape[2:]) != (1, 1) or sh != sw or sh < 2 or \
            any(int(v) for v in a["padding"]) or tuple(a["dilation"]) != (1, 1) or \
            int(a["groups"]) != 1:
        return 0
    return sh


def _winograd_candidate(a: dict, wshape: tuple, shape: tuple, cp: int, op_: int) -> bool:
    """A convolution Winograd F(m x m, 3x3) can compute and might pay for (with an output of
    at least one tile): 3x3, stride and dilation 1, not grouped, at least
    :data:`WINOGRAD_MIN_CHANNELS` channels in and out, a known batch."""
    return tuple(wshape[2:]) == (3, 3) and tuple(a["strides"]) == (1, 1) and \
        tuple(a["dilation"]) == (1, 1) and int(a["groups"]) == 1 and \
        min(cp, op_) >= WINOGRAD_MIN_CHANNELS and shape[0] is not None


def _winograd_tiles(a: dict, shape: tuple, plain: str) -> int:
    """The 4x4 output tiles of a 3x3 stride-1 convolution (0 for an empty output)."""
    pt, pl, pb, pr = a["padding"]
    oh = shape[plain.index("H")] + pt + pb - 2
    ow = shape[plain.index("W")] + pl + pr - 2
    return shape[0] * -(-oh // 4) * -(-ow // 4) if oh > 0 and ow > 0 else 0


class _WinogradChoice:
    """Which Winograd candidates (numbered in the pass's visit order of each function) become
    Winograd convolutions: ``mode`` True -- those with :data:`WINOGRAD_TILES` tiles (the
    measured rule), "all" -- every one, False -- none; ``chosen`` (function name -> {candidate
    number: bool}) overrides modes True and "all" for the candidates it names; it is in
    ``cache``, or asked for at the first candidate met (``chooser(mod)``), once per pass."""

    def __init__(self, mode: Any, chooser: Callable[[IRModule], Any] | None,
                 mod: IRModule, func_name: str, cache: dict) -> None:
        self.mode, self.chooser, self.mod = mode, chooser, mod
        self.func_name, self.cache = func_name, cache

    def use(self, index: int, tiles: int, block: int) -> bool:
        if not self.mode:
            return False
        if "chosen" not in self.cache:
            self.cache["chosen"] = self.chooser(self.mod)
        chosen = self.cache["chosen"].get(self.func_name, {})
        if index in chosen:
            return bool(chosen[index])
        return self.mode == "all" or winograd_rule(tiles, block)


def winograd_tile(tiles: int, block: int) -> int:
    """The output tile m of the F(m x m, 3x3) a Winograd candidate with this many 4x4 output
    tiles, in a layout of ``block``-channel blocks, uses: 4, or 2 below
    :data:`WINOGRAD_F4_MIN_TILES` (:data:`WINOGRAD_WIDE_F4_MIN_TILES` with ``block`` >= 16;
    a 7x7 image: F(4x4)'s transformed weight, 4x the direct one, is read for 4 tiles;
    F(2x2)'s is 16/9 of it for 16 tiles)."""
    low = WINOGRAD_F4_MIN_TILES if block < 16 else WINOGRAD_WIDE_F4_MIN_TILES
    return 4 if tiles >= low else 2


def winograd_rule(tiles: int, block: int) -> bool:
    """The measured rule (:data:`WINOGRAD_TILES`, :data:`WINOGRAD_WIDE_MIN_TILES` with
    ``block`` >= 16): does a candidate with this many 4x4 output tiles, in a layout of
    ``block``-channel blocks, become a Winograd convolution when no measurement decides?"""
    low = WINOGRAD_TILES[0] if block < 16 else max(WINOGRAD_TILES[0], WINOGRAD_WIDE_MIN_TILES)
    return low <= tiles <= WINOGRAD_TILES[1]


_Rule = Callable[[_Converter, Call], Any]
_RULES: dict[str, _Rule] = {"relax.nn.conv2d": _Converter.conv2d, "relax.concat":
                            _Converter.concat}
_RULES.update({name: _Converter.unary for name in _UNARY})
_RULES.update({name: _Converter.binary for name in _BINARY})
_RULES.update({name: _Converter.pool for name in _POOLS})
_RULES.update({name: _Converter.spatial_reduce for name in _SPATIAL_REDUCE})
_RULES.update({name: _Converter.qdq for name in _QDQ})


def _has_vnni(target: Any) -> bool:
    from workbench.target import Target
    t = target if isinstance(target, Target) else Target(target or "llvm")
    return t.has_feature("avx512vnni")


class ConvertLayoutNCHWc(Pass):
    """The pass object: ``mod = ConvertLayoutNCHWc(target)(mod)`` (see the module docstring).
    ``block`` overrides the target's block size; ``int8`` the option ``int8_conv`` (QDQ
    convolutions as integer ones, by default on AVX-512 VNNI targets only).

    ``winograd`` (default: the option of the same name): True -- a Winograd *candidate* (a
    3x3 stride-1 convolution of at least :data:`WINOGRAD_MIN_CHANNELS` channels) becomes a
    Winograd convolution when its image has :data:`WINOGRAD_TILES` tiles; ``"all"`` -- every
    candidate does; False -- none. ``choose`` decides candidate by candidate over that rule:
    a mapping ``{function name: {candidate number: bool}}`` (candidates numbered in program
    order within each function, as ``candidates`` counts them), or a callable taking the
    module the pass transforms and returning one, called only if the module has a candidate
    (the tuner's choice from measured records:
    :class:`workbench.meta_schedule.conv_implementations.WinogradFromRecords`).
    After a call, ``candidates`` counts the candidates, and ``decisions`` and
    ``candidate_tiles`` hold, per function, whether each became a Winograd convolution and
    its output tiles."""

    name = "ConvertLayoutNCHWc"

    def __init__(self, target: Any = None, block: int | None = None,
                 winograd: bool | str | None = None, int8: bool | None = None,
                 choose: Any = None) -> None:
        if block is not None and (not isinstance(block, int) or block < 2):
            raise ValueError(f"{self.name}: block must be an int >= 2, got {block!r}")
        if winograd not in (None, True, False, "all"):
            raise ValueError(f"{self.name}: winograd must be None, True, False or 'all', got "
                             f"{winograd!r}")
        if choose is not None and not callable(choose) and not hasattr(choose, "get"):
            raise TypeError(f"{self.name}: choose must be a mapping {{function: {{candidate: "
                            f"bool}}}} or a callable returning one, got {type(choose).__name__}")
        self.target = target
        self.block = block
        self.winograd = winograd
        self.int8 = int8
        self.choose = choose
        self.converted = 0
        self.candidates = 0
        self.decisions: dict[str, list[bool]] = {}
        self.candidate_tiles: dict[str, list[int]] = {}
        self.winograd_convs = 0
        self.int8_convs = 0

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name} expects an IRModule, got {type(mod).__name__}")
        block = self.block or block_for_target(self.target)
        winograd = self.winograd
        if winograd is None:
            from workbench import options
            winograd = options.get("winograd")
        int8 = self.int8
        if int8 is None:
            from workbench import options
            int8 = options.get("int8_conv") and _has_vnni(self.target)
        choose = self.choose
        chooser = choose if callable(choose) else None
        cache: dict = {} if chooser is not None else {"chosen": choose or {}}
        self.converted = self.candidates = self.winograd_convs = self.int8_convs = 0
        self.decisions, self.candidate_tiles = {}, {}
        out = mod.copy()
        for name, func in relax_functions(mod):
            if is_primitive(func):
                continue
            choice = _WinogradChoice(winograd, chooser, mod, name, cache)
            conv = _Converter(out, block, choice, int8)
            new = conv.visit_expr(func)
            self.candidates += conv.candidates
            if conv.decisions:
                self.decisions[name] = conv.decisions
                self.candidate_tiles[name] = conv.tiles
            if conv.converted:
                out[name] = new
                self.converted += conv.converted
                self.winograd_convs += conv.winograd_convs
                self.int8_convs += conv.int8_convs
        return out
