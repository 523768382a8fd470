"""workbench.testing: TVM's test helpers (comparisons checked against numpy's own)."""
import platform
import sys

import numpy as np
import pytest

import workbench
import workbench.testing as wt
from workbench.target import Target


def test_assert_allclose_accepts_ndarrays_and_checks_shapes():
    a = np.arange(6, dtype="float32").reshape(2, 3)
    wt.assert_allclose(workbench.nd.array(a), a)
    wt.assert_allclose(a + 1e-8, a)                        # within the 1e-7 defaults
    with pytest.raises(AssertionError):
        wt.assert_allclose(a + 1e-3, a)
    wt.assert_allclose(a + 1e-3, a, rtol=0, atol=2e-3)
    with pytest.raises(AssertionError, match="shapes differ"):
        wt.assert_allclose(a.reshape(3, 2), a)
    with pytest.raises(AssertionError, match="shapes differ"):  # numpy would broadcast this
        wt.assert_allclose(np.ones((1, 3)), np.ones((2, 3)))


def test_assert_allclose_is_relative_to_desired():
    # |actual - desired| <= atol + rtol*|desired|: not symmetric, as numpy's
    wt.assert_allclose(1.0, 1.1, rtol=0.095, atol=0)   # 0.1 <= 0.095 * 1.1
    with pytest.raises(AssertionError):
        wt.assert_allclose(1.1, 1.0, rtol=0.095, atol=0)  # 0.1 > 0.095 * 1.0


def test_features_match_the_host():
    assert bool(wt.requires_llvm)
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    assert bool(wt.requires_x86) == x86
    assert bool(wt.requires_x86_avx512) == Target("llvm").has_feature("avx512f")
    for gpu in (wt.requires_gpu, wt.requires_cuda, wt.requires_vulkan, wt.requires_metal):
        assert not gpu
        assert "CPU" in gpu.missing_reason


@wt.requires_cuda
def test_marked_cuda_is_skipped():
    raise AssertionError("a requires_cuda test ran on a CPU-only compiler")


@wt.requires_llvm()
def test_marked_llvm_runs():
    assert True


def test_feature_marks_and_decorator():
    [mark] = wt.requires_cuda.marks()
    assert mark.mark.name == "skipif" and mark.mark.args == (True,)
    [mark] = wt.requires_llvm.marks()
    assert mark.mark.args == (False,)
    assert wt.requires_cuda.marks(support_required="optional") == []
    with pytest.raises(ValueError, match="support_required"):
        wt.requires_cuda.marks("sometimes")

    def f():
        pass
    assert wt.requires_cuda(f) is f and f.pytestmark[0].args == (True,)


def test_targets():
    assert wt.device_enabled("llvm -mcpu=znver4")
    assert not wt.device_enabled("cuda")
    assert wt.enabled_targets() == [("llvm", workbench.cpu(0))]
    with pytest.raises(TypeError):
        wt.device_enabled(Target("llvm"))


@wt.parametrize_targets("llvm", "cuda")
def test_parametrize_targets_with_dev(target, dev):
    assert target == "llvm" and dev == workbench.cpu(0)


@wt.parametrize_targets
def test_parametrize_targets_default(target):
    assert target == "llvm"


size = wt.parameter(1, 4, ids=["one", "four"])


def test_parameter_values(size):
    assert size in (1, 4)


def test_parameter_rejects_mixed_arguments():
    with pytest.raises(ValueError, match="by_dict"):
        wt.parameter(1, by_dict={"a": 1})
    with pytest.raises(ValueError, match="at least one"):
        wt.parameter()


@wt.requires_package("numpy", "surely_not_a_package_xyz")
def test_requires_package_skips():
    raise AssertionError("ran without its package")


def test_testing_reachable_from_the_package():
    assert workbench.testing is wt


size_p, dtype_p = wt.parameters((16, "float32"), (512, "float16"), ids=["small", "half"])


def test_parameters_vary_together(size_p, dtype_p):
    assert (size_p, dtype_p) in [(16, "float32"), (512, "float16")]


def test_parameters_checks_its_sets():
    with pytest.raises(ValueError, match="same"):
        wt.parameters((1, 2), (3,))
    with pytest.raises(ValueError, match="at least one"):
        wt.parameters()


@wt.fixture
def plain():
    return 7


def test_plain_fixture(plain):
    assert plain == 7


def _run_demo(tmp_path, body):
    import subprocess
    import textwrap
    f = tmp_path / "test_demo.py"
    f.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(f), "-v", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))


def test_main_runs_pytest_on_the_calling_file(tmp_path):
    r = _run_demo(tmp_path, """
        import workbench.testing
        def test_ok():
            assert True
        def test_bad():
            assert False
        if __name__ == "__main__":
            workbench.testing.main()
    """)
    assert r.returncode == 1 and "1 failed, 1 passed" in r.stdout


def test_parameter_parameters_and_cached_fixture_run_counts(tmp_path):
    # In a file of its own, so the counts do not depend on which tests of this file run.
    r = _run_demo(tmp_path, """
        import workbench.testing as wt
        size = wt.parameter(1, 4)
        n, dtype = wt.parameters((16, "float32"), (512, "float16"))
        calls = []

        @wt.fixture(cache_return_value=True)
        def expensive(size):
            calls.append(size)
            return {"data": [size]}

        def test_combinations(size, n, dtype):
            assert (n, dtype) in [(16, "float32"), (512, "float16")]

        def test_cached_a(expensive, size):
            expensive["data"].append(-1)    # a deep copy: test_cached_b sees the original

        def test_cached_b(expensive, size):
            assert expensive["data"] == [size]

        def test_z_setup_ran_once_per_value():
            assert sorted(calls) == [1, 4]

        if __name__ == "__main__":
            wt.main()
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    # 2 sizes x 2 sets (not 2 x 2 x 2 combinations) + 2 + 2 + 1
    assert r.stdout.count("test_combinations[") == 4
    assert "9 passed" in r.stdout
