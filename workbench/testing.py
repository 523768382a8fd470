"""Test helpers with TVM's names (``tvm.testing``): comparisons, feature markers, targets.

``import workbench.testing`` (pytest is imported here, so the package never imports this
module itself). What it offers, with TVM's behaviour on a CPU-only compiler:

- :func:`assert_allclose` -- ``np.testing.assert_allclose`` that first checks the shapes and
  accepts NDArrays; ``rtol``/``atol`` default to 1e-7 as in TVM.
- Feature markers ``requires_llvm``, ``requires_x86``, ``requires_x86_avx512``, ... usable as
  ``@requires_x86_avx512`` or ``@requires_x86_avx512()`` on a test function or class (the test
  is skipped when the feature is missing) and as ``requires_llvm.marks()``. Workbench compiles
  only for the host CPU through LLVM, so the GPU and accelerator markers (``requires_gpu``,
  ``requires_cuda``, ...) always skip, naming why.
- :func:`device_enabled`, :func:`enabled_targets`, :func:`parametrize_targets`: the runnable
  targets, which here is ``llvm`` on ``cpu(0)``.
- :func:`parameter` / :func:`parameters` (parametrized pytest fixtures: every combination of
  ``parameter`` values, one run per set of ``parameters``), :func:`fixture` (optionally
  caching its value), :func:`requires_package`, and :func:`main` (run this test file).

Not provided: ``CompareBeforeAfter`` (it needs TVMScript), ``assert_prim_expr_equal``;
TVM's ``TVM_TEST_TARGETS`` variable is not read (one target exists).
"""
from __future__ import annotations

import copy
import functools
import importlib.util
import inspect
import itertools
import platform
import sys
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pytest

from workbench.runtime import Device, device

__all__ = [
    "assert_allclose", "Feature", "device_enabled", "enabled_targets", "parametrize_targets",
    "parameter", "parameters", "fixture", "main", "requires_package", "requires_llvm_minimum_version", "uses_gpu",
    "requires_llvm", "requires_x86", "requires_aarch64", "requires_x86_avx512",
    "requires_x86_vnni", "requires_arm_dot", "requires_arm_fp16", "requires_rpc",
    "requires_gpu", "requires_multi_gpu", "requires_cuda", "requires_cudnn", "requires_cublas",
    "requires_nvptx", "requires_tensorcore", "requires_cudagraph", "requires_opencl",
    "requires_rocm", "requires_metal", "requires_vulkan", "requires_hexagon",
    "DEFAULT_TEST_TARGETS",
]


# ---- comparisons ----------------------------------------------------------------------------

