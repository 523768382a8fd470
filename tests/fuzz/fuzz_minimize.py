"""Shrink a failing random fuzz case to the fewest trace instructions that still fail.

``minimize("random:SEED")`` reruns the case, takes its trace (JSON), and removes instructions
(chunks first, then one at a time) as long as the replayed remainder still fails the same way:
a wrong result, or an exception from the build/run (or a hang, caught by an alarm). An
instruction whose inputs were defined by a removed one, or that is now refused, is skipped in
the replay. Prints the smallest trace as Python. Runs in-process (a crash ends it; rerun the
case with ``--case`` for that).
"""
from __future__ import annotations

import signal
from typing import Any

from fuzz_cases import WORKLOADS, check_numeric, workload_mod
from fuzz_moves import Session
from workbench.tir.schedule import LoopRV, Schedule, ScheduleError
from workbench.tir.schedule.instruction import get_kind
from workbench.tir.schedule.trace import (
    _input_from_json, _literal_from_json, _regroup, apply_instruction,
)


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang()


def replay_subset(mod: Any, insts: list, decisions: dict[int, Any], keep: list[int]
                  ) -> tuple[Schedule, dict[int, list[Any]]]:
    """Replay the kept instructions of a JSON trace, skipping any that cannot apply; also
    returns the index maps applied to parameters (by parameter position)."""
    sch = Schedule(mod, seed=0)
    param_maps: dict[int, list[Any]] = {}
    named: dict[str, Any] = {"l_root": LoopRV.root(), "l_inline": LoopRV.inline()}
    for idx in keep:
        kind_name, inputs_json, attrs_json, outputs_json = insts[idx]
        kind = get_kind(kind_name)
        try:
            inputs = [_input_from_json(x, named, idx, kind_name) for x in inputs_json]
        except ValueError:
            continue                                  # an input came from a removed instruction
        attrs = [_literal_from_json(a) for a in attrs_json]
        param = _relaid_param(sch, kind_name, inputs, attrs)
        before = sch.mod["main"]
        try:
            outputs = apply_instruction(sch, kind, _regroup(kind, inputs), attrs,
                                        decisions.get(idx))
        except (ScheduleError, ValueError, TypeError, KeyError):
            continue
        if param is not None and sch.mod["main"] is not before:
            param_maps.setdefault(param, []).append(inputs[1])
        for name, rv in zip(outputs_json, outputs):
            if name != "_":
                named[name] = rv
    return sch, param_maps


def _relaid_param(sch: Schedule, kind_name: str, inputs: list, attrs: list) -> int | None:
    """The position of the parameter a TransformLayout instruction re-lays out, if any."""
    if kind_name != "TransformLayout":
        return None
    try:
        block = sch.get(inputs[0])
    except Exception:  # noqa: BLE001 - a stale handle: the instruction will be skipped
        return None
    regions = block.writes if attrs[1] == 1 else block.reads
    if not 0 <= attrs[0] < len(regions):
        return None
    func = sch.mod["main"]
    hits = [k for k, p in enumerate(func.params)
            if func.buffer_map.get(p) is regions[attrs[0]].buffer]
    return hits[0] if hits else None


def _outcome(mod: Any, workload: str, insts: list, decisions: dict[int, Any],
             keep: list[int], timeout: int) -> str:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        sch, param_maps = replay_subset(mod, insts, decisions, keep)
        problem = check_numeric(sch.mod, WORKLOADS[workload], param_maps)
        return "ok" if problem is None else "wrong"
    except _Hang:
        return "timeout"
    except Exception as e:  # noqa: BLE001
        return f"error {type(e).__name__}"
    finally:
        signal.alarm(0)


def minimize(spec: str, timeout: int = 60) -> int:
    import random
    kind, seed_s = spec.split(":")
    if kind != "random":
        print("only random cases can be minimized (a tuner case is one replayed trace)")
        return 2
    seed = int(seed_s)
    rng = random.Random(seed)
    from fuzz_cases import NAMES
    workload = rng.choice(NAMES)
    mod = workload_mod(workload)
    sch = Schedule(mod, seed=seed)
    sess = Session(sch, rng)
    signal.signal(signal.SIGALRM, _alarm)
    for _ in range(rng.randint(1, 12)):
        sess.step()
    insts, decisions_json = sess.sch.trace.as_json()
    decisions = {int(i): _literal_from_json(d) for i, d in decisions_json}
    keep = list(range(len(insts)))
    target = _outcome(mod, workload, insts, decisions, keep, timeout)
    print(f"{spec} ({workload}): {len(insts)} instructions, outcome {target}")
    if target == "ok":
        return 1
    chunk = max(1, len(keep) // 2)
    while chunk >= 1:
        i = 0
        changed = False
        while i < len(keep):
            trial = keep[:i] + keep[i + chunk:]
            if trial and _outcome(mod, workload, insts, decisions, trial, timeout) == target:
                keep = trial
                changed = True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    final, _ = replay_subset(mod, insts, decisions, keep)
    print(f"minimal: {len(keep)} instruction(s), outcome {target}")
    print(final.trace)
    print(final.mod["main"].script())
    return 0
