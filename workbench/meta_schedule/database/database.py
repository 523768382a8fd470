"""Workload, TuningRecord and the Database interface (TVM's ``meta_schedule.database``).

Semantics follow reference meta_schedule.md section 2:

- a record's rank is the **mean** of its ``run_secs`` (missing or empty counts as 1e10);
- a record is *valid* when its trace has at least one instruction before the first
  ``EnterPostproc`` and ``run_secs`` holds a value other than the 1e10 failure stub;
- ``get_top_k`` returns valid records only, fastest first (ties keep commit order);
- beyond TVM, a schedule measured more than once (records of one workload with equal traces,
  decisions included) is ranked by all its measurements: ``get_top_k`` returns it once, as a
  record whose ``run_secs`` pool those of its valid records (:func:`pool_by_trace`). On a
  shared machine one candidate's single time can be 30% off; re-measuring the leaders
  (``meta_schedule.confirm``) then outweighs a lucky measurement instead of adding to it;
- ``query_tuning_record`` ignores ``target`` and ``workload_name`` (as TVM's JSON and memory
  databases do); ``query_schedule`` replays the best record's full trace (postprocessing
  included) on a fresh schedule of the workload module;
- ``with db:`` pushes ``db`` on a per-thread stack read by ``Database.current()``.

Subclasses implement the primitive methods (``has_workload``, ``commit_workload``,
``commit_tuning_record``, ``get_top_k``, ``get_all_tuning_records``, ``__len__``); the queries
and ``dump_pruned`` are written once here on top of them.
"""
from __future__ import annotations

import base64
import threading
from typing import Any, Callable, Sequence

from workbench.ir.json import load_json, save_json
from workbench.ir.module import IRModule
from workbench.ir.structural import structural_hash
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule, Trace

__all__ = ["Workload", "TuningRecord", "Database", "PyDatabase", "FAILED_RUN_SECS", "pool_by_trace",
           "mean_run_secs"]

#: The run time TVM records for a failed build or run (a float32 stub, exactly 1e10).
FAILED_RUN_SECS = 1e10


def mean_run_secs(run_secs: Sequence[float] | None) -> float:
    """The ranking key of a record: mean of ``run_secs``, 1e10 when missing or empty."""
    if not run_secs:
        return FAILED_RUN_SECS
    return float(sum(run_secs)) / len(run_secs)


def as_module(mod: IRModule | PrimFunc) -> IRModule:
    """A bare PrimFunc becomes ``IRModule({"main": func})``, the form tasks are tuned in."""
    if isinstance(mod, PrimFunc):
        return IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise TypeError(f"expected an IRModule or a PrimFunc, got {type(mod).__name__}")
    return mod


# ---- Workload ---------------------------------------------------------------------------------

class Workload:
    """An IRModule and its hash (``shash``: the database's module-equality hash).

    JSON form (TVM's envelope): ``["<shash as decimal>", "<base64 of (uint64 little-endian
    byte length) + Workbench IR JSON text>"]``.
    """

    __slots__ = ("mod", "shash")

    def __init__(self, mod: IRModule | PrimFunc, shash: int | None = None) -> None:
        self.mod = as_module(mod)
        self.shash = int(structural_hash(self.mod) if shash is None else shash)

    def as_json(self) -> list:
        text = save_json(self.mod).encode("utf-8")
        payload = len(text).to_bytes(8, "little") + text
        return [str(self.shash), base64.b64encode(payload).decode("ascii")]

    @staticmethod
    def decode_module(json_obj: Any) -> tuple[IRModule, int]:
        """The module and the stored hash of a workload JSON object (``ValueError`` if it is
        malformed)."""
        try:
            shash_str, b64 = json_obj
            stored = int(shash_str)
            payload = base64.b64decode(b64, validate=True)
        except (TypeError, ValueError) as err:
            raise ValueError(f"a workload must be [\"<hash>\", \"<base64>\"]: {err}") from None
        if len(payload) < 8:
            raise ValueError("workload payload is shorter than its 8-byte length prefix")
        n = int.from_bytes(payload[:8], "little")
        if n != len(payload) - 8:
            raise ValueError(f"workload payload length prefix says {n} bytes, "
                             f"found {len(payload) - 8}")
        mod = load_json(payload[8:].decode("utf-8"))
        if not isinstance(mod, IRModule):
            raise ValueError(f"workload payload holds a {type(mod).__name__}, not an IRModule")
        return mod, stored

    @staticmethod
    def from_json(json_obj: Any) -> "Workload":
        """Parse a workload; like TVM, the hash is recomputed (the stored one may come from
        another version of the hasher)."""
        mod, _ = Workload.decode_module(json_obj)
        return Workload(mod)

    def __repr__(self) -> str:
        return f"Workload(functions={list(self.mod)}, shash={self.shash})"


