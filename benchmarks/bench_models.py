"""Whole models next to PyTorch and onnxruntime (issues 12, 21): torchvision's ResNet-18,
ResNet-50, MobileNetV2, MobileNetV3-Large and EfficientNet-B0 at batch 1 (3x224x224) and a
GPT-2-style block (GPT-2 small's sizes: 768 wide,
12 heads, sequence 128), random weights (nothing is downloaded).

Per model, measured in one run and in turns (every round times each runner once, so load on
a shared machine hits all of them alike; the median over rounds is printed):

- **Workbench untuned**: ``relax.build`` of the imported model (``from_exported_program``),
  default schedules for every kernel;
- **Workbench tuned**: ``tune_relax`` with ``--trials`` trials in all (evolutionary search with
  a ``--population`` of candidates, ``--per-iter`` trials per batch, gradient task scheduler;
  each task's first trial is its default schedule, and its leaders are measured again at the
  end, ``meta_schedule.confirm``), then ``compile_relax``; the budget and the
  tuning wall time are printed (``--trials 0`` skips it; ``--top K`` tunes only the K kernels
  that take the most time untuned; ``--work-dir`` keeps the database, and a later run with
  the same directory resumes or reuses it instead of tuning again; ``--cache-flush`` times
  every candidate with its arguments but the first flushed from the caches before each call,
  TVM's ``enable_cpu_cache_flush`` with one call per measurement);
- **Workbench tuned (checked)**: the same, with each tuned kernel timed inside the model
  against its default schedule first (``meta_schedule.in_model.check_in_model``: the per-kernel
  table is printed: record, default and tuned times in the model); records that lose there are
  not used. "tuned (all records)" uses every record;
- **PyTorch eager**: ``torch.inference_mode``, contiguous and, for the CNNs, channels_last, each
  with ``--threads`` threads and with 1 (the ratios use the fastest of them);
- **onnxruntime**: the model exported by ``torch.onnx.export`` (dynamo), CPU provider.

``gpt2_decode`` is one greedy decode step of a GPT-2-style decoder with a key/value cache
(issue 22; ``relax.frontend.nn.gpt2``: 4 layers at GPT-2 small's width, GPT-2's vocabulary of
50257 with the tied output projection, a cache of 256 positions, random weights), after a
prompt of 64 tokens: the time per token (the step's call and the argmax of its logits), ours
on the VM with the cache written in place against PyTorch eager with its own fixed-capacity
cache (``torch_reference``), each step at the same position. It is not tuned.

``resnet18_int8`` is ResNet-18 quantized by onnxruntime's ``quantize_static`` (QDQ format,
per-channel int8 weights, int8 activations calibrated on 8 random images): Workbench imports
that ONNX file (``from_onnx``) and is compared with onnxruntime running the same file (its
int8 kernels) and with PyTorch eager on the float model; outputs are checked against
onnxruntime's.

Every runner uses ``--threads`` threads (default: all cores). Workbench's outputs are checked
against PyTorch (max abs error printed). Before each timed turn the script waits until the
process's other threads stop running (PyTorch's and onnxruntime's pools spin after a call).

Usage: ``python benchmarks/bench_models.py [--trials 200] [--models resnet18,resnet50,...]
[--per-iter 8] [--population 64] [--top K] [--rounds 7] [--threads N] [--work-dir DIR]
[--cache-flush] [--mcpu haswell] [--interpreted]`` (``--mcpu``: the untuned model also
compiled for those CPUs and run here, e.g. the AVX2 code path on an AVX-512 host;
onnxruntime still picks its kernels for this host; ``--interpreted``: the untuned build also
run with the VM's static replay off, every call interpreted)
"""
from __future__ import annotations

import argparse
import contextlib
import io
import logging
import math
import os
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
          "gpt2", "bert", "resnet18_int8", "gpt2_decode")


