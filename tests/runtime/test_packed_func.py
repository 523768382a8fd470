import threading

import numpy as np
import pytest

import rt_kernels as K
import workbench.nd as nd
from workbench.runtime import Module, PackedFunc, ParamInfo


@pytest.fixture(scope="module")
def mod():
    return K.build(K.ADD, K.SCALE, K.CHECK, K.COUNT, K.MATMUL_SIG)


def f32(*shape, fill=None):
    a = np.random.default_rng(0).standard_normal(shape).astype("float32") if fill is None \
        else np.full(shape, fill, dtype="float32")
    return nd.array(a)


def test_add_matches_numpy(mod):
    for n in (0, 1, 7, 1000):
        a, b, c = f32(n), f32(n, fill=2.0), nd.empty(n)
        mod["add"](a, b, c)
        np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())


def test_module_lookup_and_introspection(mod):
    f = mod["add"]
    assert isinstance(f, PackedFunc) and f is mod.get_function("add")
    assert f.name == "add" and f.is_kernel
    assert f.params[0] == ParamInfo("A", "buffer", "float32", ("n",))
    assert f.shape_vars == ("n",)
    assert [p.name for p in mod["scale"].params] == ["A", "alpha", "k", "B"]
    assert mod.entry_name == "add"
    assert set(mod.function_names) == {"add", "scale", "check", "count", "mm"}
    assert "add" in mod and "nope" not in mod
    assert repr(f) == "<PackedFunc add(A: float32[n], B: float32[n], C: float32[n])>"
    with pytest.raises(AttributeError, match="no function 'nope'"):
        mod["nope"]
    a, c = f32(3), nd.empty(3)
    mod(a, a, c)                                    # the entry function
    np.testing.assert_array_equal(c.numpy(), 2 * a.numpy())
    assert "add(A: float32[n]" in mod._repr_html_()


def test_scalars(mod):
    a, b = f32(4, 8), nd.empty((4, 8))
    mod["scale"](a, 0.5, 3, b)
    np.testing.assert_allclose(b.numpy(), a.numpy() * 0.5 + 3, rtol=1e-6)
    mod["scale"](a, 2, np.int32(-1), b)             # int for a float scalar, numpy int
    np.testing.assert_allclose(b.numpy(), a.numpy() * 2 - 1, rtol=1e-6)
    mod["scale"](a, np.float32(1.5), True and 1, b)
    np.testing.assert_allclose(b.numpy(), a.numpy() * 1.5 + 1, rtol=1e-6)


@pytest.mark.parametrize("args, exc, pattern", [
    (lambda: (f32(3), f32(3)), TypeError, r"add\(A, B, C\) takes 3 arguments, got 2"),
    (lambda: (f32(3), f32(3), f32(3), f32(3)), TypeError, "takes 3 arguments, got 4"),
    (lambda: (np.zeros(3, "float32"), f32(3), f32(3)), TypeError,
     r"parameter 'A' \(argument 0\) expects an NDArray float32\[n\], got numpy.ndarray. "
     r"Wrap it with workbench.nd.array"),
    (lambda: (f32(3), [1.0, 2.0, 3.0], f32(3)), TypeError, "parameter 'B'.*got builtins.list"),
    (lambda: (f32(3), f32(3), None), TypeError, "parameter 'C'"),
    (lambda: (f32(3), nd.empty(3, "float64"), f32(3)), ValueError,
     "parameter 'B' .* expects dtype float32, got float64 array of shape"),
    (lambda: (f32(3), f32(3, 1), f32(3)), ValueError,
     r"parameter 'B' .* expects 1 dimensions \(float32\[n\]\), got float32 array of shape "
     r"\(3, 1\)"),
    (lambda: (f32(3), f32(4), f32(3)), ValueError,
     r"parameter 'B' .* dimension 0 is shape variable 'n', bound to 3 by parameter 'A' "
     r"dimension 0, but got 4"),
    (lambda: (f32(3), f32(3), f32(2)), ValueError, "parameter 'C'.*bound to 3"),
])
def test_add_argument_errors(mod, args, exc, pattern):
    with pytest.raises(exc, match=pattern):
        mod["add"](*args())