# ---- TuningRecord -----------------------------------------------------------------------------

class TuningRecord:
    """One measured candidate: its trace (with postprocessing), workload, run times in
    seconds (or None), target and argument info.

    ``as_json()`` gives TVM's ``[trace_json, run_secs, target_config, args_info]``; the JSON
    database prefixes the workload's line number.
    """

    def __init__(self, trace: Trace, workload: Workload, run_secs: Sequence[float] | None = None,
                 target: Target | str | None = None,
                 args_info: Sequence[ArgInfo] | None = None) -> None:
        if not isinstance(trace, Trace):
            raise TypeError(f"TuningRecord: trace must be a Trace, got {type(trace).__name__}")
        if not isinstance(workload, Workload):
            raise TypeError(f"TuningRecord: workload must be a Workload, got "
                            f"{type(workload).__name__}")
        self.trace = trace
        self.workload = workload
        self.run_secs = None if run_secs is None else [float(s) for s in run_secs]
        self.target = Target(target) if isinstance(target, str) else target
        self.args_info = None if args_info is None else list(args_info)

    # -- JSON ----------------------------------------------------------------------------------
    def as_json(self) -> list:
        return [
            self.trace.as_json(remove_postproc=False),
            self.run_secs,
            None if self.target is None else self.target.export(),
            None if self.args_info is None else [a.as_json() for a in self.args_info],
        ]

    @staticmethod
    def from_json(json_obj: Any, workload: Workload) -> "TuningRecord":
        """Parse a record and replay its trace on ``workload.mod``: a trace that no longer
        applies raises here (``ValueError`` or the schedule's own error), at load time."""
        try:
            trace_json, run_secs, target_cfg, args_json = json_obj
        except (TypeError, ValueError):
            raise ValueError("a tuning record must be [trace, run_secs, target, args_info]") \
                from None
        if run_secs is not None:
            if not isinstance(run_secs, list) or not all(
                    isinstance(s, (int, float)) and not isinstance(s, bool) for s in run_secs):
                raise ValueError(f"run_secs must be a list of numbers or null, got {run_secs!r}")
        target = None if target_cfg is None else Target(target_cfg)
        args_info = None if args_json is None else [ArgInfo.from_json(a) for a in args_json]
        trace = Trace.from_json(trace_json, workload.mod)
        return TuningRecord(trace, workload, run_secs, target, args_info)

    # -- facts ---------------------------------------------------------------------------------
    @property
    def mean_run_secs(self) -> float:
        return mean_run_secs(self.run_secs)

    def is_valid(self) -> bool:
        """TVM's ``IsValid``: scheduled at all, and measured at least once successfully."""
        insts = self.trace.insts
        if not insts or insts[0].kind.name == "EnterPostproc":
            return False
        return bool(self.run_secs) and any(s != FAILED_RUN_SECS for s in self.run_secs)

    def as_measure_candidate(self) -> Any:
        """A MeasureCandidate that replays this record's trace (postprocessing included)."""
        from workbench.meta_schedule.search_strategy import MeasureCandidate

        sch = Schedule(self.workload.mod)
        self.trace.apply_to_schedule(sch, remove_postproc=False)
        args = self.args_info if self.args_info is not None else \
            ArgInfo.from_entry_func(self.workload.mod)
        return MeasureCandidate(sch, args)

    def __repr__(self) -> str:
        secs = "None" if self.run_secs is None else \
            "[" + ", ".join(f"{s:.3g}" for s in self.run_secs) + "]"
        return (f"TuningRecord(workload={self.workload.shash}, run_secs={secs}, "
                f"insts={len(self.trace.insts)})")


