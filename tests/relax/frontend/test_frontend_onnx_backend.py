"""ONNX's own backend test cases (the ``simple``, ``pytorch-operator`` and
``pytorch-converted`` suites shipped in the ``onnx`` wheel, opsets 6-12, every case with
numeric data) through ``from_onnx`` as they are -- no conversion by the caller --, compiled,
run on the VM and compared with the expected outputs.

Every case passes except those in :data:`EXPECTED_FAILURES`, each with the reason it is
refused; a listed case must fail with that reason, so one that starts to pass (or fails
differently) fails here and the list is updated.
"""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)
import workbench as wb
from workbench import relax
from workbench.relax.frontend.onnx import from_onnx

pytest.importorskip("onnx")
import onnx_backend_cases as backend  # noqa: E402

#: case id -> (regex of the error, why): the cases that cannot pass.
EXPECTED_FAILURES = {
    **{f"simple/{name}": (
        r"Gradient \(domain ai.onnx.preview.training\)",
        "Gradient is a training op (ai.onnx.preview.training); the importer is for "
        "inference") for name in ("test_gradient_of_add", "test_gradient_of_add_and_mul")},
}

CASES = backend.cases()
RTOL, ATOL = 1e-3, 1e-5

pytestmark = pytest.mark.slow


def _run_case(case: backend.Case) -> None:
    exe = relax.build(from_onnx(case.model()), "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    for k, (inputs, expected) in enumerate(case.data_sets()):
        out = vm["main"](*[wb.nd.array(v) for v in inputs])
        got = list(out) if isinstance(out, (tuple, list)) else [out]
        assert len(got) == len(expected), f"{case.id}: {len(got)} outputs, expected " \
                                          f"{len(expected)}"
        for i, (g, want) in enumerate(zip(got, expected)):
            g = g.numpy()
            what = f"{case.id} data set {k} output {i}"
            assert g.shape == want.shape and g.dtype == want.dtype, \
                (what, g.shape, g.dtype, want.shape, want.dtype)
            np.testing.assert_allclose(g, want, rtol=RTOL, atol=ATOL, err_msg=what)


def test_the_suites_are_there_and_the_pass_rate_is_at_least_90_percent():
    ids = {c.id for c in CASES}
    assert len(CASES) >= 130, f"only {len(CASES)} backend cases with numeric data found"
    assert set(EXPECTED_FAILURES) <= ids, set(EXPECTED_FAILURES) - ids
    assert 1 - len(EXPECTED_FAILURES) / len(CASES) >= 0.9


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_backend_case(case):
    expected = EXPECTED_FAILURES.get(case.id)
    if expected is None:
        _run_case(case)
        return
    pattern, why = expected
    try:
        _run_case(case)
    except Exception as err:  # noqa: BLE001 - the failure must be the listed one
        import re
        assert re.search(pattern, str(err)), \
            f"{case.id} is expected to fail ({why}) with {pattern!r}, but failed with: {err}"
        return
    pytest.fail(f"{case.id} now passes: take it off EXPECTED_FAILURES ({why})")
