"""Tuning databases: ranking, validity, composites, persistence, corruption, JSON layout."""
import base64
import json
import os
import threading

import pytest

import workbench as wb
from workbench.ir import structural_equal
from workbench.meta_schedule.arg_info import ArgInfo, TensorInfo
from workbench.meta_schedule.database import (
    Database, DatabaseWarning, JSONDatabase, MemoryDatabase, OrderedUnionDatabase, PyDatabase,
    ScheduleFnDatabase, TuningRecord, UnionDatabase, Workload,
)
from workbench.target import Target
from workbench.tir.schedule import Schedule

from ms_workloads import matmul, scheduled

TARGET = Target("llvm -num-cores=2")


def record(wl, run_secs, factor=4, args=True):
    sch = scheduled(wl.mod, factor)
    info = ArgInfo.from_entry_func(wl.mod) if args else None
    return TuningRecord(sch.trace, wl, run_secs, TARGET, info)


@pytest.fixture(params=["json", "memory"])
def db(request, tmp_path):
    if request.param == "json":
        return JSONDatabase(work_dir=str(tmp_path / "wd"))
    return MemoryDatabase()


# ---- ranking and validity -----------------------------------------------------------------------

def test_top_k_ranks_by_mean_and_ignores_failures(db):
    wl = db.commit_workload(matmul(16))
    db.commit_tuning_record(record(wl, [1e10]))              # failed: never returned
    db.commit_tuning_record(record(wl, [1.0, 5.0], 2))        # mean 3.0 (median would be 3)
    db.commit_tuning_record(record(wl, [0.5, 10.0], 8))       # mean 5.25, min 0.5
    db.commit_tuning_record(record(wl, [2.5, 2.5], 4))        # mean 2.5: the best
    db.commit_tuning_record(record(wl, None))                 # never measured
    db.commit_tuning_record(record(wl, [2.5], 16))            # tie with 2.5: commit order
    top = db.get_top_k(wl, 10)
    assert [r.run_secs for r in top] == [[2.5, 2.5], [2.5], [1.0, 5.0], [0.5, 10.0]]
    assert [r.run_secs for r in db.get_top_k(wl, 1)] == [[2.5, 2.5]]
    assert db.get_top_k(wl, 0) == []
    with pytest.raises(ValueError, match="top_k"):
        db.get_top_k(wl, -1)
    assert len(db) == 6
    assert db.query_tuning_record(matmul(16), TARGET, "main").run_secs == [2.5, 2.5]


def test_top_k_pools_the_times_of_a_schedule_measured_again(db, tmp_path):
    wl = db.commit_workload(matmul(16))
    db.commit_tuning_record(record(wl, [1.0], 2))            # a lucky first measurement
    db.commit_tuning_record(record(wl, [2.0], 4))
    db.commit_tuning_record(record(wl, [1e10], 2))           # a failed re-measurement: ignored
    db.commit_tuning_record(record(wl, [3.0, 3.5], 2))       # measured again: mean 2.5 in all
    top = db.get_top_k(wl, 5)
    assert [r.run_secs for r in top] == [[2.0], [1.0, 3.0, 3.5]]
    assert [getattr(r, "pooled_records", 1) for r in top] == [1, 2]
    assert structural_equal(db.query_ir_module(matmul(16), TARGET, "main"),
                            scheduled(matmul(16), 4).mod)
    assert len(db) == 4 and len(db.get_top_k(wl, 1)) == 1
    if isinstance(db, JSONDatabase):  # the files keep every line; a reopened database pools
        again = JSONDatabase(work_dir=os.path.dirname(db.path_workload))
        assert [r.run_secs for r in again.get_top_k(again.commit_workload(matmul(16)), 5)] \
            == [[2.0], [1.0, 3.0, 3.5]]


def test_unscheduled_trace_is_invalid(db):
    wl = db.commit_workload(matmul(16))
    sch = Schedule(wl.mod)
    sch.enter_postproc()  # nothing before EnterPostproc: TVM's IsValid says no
    db.commit_tuning_record(TuningRecord(sch.trace, wl, [0.001], TARGET, None))
    assert db.get_top_k(wl, 5) == []
    assert db.query_schedule(wl.mod, TARGET, "main") is None


