"""Untuned speed: Workbench's default schedules against PyTorch eager, measured in turns.

Every Workbench number is a model (or one op) compiled by ``relax.build`` with no tuning
database -- each kernel gets its default CPU schedule (``workbench.dlight``) -- weights bound
as constants (so packed at compile time), run by the VM. PyTorch runs the same computation
with the same weights under ``torch.inference_mode()`` with the same number of threads.
Each output is checked against PyTorch first. Times are the best of several interleaved
rounds (Workbench, then PyTorch, then again), so machine load hurts both alike; the ratio
is Workbench time / PyTorch time (below 1: Workbench faster).

1. Kernel families: the conv2d shapes of ResNet-18 and MobileNetV2 (incl. depthwise), the
   dense / matmul layers of a GPT-2 block (sequence 128, width 768), attention products,
   softmax, layer norm, pooling, a weight transpose, elementwise.
2. Whole networks written with ``workbench.relax.frontend.nn`` (and the same network in
   torch): a ResNet-18-like and a MobileNetV2-like net at batch 1, 224x224 (batch norm folded
   into the convolutions' bias, as an inference export does), and a GPT-2-style block
   (sequence 128, width 768, 12 heads, causal attention). PyTorch's CNNs are timed in NCHW
   and channels_last; the faster counts.

Usage: ``python benchmarks/bench_default_schedule.py [--kernels | --models] [--quick]
[--threads N]`` (``--quick``: fewer rounds; ``--threads``: both sides, default workbench's
``num_threads``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable

import numpy as np


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kernels", action="store_true", help="only the kernel families")
    p.add_argument("--models", action="store_true", help="only the whole networks")
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    p.add_argument("--threads", type=int, default=0, help="threads for both (0: default)")
    p.add_argument("--only", default="", help="comma-separated case names")
    return p.parse_args()


ARGS = _parse()
if ARGS.threads:
    os.environ["WORKBENCH_NUM_THREADS"] = str(ARGS.threads)

import torch  # noqa: E402

import workbench as wb  # noqa: E402
from workbench import options, relax  # noqa: E402
from workbench.relax import op as R  # noqa: E402
from workbench.relax.frontend import nn  # noqa: E402
from workbench.relax.frontend.nn.core import wrap  # noqa: E402

THREADS = options.get("num_threads")
torch.set_num_threads(THREADS)
F = torch.nn.functional
ROUNDS = 3 if ARGS.quick else 5
RNG = np.random.default_rng(0)


def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype("float32")


def best_seconds(fn: Callable[[], Any], min_time: float = 0.05) -> float:
    """Best mean time of a batch of back-to-back calls (batch sized to ~``min_time``)."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    number = max(1, min(50, int(min_time / once)))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def in_turns(*fns: Callable[[], Any]) -> list[float]:
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(ROUNDS):
        for fn, ts in zip(fns, times):
            ts.append(best_seconds(fn))
    return [min(ts) for ts in times]


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


# ---- one op: a Relax function with bound weights ---------------------------------------------

def one_op(inputs: list[tuple[str, tuple]], weights: dict[str, np.ndarray],
           body: Callable[..., Any]) -> Any:
    """Compile ``body(*inputs, *weights)``; returns a callable running it on numpy inputs
    (converted once) and the compile seconds."""
    params = [(n, s) for n, s in inputs] + [(n, w.shape) for n, w in weights.items()]
    vars_ = [relax.Var(n, relax.TensorStructInfo(tuple(s), "float32")) for n, s in params]
    bb = relax.BlockBuilder()
    with bb.function("main", vars_):
        with bb.dataflow():
            out = bb.emit_output(body(*vars_))
        bb.emit_func_output(out)
    start = time.perf_counter()
    exe = relax.build(bb.get(), params=weights)
    seconds = time.perf_counter() - start
    vm = relax.VirtualMachine(exe, wb.cpu())
    return vm, seconds


class Case:
    """One kernel family: Workbench's function, PyTorch's, the flops, a result transform."""

    def __init__(self, name: str, inputs: list[np.ndarray], weights: dict[str, np.ndarray],
                 body: Callable[..., Any], torch_fn: Callable[..., Any], flops: float,
                 to_torch_layout: Callable[[np.ndarray], np.ndarray] = lambda a: a) -> None:
        self.name = name
        self.inputs = inputs
        self.weights = weights
        self.body = body
        self.torch_fn = torch_fn
        self.flops = flops
        self.to_torch_layout = to_torch_layout