def gpt2_block() -> tuple[Any, tuple]:
    """One GPT-2 transformer block (pre-LayerNorm, causal self-attention, tanh GELU MLP) at
    GPT-2 small's width, on a (1, 128, 768) hidden state."""
    import torch
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d: int = 768, heads: int = 12, max_len: int = 1024):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.heads = heads
            causal = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
            self.register_buffer("bias", causal.view(1, 1, max_len, max_len), persistent=False)

        def forward(self, x: Any) -> Any:
            b, t, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            hd = d // self.heads
            q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            att = att.masked_fill(~self.bias[:, :, :t, :t], float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    return Block().eval(), (torch.randn(1, 128, 768),)


def bert_encoder() -> tuple[Any, tuple]:
    """A BERT-base encoder (issue 22): ``torch.nn.TransformerEncoder`` with 12 post-LayerNorm
    layers, 768 wide, 12 heads, a 3072-wide exact-GELU MLP, on a (1, 128, 768) hidden state."""
    import torch
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(768, 12, dim_feedforward=3072, dropout=0.0,
                                       activation="gelu", batch_first=True)
    # enable_nested_tensor only matters with a padding mask; off, it stops a warning
    return (nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).eval(),
            (torch.randn(1, 128, 768),))


def export_program(model: Any, args: tuple) -> Any:
    """``torch.export`` of ``model``, with the fused ``_transformer_encoder_layer_fwd`` fast
    path of ``nn.TransformerEncoderLayer`` off, so the program is made of plain aten ops."""
    import torch
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        return torch.export.export(model, args)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def make_model(name: str) -> tuple[Any, tuple]:
    import torch
    import torchvision
    torch.manual_seed(0)
    if name == "gpt2":
        return gpt2_block()
    if name == "bert":
        return bert_encoder()
    model = getattr(torchvision.models, name)(weights=None).eval()
    return calibrated_batch_norm(model), (torch.randn(1, 3, 224, 224),)


def calibrated_batch_norm(model: Any, image: tuple = (3, 224, 224)) -> Any:
    """``model`` with its batch-norm statistics taken from two random batches (their average),
    so the activations of a randomly initialised CNN stay near 1 through its depth and the
    output check against PyTorch means something: with torchvision's initial statistics
    MobileNetV2's logits are ~1e-9 and EfficientNet-B0's ~1e-14, where any result passes an
    absolute tolerance. The kernels, and so the timings, are the same either way. ``image``:
    the (channels, height, width) of the random batches."""
    import torch
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    if not bns:
        return model
    for m in bns:
        m.reset_running_stats()
        m.momentum = None                 # a cumulative average over the batches
        m.train()                         # only batch norm learns (no dropout, no drop path)
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(2, *image))
    return model.eval()


class Runner:
    """One way of running a model: ``call()`` runs it once on fixed inputs."""

    def __init__(self, name: str, call: Callable[[], Any]) -> None:
        self.name, self.call, self.samples = name, call, []

    def time_turn(self, number: int) -> None:
        from workbench.runtime.settle import wait_for_quiet_threads
        wait_for_quiet_threads(0.5)
        self.call()
        t0 = time.perf_counter()
        for _ in range(number):
            self.call()
        self.samples.append((time.perf_counter() - t0) / number)

    @property
    def ms(self) -> float:
        return float(np.median(self.samples)) * 1e3


def workbench_runner(name: str, exe: Any, args: tuple, replay: bool = True
                     ) -> tuple[Runner, np.ndarray]:
    import workbench as wb
    with wb.options.override(vm_static_replay=replay):
        vm = wb.relax.VirtualMachine(exe, wb.cpu())
    inputs = [wb.nd.array(a.numpy()) for a in args]
    fn = vm["main"]
    out = fn(*inputs)
    first = out[0] if isinstance(out, (tuple, list)) else out
    return Runner(name, lambda: fn(*inputs)), first.numpy()