def _as_numpy(x: Any) -> np.ndarray:
    # NDArray.numpy() copies; an array-like without it goes through numpy's own conversion.
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray) and callable(x.numpy):
        x = x.numpy()
    return np.asanyarray(x)


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``desired`` have the same shape and
    ``|actual - desired| <= atol + rtol * |desired|`` elementwise (``desired`` is the
    reference, as in numpy; the two are not interchangeable). NDArrays, numpy arrays, lists
    and scalars are accepted."""
    a, d = _as_numpy(actual), _as_numpy(desired)
    if a.shape != d.shape:
        raise AssertionError(f"assert_allclose: shapes differ: actual {a.shape}, "
                             f"desired {d.shape}")
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)


# ---- features -------------------------------------------------------------------------------

_CPU_ONLY = "Workbench compiles only for the host CPU (target 'llvm')"


class Feature:
    """Something a test may need. ``Feature(name, long_name, check)``: ``check()`` returns
    None when the feature is present, else the reason it is not (the skip message).

    A Feature decorates a test function or class (with or without a call) and gives its
    pytest marks with :meth:`marks`; ``bool(feature)`` says whether it is present.
    """

    def __init__(self, name: str, long_name: str | None = None,
                 check: Callable[[], str | None] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Feature: name must be a non-empty string, got {name!r}")
        self.name = name
        self.long_name = long_name or name
        self._check = check or (lambda: None)
        self._reason: str | None | bool = False  # False: not checked yet

    @property
    def missing_reason(self) -> str | None:
        """None if the feature is present, else why it is not (checked once)."""
        if self._reason is False:
            self._reason = self._check()
        return self._reason  # type: ignore[return-value]

    def __bool__(self) -> bool:
        return self.missing_reason is None

    def marks(self, support_required: str = "compile-and-run") -> list:
        """The pytest marks that skip a test when the feature is missing."""
        if support_required not in ("compile-and-run", "compile-only", "optional"):
            raise ValueError(f"{self.name}.marks: support_required must be 'compile-and-run', "
                             f"'compile-only' or 'optional', got {support_required!r}")
        if support_required == "optional":
            return []
        reason = self.missing_reason
        return [pytest.mark.skipif(reason is not None,
                                   reason=f"needs {self.long_name}: {reason}")]

    def __call__(self, func: Any = None, *, support_required: str = "compile-and-run") -> Any:
        marks = self.marks(support_required)

        def apply(f: Any) -> Any:
            for mark in marks:
                f = mark(f)
            return f

        return apply if func is None else apply(func)

    def __repr__(self) -> str:
        state = "present" if self else f"missing ({self.missing_reason})"
        return f"Feature({self.name!r}, {state})"


def _host_feature(*names: str) -> Callable[[], str | None]:
    def check() -> str | None:
        from workbench.target import Target  # the host's LLVM feature list
        host = Target("llvm")
        if any(host.has_feature(n) for n in names):
            return None
        return f"the host CPU ({host.host_cpu}) has none of {', '.join(names)}"
    return check


def _machine_is(*names: str) -> Callable[[], str | None]:
    def check() -> str | None:
        machine = platform.machine().lower()
        return None if machine in names else f"the host is {machine}"
    return check


def _never(why: str = _CPU_ONLY) -> Callable[[], str]:
    return lambda: why


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


requires_llvm = Feature("llvm", "LLVM", lambda: None if _has_module("llvmlite")
                        else "llvmlite is not installed")
requires_x86 = Feature("x86", "an x86 CPU", _machine_is("x86_64", "amd64", "i386", "i686"))
requires_aarch64 = Feature("aarch64", "an AArch64 CPU", _machine_is("aarch64", "arm64"))
requires_x86_avx512 = Feature("x86_avx512", "x86 AVX-512", _host_feature("avx512f"))
requires_x86_vnni = Feature("x86_vnni", "x86 VNNI", _host_feature("avx512vnni", "avxvnni"))
requires_arm_dot = Feature("arm_dot", "Arm dot product", _host_feature("dotprod"))
requires_arm_fp16 = Feature("arm_fp16", "Arm fp16", _host_feature("fullfp16"))
# Remote sessions run on Dask (``workbench.rpc``); the local session needs nothing.
requires_rpc = Feature("rpc", "RPC (Dask)", lambda: None if _has_module("distributed")
                       else "dask.distributed is not installed")

requires_gpu = Feature("gpu", "a GPU", _never())
requires_multi_gpu = Feature("multi_gpu", "several GPUs", _never())
requires_cuda = Feature("cuda", "CUDA", _never())
requires_cudnn = Feature("cudnn", "cuDNN", _never())
requires_cublas = Feature("cublas", "cuBLAS", _never())
requires_nvptx = Feature("nvptx", "NVPTX", _never())
requires_tensorcore = Feature("tensorcore", "Tensor Cores", _never())
requires_cudagraph = Feature("cudagraph", "CUDA Graph", _never())
requires_opencl = Feature("opencl", "OpenCL", _never())
requires_rocm = Feature("rocm", "ROCm", _never())
requires_metal = Feature("metal", "Metal", _never())
requires_vulkan = Feature("vulkan", "Vulkan", _never())
requires_hexagon = Feature("hexagon", "Hexagon", _never())


def uses_gpu(func: Any = None) -> Any:
    """TVM marks tests that use a GPU when one exists and run on the CPU otherwise; with no
    GPU backend such a test simply runs (the function is returned unchanged)."""
    return (lambda f: f) if func is None else func


def requires_package(*packages: str) -> Callable[[Any], Any]:
    """Skip the decorated test unless every Python package in ``packages`` can be imported."""
    for p in packages:
        if not isinstance(p, str):
            raise TypeError(f"requires_package: package names are strings, got {p!r}")
    marks = [pytest.mark.skipif(not _has_module(p), reason=f"cannot import {p!r}")
             for p in packages]

    def wrapper(func: Any) -> Any:
        for mark in marks:
            func = mark(func)
        return func
    return wrapper


def requires_llvm_minimum_version(major_version: int) -> Callable[[Any], Any]:
    """Skip the decorated test unless llvmlite's LLVM is at least ``major_version``."""
    import llvmlite.binding as llvm

    have = llvm.llvm_version_info[0]
    return pytest.mark.skipif(have < major_version,
                              reason=f"needs LLVM >= {major_version}, have {have}")


# ---- targets ----------------------------------------------------------------------------------

DEFAULT_TEST_TARGETS = ["llvm", "cuda", "nvptx", "vulkan -from_device=0", "opencl", "metal",
                        "rocm", "hexagon"]
_RUNNABLE_KINDS = ("llvm",)


def _kind(target: Any) -> str:
    text = str(target).strip()
    return text.split()[0] if text else ""


def device_enabled(target: str) -> bool:
    """Can tests run on ``target`` (a target string; only its kind counts)? Here: ``llvm``."""
    if not isinstance(target, str):
        raise TypeError(f"device_enabled: target must be a string, got {type(target).__name__}")
    return _kind(target) in _RUNNABLE_KINDS


