"""Kernels and worker-side functions for the rpc tests (module level: workers import them)."""
import os
import signal
import tempfile
import time

import numpy as np

import workbench as wb
from workbench import te
from workbench.relax.frontend import nn


def scale_kernel(n=64):
    """``B = A * 2 + 1`` as a compiled runtime Module."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return wb.build(te.create_prim_func([A, B]), "llvm")


class TwoHeads(nn.Module):
    """y = x @ W.T + b, returned with relu(y): a VM function returning a tuple."""

    def __init__(self):
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = self.fc(x)
        return (y, nn.relu(y))


def two_heads():
    """(executable, params dict, x, expected outputs) computed with numpy."""
    model = TwoHeads()
    mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor((3, 8), "float32")}})
    exe = wb.compile(mod, "llvm")
    rng = np.random.default_rng(7)
    params = {n: rng.standard_normal(p.shape).astype(p.dtype)
              for n, p in model.named_parameters()}
    x = rng.standard_normal((3, 8)).astype("float32")
    y = x @ params["fc.weight"].T + params["fc.bias"]
    return exe, params, x, (y, np.maximum(y, 0))


# ---- run on workers ---------------------------------------------------------------------------

MARKERS = os.path.join(tempfile.gettempdir(), "workbench_rpc_test_markers")
SLOW_SECONDS = 4.0


def slow_evaluator(rt_mod, device, evaluator_config, repeated_args):
    """f_run_evaluator that takes a while (long enough to kill its worker meanwhile) and
    leaves a file naming the Dask worker process (the measuring child's parent)."""
    from workbench.meta_schedule.runner.utils import default_run_evaluator
    os.makedirs(MARKERS, exist_ok=True)
    with open(os.path.join(MARKERS, f"measuring-{os.getppid()}"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(SLOW_SECONDS)
    return default_run_evaluator(rt_mod, device, evaluator_config, repeated_args)


def crash_now():
    """A job that segfaults its process."""
    os.kill(os.getpid(), signal.SIGSEGV)