def test_workloads_are_deduplicated_structurally(db):
    a = db.commit_workload(matmul(16))
    b = db.commit_workload(matmul(16))  # equal module, new objects
    c = db.commit_workload(matmul(32))
    assert a is b and c is not a
    assert db.has_workload(matmul(32)) and not db.has_workload(matmul(8))
    assert db.query_tuning_record(matmul(8), TARGET, "main") is None
    # A record whose workload is an equal but different object lands on the canonical one.
    db.commit_tuning_record(record(Workload(matmul(16)), [1.0]))
    assert len(db.get_top_k(a, 5)) == 1


def test_query_schedule_replays_trace_to_same_ir(db):
    mod = matmul(16)
    wl = db.commit_workload(mod)
    best = scheduled(mod, 8)
    db.commit_tuning_record(TuningRecord(best.trace, wl, [0.5], TARGET, None))
    db.commit_tuning_record(record(wl, [0.9], 2))
    sch = db.query_schedule(mod, TARGET, "main")
    assert structural_equal(sch.mod, best.mod)
    assert structural_equal(db.query_ir_module(mod, TARGET, "main"), best.mod)
    assert structural_equal(db.query(mod, TARGET, kind="ir_module"), best.mod)
    assert db.query(mod, TARGET, kind="record").run_secs == [0.5]
    assert structural_equal(db.query(mod, TARGET).mod, best.mod)
    assert len(sch.trace.insts) == len(best.trace.insts)  # postprocessing kept
    with pytest.raises(ValueError, match="kind"):
        db.query(mod, TARGET, kind="best")
    # the best schedule still computes a matmul
    import numpy as np
    a, b = np.random.rand(16, 16).astype("float32"), np.random.rand(16, 16).astype("float32")
    c = wb.nd.empty((16, 16), "float32")
    wb.build(sch.mod)["main"](wb.nd.array(a), wb.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_dump_pruned_keeps_best_valid_per_workload(db):
    w1, w2 = db.commit_workload(matmul(16)), db.commit_workload(matmul(32))
    for secs, f in ([3.0], 2), ([1.0], 4), ([1e10], 8):
        db.commit_tuning_record(record(w1, secs, f))
    db.commit_tuning_record(record(w2, [1e10]))          # w2 has no valid record
    dest = MemoryDatabase()
    db.dump_pruned(dest)
    assert len(dest) == 1
    (only,) = dest.get_all_tuning_records()
    assert only.run_secs == [1.0] and dest.has_workload(matmul(16))
    assert not dest.has_workload(matmul(32))


# ---- composites ---------------------------------------------------------------------------------

def test_union_vs_ordered_union():
    mod = matmul(16)
    slow, fast = MemoryDatabase(), MemoryDatabase()
    slow.commit_tuning_record(record(slow.commit_workload(mod), [2.0], 2))
    fast.commit_tuning_record(record(fast.commit_workload(mod), [1.0], 8))
    empty = MemoryDatabase()
    union = Database.create("union", empty, slow, fast)
    ordered = Database.create("ordered_union", empty, slow, fast)
    assert isinstance(union, UnionDatabase) and isinstance(ordered, OrderedUnionDatabase)
    assert union.query_tuning_record(mod, TARGET, "main").run_secs == [1.0]
    assert ordered.query_tuning_record(mod, TARGET, "main").run_secs == [2.0]
    assert structural_equal(union.query_ir_module(mod, TARGET, "main"), scheduled(mod, 8).mod)
    assert union.query_tuning_record(matmul(8), TARGET, "main") is None
    for composite in (union, ordered):
        with pytest.raises(NotImplementedError):
            composite.commit_workload(mod)
        with pytest.raises(NotImplementedError):
            len(composite)


def test_schedule_fn_database_and_priority(tmp_path):
    mod = matmul(16)
    seen = []

    def manual(sch):
        seen.append(sch.mod.attrs.get("task_name"))
        if "main" not in sch.mod or sch.mod.attrs.get("task_name") == "skip":
            return False
        i, _, _ = sch.get_loops(sch.get_block("C"))
        sch.split(i, [None, 2])
        return True

    fn_db = Database.create(manual)
    assert isinstance(fn_db, ScheduleFnDatabase)
    sch = fn_db.query_schedule(mod, TARGET, "main")
    assert seen == ["main"]
    assert fn_db.query_schedule(mod, TARGET, "skip") is None
    rec = fn_db.query_tuning_record(mod, TARGET, "main")
    assert rec.run_secs is None and rec.workload.shash == 0
    tuned = JSONDatabase(work_dir=str(tmp_path))
    tuned.commit_tuning_record(record(tuned.commit_workload(mod), [0.1], 8))
    both = OrderedUnionDatabase(fn_db, tuned)
    # the manual schedule wins, although the tuned one has a run time
    assert structural_equal(both.query_ir_module(mod, TARGET, "main"),
                            scheduled(mod, 2).mod)
    assert sch.mod.attrs["task_name"] == "main"
    assert structural_equal(sch.mod["main"], scheduled(mod, 2).mod["main"])


def test_create_kinds_and_errors(tmp_path):
    assert isinstance(Database.create("memory"), MemoryDatabase)
    assert isinstance(Database.create("json", work_dir=str(tmp_path)), JSONDatabase)
    with pytest.raises(ValueError, match="unknown kind"):
        Database.create("sqlite")
    with pytest.raises(ValueError, match="module_equality"):
        MemoryDatabase(module_equality="bytewise")
    with pytest.raises(ValueError, match="work_dir"):
        JSONDatabase()
    with pytest.raises(FileNotFoundError):
        JSONDatabase(work_dir=str(tmp_path / "absent"), allow_missing=False)


def test_current_is_a_thread_local_stack():
    a, b = MemoryDatabase(), MemoryDatabase()
    assert Database.current() is None
    with a:
        assert Database.current() is a
        with b:
            assert Database.current() is b
            other = []
            t = threading.Thread(target=lambda: other.append(Database.current()))
            t.start()
            t.join()
            assert other == [None]
        assert Database.current() is a
    assert Database.current() is None


def test_py_database_subclass_gets_generic_queries():
    class ListDatabase(PyDatabase):
        def __init__(self):
            self.wls, self.recs = [], []

        def has_workload(self, mod):
            return any(structural_equal(w.mod, mod) for w in self.wls)

        def commit_workload(self, mod):
            for w in self.wls:
                if structural_equal(w.mod, mod):
                    return w
            self.wls.append(Workload(mod))
            return self.wls[-1]

        def commit_tuning_record(self, rec):
            self.recs.append(rec)

        def get_top_k(self, workload, top_k):
            return sorted((r for r in self.recs if r.is_valid()),
                          key=lambda r: r.mean_run_secs)[:top_k]

        def get_all_tuning_records(self):
            return list(self.recs)

        def __len__(self):
            return len(self.recs)

    db = ListDatabase()
    mod = matmul(16)
    wl = db.commit_workload(mod)
    db.commit_tuning_record(record(wl, [2.0], 2))
    db.commit_tuning_record(record(wl, [1.0], 8))
    assert structural_equal(db.query_ir_module(mod, TARGET, "main"), scheduled(mod, 8).mod)
    dest = MemoryDatabase()
    db.dump_pruned(dest)
    assert [r.run_secs for r in dest.get_all_tuning_records()] == [[1.0]]


def test_repr_html_lists_workloads_and_best(db):
    wl = db.commit_workload(matmul(16))
    db.commit_tuning_record(record(wl, [2e-6, 4e-6]))
    db.commit_workload(matmul(32))
    text = db._repr_html_()
    assert "<table" in text and "2 workload(s)" in text and "3.000" in text  # mean in us
    union = UnionDatabase(db)
    assert "UnionDatabase" in union._repr_html_()


# ---- JSON round trips ---------------------------------------------------------------------------

def test_workload_and_record_json_roundtrip():
    mod = matmul(16)
    wl = Workload(mod)
    shash, b64 = wl.as_json()
    payload = base64.b64decode(b64)
    assert int.from_bytes(payload[:8], "little") == len(payload) - 8
    assert json.loads(payload[8:])["format"] == "workbench.ir"
    back = Workload.from_json([shash, b64])
    assert back.shash == int(shash) and structural_equal(back.mod, mod)
    # a stale stored hash is recomputed, as TVM does
    assert Workload.from_json(["12345", b64]).shash == int(shash)
    rec = record(wl, [1.0, 2])
    rec2 = TuningRecord.from_json(json.loads(json.dumps(rec.as_json())), back)
    assert rec2.run_secs == [1.0, 2.0] and rec2.args_info == rec.args_info
    assert rec2.target.export() == TARGET.export()
    assert rec2.trace.as_json() == rec.trace.as_json()
    with pytest.raises(ValueError):
        Workload.from_json(["1", base64.b64encode(b"\x05\x00\x00\x00\x00\x00\x00\x00ab").decode()])


def test_arg_info():
    mod = matmul(16)
    info = ArgInfo.from_entry_func(mod)
    assert info == [TensorInfo("float32", [16, 16])] * 3
    assert info[0].as_json() == ["TENSOR", "float32", [16, 16]]
    assert ArgInfo.from_json(["TENSOR", "int8", [4]]) == TensorInfo("int8", (4,))
    assert ArgInfo.from_prim_func(mod["main"]) == info
    with pytest.raises(ValueError):
        ArgInfo.from_json(["SCALAR", "int32"])
    from workbench import tir
    from workbench.tir import stmt as S
    n = tir.Var("n", "int32")
    A = tir.decl_buffer((4,), "float32", "A")
    f = tir.prim_func([A, n], S.BufferStore(A, tir.const(0.0, "float32"), (tir.const(0),)))
    with pytest.raises(ValueError, match="scalar"):
        ArgInfo.from_prim_func(f)
    two = wb.IRModule({"a": matmul(8)["main"], "b": matmul(4)["main"]})
    with pytest.raises(ValueError, match="entry"):
        ArgInfo.from_entry_func(two)
    two["b"] = two["b"].with_attr("tir.is_entry_func", True)
    assert ArgInfo.from_entry_func(two)[0].shape == (4, 4)


# ---- the JSON database's files ------------------------------------------------------------------

def test_json_files_layout_literally(tmp_path):
    db = JSONDatabase(work_dir=str(tmp_path))
    mod = matmul(16)
    wl = db.commit_workload(mod)
    db.commit_tuning_record(record(wl, [0.5, 0.25]))
    assert sorted(os.listdir(tmp_path)) == ["database_tuning_record.json",
                                            "database_workload.json"]
    wl_lines = (tmp_path / "database_workload.json").read_text().splitlines(keepends=True)
    assert wl_lines == [json.dumps(wl.as_json(), separators=(",", ":")) + "\n"]
    assert wl_lines[0].startswith(f'["{wl.shash}","')
    rec_text = (tmp_path / "database_tuning_record.json").read_text()
    assert rec_text == (
        '[0,[[[["GetSBlock",[],["\\"C\\"","\\"main\\""],["b0"]],'
        '["GetLoops",["b0"],[],["l1","l2","l3"]],'
        '["Split",["l1","None",4],[1,0],["l4","l5"]],'
        '["EnterPostproc",[],[],[]]],[]],'
        '[0.5,0.25],'
        '{"keys":["cpu"],"kind":"llvm","num-cores":2},'
        '[["TENSOR","float32",[16,16]],["TENSOR","float32",[16,16]],'
        '["TENSOR","float32",[16,16]]]]]\n')


def test_reopening_work_dir_resumes(tmp_path):
    wd = str(tmp_path)
    db = JSONDatabase(work_dir=wd)
    w16, w32 = db.commit_workload(matmul(16)), db.commit_workload(matmul(32))
    db.commit_tuning_record(record(w32, [3.0], 2))
    db.commit_tuning_record(record(w16, [2.0], 2))
    db.commit_tuning_record(record(w16, [1.0], 8))
    again = JSONDatabase(work_dir=wd)
    assert len(again) == 3
    w16b = again.commit_workload(matmul(16))  # already there: no new line
    assert structural_equal(w16b.mod, matmul(16))
    assert [r.run_secs for r in again.get_top_k(w16b, 5)] == [[1.0], [2.0]]
    assert structural_equal(again.query_ir_module(matmul(16), TARGET, "main"),
                            scheduled(matmul(16), 8).mod)
    assert len((tmp_path / "database_workload.json").read_text().splitlines()) == 2
    # appending after a reopen points at the right workload line
    again.commit_tuning_record(record(again.commit_workload(matmul(32)), [0.5], 4))
    last = (tmp_path / "database_tuning_record.json").read_text().splitlines()[-1]
    assert last.startswith("[1,")
    third = JSONDatabase(work_dir=wd)
    assert [r.run_secs for r in third.get_top_k(third.commit_workload(matmul(32)), 5)] == \
        [[0.5], [3.0]]


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def test_corrupt_workload_line_is_reported_and_skipped(tmp_path):
    db = JSONDatabase(work_dir=str(tmp_path))
    w16, w32 = db.commit_workload(matmul(16)), db.commit_workload(matmul(32))
    db.commit_tuning_record(record(w16, [1.0]))
    db.commit_tuning_record(record(w32, [2.0]))
    wpath = tmp_path / "database_workload.json"
    lines = _lines(wpath)
    wpath.write_text('["123", "not base64!"]\n' + lines[1])  # line 1 corrupt
    with pytest.warns(DatabaseWarning) as caught:
        again = JSONDatabase(work_dir=str(tmp_path))
    messages = [str(w.message) for w in caught]
    assert any(f"{wpath}:1:" in m for m in messages)
    # the record of the lost workload is skipped too, naming its line
    assert any("database_tuning_record.json:1:" in m and "line 1" in m for m in messages)
    assert len(again) == 1
    assert again.query_tuning_record(matmul(32), TARGET, "main").run_secs == [2.0]
    # a new workload goes after the corrupt line: record indices stay line numbers
    again.commit_tuning_record(record(again.commit_workload(matmul(8)), [4.0]))
    assert _lines(tmp_path / "database_tuning_record.json")[-1].startswith("[2,")


def test_corrupt_record_lines_are_reported_and_skipped(tmp_path):
    db = JSONDatabase(work_dir=str(tmp_path))
    wl = db.commit_workload(matmul(16))
    for secs, f in ([3.0], 2), ([2.0], 4), ([1.0], 8):
        db.commit_tuning_record(record(wl, secs, f))
    rpath = tmp_path / "database_tuning_record.json"
    lines = _lines(rpath)
    bad_trace = lines[2].replace('\\"C\\"', '\\"no_such_block\\"')  # parses, cannot replay
    rpath.write_text(lines[0] + "{this is not json\n" + bad_trace + '[7,[[[],[]],[1],null,null]]\n')
    with pytest.warns(DatabaseWarning) as caught:
        again = JSONDatabase(work_dir=str(tmp_path))
    messages = " | ".join(str(w.message) for w in caught)
    for lineno in (2, 3, 4):
        assert f"{rpath}:{lineno}:" in messages
    assert f"{rpath}:1:" not in messages
    assert [r.run_secs for r in again.get_all_tuning_records()] == [[3.0]]


def test_cut_short_last_line_is_closed_before_appending(tmp_path):
    db = JSONDatabase(work_dir=str(tmp_path))
    wl = db.commit_workload(matmul(16))
    db.commit_tuning_record(record(wl, [2.0]))
    rpath = tmp_path / "database_tuning_record.json"
    full = rpath.read_text()
    rpath.write_text(full + full[: len(full) // 2])  # a crash mid-write
    with pytest.warns(DatabaseWarning, match=":2:"):
        again = JSONDatabase(work_dir=str(tmp_path))
    again.commit_tuning_record(record(again.commit_workload(matmul(16)), [1.0], 8))
    with pytest.warns(DatabaseWarning, match=":2:"):
        third = JSONDatabase(work_dir=str(tmp_path))
    assert [r.run_secs for r in third.get_all_tuning_records()] == [[1.0], [2.0]]


def test_record_details(tmp_path):
    wl = Workload(matmul(16))
    body = record(wl, [1.0]).as_json()
    body[1] = [1, 2]  # integer seconds are accepted, as in TVM
    assert TuningRecord.from_json(body, wl).run_secs == [1.0, 2.0]
    body[1] = ["fast"]
    with pytest.raises(ValueError, match="run_secs"):
        TuningRecord.from_json(body, wl)
    search_strategy = pytest.importorskip("workbench.meta_schedule.search_strategy")
    cand = record(wl, [1.0]).as_measure_candidate()
    assert isinstance(cand, search_strategy.MeasureCandidate)
    assert structural_equal(cand.sch.mod, scheduled(wl.mod, 4).mod)
    assert cand.args_info == ArgInfo.from_entry_func(wl.mod)
