import pickle

import numpy as np
import pytest

import workbench.nd as nd
from workbench import options
from workbench.runtime import Device, NDArray, Tensor, cpu, device, empty, tensor


# -- Device ---------------------------------------------------------------------------------

def test_cpu_device_identity():
    dev = cpu()
    assert str(dev) == "cpu(0)" and repr(dev) == "cpu(0)"
    assert dev.device_type == 1 and dev.device_id == 0
    assert dev == device("cpu", 0) == device("cpu") == device("llvm") == device(1) \
        == device("cpu:0") == Device(1, 0)
    assert hash(dev) == hash(device("cpu"))
    assert dev != cpu(1) and str(cpu(1)) == "cpu(1)"
    assert len({cpu(0), device("cpu"), cpu(1)}) == 2
    assert pickle.loads(pickle.dumps(dev)) == dev
    with pytest.raises(AttributeError):
        dev.device_id = 3


def test_device_attributes():
    dev = cpu()
    assert dev.exist is True
    assert dev.num_cores >= 1
    with options.override(num_threads=3):
        assert dev.max_threads == 3
    dev.sync()
    cuda = device("cuda", 0)
    assert str(cuda) == "cuda(0)" and cuda.exist is False
    with pytest.raises(RuntimeError, match="cuda\\(0\\)"):
        cuda.sync()


def test_device_bad_arguments():
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        device("tpu")
    with pytest.raises(ValueError, match="device_id"):
        cpu(-1)
    with pytest.raises(ValueError, match="device_type"):
        Device(99)


# -- NDArray --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "int64", "uint8",
                                   "bool", "float16"])
def test_tensor_roundtrip_and_alignment(dtype):
    src = (np.arange(24) % 3).astype(dtype).reshape(2, 3, 4)
    a = tensor(src)
    assert isinstance(a, NDArray) and Tensor is NDArray
    assert a.shape == (2, 3, 4) and a.dtype == dtype and a.device == cpu(0)
    assert a.data_ptr % 64 == 0
    np.testing.assert_array_equal(a.numpy(), src)
    assert a.ndim == 3 and a.size == 24 and a.nbytes == src.nbytes


def test_numpy_copy_and_view():
    a = nd.array(np.zeros(4, dtype="float32"))
    copy = a.numpy()
    copy[0] = 1
    assert a.numpy()[0] == 0                      # numpy() copies, like TVM
    view = a.numpy(copy=False)
    view[1] = 5
    assert a.numpy()[1] == 5                      # the view shares memory
    assert view.ctypes.data == a.data_ptr
    del a
    assert view[1] == 5                           # and keeps it alive
    b = nd.array([1, 2, 3])
    assert np.asarray(b).ctypes.data == b.data_ptr
    np.testing.assert_array_equal(np.array(b, copy=True), [1, 2, 3])


def test_empty_and_scalars_and_zero_size():
    e = empty((3, 0), "int32")
    assert e.shape == (3, 0) and e.numpy().shape == (3, 0) and e.data_ptr % 64 == 0
    s = nd.empty(5)
    assert s.shape == (5,) and s.dtype == "float32"
    z = tensor(np.float32(2.5))
    assert z.shape == () and z.numpy() == 2.5
    assert tensor([[1.0, 2.0]]).dtype == "float64"


def test_copyfrom_copyto():
    a = nd.empty((2, 2), "float32")
    a.copyfrom(np.array([[1, 2], [3, 4]], dtype="float64"))   # numpy data is cast, like TVM
    np.testing.assert_array_equal(a.numpy(), [[1, 2], [3, 4]])
    assert a.copyfrom([[0, 0], [0, 1]]) is a
    with pytest.raises(ValueError, match=r"shape \(3,\).*\(2, 2\)"):
        a.copyfrom(np.zeros(3))
    with pytest.raises(ValueError, match="shape and dtype must match"):
        a.copyfrom(nd.empty((2, 2), "float64"))
    b = a.copyto(cpu(0))
    assert b is not a and b.data_ptr != a.data_ptr
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    c = nd.empty((2, 2), "float32")
    assert a.copyto(c) is c
    a[:] = 7
    assert (a.numpy() == 7).all()
    a[:] = np.ones((2, 2))
    assert (a.numpy() == 1).all()
    with pytest.raises(ValueError, match="whole-array"):
        a[0] = 1
    with pytest.raises(TypeError):
        a.copyto("cpu")


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="shape\\[1\\] must be an int"):
        empty((2, 2.5))
    with pytest.raises(ValueError, match="shape\\[0\\] must be >= 0"):
        empty((-1,))
    with pytest.raises(TypeError, match="dtype 'complex64' is not supported"):
        empty((2,), "complex64")
    with pytest.raises(TypeError, match="is not a dtype"):
        empty((2,), "floaty")
    with pytest.raises(TypeError, match="device must be"):
        tensor([1], "cpu")
    with pytest.raises(ValueError, match="not available"):
        tensor([1], device("cuda"))
    with pytest.raises(TypeError, match="not built directly"):
        NDArray()


def test_repr_and_html_and_pickle():
    a = nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    r = repr(a)
    assert r.startswith("<workbench.nd.NDArray shape=(2, 3), dtype=float32, cpu(0)>")
    assert "[[0. 1. 2.]" in r
    h = a._repr_html_()
    assert "shape=(2, 3)" in h and "float32" in h and "<pre" in h
    big = nd.empty((1000, 1000))
    assert len(repr(big)) < 1000
    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    assert b.data_ptr % 64 == 0