def enabled_targets() -> list[tuple[str, Device]]:
    """``[(target, device), ...]`` for every runnable target: ``[("llvm", cpu(0))]``."""
    return [(t, device(_kind(t))) for t in DEFAULT_TEST_TARGETS if device_enabled(t)]


def parametrize_targets(*args: Any) -> Any:
    """Run the decorated test once per target: ``@parametrize_targets`` (every default
    target) or ``@parametrize_targets("llvm", "cuda")``. The test takes ``target`` and, if it
    asks for it, ``dev``; targets that cannot run here are reported as skipped."""
    def decorate(func: Callable, targets: Sequence[str]) -> Callable:
        wants_dev = "dev" in inspect.signature(func).parameters
        params = []
        for t in targets:
            skip = () if device_enabled(t) else (
                pytest.mark.skip(reason=f"target {t!r} cannot run: {_CPU_ONLY}"),)
            value = (t, device(_kind(t)) if device_enabled(t) else None) if wants_dev else t
            params.append(pytest.param(*(value if wants_dev else (value,)), marks=skip, id=t))
        names = "target,dev" if wants_dev else "target"
        return pytest.mark.parametrize(names, params)(func)

    if len(args) == 1 and callable(args[0]):
        return decorate(args[0], DEFAULT_TEST_TARGETS)
    for t in args:
        if not isinstance(t, str):
            raise TypeError(f"parametrize_targets: targets are strings, got {t!r}")
    return lambda func: decorate(func, list(args))


def parameter(*values: Any, ids: Iterable[str] | None = None,
              by_dict: dict[str, Any] | None = None) -> Any:
    """A parametrized pytest fixture: assign it to a module-level name and every test taking
    that name runs once per value (``size = parameter(1, 10)``, or ``by_dict={id: value}``)."""
    if by_dict is not None:
        if values or ids:
            raise ValueError("parameter: by_dict cannot be combined with values or ids")
        ids, values = tuple(by_dict), tuple(by_dict.values())
    if not values:
        raise ValueError("parameter: give at least one value")

    @pytest.fixture(params=values, ids=list(ids) if ids is not None else None, scope="session")
    def as_fixture(*_cls: Any, request: Any) -> Any:
        return request.param

    return as_fixture


_GROUPS = itertools.count()


def parameters(*value_sets: Sequence[Any], ids: Iterable[str] | None = None) -> list[Any]:
    """Parametrized fixtures that vary together: ``size, dtype = parameters((16, "float32"),
    (512, "float16"))`` runs a test taking ``size`` and ``dtype`` once per set, not once per
    combination. Call it at module level and unpack the result into module-level names.

    (TVM groups them with its pytest plugin; here a hidden fixture holding the set, put into
    the calling module, is what every returned fixture reads.)"""
    if not value_sets:
        raise ValueError("parameters: give at least one set of values")
    sets = [tuple(v) for v in value_sets]
    width = len(sets[0])
    if width == 0 or any(len(v) != width for v in sets):
        raise ValueError(f"parameters: every set must have the same, non-zero number of "
                         f"values; got lengths {[len(v) for v in sets]}")
    group = f"_workbench_parameters_{next(_GROUPS)}"

    @pytest.fixture(params=range(len(sets)), ids=list(ids) if ids is not None else None,
                    scope="session", name=group)
    def group_fixture(request: Any) -> tuple:
        return sets[request.param]

    sys._getframe(1).f_globals[group] = group_fixture  # pytest finds fixtures in the module

    def member(i: int) -> Any:
        def pick(**kwargs: Any) -> Any:
            return kwargs[group][i]
        pick.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(group, inspect.Parameter.POSITIONAL_OR_KEYWORD)])
        pick.__name__ = f"{group}_{i}"
        return pytest.fixture(pick, scope="session")

    return [member(i) for i in range(width)]


def fixture(func: Callable | None = None, *, cache_return_value: bool = False) -> Any:
    """A pytest fixture (``@fixture`` or ``@fixture(cache_return_value=True)``). With caching
    the function runs once per distinct set of argument values (compared by ``repr``) and
    every test gets a deep copy of that value, so tests stay independent."""
    def wraps(f: Callable) -> Any:
        if cache_return_value:
            f = _cached(f)
        return pytest.fixture(f, scope="function")
    return wraps if func is None else wraps(func)


def _cached(f: Callable) -> Callable:
    cache: dict[str, Any] = {}

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key = repr((args, sorted(kwargs.items())))
        if key not in cache:
            cache[key] = f(*args, **kwargs)
        return copy.deepcopy(cache[key])
    return wrapper


def main() -> None:
    """Run pytest on the calling file with this process's arguments (TVM's
    ``if __name__ == "__main__": tvm.testing.main()``)."""
    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file] + sys.argv[1:]))
