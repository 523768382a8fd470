"""A model in our parallel runtime and in PyTorch while another process keeps a core busy
(issue 26: in JupyterLab with Chromium busy on the same 2 cores, notebook 07's untuned
ResNet-18 took 259 ms against 35 ms quiet, while PyTorch did not collapse).

Per round, four turns: each runner quiet, then each runner with a *hog* running (a separate
Python process spinning in a loop, started before the turn and ended after it;
``--hogs`` of them). Every turn calls the model ``--number`` times after one warm-up call;
the median over ``--rounds`` rounds is printed, with the ratios that matter:

- *loaded / quiet* per runner: how badly the runner degrades under the load;
- *Workbench / PyTorch* quiet and loaded.

Workbench runs ``relax.build`` of the imported model (default schedules); PyTorch runs eager
in ``torch.inference_mode`` with the same thread count (``--threads``, default: all cores).
Run it in turns with the options to compare (the machine may be shared: read the ratios)::

    python benchmarks/bench_oversubscribed.py --model resnet18
    python benchmarks/bench_oversubscribed.py --first torch        # torch's libgomp
    WORKBENCH_PARALLEL_CHUNKS=0 python benchmarks/bench_oversubscribed.py  # static split

``--model`` is a torchvision model name (random weights, batch-norm statistics calibrated,
1x3x224x224 input) or ``small``: a 4-layer CNN at 1x3x64x64 that builds in seconds.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# A process that keeps one core busy, and ends when this script does (its parent changes).
HOG_SOURCE = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(100000):
        pass
"""


def make_model(name: str) -> tuple[Any, tuple]:
    """(model in eval mode, example inputs): a torchvision model or the ``small`` CNN, its
    batch-norm statistics calibrated (bench_models: otherwise MobileNetV2's outputs are
    ~1e-9 and the output check below passes anything)."""
    import torch
    import torchvision
    from bench_models import calibrated_batch_norm

    torch.manual_seed(0)
    if name == "small":
        nn = torch.nn
        layers: list[Any] = []
        width = 3
        for out in (32, 64, 64, 128):
            layers += [nn.Conv2d(width, out, 3, padding=1), nn.BatchNorm2d(out), nn.ReLU()]
            width = out
        model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(width, 10))
        return calibrated_batch_norm(model.eval(), (3, 64, 64)), (torch.randn(1, 3, 64, 64),)
    model = getattr(torchvision.models, name)(weights=None).eval()
    return calibrated_batch_norm(model), (torch.randn(1, 3, 224, 224),)


class Hogs:
    """``count`` processes spinning on the CPU while the context is active."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "Hogs":
        self.procs = [subprocess.Popen([sys.executable, "-c", HOG_SOURCE])
                      for _ in range(self.count)]
        time.sleep(0.2)  # let them reach their loop
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


def time_turn(call: Callable[[], Any], number: int) -> float:
    """Seconds per call over ``number`` calls, after one warm-up call and a wait for the
    process's other threads to go quiet (the other runner's pool may still spin)."""
    from workbench.runtime.settle import wait_for_quiet_threads

    wait_for_quiet_threads(0.5)
    call()
    t0 = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - t0) / number


def build_runners(name: str, threads: int) -> tuple[dict[str, Callable[[], Any]], str]:
    """The two runners on the same model and inputs, outputs checked; and a build note."""
    import torch

    import workbench as wb
    from workbench import relax
    from workbench.relax.frontend.torch import from_exported_program

    torch.set_num_threads(threads)
    model, args = make_model(name)
    with torch.no_grad():
        want = model(*args).numpy()
        ep = torch.export.export(model, args)
    t0 = time.perf_counter()
    exe = relax.build(from_exported_program(ep), wb.Target(f"llvm -num-cores={threads}"))
    note = f"import + build {time.perf_counter() - t0:.1f} s"
    fn = wb.relax.VirtualMachine(exe, wb.cpu())["main"]
    inputs = [wb.nd.array(a.numpy()) for a in args]
    out = fn(*inputs)
    got = (out[0] if isinstance(out, (tuple, list)) else out).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)

    def pytorch() -> Any:
        with torch.inference_mode():
            return model(*args)

    return {"Workbench": lambda: fn(*inputs), "PyTorch": pytorch}, note


def loaded_gomps() -> list[str]:
    """The libgomp files mapped into this process (Linux), to say whose pool runs."""
    try:
        with open("/proc/self/maps") as f:
            return sorted({line.split()[-1] for line in f if "libgomp" in line})
    except OSError:
        return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=10, help="calls per turn")
    parser.add_argument("--hogs", type=int, default=1, help="busy processes in loaded turns")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--first", choices=("torch", "workbench"), default="workbench",
                        help="which is imported first and so loads libgomp (both then share "
                             "it): workbench, whose runtime sets GOMP_SPINCOUNT from the option "
                             "omp_spin_count, or torch (libgomp's default spinning; before "
                             "issue 26 notebook 07 imported torch first)")
    ns = parser.parse_args()
    if ns.first == "torch":
        import torch  # noqa: F401 - first, on purpose

    from workbench import options

    runners, note = build_runners(ns.model, ns.threads)
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(ns.rounds):
        for load in ("quiet", "loaded"):
            for name, call in runners.items():
                with Hogs(ns.hogs if load == "loaded" else 0):
                    samples.setdefault((name, load), []).append(time_turn(call, ns.number))
    ms = {key: float(np.median(v)) * 1e3 for key, v in samples.items()}
    host = os.uname()
    print(f"{ns.model}: {note}; {ns.threads} threads, {ns.hogs} hog(s), {ns.rounds} rounds x "
          f"{ns.number} calls; parallel_chunks={options.get('parallel_chunks')}; imported first: "
          f"{ns.first}; "
          f"{os.cpu_count()} cores ({host.machine}), load average "
          f"{os.getloadavg()[0]:.2f}")
    print("libgomp mapped: " + ", ".join(loaded_gomps()))
    print(f"{'runner':<10} {'quiet ms':>9} {'loaded ms':>10} {'loaded/quiet':>13}")
    for name in runners:
        quiet, loaded = ms[(name, "quiet")], ms[(name, "loaded")]
        print(f"{name:<10} {quiet:>9.2f} {loaded:>10.2f} {loaded / quiet:>13.2f}")
    for load in ("quiet", "loaded"):
        print(f"Workbench / PyTorch, {load}: "
              f"{ms[('Workbench', load)] / ms[('PyTorch', load)]:.2f}")


if __name__ == "__main__":
    main()
