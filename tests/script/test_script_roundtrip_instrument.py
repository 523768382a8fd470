"""The round-trip pass instrument (workbench.script.roundtrip): builds under a PassContext
holding it are checked, and a broken printer output is reported with the pass and function."""
from __future__ import annotations

import pytest

import workbench as wb
from roundtrip_cases import CASES
from workbench import relax
from workbench.ir.transform import PassContext
from workbench.script import roundtrip
from workbench.script.roundtrip import RoundTripError, RoundTripInstrument, check_roundtrip


def _break_constants(monkeypatch):
    """Make the printed text say 1 where the IR has 0 (as a printer bug would)."""
    real = roundtrip.script_text
    monkeypatch.setattr(roundtrip, "script_text",
                        lambda x: real(x).replace("T.float32(0)", "T.float32(1)"))


def test_check_roundtrip_of_a_case_is_none():
    assert check_roundtrip(CASES["matmul_static"]()) is None
    assert check_roundtrip(CASES["relax_legalized_mlp"]()) is None


def test_check_roundtrip_reports_a_parse_error(monkeypatch):
    monkeypatch.setattr(roundtrip, "script_text", lambda x: "def broken(:\n")
    bad = check_roundtrip(CASES["matmul_static"]())
    assert bad is not None and bad.path == "<parse>" and "parsing raised" in bad.reason


def test_check_roundtrip_rejects_non_ir():
    with pytest.raises(TypeError, match="check_roundtrip: expected"):
        check_roundtrip(42)


def test_lowering_under_the_instrument_checks_every_boundary():
    entry, every = RoundTripInstrument("entry"), RoundTripInstrument("all")
    for inst in (entry, every):
        with PassContext(instruments=[inst]):
            wb.lower(CASES["matmul_static"]())
        assert inst.failures == []
    # entry: only the module entering tir.lowering; all: each pass's output too (the passes
    # that change nothing hand back the same functions and are not checked again).
    assert entry.modules_checked == 1
    assert every.modules_checked > 3


def test_a_relax_build_under_the_instrument_round_trips():
    inst = RoundTripInstrument("all")
    with PassContext(instruments=[inst]):
        relax.build(CASES["relax_mlp"](), target="llvm")
    assert inst.failures == [] and inst.modules_checked > 5 and inst.functions_checked > 5


def test_a_broken_printer_is_reported_with_pass_and_function(monkeypatch):
    _break_constants(monkeypatch)
    with pytest.raises(RoundTripError) as err:
        with PassContext(instruments=[RoundTripInstrument("entry")]):
            wb.lower(CASES["matmul_static"]())
    f = err.value.failure
    assert (f.stage, f.pass_name, f.function) == ("before", "tir.lowering", "main")
    assert "values differ" in f.reason and "'tir.lowering'" in str(err.value)


def test_record_mode_names_the_function_of_a_module(monkeypatch):
    mod = CASES["relax_mlp"]()
    inst = RoundTripInstrument("all", on_failure="record")
    with PassContext(instruments=[inst]):
        legal = relax.transform.LegalizeOps()(mod)
    assert inst.failures == []
    _break_constants(monkeypatch)  # the legalized matmuls start from a 0 init
    inst = RoundTripInstrument("all", on_failure="record")
    with PassContext(instruments=[inst]):
        relax.transform.FuseOps()(relax.transform.AnnotateTIROpPattern()(legal))
    assert inst.failures, "the broken text was not reported"
    f = inst.failures[0]
    assert f.pass_name == "AnnotateTIROpPattern" and f.stage == "before"
    assert f.function in legal and f.path.startswith(f"root['{f.function}']")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="mode must be one of"):
        RoundTripInstrument("every")
    with pytest.raises(ValueError, match="on_failure"):
        RoundTripInstrument(on_failure="warn")
