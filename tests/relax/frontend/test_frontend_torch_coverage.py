"""Core ATen coverage of the PyTorch importer: every core op is converted or refused for a
stated reason, and ``docs/aten_coverage.md`` is the current table."""
from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("torch")
from workbench.relax.frontend.torch import coverage  # noqa: E402

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "aten_coverage.md"


def test_every_core_aten_op_is_converted_or_explained():
    rows = coverage.coverage()
    assert len(rows) > 150, "PyTorch's core ATen list looks empty"
    unexplained = [r.op for r in rows if r.reason == coverage.UNEXPLAINED]
    assert not unexplained, f"core ATen ops with neither a converter nor a reason: {unexplained}"
    assert sum(r.supported for r in rows) >= 160


def test_the_docs_table_is_current():
    import torch
    text = DOC.read_text()
    version = torch.__version__.split("+")[0]
    if f"(PyTorch {version})" not in text:
        pytest.skip(f"docs/aten_coverage.md was generated with another PyTorch than {version}")
    assert text == coverage.markdown(), \
        "docs/aten_coverage.md is out of date: python -m workbench.relax.frontend.torch." \
        "coverage > docs/aten_coverage.md"