def trace_key(record: TuningRecord) -> str:
    """The identity of a record's schedule: its trace (postprocessing and decisions
    included) as canonical JSON, computed once per record."""
    key = getattr(record, "_trace_key", None)
    if key is None:
        import json
        key = json.dumps(record.trace.as_json(remove_postproc=False), separators=(",", ":"),
                         sort_keys=True)
        record._trace_key = key
    return key


def pool_by_trace(records: Sequence[TuningRecord]) -> list[TuningRecord]:
    """Valid ``records`` of one workload, given in commit order, as one record per distinct
    trace, fastest (pooled mean) first, ties in order of first commit. A trace measured once
    keeps its record object; one measured several times becomes a new record with the first
    record's trace, target and argument info, the valid times of all of them in commit order,
    and ``pooled_records``, how many records it pools."""
    groups: dict[str, list[TuningRecord]] = {}
    for r in records:
        if r.is_valid():
            groups.setdefault(trace_key(r), []).append(r)
    pooled: list[TuningRecord] = []
    for group in groups.values():
        if len(group) == 1:
            pooled.append(group[0])
            continue
        first = group[0]
        secs = [s for r in group for s in r.run_secs if s != FAILED_RUN_SECS]
        rec = TuningRecord(first.trace, first.workload, secs, first.target, first.args_info)
        rec._trace_key = trace_key(first)
        rec.pooled_records = len(group)
        pooled.append(rec)
    order = {id(r): i for i, r in enumerate(pooled)}
    pooled.sort(key=lambda r: (r.mean_run_secs, order[id(r)]))
    return pooled


# ---- Database ---------------------------------------------------------------------------------

_CURRENT = threading.local()


def _stack() -> list["Database"]:
    s = getattr(_CURRENT, "items", None)
    if s is None:
        s = _CURRENT.items = []
    return s


