"""A fixed-seed slice of the random-CNN fuzzer (cnn_fuzz.py), run the way `make fuzz` runs it:
a fresh interpreter builds each random graph with the default pipeline (blocked layout) and
compares it with PyTorch. Seeds are fixed, so the slice does the same work on every run."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
HERE = Path(__file__).resolve().parent


def _run(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(HERE / "cnn_fuzz.py"), *args],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("block", ["16", "8"])
def test_fixed_seed_cnn_slice_matches_pytorch(block):
    out = _run("--graphs", "12", "--first-seed", "1", "--block", block)
    summary = out.strip().splitlines()[-1]
    assert "12 graphs, {'ok': 12}" in summary, out[-3000:]
    converted = int(summary.split("}, ")[1].split()[0])
    assert converted >= 24, summary       # the slice exercises the blocked layout


@pytest.mark.slow
def test_fixed_seed_pt2e_slice_matches_pytorchs_quantized_models():
    """The same graphs quantized by PyTorch's PT2E flow: on an AVX-512 VNNI host their
    convolutions run on the int8 kernels (elsewhere as float32 ones on dequantized values)."""
    pytest.importorskip("torchao")
    from workbench.target import Target
    out = _run("--graphs", "6", "--first-seed", "1", "--pt2e")
    summary = out.strip().splitlines()[-1]
    assert "6 graphs, {'ok': 6}" in summary, out[-3000:]
    int8 = int(summary.split("Winograd, ")[1].split()[0])
    assert (int8 >= 6) == Target("llvm").has_feature("avx512vnni"), summary


def test_one_seed_prints_its_steps():
    out = _run("--seed", "3")
    assert "input (N=" in out and "'outcome': 'ok'" in out
