"""Fixtures for the relax_vm tests: compiled MLP kernels (built once) and the test.vm.*
packed functions."""
import pytest

import workbench.runtime.relax_vm.testing  # noqa: F401  (registers test.vm.*)
from vm_programs import build_kernels


@pytest.fixture(scope="session")
def mlp_lib():
    return build_kernels()
