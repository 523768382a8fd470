"""JSONDatabase: the tuning database as two JSON-lines files (TVM's layout).

``work_dir/database_workload.json``: one line per distinct workload, ``Workload.as_json()``.
``work_dir/database_tuning_record.json``: one line per record,
``[<0-based line number of its workload>, TuningRecord.as_json()]``.

Robustness (these files record hours of measurements):

- every line is appended whole with one ``write`` on an ``O_APPEND`` descriptor, so concurrent
  writers and crashes leave whole lines; ``fsync`` after each line when the option
  ``ms_database_fsync`` is on;
- on load a line that does not parse, names a missing workload, or whose trace no longer
  replays is reported (``DatabaseWarning`` with file and line number) and skipped; the rest
  loads; a last line cut short by a crash is closed with a newline before anything is appended;
- line numbers count every physical line (corrupt ones too), so record lines keep pointing at
  the right workload after a corrupt workload line.

Reopening the same work dir reloads everything, which is how a tuning run resumes. In memory
it is a :class:`~workbench.meta_schedule.database.MemoryDatabase` (lookups, ``get_top_k``)
whose new workloads and records are appended to the files before they are indexed.
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Any

from workbench import options
from workbench.meta_schedule.database.database import TuningRecord, Workload
from workbench.meta_schedule.database.memory_database import MemoryDatabase

__all__ = ["JSONDatabase", "DatabaseWarning"]

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"

options.register("ms_database_fsync", bool, False, env="WORKBENCH_MS_DATABASE_FSYNC",
                 doc="fsync the tuning database files after every appended line (slower; "
                     "survives power loss, not just process crashes).")


class DatabaseWarning(UserWarning):
    """A line of a database file was skipped (the message names the file and line)."""


def dumps(obj: Any) -> str:
    """TVM's dump style: compact, keys sorted, one line."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def append_line(path: str, text: str) -> None:
    """Append ``text`` plus a newline with one write on an O_APPEND descriptor."""
    data = (text + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:  # a regular file takes it in one call; loop only for safety
            n = os.write(fd, view)
            view = view[n:]
        if options.get("ms_database_fsync"):
            os.fsync(fd)
    finally:
        os.close(fd)


def _read_lines(path: str) -> list[bytes]:
    """Physical lines of ``path``; closes a cut-short last line with a newline."""
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        return []
    if not data.endswith(b"\n"):
        try:
            with open(path, "ab") as f:
                f.write(b"\n")
        except OSError as err:  # read-only database: loading still works
            warnings.warn(f"{path}: cannot close the unterminated last line ({err})",
                          DatabaseWarning, stacklevel=4)
        data += b"\n"
    return data.split(b"\n")[:-1]


class JSONDatabase(MemoryDatabase):
    """A database persisted as JSON lines; see the module docstring.

    ``JSONDatabase(path_workload=None, path_tuning_record=None, work_dir=None,
    allow_missing=True, module_equality="structural")``: give both paths or a ``work_dir``
    (TVM's file names inside it). With ``allow_missing=False`` missing files raise
    ``FileNotFoundError``; otherwise they (and their directories) are created.
    """

    def __init__(self, path_workload: str | None = None, path_tuning_record: str | None = None,
                 work_dir: str | None = None, allow_missing: bool = True,
                 module_equality: str = "structural") -> None:
        if work_dir is not None:
            work_dir = os.fspath(work_dir)
            path_workload = path_workload or os.path.join(work_dir, WORKLOAD_FILE)
            path_tuning_record = path_tuning_record or os.path.join(work_dir, RECORD_FILE)
        if path_workload is None or path_tuning_record is None:
            raise ValueError("JSONDatabase needs work_dir, or both path_workload and "
                             "path_tuning_record")
        self.path_workload = os.fspath(path_workload)
        self.path_tuning_record = os.fspath(path_tuning_record)
        super().__init__(module_equality)
        self._line_of: dict[int, int] = {}            # id(canonical workload) -> its line
        self._n_workload_lines = 0
        for path in (self.path_workload, self.path_tuning_record):
            if not os.path.exists(path):
                if not allow_missing:
                    raise FileNotFoundError(f"JSONDatabase: {path} does not exist "
                                            "(allow_missing=False)")
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                open(path, "ab").close()
        self._load()

    # -- loading -------------------------------------------------------------------------------
    def _load(self) -> None:
        by_line: list[Workload | None] = []
        for lineno, raw in enumerate(_read_lines(self.path_workload), start=1):
            by_line.append(None)
            if not raw.strip():
                continue
            try:
                mod, _ = Workload.decode_module(json.loads(raw.decode("utf-8")))
            except Exception as err:  # noqa: BLE001 - any failure means "corrupt line"
                self._warn(self.path_workload, lineno, "workload", err)
                continue
            shash = self._table.equality.hash(mod)
            wl = self._table.find(mod, shash)
            if wl is None:  # equal duplicates (two writers) share the first line's object
                wl = Workload(mod, shash)
                self._table.add(wl)
                self._line_of[id(wl)] = lineno - 1
            by_line[-1] = wl
        self._n_workload_lines = len(by_line)
        for lineno, raw in enumerate(_read_lines(self.path_tuning_record), start=1):
            if not raw.strip():
                continue
            try:
                index, body = json.loads(raw.decode("utf-8"))
                if not isinstance(index, int) or not 0 <= index < len(by_line):
                    raise ValueError(f"workload index {index!r} is not a line of "
                                     f"{os.path.basename(self.path_workload)}")
                wl = by_line[index]
                if wl is None:
                    raise ValueError(f"its workload (line {index + 1}) was skipped")
                record = TuningRecord.from_json(body, wl)
            except Exception as err:  # noqa: BLE001
                self._warn(self.path_tuning_record, lineno, "tuning record", err)
                continue
            self._insert(wl, record)

    @staticmethod
    def _warn(path: str, lineno: int, what: str, err: BaseException) -> None:
        warnings.warn(f"{path}:{lineno}: skipping a corrupt {what} line: "
                      f"{type(err).__name__}: {err}", DatabaseWarning, stacklevel=4)

    # -- the log -------------------------------------------------------------------------------
    def _log_workload(self, workload: Workload) -> None:
        append_line(self.path_workload, dumps(workload.as_json()))
        self._line_of[id(workload)] = self._n_workload_lines
        self._n_workload_lines += 1

    def _log_record(self, workload: Workload, record: TuningRecord) -> None:
        append_line(self.path_tuning_record,
                    dumps([self._line_of[id(workload)], record.as_json()]))

    # -- queries -------------------------------------------------------------------------------
    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every record, fastest first, ties in commit order (TVM keeps them in one sorted
        set)."""
        return sorted(super().get_all_tuning_records(), key=lambda r: r.mean_run_secs)

    def records_in_commit_order(self) -> list[TuningRecord]:
        """Every record, oldest first (not in TVM, whose list is sorted by speed; used by
        displays that replay a tuning run)."""
        return super().get_all_tuning_records()

    def __repr__(self) -> str:
        return (f"JSONDatabase({self.path_workload!r}, {self.path_tuning_record!r}: "
                f"{len(self._table)} workload(s), {len(self)} record(s))")