def conv_case(name: str, c: int, hw: int, k: int, ks: int, stride: int, pad: int,
              groups: int = 1, layout: str = "NCHW") -> Case:
    x = rand(1, c, hw, hw)
    w = rand(k, c // groups, ks, ks, scale=(c // groups * ks * ks) ** -0.5)
    b = rand(k)
    tx, tw, tb = map(torch.from_numpy, (x, w, b))
    out_hw = (hw + 2 * pad - ks) // stride + 1
    flops = 2 * k * out_hw * out_hw * (c // groups) * ks * ks
    if layout == "NCHW":
        def body(x_, w_, b_):
            y = R.nn.conv2d(x_, w_, strides=stride, padding=pad, groups=groups)
            return R.nn.relu(R.add(y, R.reshape(b_, (1, k, 1, 1))))
        return Case(name, [x], {"w": w, "b": b}, body,
                    lambda: torch.relu(F.conv2d(tx, tw, tb, stride, pad, 1, groups)), flops)
    xt = x.transpose(0, 2, 3, 1).copy()

    def body_nhwc(x_, w_, b_):
        y = R.nn.conv2d(x_, w_, strides=stride, padding=pad, groups=groups,
                        data_layout="NHWC", kernel_layout="HWIO")
        return R.nn.relu(R.add(y, b_))
    tx_cl = tx.contiguous(memory_format=torch.channels_last)
    return Case(name, [xt], {"w": w.transpose(2, 3, 1, 0).copy(), "b": b}, body_nhwc,
                lambda: torch.relu(F.conv2d(tx_cl, tw, tb, stride, pad, 1, groups)), flops,
                lambda a: a.transpose(0, 3, 1, 2))


def dense_case(name: str, m: int, k: int, n: int, gelu: bool = False) -> Case:
    x, w, b = rand(m, k), rand(n, k, scale=k ** -0.5), rand(n)
    tx, tw, tb = map(torch.from_numpy, (x, w, b))

    def body(x_, w_, b_):
        # relax.op.linear is matmul(x, permute_dims(w)) + b, as nn.Linear and the importers
        # emit it; with the weight bound, the transpose is folded at compile time.
        y = R.linear(x_, w_, b_)
        return R.nn.gelu(y) if gelu else y

    def torch_fn():
        y = F.linear(tx, tw, tb)
        return F.gelu(y) if gelu else y
    return Case(name, [x], {"w": w, "b": b}, body, torch_fn, 2 * m * k * n)


def bmm_case(name: str, b: int, m: int, k: int, n: int, transpose_b: bool) -> Case:
    x = rand(b, m, k)
    y = rand(b, n, k) if transpose_b else rand(b, k, n)
    tx, ty = map(torch.from_numpy, (x, y))
    if transpose_b:
        return Case(name, [x, y], {}, lambda x_, y_: R.matmul(x_, R.permute_dims(y_, [0, 2, 1])),
                    lambda: tx @ ty.transpose(1, 2), 2 * b * m * k * n)
    return Case(name, [x, y], {}, R.matmul, lambda: tx @ ty, 2 * b * m * k * n)


def unary_case(name: str, x: np.ndarray, body: Callable, torch_fn: Callable[[Any], Any],
               weights: dict[str, np.ndarray] | None = None) -> Case:
    tx = torch.from_numpy(x)
    tw = {k: torch.from_numpy(v) for k, v in (weights or {}).items()}
    return Case(name, [x], weights or {}, body, lambda: torch_fn(tx, **tw), 0.0)


def kernel_cases() -> list[Case]:
    ln_g, ln_b = rand(768), rand(768)
    return [
        conv_case("resnet conv1 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3),
        conv_case("resnet 3x3 64->64 @56", 64, 56, 64, 3, 1, 1),
        conv_case("resnet 3x3/2 64->128 @56", 64, 56, 128, 3, 2, 1),
        conv_case("resnet 3x3 128->128 @28", 128, 28, 128, 3, 1, 1),
        conv_case("resnet 3x3 256->256 @14", 256, 14, 256, 3, 1, 1),
        conv_case("resnet 3x3 512->512 @7", 512, 7, 512, 3, 1, 1),
        conv_case("resnet 1x1/2 256->512 @14", 256, 14, 512, 1, 2, 0),
        conv_case("resnet 3x3 64->64 @56 NHWC", 64, 56, 64, 3, 1, 1, layout="NHWC"),
        conv_case("mbv2 conv 3x3/2 3->32 @224", 3, 224, 32, 3, 2, 1),
        conv_case("mbv2 dw 3x3 32 @112", 32, 112, 32, 3, 1, 1, groups=32),
        conv_case("mbv2 dw 3x3/2 96 @112", 96, 112, 96, 3, 2, 1, groups=96),
        conv_case("mbv2 dw 3x3 144 @56", 144, 56, 144, 3, 1, 1, groups=144),
        conv_case("mbv2 dw 3x3 960 @7", 960, 7, 960, 3, 1, 1, groups=960),
        conv_case("mbv2 pw 1x1 16->96 @112", 16, 112, 96, 1, 1, 0),
        conv_case("mbv2 pw 1x1 144->24 @56", 144, 56, 24, 1, 1, 0),
        conv_case("mbv2 pw 1x1 320->1280 @7", 320, 7, 1280, 1, 1, 0),
        conv_case("mbv2 dw 3x3 144 @56 NHWC", 144, 56, 144, 3, 1, 1, groups=144,
                  layout="NHWC"),
        dense_case("gpt2 qkv 128x768 @ 768x2304", 128, 768, 2304),
        dense_case("gpt2 proj 128x768 @ 768x768", 128, 768, 768),
        dense_case("gpt2 fc1+gelu 128x768 @ 768x3072", 128, 768, 3072, gelu=True),
        dense_case("gpt2 fc2 128x3072 @ 3072x768", 128, 3072, 768),
        dense_case("resnet fc 1x512 @ 512x1000", 1, 512, 1000),
        bmm_case("attn q @ k^T 12x128x64x128", 12, 128, 64, 128, True),
        bmm_case("attn p @ v 12x128x128x64", 12, 128, 128, 64, False),
        unary_case("softmax 12x128x128", rand(12, 128, 128),
                   lambda x_: R.nn.softmax(x_, axis=-1), lambda t: torch.softmax(t, -1)),
        unary_case("layer norm 128x768", rand(128, 768),
                   lambda x_, g_, b_: R.nn.layer_norm(x_, g_, b_, axes=-1),
                   lambda t, g, b: F.layer_norm(t, (768,), g, b), {"g": ln_g, "b": ln_b}),
        unary_case("max pool 3x3/2 64 @112", rand(1, 64, 112, 112),
                   lambda x_: R.nn.max_pool2d(x_, pool_size=3, strides=2, padding=1),
                   lambda t: F.max_pool2d(t, 3, 2, 1)),
        unary_case("global avg pool 512 @7", rand(1, 512, 7, 7),
                   lambda x_: R.nn.adaptive_avg_pool2d(x_, (1, 1)),
                   lambda t: F.adaptive_avg_pool2d(t, 1)),
        unary_case("transpose 768x3072", rand(768, 3072), R.permute_dims,
                   lambda t: t.t().contiguous()),
        unary_case("add + relu 64x56x56", rand(1, 64, 56, 56),
                   lambda x_: R.nn.relu(R.add(x_, x_)), lambda t: torch.relu(t + t)),
    ]


def bench_kernels() -> None:
    print(f"\n1. Kernel families (ms; ratio = workbench / torch, below 1 is faster)   "
          f"load {load()}")
    print(f"   {'case':<36} {'workbench':>10} {'torch':>9} {'ratio':>6} {'GFLOPS':>7} "
          f"{'compile s':>9}")
    ratios = []
    only = [s for s in ARGS.only.split(",") if s]
    for case in kernel_cases():
        if only and not any(s in case.name for s in only):
            continue
        names = [f"in{k}" for k in range(len(case.inputs))]
        vm, compile_s = one_op([(n, a.shape) for n, a in zip(names, case.inputs)],
                               case.weights, case.body)
        args = [wb.nd.array(a) for a in case.inputs]
        got = case.to_torch_layout(vm["main"](*args).numpy())
        with torch.inference_mode():
            want = case.torch_fn().contiguous().numpy()
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3, err_msg=case.name)

        def torch_run(fn=case.torch_fn):
            with torch.inference_mode():
                fn()
        t_wb, t_torch = in_turns(lambda vm=vm, args=args: vm["main"](*args), torch_run)
        ratios.append(t_wb / t_torch)
        gflops = f"{case.flops / t_wb / 1e9:7.1f}" if case.flops else f"{'':7}"
        print(f"   {case.name:<36} {t_wb * 1e3:10.3f} {t_torch * 1e3:9.3f} "
              f"{t_wb / t_torch:6.2f} {gflops} {compile_s:9.2f}", flush=True)
    if ratios:
        geo = float(np.exp(np.mean(np.log(ratios))))
        print(f"   geometric mean ratio {geo:.2f}  (worst {max(ratios):.2f})   load {load()}")


# ---- whole networks ---------------------------------------------------------------------------

def relu6(x: nn.Tensor) -> nn.Tensor:
    return wrap(R.clip(x.expr, 0.0, 6.0), "relu6")


class ConvAct(nn.Module):
    def __init__(self, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
                 act: str | None = "relu") -> None:
        self.conv = nn.Conv2D(cin, cout, k, stride, k // 2, groups=groups)
        self.act = act

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = self.conv(x)
        if self.act == "relu":
            return nn.op.relu(y)
        return relu6(y) if self.act == "relu6" else y


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        self.c1 = ConvAct(cin, cout, 3, stride)
        self.c2 = ConvAct(cout, cout, 3, act=None)
        self.down = ConvAct(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout \
            else None

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        skip = self.down(x) if self.down is not None else x
        return nn.op.relu(self.c2(self.c1(x)) + skip)


class ResNet18Like(nn.Module):
    def __init__(self) -> None:
        self.stem = ConvAct(3, 64, 7, 2)
        chans = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
        self.blocks = nn.ModuleList([b for cin, cout, s in chans
                                     for b in (BasicBlock(cin, cout, s),
                                               BasicBlock(cout, cout, 1))])
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = nn.op.max_pool2d(self.stem(x), 3, 2, 1)
        for block in self.blocks:
            y = block(y)
        y = nn.op.reshape(nn.op.adaptive_avg_pool2d(y, (1, 1)), [1, 512])
        return self.fc(y)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        hidden = cin * expand
        self.expand = ConvAct(cin, hidden, 1, act="relu6") if expand != 1 else None
        self.dw = ConvAct(hidden, hidden, 3, stride, groups=hidden, act="relu6")
        self.project = ConvAct(hidden, cout, 1, act=None)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = self.expand(x) if self.expand is not None else x
        y = self.project(self.dw(y))
        return y + x if self.residual else y


MBV2_CONFIG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1)]


class MobileNetV2Like(nn.Module):
    def __init__(self) -> None:
        self.stem = ConvAct(3, 32, 3, 2, act="relu6")
        blocks, cin = [], 32
        for t, c, n, s in MBV2_CONFIG:
            for i in range(n):
                blocks.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        self.blocks = nn.ModuleList(blocks)
        self.head = ConvAct(320, 1280, 1, act="relu6")
        self.fc = nn.Linear(1280, 1000)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = self.stem(x)
        for block in self.blocks:
            y = block(y)
        y = nn.op.reshape(nn.op.adaptive_avg_pool2d(self.head(y), (1, 1)), [1, 1280])
        return self.fc(y)


SEQ, WIDTH, HEADS = 128, 768, 12


class GPT2Block(nn.Module):
    def __init__(self) -> None:
        self.ln1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.ln2 = nn.LayerNorm(WIDTH)
        self.fc1 = nn.Linear(WIDTH, 4 * WIDTH)
        self.fc2 = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        hd = WIDTH // HEADS
        q, k, v = nn.op.split(self.qkv(self.ln1(x)), 3, axis=2)
        q, k, v = (nn.op.reshape(t, [1, SEQ, HEADS, hd]) for t in (q, k, v))
        a = nn.op.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(nn.op.reshape(a, [1, SEQ, WIDTH]))
        return x + self.fc2(nn.op.gelu(self.fc1(self.ln2(x))))


def _init(module: nn.Module, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, p in module.named_parameters():
        shape = tuple(int(d) for d in p.shape)
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 0
        if fan_in:
            arr = rng.standard_normal(shape) * (2.0 / fan_in) ** 0.5
        elif name.endswith("weight"):
            arr = 1.0 + 0.1 * rng.standard_normal(shape)   # layer-norm gains
        else:
            arr = 0.1 * rng.standard_normal(shape)
        out[name] = arr.astype("float32")
    return out


def _torch_twin(kind: str, weights: dict[str, np.ndarray]) -> Callable[[torch.Tensor],
                                                                      torch.Tensor]:
    """The same network in torch, reading the same weights (names as Workbench's)."""
    W = {k: torch.from_numpy(v) for k, v in weights.items()}

    def conv(prefix: str, x: torch.Tensor, stride: int = 1, groups: int = 1,
             act: str | None = "relu") -> torch.Tensor:
        w = W[f"{prefix}.conv.weight"]
        y = F.conv2d(x, w, W[f"{prefix}.conv.bias"], stride, w.shape[-1] // 2, 1, groups)
        if act == "relu":
            return torch.relu(y)
        return F.relu6(y) if act == "relu6" else y

    def resnet(x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(conv("stem", x, 2), 3, 2, 1)
        strides = [1, 1, 2, 1, 2, 1, 2, 1]
        for i, s in enumerate(strides):
            p = f"blocks.{i}"
            skip = conv(f"{p}.down", y, s, act=None) if f"{p}.down.conv.weight" in W else y
            y = torch.relu(conv(f"{p}.c2", conv(f"{p}.c1", y, s), act=None) + skip)
        y = F.adaptive_avg_pool2d(y, 1).reshape(1, 512)
        return F.linear(y, W["fc.weight"], W["fc.bias"])

    def mobilenet(x: torch.Tensor) -> torch.Tensor:
        y = conv("stem", x, 2, act="relu6")
        i, cin = 0, 32
        for t, c, n, s in MBV2_CONFIG:
            for j in range(n):
                p, stride = f"blocks.{i}", s if j == 0 else 1
                h = conv(f"{p}.expand", y, act="relu6") if t != 1 else y
                h = conv(f"{p}.dw", h, stride, groups=h.shape[1], act="relu6")
                h = conv(f"{p}.project", h, act=None)
                y = h + y if stride == 1 and cin == c else h
                i, cin = i + 1, c
        y = F.adaptive_avg_pool2d(conv("head", y, act="relu6"), 1).reshape(1, 1280)
        return F.linear(y, W["fc.weight"], W["fc.bias"])

    def gpt2(x: torch.Tensor) -> torch.Tensor:
        hd = WIDTH // HEADS
        h = F.layer_norm(x, (WIDTH,), W["ln1.weight"], W["ln1.bias"])
        q, k, v = F.linear(h, W["qkv.weight"], W["qkv.bias"]).split(WIDTH, dim=2)
        q, k, v = (t.reshape(1, SEQ, HEADS, hd).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + F.linear(a.transpose(1, 2).reshape(1, SEQ, WIDTH), W["proj.weight"],
                         W["proj.bias"])
        h = F.layer_norm(x, (WIDTH,), W["ln2.weight"], W["ln2.bias"])
        return x + F.linear(F.gelu(F.linear(h, W["fc1.weight"], W["fc1.bias"])),
                            W["fc2.weight"], W["fc2.bias"])

    return {"resnet18": resnet, "mobilenetv2": mobilenet, "gpt2_block": gpt2}[kind]


MODELS = {
    "resnet18": (ResNet18Like, (1, 3, 224, 224), True),
    "mobilenetv2": (MobileNetV2Like, (1, 3, 224, 224), True),
    "gpt2_block": (GPT2Block, (1, SEQ, WIDTH), False),
}


def bench_models() -> None:
    print(f"\n2. Networks (ms; ratio = workbench untuned / torch eager)   load {load()}")
    print(f"   {'network':<22} {'workbench':>10} {'torch':>9} {'ratio':>6} {'kernels':>8} "
          f"{'compile s':>9}  torch layout")
    only = [s for s in ARGS.only.split(",") if s]
    for kind, (cls, shape, is_cnn) in MODELS.items():
        if only and kind not in only:
            continue
        model = cls()
        mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor(shape, "float32")}})
        weights = _init(model, 1)
        start = time.perf_counter()
        exe = relax.build(mod, params=weights)
        compile_s = time.perf_counter() - start
        vm = relax.VirtualMachine(exe, wb.cpu())
        x = rand(*shape)
        args = [wb.nd.array(x)]
        twin = _torch_twin(kind, weights)
        tx = torch.from_numpy(x)
        with torch.inference_mode():
            want = twin(tx).numpy()
        got = vm["forward"](*args).numpy()
        scale = float(np.abs(want).max())
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * scale, err_msg=kind)

        def run_torch(inp=tx, fn=twin):
            with torch.inference_mode():
                fn(inp)
        layouts = [("NCHW", run_torch)]
        if is_cnn:
            cl = tx.contiguous(memory_format=torch.channels_last)
            layouts.append(("channels_last", lambda inp=cl, fn=twin: run_torch(inp, fn)))
        times = in_turns(lambda vm=vm, args=args: vm["forward"](*args),
                         *[fn for _, fn in layouts])
        t_wb, t_torch = times[0], min(times[1:])
        layout = layouts[times[1:].index(t_torch)][0]
        print(f"   {kind:<22} {t_wb * 1e3:10.2f} {t_torch * 1e3:9.2f} {t_wb / t_torch:6.2f} "
              f"{len(exe.kernel_names):8d} {compile_s:9.1f}  {layout}", flush=True)
    print(f"   load {load()}")


def main() -> None:
    print(f"bench_default_schedule: {os.cpu_count()} CPU(s), {THREADS} thread(s) for both, "
          f"torch {torch.__version__}, load average {load()}")
    if not ARGS.models:
        bench_kernels()
    if not ARGS.kernels:
        bench_models()


if __name__ == "__main__":
    sys.exit(main())
