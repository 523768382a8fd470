"""One fuzz case: make a schedule from a seed, build it, compare it with numpy.

Two kinds of case:

- ``"random"``: a workload and 1..12 random moves of :mod:`fuzz_moves` (every public
  primitive, legal or not). The accepted ones make the schedule; its trace must replay from
  JSON and from Python to the same IR.
- ``"tuner"``: the tuner's own space: one of the workload's llvm design spaces (post-order
  apply with ``ScheduleRule.create("llvm")``) replayed with fresh random decisions, or with one
  of the llvm mutators applied, then the llvm postprocessors, exactly as the search strategies
  do. A replay or postprocessor refusal is a refused schedule. The workload is one of the
  float32 ones or a low-precision one (``LOWP_WORKLOADS``: int8 / bf16 matmuls and an int8
  conv2d, on one of its targets -- with AMX, and without it for the VNNI / AVX512-BF16
  kernels); the candidate is built as the tuner's builder builds it (preproc blocks stripped,
  the weights packed up front by their ``layout_rewrites``).

Every argument is passed in an array surrounded by guard bytes: a write outside any of them,
or into an input, is a ``wrong`` result (a write outside the kernel's own allocations mostly
kills the worker: a ``crash``).

:func:`run_case` returns a plain dict (JSON-able): the outcome (``ok``, ``refused`` -- a tuner
sample the postprocessors rejected --, ``wrong``, ``error``: an exception from a primitive, the
replay, the build or the run), the counts of accepted and refused calls, and for a failure the
moves, the trace and the detail.
"""
from __future__ import annotations

import json
import random
import time
import traceback
from typing import Any

import numpy as np

import workbench as wb
from fuzz_moves import FuzzFailure, Session
from fuzz_workloads import LOWP_WORKLOADS, WORKLOADS, Workload
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.testing import verify_trace_roundtrip

NAMES = sorted(WORKLOADS)
TUNER_NAMES = NAMES + sorted(LOWP_WORKLOADS)
ALL_WORKLOADS = {**WORKLOADS, **LOWP_WORKLOADS}
_MODS: dict[str, Any] = {}
_SPACES: dict[str, Any] = {}


def workload_mod(name: str) -> Any:
    if name not in _MODS:
        _MODS[name] = wb.IRModule({"main": ALL_WORKLOADS[name].build()})
    return _MODS[name]


# ---- numeric check --------------------------------------------------------------------------------

def _relayout(arr: np.ndarray, maps: list[Any]) -> np.ndarray:
    """``arr`` re-laid out by each index map in turn (``Y[m(i)] = X[i]``)."""
    for imap in maps:
        points = imap.image_points(list(arr.shape))
        new_shape = tuple(int(x) + 1 for x in points.max(axis=0)) if len(points) else ()
        out = np.zeros(new_shape, arr.dtype)
        out[tuple(points.T)] = arr.reshape(-1)
        arr = out
    return arr


GUARD_BYTES = 256
_CANARY = 0xA5


def _guarded(value: np.ndarray) -> tuple[Any, np.ndarray, slice]:
    """An NDArray holding ``value`` inside a buffer with GUARD_BYTES canary bytes on each
    side (an ordinary NDArray has unpredictable slack around it); returns it, the whole raw
    buffer and the slice of the value's bytes in it."""
    value = np.ascontiguousarray(value)
    raw = np.full(value.nbytes + 2 * GUARD_BYTES + 64, _CANARY, np.uint8)
    start = GUARD_BYTES + (-(raw.ctypes.data + GUARD_BYTES) % 64)  # the ABI's 64-byte alignment
    view = np.ndarray(value.shape, value.dtype, buffer=raw, offset=start)
    view[...] = value
    arr = wb.nd.empty(value.shape, value.dtype)
    arr._view, arr._ptr = view, view.ctypes.data   # test-only: point the NDArray at `raw`
    return arr, raw, slice(start, start + value.nbytes)


def _outside_writes(k: int, raw: np.ndarray, inside: slice) -> str | None:
    before = np.flatnonzero(raw[inside.start - GUARD_BYTES:inside.start] != _CANARY)
    after = np.flatnonzero(raw[inside.stop:inside.stop + GUARD_BYTES] != _CANARY)
    if not len(before) and not len(after):
        return None
    where = ([f"{GUARD_BYTES - int(b)} bytes before it" for b in before[:1]] +
             [f"{int(a)} bytes after its end" for a in after[:1]])
    return f"wrote outside argument {k} ({', '.join(where)}; {len(before) + len(after)} " \
        "guard bytes changed)"


