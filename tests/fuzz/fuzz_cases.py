"""One fuzz case: make a schedule from a seed, build it, compare it with numpy.

Two kinds of case:

- ``"random"``: a workload and 1..12 random moves of :mod:`fuzz_moves` (every public
  primitive, legal or not). The accepted ones make the schedule; its trace must replay from
  JSON and from Python to the same IR.
- ``"tuner"``: the tuner's own space: one of the workload's llvm design spaces (post-order
  apply with ``ScheduleRule.create("llvm")``) replayed with fresh random decisions, or with one
  of the llvm mutators applied, then the llvm postprocessors, exactly as the search strategies
  do. A replay or postprocessor refusal is a refused schedule.

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
from fuzz_workloads import WORKLOADS, Workload
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.testing import verify_trace_roundtrip

NAMES = sorted(WORKLOADS)
_MODS: dict[str, Any] = {}
_SPACES: dict[str, Any] = {}


def workload_mod(name: str) -> Any:
    if name not in _MODS:
        _MODS[name] = wb.IRModule({"main": WORKLOADS[name].build()})
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


def check_numeric(mod: Any, w: Workload, param_maps: dict[int, list[Any]] | None = None
                  ) -> str | None:
    """Build ``mod``, run it on the workload's inputs and compare the output (the last
    parameter) with numpy; None when equal, else what differs. ``param_maps`` gives the
    index maps transform_layout applied to parameters (their layout in the signature)."""
    param_maps = param_maps or {}
    func = mod["main"]
    inputs = w.inputs(np.random.default_rng(0))
    expected = np.asarray(w.reference(*inputs))
    out_pos = len(func.params) - 1
    out_buf = func.buffer_map[func.params[-1]]
    expected = _relayout(expected.astype(out_buf.dtype), param_maps.get(out_pos, []))
    args = [_relayout(a, param_maps.get(k, [])) for k, a in enumerate(inputs)]
    fill = np.nan if "float" in out_buf.dtype else -7
    out = wb.nd.array(np.full(expected.shape, fill, out_buf.dtype))
    rt = wb.build(mod)
    rt["main"](*[wb.nd.array(a) for a in args], out)
    got = out.numpy()
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


def design_spaces(name: str) -> tuple[list[Any], list[Any], dict[Any, float], Any]:
    """The workload's llvm design spaces, postprocessors and mutators (cached per process)."""
    if name not in _SPACES:
        from workbench.meta_schedule import TuneContext
        ctx = TuneContext(workload_mod(name), target="llvm",
                          space_generator="post-order-apply", rand_state=1)
        spaces = ctx.generate_design_space()
        gen = ctx.space_generator
        _SPACES[name] = ([s.trace.simplified(remove_postproc=True) for s in spaces],
                         list(gen.postprocs), dict(gen.mutator_probs), ctx)
    return _SPACES[name]


def _tuner_case(seed: int) -> dict[str, Any]:
    from workbench.meta_schedule.search_strategy.base import TraceApplier
    from workbench.tir.schedule.handles import RandomEngine
    rng = random.Random(seed)
    name = rng.choice(NAMES)
    traces, postprocs, mutators, _ = design_spaces(name)
    trace = traces[rng.randrange(len(traces))]
    out: dict[str, Any] = {"workload": name, "accepted": 0, "refused": 0}
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
    return _numeric(out, sch, WORKLOADS[name], {}, [how])


def _numeric(out: dict[str, Any], sch: Schedule, w: Workload,
             param_maps: dict[int, list[Any]], moves: list[str]) -> dict[str, Any]:
    try:
        problem = check_numeric(sch.mod, w, param_maps)
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
