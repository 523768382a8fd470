"""The build driver: targets, sources, the object cache and the per-pass log."""
import re

import numpy as np
import pytest

import workbench as wb
from workbench import tir
from workbench.codegen import compile_to_object
from workbench.target import Target
from workbench.tir import stmt as S
from workbench.tir.transform import lower_with_log


def _scale(n=32, factor=2.0):
    A = tir.decl_buffer((n,), "float32", "A")
    i = tir.Var("i")
    return tir.prim_func([A], S.For(i, tir.const(0), tir.const(n), "serial",
                                    S.BufferStore(A, A[i] * factor, (i,))))


def test_target_forms():
    t = Target("llvm -mcpu=znver4 -num-cores=2")
    assert t.mcpu == "znver4" and t.num_cores == 2
    assert str(t) == "llvm -mcpu=znver4 -num-cores=2"
    assert Target({"kind": "llvm", "num-cores": 2}).num_cores == 2
    assert Target(t.export()) == t
    with pytest.raises(ValueError, match="unsupported target kind"):
        Target("cuda")
    with pytest.raises(ValueError, match="unknown target option"):
        Target("llvm -bogus=1")
    # TVM's other spellings: -key value, --key, a bare flag
    assert Target("llvm -num-cores 2 --mcpu znver4 -fast-math") == \
        Target("llvm -mcpu=znver4 -num-cores=2 -fast-math=1")
    assert Target("llvm -fast-math -mcpu=haswell").fast_math
    for bad, why in (("llvm -mcpu=", "empty option"), ("llvm mcpu", "expected a -flag"),
                     ("llvm -mcpu=a -mcpu b", "appears more than once")):
        with pytest.raises(ValueError, match=why):
            Target(bad)


def test_runs_on_compares_the_extensions_code_may_use():
    spr, zen4, zen3 = (Target(f"llvm -mcpu={c}") for c in ("sapphirerapids", "znver4", "znver3"))
    haswell = Target("llvm -mcpu=haswell")
    assert haswell.runs_on(spr) and haswell.runs_on(zen4) and haswell.runs_on(haswell)
    assert not zen4.runs_on(spr), "AMD's SSE4a"
    assert not spr.runs_on(zen4), "AMX"
    assert not zen4.runs_on(zen3) and zen3.runs_on(zen4)
    assert Target("llvm -mattr=+avx2,+fma").runs_on(zen3)
    assert not Target("llvm -mattr=+avx2,+avx512f").runs_on(haswell)
    assert Target("llvm").runs_on() and Target("llvm -num-cores=2").runs_on()
    host = Target("llvm")
    assert Target(f"llvm -mcpu={host.host_cpu}").runs_on()
    # code for the host's own vector width: an AVX-512 host runs the AVX2 path, not back
    assert haswell.runs_on() == (host.has_feature("avx2") and host.has_feature("fma"))


def test_sources_and_cache(tmp_path):
    with wb.options.override(cache_dir=str(tmp_path)):
        f = _scale(factor=3.5)
        first = compile_to_object(f)
        second = compile_to_object(f)
        assert not first.cache_hit and second.cache_hit
        assert first.obj == second.obj
    rt = wb.build(f)
    assert re.search(r'define i32 @"?main"?\(', rt.get_source("ll"))
    assert "main" in rt.get_source("asm")


def test_lowering_log_names_every_pass():
    _, log = lower_with_log(_scale())
    names = [r.pass_name for r in log]
    assert names[:6] == ["VerifyInput", "PlanBufferAllocation", "LowerInitBlock",
                         "LowerOpaqueBlock", "CompactBufferAllocation", "LowerMatchBuffer"]
    assert "VectorizeLoop" in names and all(r.seconds >= 0 for r in log)
    assert all("def main" in r.script or "main" in r.script for r in log)


def test_num_cores_target_runs():
    f = _scale(64)
    f = f.with_body(f.body.replace(kind="parallel"))
    rt = wb.build(f, target="llvm -num-cores=2")
    a = wb.nd.array(np.arange(64, dtype="float32"))
    rt["main"](a)
    np.testing.assert_array_equal(a.numpy(), np.arange(64) * 2.0)


def test_verifier_rejects_undefined_variable():
    A = tir.decl_buffer((4,), "float32", "A")
    ghost = tir.Var("ghost")
    f = tir.prim_func([A], S.BufferStore(A, tir.const(1.0), (ghost,)))
    with pytest.raises(ValueError, match="ghost"):
        wb.build(f)