def torch_runners(model: Any, args: tuple, cnn: bool) -> list[Runner]:
    import torch

    def eager(m: Any, a: tuple) -> Callable[[], Any]:
        def call() -> Any:
            with torch.inference_mode():
                return m(*a)
        return call

    def one_thread(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return call()
            finally:
                torch.set_num_threads(threads)
        return run

    runners = [Runner("PyTorch eager", eager(model, args))]
    if cnn:
        cl_model = model.to(memory_format=torch.channels_last)
        cl_args = tuple(a.contiguous(memory_format=torch.channels_last) for a in args)
        runners.append(Runner("PyTorch eager channels_last", eager(cl_model, cl_args)))
    if torch.get_num_threads() > 1:
        # PyTorch's thread pool degrades badly on a busy machine (one run: ResNet-18 848 ms
        # with 2 threads, 39 ms with 1): the reference is its fastest configuration
        runners += [Runner(f"{r.name} 1 thread", one_thread(r.call)) for r in list(runners)]
    return runners


def onnxruntime_runner(ep: Any, args: tuple, threads: int) -> Runner | None:
    try:
        import onnxruntime as ort
        import torch
    except ImportError:
        return None
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        program = torch.onnx.export(ep, args, dynamo=True, verbose=False)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(program.model_proto.SerializeToString(), opts,
                                   providers=["CPUExecutionProvider"])
    feed = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    session.run(None, feed)
    return Runner("onnxruntime", lambda: session.run(None, feed))


def onnx_model_runner(model: Any, args: tuple, threads: int) -> tuple[Runner, np.ndarray]:
    """onnxruntime on an ONNX model as it is (e.g. a quantized one), and its output."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(model.SerializeToString(), opts,
                                   providers=["CPUExecutionProvider"])
    feed = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    out = session.run(None, feed)[0]
    return Runner("onnxruntime (int8 QDQ)", lambda: session.run(None, feed)), out


def slowest_kernels(exe: Any, args: tuple, k: int) -> list[str]:
    """The ``k`` fused kernels that take the most time in one profiled run."""
    import workbench as wb
    vm = wb.relax.VirtualMachine(exe, wb.cpu(), profile=True)
    report = vm.profile("main", *[wb.nd.array(a.numpy()) for a in args])
    names = report.group_by("name")["Name"]
    return [n for n in names if n in exe.kernel_names][:k]


def tune(mod: Any, target: Any, work_dir: str, ns: argparse.Namespace,
         op_names: list[str] | None) -> tuple[Any, float, int, int]:
    """(database, tuning wall seconds, trials in the database for the tuned tasks, tasks)."""
    from workbench.meta_schedule.relax_integration import extract_tasks, tune_relax
    from workbench.meta_schedule.search_strategy import EvolutionarySearch
    from workbench.meta_schedule.task_budget import trials_done
    tasks = extract_tasks(mod, target, alternatives=True)   # what tune_relax tunes
    if op_names is not None:
        tasks = [t for t in tasks if any(op in t.task_name for op in op_names)]
    runner: Any = "local"
    if ns.cache_flush:
        # TVM's advice for CPU tuning: each timed call starts with the weights and the output
        # out of the caches, the input warm (one call per measurement, so the flush is not
        # amortised away).
        from workbench.meta_schedule.runner import EvaluatorConfig, LocalRunner
        runner = LocalRunner(evaluator_config=EvaluatorConfig(
            number=1, repeat=10, min_repeat_ms=0, enable_cpu_cache_flush=True))
    t0 = time.perf_counter()
    db = tune_relax(mod, None, target, work_dir, max_trials_global=ns.trials,
                    num_trials_per_iter=ns.per_iter, op_names=op_names,
                    strategy=EvolutionarySearch(population_size=ns.population),
                    runner=runner, seed=0, dashboard="text")
    secs = time.perf_counter() - t0
    total = sum(trials_done(db, [t.dispatched[0] for t in tasks]))
    return db, secs, total, len(tasks)


def quantized_resnet18(work: str) -> tuple[Any, Any, tuple]:
    """(float torch model, ONNX model quantized by onnxruntime's quantize_static, inputs)."""
    import onnx
    import torch
    from onnxruntime import quantization as q
    model, args = make_model("resnet18")
    fp32, qdq = os.path.join(work, "resnet18.onnx"), os.path.join(work, "resnet18_qdq.onnx")
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, fp32, input_names=["x"], opset_version=17,
                          dynamo=False)

    class Calibration(q.CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            self.feeds = iter([{"x": rng.standard_normal((1, 3, 224, 224), np.float32)}
                               for _ in range(8)])

        def get_next(self) -> dict | None:
            return next(self.feeds, None)

    logging.getLogger().setLevel(logging.ERROR)     # its advice to pre-process the model
    q.quantize_static(fp32, qdq, Calibration(), quant_format=q.QuantFormat.QDQ,
                      per_channel=True, activation_type=q.QuantType.QInt8,
                      weight_type=q.QuantType.QInt8)
    return model, onnx.load(qdq), args


def bench_model(name: str, args_ns: argparse.Namespace) -> list[str]:
    import torch

    import workbench as wb
    from workbench import relax
    from workbench.meta_schedule.relax_integration import compile_relax
    from workbench.relax.frontend.torch import from_exported_program

    threads = args_ns.threads
    target = wb.Target(f"llvm -num-cores={threads}")
    quantized = name == "resnet18_int8"
    if quantized:
        from workbench.relax.frontend.onnx import from_onnx
        model, qmodel, args = quantized_resnet18(tempfile.mkdtemp(prefix="wb_bench_int8_"))
        ort_runner, ort_out = onnx_model_runner(qmodel, args, threads)
        want = ort_out
    else:
        model, args = make_model(name)
        with torch.no_grad():
            want = model(*args).numpy()
            ep = export_program(model, args)
    t0 = time.perf_counter()
    mod = from_onnx(qmodel) if quantized else from_exported_program(ep)
    untuned_exe = relax.build(mod, target)
    build_secs = time.perf_counter() - t0
    runners, outputs = [], {}
    runner, outputs["untuned"] = workbench_runner("Workbench untuned", untuned_exe, args)
    runners.append(runner)
    notes = [f"{name}: import + build {build_secs:.1f} s"]
    if args_ns.interpreted:
        # the same executable with every call interpreted (no static replay): what the
        # VM's replay of the recorded kernel calls saves
        runner, outputs["untuned, interpreted"] = workbench_runner(
            "Workbench untuned, interpreted", untuned_exe, args, replay=False)
        runners.append(runner)
    for mcpu in args_ns.mcpu:
        # the same model compiled for another CPU's vector ISA (e.g. haswell: AVX2, 8-channel
        # blocks), run here: that ISA's code path timed against the same references
        label = f"Workbench untuned -mcpu={mcpu}"
        runner, outputs[f"untuned -mcpu={mcpu}"] = workbench_runner(
            label, relax.build(mod, wb.Target(f"llvm -num-cores={threads} -mcpu={mcpu}")), args)
        runners.append(runner)
    if args_ns.trials > 0:
        work_dir = (os.path.join(args_ns.work_dir, name) if args_ns.work_dir
                    else tempfile.mkdtemp(prefix=f"wb_bench_{name}_"))
        op_names = (slowest_kernels(untuned_exe, args, args_ns.top) if args_ns.top > 0
                    else None)
        db, secs, total, ntasks = tune(mod, target, work_dir, args_ns, op_names)
        from workbench.meta_schedule.in_model import check_in_model
        t_check = time.perf_counter()
        check = check_in_model(db, mod, target, [a.numpy() for a in args])
        t_check = time.perf_counter() - t_check
        tuned_all = compile_relax(db, mod, target)
        runner, outputs["tuned (all records)"] = workbench_runner(
            "Workbench tuned (all records)", tuned_all, args)
        runners.append(runner)
        runner, outputs["tuned"] = workbench_runner("Workbench tuned (checked)", check.exe,
                                                    args)
        runners.append(runner)
        ends = ", ".join(f"{'checked' if k == 'tuned' else k} {v:.2f} ms"
                         for k, v in check.model_ms.items())
        verdict = ("the untuned build is kept" if check.untuned_kept else
                   "every record is used after all" if check.all_records_kept else "kept")
        notes.append(f"{name}: records checked in the model ({t_check:.0f} s): kernels "
                     f"untuned {check.untuned_us:.0f} us, tuned {check.tuned_us:.0f} us; "
                     f"{len(check.profile_hidden)} of {len(check.table)} records lose in its "
                     f"profile; end to end {ends}: {verdict} (Workbench tuned (checked): "
                     f"{len(check.table) - len(check.hidden)} records used)\n" +
                     check.table.to_string(float_format=lambda v: f"{v:.1f}"))
        impl = getattr(check.exe, "conv_implementations", None)
        if impl is not None and len(impl):
            notes.append(f"{name}: Winograd or direct, from the records (us per call; Used: "
                         f"after the check in the model):\n" +
                         impl.drop(columns=["Function"]).to_string(
                             float_format=lambda v: f"{v:.1f}", index=False))
        if len(check.implementations):
            notes.append(f"{name}: choices against the rule, checked in the model (us per "
                         f"call):\n" + check.implementations.drop(columns=["Function"])
                         .to_string(float_format=lambda v: f"{v:.1f}", index=False))
        notes.append(f"{name}: tuned {ntasks} task(s) with a budget of {args_ns.trials} trials "
                     f"({total} in the database; {args_ns.per_iter} per batch, population "
                     f"{args_ns.population}) in {secs:.0f} s wall; records in {work_dir}")
    reference = "onnxruntime (int8)" if quantized else "PyTorch"
    for key, got in outputs.items():
        err, scale = float(np.max(np.abs(got - want))), float(np.max(np.abs(want)))
        notes.append(f"{name}: Workbench {key} vs {reference}: max abs error {err:.2e} "
                     f"(outputs up to {scale:.3g}: {err / max(scale, 1e-30):.1e} of that)")
    runners += torch_runners(model, args, cnn=name not in ("gpt2", "bert"))
    if not quantized:
        ort_runner = onnxruntime_runner(ep, args, threads)
    if ort_runner is not None:
        runners.append(ort_runner)

    # number of calls per turn: about 0.2 s of the slowest runner
    slowest = max(_once(r) for r in runners)
    number = max(1, int(0.2 / slowest))
    for _ in range(args_ns.rounds):
        for r in runners:
            r.time_turn(number)
    eager = min((r for r in runners if r.name.startswith("PyTorch")), key=lambda r: r.ms)
    lines = [f"\n{name} (median of {args_ns.rounds} rounds, {number} call(s) per turn, "
             f"{threads} thread(s)):",
             f"  {'runner':32s} {'ms':>9s} {'/ PyTorch eager':>16s}"]
    for r in runners:
        mark = " *" if r is eager else ""
        lines.append(f"  {r.name:32s} {r.ms:9.2f} {r.ms / eager.ms:15.2f}x{mark}")
    lines.append(f"  (* the PyTorch eager reference: {eager.name})")
    return notes + lines


def gpt2_decode_config() -> Any:
    from workbench.relax.frontend.nn.gpt2 import GPT2Config
    return GPT2Config(vocab_size=50257, n_positions=256, n_embd=768, n_layer=4, n_head=12)


DECODE_PROMPT = 64


def bench_decode(args_ns: argparse.Namespace) -> list[str]:
    """The ``gpt2_decode`` row: time per generated token (see the module docstring)."""
    import torch

    import workbench as wb
    from workbench import relax
    from workbench.relax.frontend.nn.gpt2 import (
        GPT2Decoder, export_gpt2, from_torch, torch_reference,
    )
    name, cfg = "gpt2_decode", gpt2_decode_config()
    threads = args_ns.threads
    reference = torch_reference(cfg, seed=0)
    t0 = time.perf_counter()
    exe = relax.build(export_gpt2(from_torch(reference, cfg), prefill_len=DECODE_PROMPT),
                      wb.Target(f"llvm -num-cores={threads}"))
    build_secs = time.perf_counter() - t0
    prompt = list(np.random.default_rng(0).integers(0, cfg.vocab_size, DECODE_PROMPT))
    decoder = GPT2Decoder(exe, cfg, prefill_len=DECODE_PROMPT)
    decoder.prefill(prompt)
    reference.reset()
    with torch.inference_mode():
        reference(torch.tensor([prompt]), 0)
    token = int(prompt[-1])

    def ours() -> int:
        decoder.pos = DECODE_PROMPT          # every step at the same position
        return int(np.argmax(decoder.step(token)))
    tok = torch.tensor([[token]])

    class Step(torch.nn.Module):
        def forward(self, t: Any) -> Any:
            return reference(t, DECODE_PROMPT)[0, -1].argmax()
    step = Step()
    decoder.pos = DECODE_PROMPT
    got = decoder.step(token)
    with torch.inference_mode():
        want = reference(tok, DECODE_PROMPT)[0, -1].numpy()
    notes = [f"{name}: {cfg.n_layer} layers, width {cfg.n_embd}, vocabulary {cfg.vocab_size}, "
             f"cache {cfg.n_positions} positions, step at position {DECODE_PROMPT}; export + "
             f"build {build_secs:.1f} s",
             f"{name}: Workbench vs PyTorch step logits: max abs error "
             f"{float(np.max(np.abs(got - want))):.2e} (logits up to "
             f"{float(np.max(np.abs(want))):.2f}); same argmax: "
             f"{int(np.argmax(got)) == int(np.argmax(want))}"]
    if args_ns.trials > 0:
        notes.append(f"{name}: not tuned (--trials applies to the other models)")
    runners = [Runner("Workbench untuned", ours)] + torch_runners(step, (tok,), cnn=False)
    slowest = max(_once(r) for r in runners)
    number = max(1, int(0.2 / slowest))
    for _ in range(args_ns.rounds):
        for r in runners:
            r.time_turn(number)
    eager = min((r for r in runners if r.name.startswith("PyTorch")), key=lambda r: r.ms)
    lines = [f"\n{name}: time per token (median of {args_ns.rounds} rounds, {number} step(s) "
             f"per turn, {threads} thread(s)):",
             f"  {'runner':32s} {'ms':>9s} {'/ PyTorch eager':>16s}"]
    for r in runners:
        mark = " *" if r is eager else ""
        lines.append(f"  {r.name:32s} {r.ms:9.2f} {r.ms / eager.ms:15.2f}x{mark}")
    lines.append(f"  (* the PyTorch eager reference: {eager.name})")
    return notes + lines


def _once(r: Runner) -> float:
    t0 = time.perf_counter()
    r.call()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=200,
                    help="tuning budget per model (total trials; 0: no tuned runner)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--per-iter", type=int, default=8, help="num_trials_per_iter")
    ap.add_argument("--population", type=int, default=64,
                    help="evolutionary search population (TVM: 512; slow on 2 cores)")
    ap.add_argument("--top", type=int, default=0,
                    help="tune only the K kernels that take the most time untuned (0: all)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--mcpu", default="",
                    help="comma-separated CPUs (e.g. haswell) whose code also runs here, "
                         "untuned: an AVX2 build timed on an AVX-512 host")
    ap.add_argument("--interpreted", action="store_true",
                    help="also time the untuned build with the VM's static replay off")
    ap.add_argument("--cache-flush", action="store_true",
                    help="tune with every argument but the first flushed from the caches "
                         "before every timed call "
                         "(EvaluatorConfig(number=1, repeat=10, enable_cpu_cache_flush=True))")
    ap.add_argument("--work-dir", default=None,
                    help="keep each model's tuning database in DIR/<model> (resumed, reused)")
    ns = ap.parse_args()
    names = [m.strip() for m in ns.models.split(",") if m.strip()]
    ns.mcpu = [c.strip() for c in ns.mcpu.split(",") if c.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    if ns.trials < 0 or ns.top < 0 or min(ns.rounds, ns.threads, ns.per_iter,
                                           ns.population) < 1:
        ap.error("--trials and --top must be >= 0; --rounds, --threads, --per-iter and "
                 "--population >= 1")

    import workbench  # noqa: F401 - before torch: workbench bounds libgomp's idle spinning
    foreign = [c for c in ns.mcpu if not workbench.Target(f"llvm -mcpu={c}").runs_on()]
    if foreign:
        ap.error(f"--mcpu {','.join(foreign)}: this host ({workbench.Target('llvm').host_cpu}) "
                 "lacks extensions that code uses, so it cannot run it")
    import torch
    torch.set_num_threads(ns.threads)
    logging.getLogger("workbench.meta_schedule").setLevel(logging.WARNING)
    print(f"load average before: {os.getloadavg()}")
    report = []
    for name in names:
        report += bench_decode(ns) if name == "gpt2_decode" else bench_model(name, ns)
    print("\n".join(report))
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
