"""The steps of ``workbench demo``: build a kernel, check it against numpy, time both.

Each :class:`DemoStep` builds one computation (te/topi, optionally hand-scheduled with
``tir.Schedule``), compiles it with :func:`workbench.build`, compares its output with numpy,
and times it with ``time_evaluator`` next to the numpy equivalent. Later features add steps by
appending to :data:`DEMO_STEPS` (or calling :func:`register_step`); the CLI prints whatever is
registered, in order.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np


@dataclass
class DemoConfig:
    """Knobs shared by the steps: ``quick`` shrinks sizes (tests, slow machines)."""

    quick: bool = False
    repeat: int = 5
    min_repeat_ms: float = 40.0


@dataclass
class DemoResult:
    """What a step reports; times are medians in seconds."""

    name: str
    shape: str
    max_error: float
    ok: bool
    compile_seconds: float
    seconds: float
    numpy_seconds: float
    flops: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.flops and self.seconds else 0.0

    @property
    def speedup(self) -> float:
        """numpy time / workbench time (> 1: the compiled kernel is faster)."""
        return self.numpy_seconds / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class DemoStep:
    """One demo computation: ``run(config)`` builds, checks and times it."""

    name: str
    description: str
    run: Callable[[DemoConfig], DemoResult]


DEMO_STEPS: list[DemoStep] = []


def register_step(name: str, description: str) -> Callable:
    """Decorator adding ``fn(config) -> DemoResult`` to :data:`DEMO_STEPS`."""
    def wrap(fn: Callable[[DemoConfig], DemoResult]) -> Callable[[DemoConfig], DemoResult]:
        if any(s.name == name for s in DEMO_STEPS):
            raise ValueError(f"demo step {name!r} is already registered")
        DEMO_STEPS.append(DemoStep(name, description, fn))
        return fn
    return wrap


# ---- measuring -------------------------------------------------------------------------------

def median_seconds(fn: Callable[[], object], config: DemoConfig) -> float:
    """Median seconds per call of a Python callable, measured like ``time_evaluator``."""
    from workbench.runtime.evaluator import time_evaluator
    from workbench.runtime.device import cpu
    ev = time_evaluator(fn, cpu(0), number=1, repeat=config.repeat,
                        min_repeat_ms=config.min_repeat_ms)
    return float(ev().median)


def build_and_measure(name: str, func, inputs: Sequence[np.ndarray], out_shape: tuple,
                      out_dtype: str, expected: Callable[[], np.ndarray],
                      numpy_call: Callable[[], object], flops: float, config: DemoConfig,
                      rtol: float = 1e-5, atol: float = 1e-5) -> DemoResult:
    """Compile ``func`` (a PrimFunc), run it on ``inputs``, compare, and time both sides."""
    import workbench as wb
    start = time.perf_counter()
    rt = wb.build(func, target="llvm")
    compile_s = time.perf_counter() - start
    dev = wb.cpu(0)
    args = [wb.nd.array(a, dev) for a in inputs]
    out = wb.nd.empty(out_shape, out_dtype, dev)
    rt["main"](*args, out)
    want = expected()
    got = out.numpy()
    err = float(np.max(np.abs(got.astype("float64") - want))) if got.size else 0.0
    ok = bool(np.allclose(got, want, rtol=rtol, atol=atol))
    ev = rt.time_evaluator("main", dev, number=1, repeat=config.repeat,
                           min_repeat_ms=config.min_repeat_ms)
    seconds = float(ev(*args, out).median)
    shape = "x".join(str(s) for s in inputs[0].shape)
    return DemoResult(name, shape, err, ok, compile_s, seconds,
                      median_seconds(numpy_call, config), flops)


# ---- the steps -------------------------------------------------------------------------------

@register_step("add", "elementwise add, split / parallel / vectorize")
def _add(config: DemoConfig) -> DemoResult:
    from workbench import te, topi
    from workbench.tir.schedule import Schedule
    n = 1 << (18 if config.quick else 22)
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = topi.add(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    (loop,) = sch.get_loops(sch.get_block(C.op.name))
    outer, inner = sch.split(loop, [None, 64])
    sch.parallel(outer)
    sch.vectorize(inner)
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype="float32"), rng.random(n, dtype="float32")
    out = np.empty_like(a)
    return build_and_measure("add", sch.mod["main"], [a, b], (n,), "float32",
                             lambda: a.astype("float64") + b,
                             lambda: np.add(a, b, out=out), n, config)


@register_step("softmax", "row softmax (max, exp, sum, divide), rows in parallel")
def _softmax(config: DemoConfig) -> DemoResult:
    from workbench import te, topi
    from workbench.tir.schedule import Schedule
    rows, cols = (256, 256) if config.quick else (1024, 1024)
    X = te.placeholder((rows, cols), name="X")
    Y = topi.nn.softmax(X)
    sch = Schedule(te.create_prim_func([X, Y]))
    for stage in ("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"):
        loops = sch.get_loops(sch.get_block(stage))
        sch.parallel(loops[0])
        if stage in ("T_softmax_exp", "T_softmax_norm"):
            sch.vectorize(loops[1])
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype("float32")

    def numpy_softmax() -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return build_and_measure("softmax", sch.mod["main"], [x], (rows, cols), "float32",
                             lambda: numpy_softmax().astype("float64"), numpy_softmax,
                             5 * rows * cols, config, rtol=1e-5, atol=1e-7)


@register_step("matmul", "matmul, split / reorder / parallel / vectorize by hand")
def _matmul(config: DemoConfig) -> DemoResult:
    from workbench import te, topi
    from workbench.tir.schedule import Schedule
    n = 128 if config.quick else 256
    A, B = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    C = topi.nn.matmul(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    i, j, k = sch.get_loops(sch.get_block(C.op.name))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 32])
    # A 4x32 tile of C stays in registers/L1 while k streams rows of B through it.
    sch.reorder(io, jo, k, ii, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    rng = np.random.default_rng(2)
    a, b = rng.random((n, n), dtype="float32"), rng.random((n, n), dtype="float32")
    out = np.empty((n, n), "float32")
    return build_and_measure("matmul", sch.mod["main"], [a, b], (n, n), "float32",
                             lambda: a.astype("float64") @ b, lambda: np.matmul(a, b, out=out),
                             2.0 * n ** 3, config, rtol=1e-4, atol=1e-4)


# ---- running and printing --------------------------------------------------------------------

def run_steps(names: Sequence[str] | None = None, config: DemoConfig | None = None,
              on_result: Callable[[DemoResult], None] | None = None) -> list[DemoResult]:
    """Run the registered steps (all, or those in ``names``, in registration order)."""
    config = config or DemoConfig()
    known = [s.name for s in DEMO_STEPS]
    for n in names or ():
        if n not in known:
            raise ValueError(f"unknown demo step {n!r}; known steps: {', '.join(known)}")
    results = []
    for step in DEMO_STEPS:
        if names and step.name not in names:
            continue
        r = step.run(config)
        results.append(r)
        if on_result is not None:
            on_result(r)
    return results


COLUMNS = ("step", "shape", "check", "compile ms", "time us", "GFLOPS", "numpy us", "vs numpy")


def format_row(r: DemoResult) -> tuple[str, ...]:
    return (r.name, r.shape, "ok" if r.ok else f"FAIL {r.max_error:.1e}",
            f"{r.compile_seconds * 1e3:.0f}", f"{r.seconds * 1e6:.1f}",
            f"{r.gflops:.2f}" if r.flops else "-", f"{r.numpy_seconds * 1e6:.1f}",
            f"{r.speedup:.2f}x")


def format_table(rows: Sequence[Sequence[str]], header: Sequence[str] = COLUMNS) -> str:
    """A plain-text table with right-aligned numeric columns."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells: Sequence[str]) -> str:
        out = []
        for k, (c, w) in enumerate(zip(cells, widths)):
            out.append(str(c).ljust(w) if k < 3 else str(c).rjust(w))
        return "  ".join(out).rstrip()
    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep] + [line(r) for r in rows])
