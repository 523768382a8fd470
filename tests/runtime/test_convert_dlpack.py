"""runtime.convert and DLPack exchange (from_dlpack, __dlpack__), checked against numpy and
PyTorch reading the same memory."""
import types

import numpy as np
import pytest

import workbench
from workbench import runtime


def test_convert_scalars_unchanged_containers_immutable():
    for v in (1024, 1.5, True, "abc", None):
        assert runtime.convert(v) == v and type(runtime.convert(v)) is type(v)
    assert runtime.convert([1, [2, 3]]) == (1, (2, 3))
    m = runtime.convert({"a": [1, 2], "b": {"c": 3}})
    assert isinstance(m, types.MappingProxyType) and m["a"] == (1, 2) and m["b"]["c"] == 3
    with pytest.raises(TypeError):
        m["a"] = 1
    nd = runtime.convert(np.arange(4, dtype="int32"))
    assert isinstance(nd, runtime.NDArray)
    np.testing.assert_array_equal(nd.numpy(), np.arange(4, dtype="int32"))
    with pytest.raises(TypeError, match="dict key"):
        runtime.convert({_ListKey(): 1})


class _ListKey(list):
    __hash__ = object.__hash__  # usable as a dict key, but a list: not immutable


def test_convert_size_builds_a_placeholder():
    from workbench import te
    n = runtime.convert(16)
    A = te.placeholder((n,), name="A")
    assert len(A.shape) == 1 and A.shape[0].value == 16


def _aligned(shape, dtype="float32"):
    return workbench.nd.array(np.zeros(shape, dtype)).numpy(copy=False)


def test_from_dlpack_torch_shares_memory():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    if t.data_ptr() % 64:
        pytest.skip("torch gave an unaligned buffer")
    nd = runtime.from_dlpack(t)
    assert nd.shape == (3, 4) and nd.dtype == "float32"
    np.testing.assert_array_equal(nd.numpy(), t.numpy())
    t[1, 2] = -7.0          # one memory: the NDArray sees torch's write ...
    assert nd.numpy()[1, 2] == -7.0
    back = torch.from_dlpack(nd)
    back[0, 0] = 42.0       # ... and torch sees the NDArray's memory
    assert t[0, 0].item() == 42.0 and nd.numpy()[0, 0] == 42.0
    assert workbench.nd.from_dlpack is runtime.from_dlpack


def test_ndarray_exports_dlpack_to_numpy_zero_copy():
    a = workbench.nd.array(np.arange(8, dtype="int64"))
    v = np.from_dlpack(a)
    np.testing.assert_array_equal(v, np.arange(8))
    v[3] = 100
    assert a.numpy()[3] == 100
    assert a.__dlpack_device__() == (1, 0)


def test_from_dlpack_numpy_round_trip_and_kernel_call():
    from workbench import te
    base = _aligned((16,))
    base[:] = np.arange(16)
    nd = runtime.from_dlpack(base)
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 2.0, name="B")
    f = workbench.build(te.create_prim_func([A, B]))
    out = runtime.from_dlpack(_aligned((16,)))
    f(nd, out)
    np.testing.assert_array_equal(out.numpy(), np.arange(16) * 2.0)


def test_from_dlpack_rejects_unaligned_and_strided():
    base = _aligned((17,))
    with pytest.raises(ValueError, match="64-byte aligned"):
        runtime.from_dlpack(base[1:])
    two = _aligned((4, 4))
    with pytest.raises(ValueError, match="C-contiguous"):
        runtime.from_dlpack(two[:, ::2])
    with pytest.raises(ValueError, match="DLPack"):
        runtime.from_dlpack(object())


def test_from_dlpack_capsule():
    base = _aligned((5,))
    base[:] = 3
    nd = runtime.from_dlpack(base.__dlpack__())
    np.testing.assert_array_equal(nd.numpy(), np.full(5, 3, "float32"))


def test_runtime_enabled_and_shape_tuple():
    assert runtime.enabled("llvm") and runtime.enabled("llvm -mcpu=znver4")
    assert runtime.enabled("cpu")
    assert not runtime.enabled("cuda") and not runtime.enabled("gpu")
    with pytest.raises(TypeError):
        runtime.enabled(None)
    from workbench.runtime import ShapeTuple
    from workbench.runtime.relax_vm import ShapeTuple as VMShapeTuple
    assert ShapeTuple is VMShapeTuple and tuple(ShapeTuple([2, 3])) == (2, 3)