@pytest.mark.parametrize("args, exc, pattern", [
    (lambda: (f32(4, 7), 1.0, 1, f32(4, 8)), ValueError,
     r"parameter 'A' .* expects shape float32\[4, 8\]: dimension 1 must be 8"),
    (lambda: (f32(4, 8), "x", 1, f32(4, 8)), TypeError,
     "parameter 'alpha' .* expects a float32 scalar .*got str"),
    (lambda: (f32(4, 8), 1.0, 1.5, f32(4, 8)), TypeError,
     r"parameter 'k' \(argument 2\) expects a int32 scalar \(an int\), got float"),
    (lambda: (f32(4, 8), 1.0, 2 ** 31, f32(4, 8)), ValueError,
     r"parameter 'k' .* 2147483648 is out of range for int32"),
    (lambda: (f32(4, 8), 1.0, f32(1), f32(4, 8)), TypeError, "parameter 'k'"),
])
def test_scale_argument_errors(mod, args, exc, pattern):
    with pytest.raises(exc, match=pattern):
        mod["scale"](*args())


def test_symbolic_dims_across_params(mod):
    mm = mod["mm"]
    mm(f32(2, 3), f32(3, 5), f32(2, 5))
    with pytest.raises(ValueError, match=r"parameter 'B' .* shape variable 'k', bound to 3 by "
                                         r"parameter 'A' dimension 1, but got 4"):
        mm(f32(2, 3), f32(4, 5), f32(2, 5))
    with pytest.raises(ValueError, match=r"parameter 'C' .* dimension 1 is shape variable 'm', "
                                         r"bound to 5 by parameter 'B' dimension 1"):
        mm(f32(2, 3), f32(3, 5), f32(2, 6))
    with pytest.raises(ValueError, match=r"parameter 'C' .* dimension 0 is shape variable 'n'"):
        mm(f32(2, 3), f32(3, 5), f32(3, 5))


def test_failed_call_leaves_function_usable(mod):
    a, c = f32(3), nd.empty(3)
    for _ in range(3):
        with pytest.raises(ValueError):
            mod["add"](a, f32(4), c)
    mod["add"](a, a, c)
    np.testing.assert_array_equal(c.numpy(), 2 * a.numpy())


def test_nonzero_return_raises(mod):
    mod["check"](5)
    with pytest.raises(RuntimeError, match=r"runtime check failed in kernel 'check' "
                                           r"\(error code 7\)"):
        mod["check"](-1)
    mod["check"](0)


def test_int64_scalar_range(mod):
    mod["check"](2 ** 63 - 1)
    with pytest.raises(ValueError, match="out of range for int64"):
        mod["check"](2 ** 63)


def test_concurrent_calls_from_threads(mod):
    """Each thread sees its own slots (the kernel runs without the GIL)."""
    n = 50_000
    inputs = [(f32(n, fill=float(t)), f32(n, fill=1.0), nd.empty(n)) for t in range(4)]
    errors = []

    def work(t):
        a, b, c = inputs[t]
        try:
            for _ in range(50):
                mod["add"](a, b, c)
                if not (c.numpy(copy=False) == t + 1).all():
                    errors.append(t)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_bad_metadata_is_rejected():
    bad = dict(K.ADD[1], params=[{"name": "A", "kind": "buffer", "dtype": "float32",
                                  "shape": ["q"]}])
    obj, _ = K.compile_kernels((K.ADD[0], bad))
    with pytest.raises(ValueError, match="shape variable 'q' not listed in shape_vars"):
        Module.from_object(obj)
    missing = {"name": "ghost", "params": [], "shape_vars": []}
    obj, _ = K.compile_kernels(K.CHECK, meta={"version": 1, "entry": "check",
                                              "functions": [K.CHECK[1], missing]})
    with pytest.raises(ValueError, match="'ghost' is listed .* does not define it"):
        Module.from_object(obj)
    obj, _ = K.compile_kernels(K.CHECK, meta={"version": 2, "functions": []})
    with pytest.raises(ValueError, match="unsupported metadata version 2"):
        Module.from_object(obj)
    with pytest.raises(ValueError, match="not an ELF"):
        Module.from_object(b"not an object file")
