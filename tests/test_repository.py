"""The repository holds sources only: no built or downloaded artifacts are committed."""
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ARTIFACT_SUFFIXES = (".whl", ".tar.gz", ".so", ".o", ".onnx", ".pt2", ".vmexe", ".pyc")


def _tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return out.splitlines()


def test_no_artifacts_are_committed():
    bad = [f for f in _tracked_files() if f.endswith(ARTIFACT_SUFFIXES)]
    assert not bad, f"built or downloaded files are committed: {bad}"


def test_artifacts_are_ignored():
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "x.whl", "dist/x.tar.gz",
                              "lib.so", "model.onnx"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert set(ignored) == {"x.whl", "dist/x.tar.gz", "lib.so", "model.onnx"}