class Database:
    """The abstract database. Create one with :meth:`create` or a subclass constructor."""

    # -- primitives (subclasses) ---------------------------------------------------------------
    def has_workload(self, mod: IRModule) -> bool:
        """Whether the database holds a workload equal to ``mod``."""
        raise NotImplementedError(f"{type(self).__name__}.has_workload")

    def commit_workload(self, mod: IRModule) -> Workload:
        """The workload equal to ``mod``, added (and persisted) first if missing."""
        raise NotImplementedError(f"{type(self).__name__}.commit_workload")

    def commit_tuning_record(self, record: TuningRecord) -> None:
        """Add a record (its workload is committed first if the database lacks it)."""
        raise NotImplementedError(f"{type(self).__name__}.commit_tuning_record")

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        """Up to ``top_k`` valid records of ``workload``, fastest (mean) first; a trace
        measured several times appears once, with its times pooled (module docstring)."""
        raise NotImplementedError(f"{type(self).__name__}.get_top_k")

    def get_all_tuning_records(self) -> list[TuningRecord]:
        raise NotImplementedError(f"{type(self).__name__}.get_all_tuning_records")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__}.__len__")

    # -- queries (generic) ---------------------------------------------------------------------
    def query_tuning_record(self, mod: IRModule, target: Target | None = None,
                            workload_name: str = "main") -> TuningRecord | None:
        """The best valid record of ``mod``, or None (``target``/``workload_name`` unused)."""
        mod = as_module(mod)
        if not self.has_workload(mod):
            return None
        records = self.get_top_k(self.commit_workload(mod), 1)
        return records[0] if records else None

    def query_schedule(self, mod: IRModule, target: Target | None = None,
                       workload_name: str = "main") -> Schedule | None:
        """The best record's trace replayed on a fresh schedule of its workload, or None."""
        record = self.query_tuning_record(mod, target, workload_name)
        if record is None:
            return None
        sch = Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        return sch

    def query_ir_module(self, mod: IRModule, target: Target | None = None,
                        workload_name: str = "main") -> IRModule | None:
        sch = self.query_schedule(mod, target, workload_name)
        return None if sch is None else sch.mod

    def query(self, mod: IRModule, target: Target | None = None, *,
              workload_name: str = "main", kind: str = "schedule") -> Any:
        """``kind`` = "schedule" | "record" | "ir_module" selects the query."""
        if kind == "schedule":
            return self.query_schedule(mod, target, workload_name)
        if kind == "record":
            return self.query_tuning_record(mod, target, workload_name)
        if kind == "ir_module":
            return self.query_ir_module(mod, target, workload_name)
        raise ValueError(f"Database.query: unknown kind {kind!r}; expected 'schedule', "
                         "'record' or 'ir_module'")

    def dump_pruned(self, destination: "Database") -> None:
        """Copy the best valid record of every workload into ``destination``."""
        best: dict[int, tuple[float, int, TuningRecord]] = {}
        groups: dict[int, Workload] = {}
        for seq, record in enumerate(self.get_all_tuning_records()):
            if not record.is_valid():
                continue
            key = workload_key(record.workload, groups)
            cand = (record.mean_run_secs, seq, record)
            if key not in best or cand[:2] < best[key][:2]:
                best[key] = cand
        for _, _, record in sorted(best.values(), key=lambda t: t[1]):
            wl = destination.commit_workload(record.workload.mod)
            destination.commit_tuning_record(TuningRecord(
                record.trace, wl, record.run_secs, record.target, record.args_info))

    # -- scope ---------------------------------------------------------------------------------
    def __enter__(self) -> "Database":
        _stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()
        elif self in stack:
            stack.remove(self)

    @staticmethod
    def current() -> "Database | None":
        """The innermost database entered with ``with`` in this thread, or None."""
        stack = _stack()
        return stack[-1] if stack else None

    # -- factory -------------------------------------------------------------------------------
    @staticmethod
    def create(kind: str | Callable[[Schedule], bool] = "json", *args: Any,
               **kwargs: Any) -> "Database":
        """"json" | "memory" | "union" | "ordered_union", or a schedule function
        ``f(sch) -> bool`` (a :class:`ScheduleFnDatabase`)."""
        from workbench.meta_schedule.database import (
            JSONDatabase, MemoryDatabase, OrderedUnionDatabase, ScheduleFnDatabase,
            UnionDatabase,
        )
        if callable(kind):
            return ScheduleFnDatabase(kind, *args, **kwargs)
        makers = {"json": JSONDatabase, "memory": MemoryDatabase, "union": UnionDatabase,
                  "ordered_union": OrderedUnionDatabase}
        if kind not in makers:
            raise ValueError(f"Database.create: unknown kind {kind!r}; expected one of "
                             f"{', '.join(makers)} or a schedule function")
        return makers[kind](*args, **kwargs)

    def _repr_html_(self) -> str:
        from workbench.meta_schedule.database.display import database_html
        return database_html(self)


def workload_key(workload: Workload, groups: dict[int, Workload]) -> int:
    """Group records by workload: the same object, or an equal module under the same hash."""
    from workbench.ir.structural import structural_equal

    if id(workload) in groups:
        return id(workload)
    for key, wl in groups.items():
        if wl.shash == workload.shash and structural_equal(wl.mod, workload.mod):
            return key
    groups[id(workload)] = workload
    return id(workload)


class PyDatabase(Database):
    """Base for databases written in Python: override the primitive methods (and, if useful,
    the queries). Works with or without ``@derived_object``."""

    _tvm_metadata = {
        "cls": Database,
        "methods": ["has_workload", "commit_workload", "commit_tuning_record", "get_top_k",
                    "get_all_tuning_records", "query_tuning_record", "query_schedule",
                    "query_ir_module", "__len__"],
    }
