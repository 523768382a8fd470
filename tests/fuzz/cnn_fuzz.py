"""Random small convolutional graphs through the whole compiler, against PyTorch.

Each seed makes a ``torch.nn.Module`` (:func:`random_cnn`): an input with an odd channel count
and image size, then 3..10 random steps -- convolutions (kernel 1/3/5, stride 1/2, dilation,
padding, grouped and depthwise, wide 3x3 ones that take the Winograd path, odd output channels such as 3, 5, 24, 40, 100, with or without
bias, often followed by batch norm), activations (ReLU, ReLU6, hardswish, hardsigmoid, sigmoid,
SiLU, GELU, tanh, leaky ReLU), max / average / adaptive pools, residual adds and products with
an earlier tensor of the same shape, channel concats, squeeze-and-excite blocks (half with a 1x1 projection after), scalar
arithmetic -- and a head (the feature map itself, a second output, or global pooling + linear).
The module is exported with ``torch.export``, imported with ``from_exported_program`` and built
by ``relax.build`` with the default pipeline (channel-blocked layout, fusion, default
schedules); the outputs must match PyTorch's to ``1e-4`` of their largest magnitude.

``python tests/fuzz/cnn_fuzz.py --graphs 300`` (``make fuzz``) runs seeds 1..300 and prints one
line per failure and a summary; ``--seed S`` reruns one graph and prints its steps and the
compiled module's kernels. ``--block 8`` forces AVX2's block on an AVX-512 host (the pass
then converts for 8-lane blocks; every host runs it). ``--pt2e`` quantizes each graph with
PyTorch's PT2E flow first and compares with the quantized model (:data:`PT2E_TOLERANCE`):
on an AVX-512 VNNI host its convolutions run on the int8 kernels; graphs PyTorch's quantizer
refuses are counted as skipped.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from typing import Any

import numpy as np

CHANNELS = (3, 5, 8, 16, 24, 32, 40, 64, 72, 100)
ACTS = ("relu", "relu6", "hardswish", "hardsigmoid", "sigmoid", "silu", "gelu", "tanh",
        "leaky_relu")


def _act(name: str) -> Any:
    import torch.nn as nn
    return {"relu": nn.ReLU(), "relu6": nn.ReLU6(), "hardswish": nn.Hardswish(),
            "hardsigmoid": nn.Hardsigmoid(), "sigmoid": nn.Sigmoid(), "silu": nn.SiLU(),
            "gelu": nn.GELU(), "tanh": nn.Tanh(), "leaky_relu": nn.LeakyReLU(0.1)}[name]


def random_cnn(seed: int) -> tuple[Any, Any, list[str]]:
    """``(module, example input, step descriptions)`` for ``seed``."""
    import torch
    import torch.nn as nn
    rng = random.Random(seed)
    torch.manual_seed(seed)
    c = rng.choice(CHANNELS)
    h, w = rng.randint(5, 23), rng.randint(5, 23)
    batch = rng.choice((1, 1, 2))
    steps: list[tuple[str, Any, Any]] = []     # (kind, module or None, argument)
    shapes = [(c, h, w)]                       # the shape after each step (index 0: input)
    desc = [f"input (N={batch}, C={c}, H={h}, W={w})"]
    mods = nn.ModuleList()

    def add_module(m: Any) -> int:
        mods.append(m)
        return len(mods) - 1

    for _ in range(rng.randint(3, 10)):
        c, h, w = shapes[-1]
        kind = rng.choices(("conv", "act", "pool", "residual", "concat", "se", "scalar"),
                           (6, 3, 1, 2, 1, 1, 1))[0]
        if kind == "pool" and min(h, w) < 4:
            kind = "conv"
        if kind == "conv":
            k = rng.choice((1, 1, 3, 3, 5))
            stride = rng.choice((1, 1, 2)) if min(h, w) > 6 else 1
            dil = rng.choice((1, 1, 1, 2)) if k == 3 and min(h, w) > 8 else 1
            pad = rng.choice((0, k // 2 * dil, k // 2 * dil))
            if (h + 2 * pad - dil * (k - 1) - 1) < 0 or (w + 2 * pad - dil * (k - 1) - 1) < 0:
                pad = k // 2 * dil
            groups, out = 1, rng.choice(CHANNELS)
            r = rng.random()
            if c >= 48 and min(h, w) >= 8 and rng.random() < 0.5:
                # wide 3x3 stride-1: the Winograd path (partial 4x4 tiles, padded channels)
                k, stride, dil, pad, out = 3, 1, 1, rng.choice((0, 1, 1)), rng.choice((64, 72, 100))
            elif r < 0.25:
                groups, out = c, c                          # depthwise
            elif r < 0.35:
                g = next((g for g in (2, 4, 8) if c % g == 0 and rng.random() < 0.7), 1)
                groups, out = g, g * rng.choice((1, 2, 3, 8))
            conv = nn.Conv2d(c, out, k, stride, pad, dil, groups, bias=rng.random() < 0.5)
            seq = [conv]
            if rng.random() < 0.6:
                bn = nn.BatchNorm2d(out)
                with torch.no_grad():
                    bn.running_mean.uniform_(-0.5, 0.5)
                    bn.running_var.uniform_(0.5, 2.0)
                    bn.weight.uniform_(0.5, 1.5)
                    bn.bias.uniform_(-0.5, 0.5)
                seq.append(bn)
            if rng.random() < 0.6:
                act = rng.choice(ACTS)
                seq.append(_act(act))
            steps.append(("mod", add_module(nn.Sequential(*seq)), None))
            oh = (h + 2 * pad - dil * (k - 1) - 1) // stride + 1
            ow = (w + 2 * pad - dil * (k - 1) - 1) // stride + 1
            shapes.append((out, oh, ow))
            desc.append(f"conv {c}->{out} k{k} s{stride} p{pad} d{dil} g{groups} "
                        f"bias={conv.bias is not None} + {[type(m).__name__ for m in seq[1:]]}")
        elif kind == "act":
            act = rng.choice(ACTS)
            steps.append(("mod", add_module(_act(act)), None))
            shapes.append((c, h, w))
            desc.append(act)
        elif kind == "pool":
            r = rng.random()
            if r < 0.4:
                m, (oh, ow) = nn.MaxPool2d(3, 2, 1), ((h - 1) // 2 + 1, (w - 1) // 2 + 1)
            elif r < 0.7:
                m, (oh, ow) = nn.AvgPool2d(2, 2), (h // 2, w // 2)
            else:
                m, (oh, ow) = nn.AdaptiveAvgPool2d((1, 1)), (1, 1)
            steps.append(("mod", add_module(m), None))
            shapes.append((c, oh, ow))
            desc.append(type(m).__name__)
        elif kind in ("residual", "concat"):
            same = [i for i, s in enumerate(shapes[:-1]) if
                    (s == shapes[-1] if kind == "residual" else s[1:] == (h, w))]
            if not same:
                steps.append(("mod", add_module(_act("relu")), None))
                shapes.append((c, h, w))
                desc.append("relu")
                continue
            j = rng.choice(same)
            if kind == "residual":
                op = rng.choice(("add", "add", "mul", "sub"))
                steps.append((op, None, j))
                shapes.append((c, h, w))
                desc.append(f"{op} with step {j}")
            else:
                steps.append(("concat", None, j))
                shapes.append((c + shapes[j][0], h, w))
                desc.append(f"concat with step {j} ({shapes[j][0]} channels)")
        elif kind == "se":
            mid = max(1, c // 4)
            fc1, fc2 = nn.Conv2d(c, mid, 1), nn.Conv2d(mid, c, 1)
            # half of them end in a 1x1 projection, as in EfficientNet / MobileNetV3 (the
            # scale then moves onto its weights: FoldChannelScaleToConv2D)
            out = rng.choice(CHANNELS) if rng.random() < 0.5 else None
            parts = [fc1, fc2] + ([nn.Conv2d(c, out, 1)] if out else [])
            steps.append(("se", add_module(nn.ModuleList(parts)), None))
            shapes.append((out or c, h, w))
            desc.append(f"squeeze-excite {c}->{mid}->{c}" +
                        (f", 1x1 projection to {out}" if out else ""))
        else:
            a, b = rng.uniform(0.5, 2.0), rng.uniform(-1, 1)
            steps.append(("scalar", None, (a, b)))
            shapes.append((c, h, w))
            desc.append(f"x * {a:.3f} + {b:.3f}, / 1.5")
    head = rng.choice(("map", "two", "linear"))
    classes = rng.choice((10, 17))
    if head == "linear":
        lin = add_module(nn.Linear(shapes[-1][0], classes))
    desc.append(f"head: {head}")

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mods = mods

        def forward(self, x: Any) -> Any:
            vals = [x]
            for kind, m, arg in steps:
                y = vals[-1]
                if kind == "mod":
                    y = self.mods[m](y)
                elif kind == "add":
                    y = y + vals[arg]
                elif kind == "mul":
                    y = y * vals[arg]
                elif kind == "sub":
                    y = y - vals[arg]
                elif kind == "concat":
                    y = torch.cat([y, vals[arg]], dim=1)
                elif kind == "se":
                    fc1, fc2, *proj = self.mods[m]
                    s = torch.relu(fc1(y.mean((2, 3), keepdim=True)))
                    y = y * torch.sigmoid(fc2(s))
                    if proj:
                        y = proj[0](y)
                else:
                    y = (y * arg[0] + arg[1]) / 1.5
                vals.append(y)
            out = vals[-1]
            if head == "two":
                return out, vals[len(vals) // 2]
            if head == "linear":
                return self.mods[lin](out.mean((2, 3)))
            return out

    x = torch.randn(batch, shapes[0][0], shapes[0][1], shapes[0][2])
    return Net().eval(), x, desc


def quantize_pt2e(net: Any, x: Any, seed: int) -> Any:
    """``net`` quantized by PyTorch's PT2E flow (torchao's x86 Inductor quantizer: uint8
    activations per tensor, int8 weights per channel), calibrated on ``x`` and three random
    inputs like it."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq
    quantizer = xiq.X86InductorQuantizer().set_global(
        xiq.get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(torch.export.export(net, (x,)).module(), quantizer)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for inp in [x] + [torch.randn(x.shape, generator=gen) for _ in range(3)]:
            prepared(inp)
    return convert_pt2e(prepared)


#: With --pt2e: the reference is PyTorch's quantized model, which dequantizes and convolves in
#: float32 while ours sums integers exactly, so a value at a rounding boundary may quantize one
#: step apart and carry that on: outputs agree within this fraction of their largest magnitude
#: (a lost zero-point correction is off by 10-20%).
PT2E_TOLERANCE = 0.03


def run_graph(seed: int, block: int | None = None, verbose: bool = False,
              pt2e: bool = False) -> dict:
    """Build graph ``seed`` and compare it with PyTorch: a dict with ``outcome`` (``ok``,
    ``wrong``, ``error``; with ``pt2e``, also ``skipped`` when PyTorch's quantizer refuses the
    graph), ``converted`` (convolutions in the blocked layout), ``winograd`` (those of them
    that became Winograd convolutions), ``int8`` (those that became integer ones) and, for a
    failure, ``detail`` and the steps. ``pt2e`` quantizes the graph first
    (:func:`quantize_pt2e`) and compares with the quantized model."""
    import torch

    import workbench as wb
    from workbench import relax
    from workbench.relax.frontend.torch import from_exported_program
    from workbench.relax.pipeline import get_default_pipeline
    from workbench.relax.transform import ConvertLayoutNCHWc
    net, x, desc = random_cnn(seed)
    result: dict[str, Any] = {"seed": seed, "steps": desc}
    if pt2e:
        try:
            net = quantize_pt2e(net, x, seed)
        except Exception as e:  # noqa: BLE001 - PyTorch's quantizer, not ours
            result.update(outcome="skipped", detail=f"quantizer: {type(e).__name__}: {e}")
            return result
    tolerance = PT2E_TOLERANCE if pt2e else 1e-4
    try:
        with torch.no_grad():
            ref = net(x)
        refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
        mod = from_exported_program(torch.export.export(net, (x,)),
                                    keep_params_as_input=False)
        pipeline = get_default_pipeline("llvm")
        if block is not None:
            pipeline.passes = [ConvertLayoutNCHWc("llvm", block=block)
                               if p.name == "ConvertLayoutNCHWc" else p
                               for p in pipeline.passes]
        layout_pass = next((p for p in pipeline.passes if p.name == "ConvertLayoutNCHWc"),
                           None)                # None: options.convert_layout is off
        ex = relax.build(mod, "llvm", relax_pipeline=pipeline)
        for key, attr in (("converted", "converted"), ("winograd", "winograd_convs"),
                          ("int8", "int8_convs")):
            result[key] = getattr(layout_pass, attr, 0)
        vm = relax.VirtualMachine(ex, wb.cpu())
        out = vm["main"](wb.nd.array(x.numpy()))
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        got = [o.numpy() for o in outs]
        if verbose:
            print("\n".join(desc))
        if len(got) != len(refs):
            raise AssertionError(f"{len(got)} outputs, PyTorch gives {len(refs)}")
        for k, (g, r) in enumerate(zip(got, refs)):
            if g.shape != r.shape:
                raise AssertionError(f"output {k}: shape {g.shape}, PyTorch {r.shape}")
            scale = max(float(np.abs(r).max()), 1e-3)
            err = float(np.abs(g - r).max())
            result["error"] = max(result.get("error", 0.0), err / scale)
            if not err <= tolerance * scale:
                result.update(outcome="wrong",
                              detail=f"output {k}: max error {err:.3g} (scale {scale:.3g})")
                return result
        result["outcome"] = "ok"
    except Exception as e:  # noqa: BLE001 - every failure is a finding
        result.update(outcome="error", detail=f"{type(e).__name__}: {e}",
                      traceback=traceback.format_exc()[-3000:])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", type=int, default=300)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--seed", type=int, default=None, help="run one graph, verbosely")
    ap.add_argument("--block", type=int, default=None)
    ap.add_argument("--pt2e", action="store_true",
                    help="quantize each graph with PyTorch's PT2E flow first (int8 kernels)")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    if args.seed is not None:
        r = run_graph(args.seed, args.block, verbose=True, pt2e=args.pt2e)
        print({k: v for k, v in r.items() if k != "steps"})
        return 0 if r["outcome"] == "ok" else 1
    start = time.time()
    tally: dict[str, int] = {}
    converted = winograd = int8 = 0
    worst = 0.0
    for seed in range(args.first_seed, args.first_seed + args.graphs):
        r = run_graph(seed, args.block, pt2e=args.pt2e)
        tally[r["outcome"]] = tally.get(r["outcome"], 0) + 1
        converted += r.get("converted", 0)
        winograd += r.get("winograd", 0)
        int8 += r.get("int8", 0)
        worst = max(worst, r.get("error", 0.0))
        if r["outcome"] not in ("ok", "skipped"):
            print(f"seed {seed}: {r['outcome']}: {r['detail']}", flush=True)
            print("   " + "\n   ".join(r["steps"]), flush=True)
    print(f"cnn fuzz: {args.graphs} graphs, {tally}, {converted} convolutions in the blocked "
          f"layout ({winograd} Winograd, {int8} int8), largest error {worst:.2g} of the "
          f"output's magnitude, {time.time() - start:.0f} s", flush=True)
    return 0 if set(tally) <= {"ok", "skipped"} else 1


if __name__ == "__main__":
    sys.exit(main())
