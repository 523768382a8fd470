"""Winograd or direct, convolution by convolution, from measurements (issues 21 and 27): the
tuner tunes both kernels of each 3x3 convolution that can be a Winograd one, and a build with
the database takes the one whose record ran faster.

The model has two such convolutions: 64 channels on 14x14 (16 tiles: Winograd by the rule)
and on 7x7 after a pool (4 tiles). The rule here is the one before F(2x2, 3x3) took the small
images (Winograd from 9 tiles; the fixture ``rule_from_nine_tiles``), so the 7x7 one is direct
by it: these tests are about choosing against a rule, whichever it is. The records are made
by hand with times that reverse the rule for both, so a choice by the records is told from
the rule's."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.meta_schedule.conv_implementations import (
    WinogradFromRecords, candidate_kernels, implementation_variants,
)
from workbench.meta_schedule.database import MemoryDatabase, TuningRecord
from workbench.meta_schedule.in_model import check_in_model
from workbench.meta_schedule.relax_integration import (
    compile_relax, extract_tasks, rival_tasks, select_tasks,
)
from workbench.relax import op as R
from workbench.relax.transform import ConvertLayoutNCHWc
from workbench.target import Target
from workbench.tir.analysis import blocks_under
from workbench.tir.schedule import Schedule

TARGET = Target("llvm -num-cores=2")
RNG = np.random.default_rng(0)
W0 = RNG.standard_normal((64, 64, 3, 3)).astype("float32") * 0.05
W1 = RNG.standard_normal((64, 64, 3, 3)).astype("float32") * 0.05


@pytest.fixture(scope="module", autouse=True)
def rule_from_nine_tiles():
    from workbench.relax.transform import convert_layout_nchwc
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(convert_layout_nchwc, "WINOGRAD_TILES", (9, 784))
        yield


@pytest.fixture(scope="module")
def model():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 64, 14, 14), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.nn.relu(R.nn.conv2d(x, relax.const(W0), padding=1)))
            b = bb.emit(R.nn.max_pool2d(a, 2, 2, 0))
            c = bb.emit(R.nn.relu(R.add(R.nn.conv2d(b, relax.const(W1), padding=1), b)))
            out = bb.emit_output(c)
        bb.emit_func_output(out)
    return bb.get()


def _reference(x: np.ndarray) -> np.ndarray:
    torch = pytest.importorskip("torch")
    f = torch.nn.functional
    a = f.relu(f.conv2d(torch.tensor(x), torch.tensor(W0), padding=1))
    b = f.max_pool2d(a, 2, 2)
    return f.relu(f.conv2d(b, torch.tensor(W1), padding=1) + b).numpy()


def _run(exe, x: np.ndarray) -> np.ndarray:
    return relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x)).numpy()


def _records(pairs, times, scheduled=()) -> MemoryDatabase:
    """Records of each candidate's (Winograd, direct) kernels claiming ``times[k]`` seconds.
    A kernel in ``scheduled`` gets its default schedule; the others' traces only look a
    block up (a record needs one instruction): those run unscheduled, slow but right."""
    from workbench.meta_schedule.task_budget import default_schedule_candidate
    from workbench.meta_schedule.tir_integration import task_module
    db = MemoryDatabase()
    for (w_name, fw, d_name, fd), secs in zip(pairs, times):
        for name, func, s in zip((w_name, d_name), (fw, fd), secs):
            if s is None:
                continue
            mod = task_module(func)
            if name in scheduled:
                sch = default_schedule_candidate(mod, TARGET).sch
            else:
                sch = Schedule(mod)
                sch.get_block(blocks_under(mod["main"].body)[1].name_hint)
            db.commit_tuning_record(TuningRecord(sch.trace, db.commit_workload(mod), [s],
                                                 TARGET))
    return db


def test_modes_and_per_candidate_choice(model):
    """``winograd`` True follows the tile rule, "all" takes every candidate, False none;
    ``choose`` overrides the rule candidate by candidate, and a callable is asked only
    when the module has a candidate."""
    counts = {}
    for mode in (True, "all", False):
        p = ConvertLayoutNCHWc(TARGET, winograd=mode)
        p(model)
        counts[mode] = (p.candidates, p.winograd_convs)
    assert counts == {True: (2, 1), "all": (2, 2), False: (2, 0)}

    def convs(mod):
        return [b.value.op.name.rsplit(".", 1)[1] for blk in mod["main"].body.blocks
                for b in blk.bindings if "conv2d" in getattr(getattr(b.value, "op", None),
                                                             "name", "")]
    p = ConvertLayoutNCHWc(TARGET, choose={"main": {0: False, 1: True}})
    assert convs(p(model)) == ["conv2d", "conv2d_winograd"]
    asked = []
    p = ConvertLayoutNCHWc(TARGET, choose=lambda m: asked.append(m) or {"main": {1: True}})
    assert convs(p(model)) == ["conv2d_winograd", "conv2d_winograd"] and len(asked) == 1
    # False wins over a choice; a module without a candidate never asks.
    p = ConvertLayoutNCHWc(TARGET, winograd=False, choose={"main": {0: True}})
    assert convs(p(model)) == ["conv2d", "conv2d"]
    small = relax.BlockBuilder()
    y = relax.Var("y", relax.TensorStructInfo((1, 8, 14, 14), "float32"))
    with small.function("main", [y]):
        with small.dataflow():
            out = small.emit_output(R.nn.conv2d(y, relax.const(W0[:8, :8]), padding=1))
        small.emit_func_output(out)
    ConvertLayoutNCHWc(TARGET, choose=lambda m: asked.append(m) or {})(small.get())
    assert len(asked) == 1
    with pytest.raises(ValueError, match="winograd must be"):
        ConvertLayoutNCHWc(TARGET, winograd="some")
    with pytest.raises(TypeError, match="choose must be"):
        ConvertLayoutNCHWc(TARGET, choose=3)


@pytest.mark.parametrize("target", [TARGET, Target("llvm -mcpu=haswell -num-cores=2"),
                                    Target("llvm -mcpu=sapphirerapids -num-cores=2")],
                         ids=["host", "avx2", "avx512"])
def test_tuning_tasks_include_both_implementations(model, target):
    """``alternatives=True`` adds, for each candidate, the kernel the model's build does not
    call, under an ``_alt`` name no kernel of the build has; the build's own tasks keep their
    names. On AVX2 (8-channel blocks) and AVX-512 (16) targets alike."""
    plain = extract_tasks(model, target)
    both = extract_tasks(model, target, alternatives=True)
    plain_names = [t.task_name for t in plain]
    assert [t.task_name for t in both][:len(plain)] == plain_names
    extra = both[len(plain):]
    assert len(extra) == 2 and all(t.task_name.endswith("_alt") for t in extra)
    assert not {t.task_name for t in extra} & {k for t in plain for k in t.kernel_names}
    by_name = {t.task_name: t for t in both}
    assert by_name["fused_conv2d_relu_alt"].alternative_of == ["fused_conv2d_winograd_relu"]
    assert by_name["fused_conv2d_winograd1_add_relu1_alt"].alternative_of == \
        ["fused_conv2d_add_relu1"]
    assert all(not t.alternative_of for t in both[:len(plain)])
    # each implementation's task is the other's rival (the scheduler's task_rivals)
    rivals = rival_tasks(both)
    index = {t.task_name: i for i, t in enumerate(both)}
    pairs_by_name = [("fused_conv2d_winograd_relu", "fused_conv2d_relu_alt"),
                     ("fused_conv2d_add_relu1", "fused_conv2d_winograd1_add_relu1_alt")]
    for model_side, alt_side in pairs_by_name:
        assert rivals[index[model_side]] == [index[alt_side]]
        assert rivals[index[alt_side]] == [index[model_side]]
    assert sum(map(bool, rivals)) == 4
    # op_names pick the model's kernels, each with its alternative, never an alternative by
    # its own name
    picked = select_tasks(both, ["fused_conv2d_add_relu1"])
    assert [t.task_name for t in picked] == ["fused_conv2d_add_relu1",
                                             "fused_conv2d_winograd1_add_relu1_alt"]
    assert [t.task_name for t in select_tasks(both, ["max_pool2d"])] == ["max_pool2d"]
    assert len(select_tasks(both, ["conv2d"])) == 4
    convs = [t for t in both if "conv2d" in t.task_name]
    assert sum("winograd" in t.task_name for t in convs) == 2 and len(convs) == 4
    pairs = candidate_kernels(implementation_variants(model, target))["main"]
    block = 16 if Target(target).has_feature("avx512f") else 8     # the host may be AVX2-only
    assert all(f.buffers[0].shape[-1].value == block for _, f, _, _ in pairs)
    assert [(w, d) for w, _, d, _ in pairs] == [
        ("fused_conv2d_winograd_relu", "fused_conv2d_relu"),
        ("fused_conv2d_winograd1_add_relu1", "fused_conv2d1_add_relu1")]


def test_build_takes_the_faster_record_and_the_rule_without_both(model):
    """Records reversing the rule for both candidates reverse the build's choices; with a
    record of one implementation only, the rule decides. The outputs match PyTorch."""
    pairs = candidate_kernels(implementation_variants(model, TARGET))["main"]
    x = RNG.standard_normal((1, 64, 14, 14)).astype("float32")
    want = _reference(x)
    db = _records(pairs, [(2e-6, 1e-6), (1e-6, 2e-6)])     # (winograd, direct) seconds
    exe = compile_relax(db, model, TARGET)
    with db:            # relax.build with the database in scope chooses the same
        assert relax.build(model, TARGET).kernel_names == exe.kernel_names
    table = exe.conv_implementations
    assert list(table["Chosen"]) == ["direct", "winograd"]
    assert list(table["Winograd (us)"]) == pytest.approx([2.0, 1.0])
    wino = [k for k in exe.kernel_names if "winograd" in k]
    assert len(wino) == 1 and "add" in wino[0]          # the 7x7 convolution, with its add
    np.testing.assert_allclose(_run(exe, x), want, rtol=1e-4, atol=1e-4)

    only_one = _records(pairs, [(1e-6, None), (None, 1e-6)])
    exe = compile_relax(only_one, model, TARGET)
    assert list(exe.conv_implementations["Chosen"]) == ["rule", "rule"]
    assert exe.kernel_names == relax.build(model, TARGET).kernel_names
    chooser = WinogradFromRecords(db, TARGET)
    assert chooser(_layout_input(model)) == {"main": {0: False, 1: True}}
    assert chooser.chosen == {"main": {0: False, 1: True}}


def _layout_input(mod):
    """The module as it enters ConvertLayoutNCHWc in the default pipeline."""
    from workbench.relax.pipeline import get_default_pipeline
    for p in get_default_pipeline(TARGET).passes:
        if p.info.name == "ConvertLayoutNCHWc":
            return mod
        mod = p(mod)
    raise AssertionError("no ConvertLayoutNCHWc in the default pipeline")


def test_in_model_check_compares_the_same_kernels_and_undoes_a_losing_choice(model):
    """check_in_model builds the untuned model with the records' choices, so every tuned
    kernel has a time in both builds. The first candidate's records choose direct against
    the rule, but that kernel runs unscheduled: slower in the model than the rule's
    Winograd kernel (its default schedule), so the choice is undone; the second candidate
    has a record of one implementation only and follows the rule."""
    pairs = candidate_kernels(implementation_variants(model, TARGET))["main"]
    wino0 = pairs[0][0]
    db = _records(pairs, [(2e-6, 1e-6), (1e-6, None)], scheduled=(wino0,))
    x = RNG.standard_normal((1, 64, 14, 14)).astype("float32")
    check = check_in_model(db, model, TARGET, [x], rounds=3)
    table = check.table
    assert list(table.index) == [pairs[0][2]]     # the only tuned kernel of that build
    assert not table[["Default (us)", "Tuned (us)"]].isna().any().any()
    impl = check.implementations
    assert len(impl) == 1 and impl.loc[0, "Candidate"] == 0
    assert impl.loc[0, "Records chose"] == "direct" and impl.loc[0, "Kernel"] == pairs[0][2]
    # medians of 3 profiled runs: an unscheduled (one thread, scalar) direct kernel against a
    # parallel, vectorised Winograd one, many times apart on a quiet machine
    assert impl.loc[0, "In model (us)"] > 1.5 * impl.loc[0, "Rule's in model (us)"]
    assert not impl.loc[0, "Used"]
    done = check.exe.conv_implementations
    assert list(done["Chosen"]) == ["direct", "rule"]
    assert list(done["Used"]) == ["winograd", "direct"]
    assert check.exe.kernel_names == relax.build(model, TARGET).kernel_names   # the rule's
    assert "implementations chosen against the rule" in check._repr_html_()
    np.testing.assert_allclose(_run(check.exe, x), _reference(x), rtol=1e-4, atol=1e-4)


def test_in_model_check_keeps_a_choice_only_if_the_model_runs_faster_with_it(model,
                                                                             monkeypatch):
    """The second candidate's records choose Winograd against the rule (direct on 7x7), its
    Winograd kernel with its default schedule and the rule's direct kernel unscheduled: per
    call the choice wins, so it is timed end to end against the build with the rule's
    implementation -- and kept, since the model runs faster with it. With the end-to-end
    times reversed (a stand-in timer: the per-call win did not make the model faster) the
    same choice is undone and the build has the rule's kernels."""
    from workbench.meta_schedule import in_model
    pairs = candidate_kernels(implementation_variants(model, TARGET))["main"]
    wino1 = pairs[1][0]
    db = _records(pairs, [(None, 1e-6), (1e-6, 2e-6)], scheduled=(wino1,))
    x = RNG.standard_normal((1, 64, 14, 14)).astype("float32")
    check = check_in_model(db, model, TARGET, [x], rounds=3)
    impl = check.implementations
    assert list(impl["Candidate"]) == [1] and impl.loc[0, "Records chose"] == "winograd"
    assert impl.loc[0, "In model (us)"] < impl.loc[0, "Rule's in model (us)"]
    # a vectorised, parallel kernel against an unscheduled one: many times apart end to end
    assert impl.loc[0, "End to end (ms)"] < impl.loc[0, "Rule's end to end (ms)"]
    assert impl.loc[0, "Used"]
    # the last step may still return the plain untuned build (the rule's direct kernel with
    # its default schedule, about as fast as the Winograd one on 7x7x64)
    wino = 1 if check.untuned_kept else 2
    assert list(check.exe.conv_implementations["Used"]) == \
        ["winograd", "direct" if check.untuned_kept else "winograd"]
    assert sum("winograd" in k for k in check.exe.kernel_names) == wino
    np.testing.assert_allclose(_run(check.exe, x), _reference(x), rtol=1e-4, atol=1e-4)

    real = in_model._time_models

    def rule_faster(builds, *args):
        ms = real(builds, *args)
        if set(builds) == {"records", "rule"}:
            return {"records": 2.0, "rule": 1.0}
        return {k: 1.0 if k == "tuned" else 2.0 for k in ms}   # the checked build wins
    monkeypatch.setattr(in_model, "_time_models", rule_faster)
    check = check_in_model(db, model, TARGET, [x], rounds=1)
    impl = check.implementations
    assert (impl.loc[0, "End to end (ms)"], impl.loc[0, "Rule's end to end (ms)"]) == (2.0, 1.0)
    assert not impl.loc[0, "Used"] and not check.untuned_kept
    assert list(check.exe.conv_implementations["Used"]) == ["winograd", "direct"]
    assert check.exe.kernel_names == relax.build(model, TARGET).kernel_names   # the rule's
    np.testing.assert_allclose(_run(check.exe, x), _reference(x), rtol=1e-4, atol=1e-4)