def check_numeric(mod: Any, w: Workload, param_maps: dict[int, list[Any]] | None = None,
                  target: str = "llvm", prepack: bool = False) -> str | None:
    """Build ``mod``, run it on the workload's inputs and compare the output (the last
    parameter) with numpy; None when equal, else what differs. ``param_maps`` gives the
    index maps transform_layout applied to parameters (their layout in the signature).
    ``prepack``: build as the tuner's builder does (``RemoveWeightLayoutRewriteBlock``: the
    kernel takes the weights packed, and they are packed here with their layout rewrites).
    Every argument lies between guard bytes; writes outside them or into inputs are reported."""
    param_maps = dict(param_maps or {})
    if prepack:
        from workbench.tir.transform import RemoveWeightLayoutRewriteBlock
        from workbench.tir.transform.remove_weight_layout_rewrite_block import layout_rewrites
        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
        packs = {r.param_index: r for r in layout_rewrites(mod["main"])}
    else:
        packs = {}
    func = mod["main"]
    inputs = w.inputs(np.random.default_rng(0))
    expected = np.asarray(w.reference(*inputs))
    out_pos = len(func.params) - 1
    out_buf = func.buffer_map[func.params[-1]]
    expected = _relayout(expected.astype(out_buf.dtype), param_maps.get(out_pos, []))
    args = [packs[k].pack(a) if k in packs else _relayout(a, param_maps.get(k, []))
            for k, a in enumerate(inputs)]
    fill = np.nan if "float" in out_buf.dtype else -7
    guarded = [_guarded(a) for a in args] + \
        [_guarded(np.full(expected.shape, fill, expected.dtype))]
    rt = wb.build(mod, target=target)
    rt["main"](*[g[0] for g in guarded])
    for k, (_, raw, inside) in enumerate(guarded):
        problem = _outside_writes(k, raw, inside)
        if problem is not None:
            return problem
    for k, (a, (arr, _, _)) in enumerate(zip(args, guarded)):
        if arr.numpy().tobytes() != np.ascontiguousarray(a).tobytes():
            return f"the kernel changed its input argument {k}"
    got = guarded[-1][0].numpy()
    if got.shape != expected.shape:
        return f"output shape {got.shape}, expected {expected.shape}"
    if w.tol == 0:
        bad = got != expected
    else:
        bad = ~np.isclose(got, expected, rtol=w.tol, atol=w.tol)
    if bad.any():
        where = np.argwhere(bad)[:3].tolist()
        return (f"{int(bad.sum())} of {bad.size} elements differ, e.g. at {where}: got "
                f"{[got[tuple(i)] for i in where]}, expected {[expected[tuple(i)] for i in where]}")
    return None


# ---- the two kinds of case --------------------------------------------------------------------------

def _random_case(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    name = rng.choice(NAMES)
    mod = workload_mod(name)
    sch = Schedule(mod, seed=seed)
    sess = Session(sch, rng)
    out: dict[str, Any] = {"workload": name}
    n_moves = rng.randint(1, 12)
    try:
        for _ in range(n_moves):
            sess.step()
    except FuzzFailure as e:
        out.update(outcome="error", detail=f"primitive: {e}", moves=sess.moves,
                   trace=str(sess.sch.trace), traceback=traceback.format_exc(limit=12))
        return _counts(out, sess)
    sch = sess.sch                               # a "copy" move may have replaced it
    _counts(out, sess)
    try:
        verify_trace_roundtrip(sch, mod)
    except Exception as e:  # noqa: BLE001 - the trace must replay
        out.update(outcome="error", detail=f"replay: {type(e).__name__}: {e}"[:2000],
                   moves=sess.moves, trace=str(sch.trace),
                   traceback=traceback.format_exc(limit=12))
        return out
    return _numeric(out, sch, WORKLOADS[name], sess.param_maps, sess.moves)


def _counts(out: dict[str, Any], sess: Session) -> dict[str, Any]:
    out["accepted"], out["refused"] = sess.accepted, sess.refused
    return out


def design_spaces(name: str, target: str = "llvm"
                  ) -> tuple[list[Any], list[Any], dict[Any, float], Any]:
    """The workload's llvm design spaces on ``target``, postprocessors and mutators (cached
    per process)."""
    key = (name, target)
    if key not in _SPACES:
        from workbench.meta_schedule import TuneContext
        ctx = TuneContext(workload_mod(name), target=target,
                          space_generator="post-order-apply", rand_state=1)
        spaces = ctx.generate_design_space()
        gen = ctx.space_generator
        _SPACES[key] = ([s.trace.simplified(remove_postproc=True) for s in spaces],
                        list(gen.postprocs), dict(gen.mutator_probs), ctx)
    return _SPACES[key]


def tuner_choice(seed: int) -> tuple[random.Random, str, str]:
    """The random stream, workload and target of tuner case ``seed``."""
    rng = random.Random(seed)
    name = rng.choice(TUNER_NAMES)
    targets = ALL_WORKLOADS[name].targets
    target = targets[rng.randrange(len(targets))] if len(targets) > 1 else targets[0]
    return rng, name, target


def _tuner_case(seed: int) -> dict[str, Any]:
    from workbench.meta_schedule.search_strategy.base import TraceApplier
    from workbench.tir.schedule.handles import RandomEngine
    rng, name, target = tuner_choice(seed)
    traces, postprocs, mutators, _ = design_spaces(name, target)
    trace = traces[rng.randrange(len(traces))]
    out: dict[str, Any] = {"workload": name, "target": target, "accepted": 0, "refused": 0}
    keep = False
    how = "fresh decisions"
    if rng.random() < 0.5:
        # First sample fresh decisions, then let a mutator change one (the evolutionary
        # search's step); the mutated trace is replayed with its decisions.
        applier = TraceApplier(workload_mod(name), [])
        base = applier.apply(trace, seed, keep_decisions=False)
        if base is not None:
            muts = list(mutators)
            mut = rng.choices(muts, weights=[mutators[m] for m in muts])[0]
            mut.rand = RandomEngine(seed)
            mutated = mut.apply(base.trace)
            if mutated is not None:
                trace, keep, how = mutated, True, f"mutated by {mut}"
    applier = TraceApplier(workload_mod(name), postprocs)
    try:
        sch = applier.apply(trace, seed, keep_decisions=keep)
    except Exception as e:  # noqa: BLE001 - TraceApplier catches refusals itself
        out.update(outcome="error", detail=f"tuner replay: {type(e).__name__}: {e}",
                   trace=str(trace), traceback=traceback.format_exc(limit=12))
        return out
    if sch is None:
        out.update(outcome="refused", refused=1, detail=how)
        return out
    out["accepted"] = 1
    out["how"] = how
    return _numeric(out, sch, ALL_WORKLOADS[name], {}, [how], target=target, prepack=True)


def _numeric(out: dict[str, Any], sch: Schedule, w: Workload,
             param_maps: dict[int, list[Any]], moves: list[str], target: str = "llvm",
             prepack: bool = False) -> dict[str, Any]:
    try:
        problem = check_numeric(sch.mod, w, param_maps, target, prepack)
    except Exception as e:  # noqa: BLE001 - a build/run exception is a finding
        out.update(outcome="error", detail=f"build/run: {type(e).__name__}: {e}"[:2000],
                   moves=moves, trace=str(sch.trace), traceback=traceback.format_exc(limit=12))
        return out
    if problem is not None:
        out.update(outcome="wrong", detail=problem, moves=moves, trace=str(sch.trace))
        return out
    out["outcome"] = "ok"
    return out


CASES = {"random": _random_case, "tuner": _tuner_case}


def run_case(kind: str, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = CASES[kind](seed)
    out.update(kind=kind, seed=seed, secs=round(time.perf_counter() - t0, 3))
    return out


def worker_main() -> None:
    """Serve cases: one JSON request ``[kind, seed]`` per stdin line, one JSON result per
    stdout line (the parent counts a worker that dies as a crash of its current case)."""
    import sys
    out = sys.stdout
    sys.stdout = sys.stderr          # stray prints must not corrupt the protocol
    for line in sys.stdin:
        kind, seed = json.loads(line)
        try:
            result = run_case(kind, seed)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            result = {"kind": kind, "seed": seed, "outcome": "error", "accepted": 0,
                      "refused": 0, "detail": f"fuzzer: {type(e).__name__}: {e}",
                      "traceback": traceback.format_exc(limit=12)}
        out.write(json.dumps(result, default=str) + "\n")
        out.flush()
