"""TVM's own TVMScript spelling, as its v0.21 tutorials write it (ir_module, tir_creation,
tir_transformation, relax_creation): each construct in a module of our own, parsed by the
decorators, built and run, and checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax, tir
from workbench.ir.module import IRModule
from workbench.script import from_source, ir as I, relax as R, tir as T

RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _run_tir(mod, name, *arrays):
    rt = wb.build(mod)
    args = [wb.nd.array(a) for a in arrays]
    rt[name](*args)
    return args


# ---- TIR: explicit block axes, reads/writes, init; then the concise forms ---------------------

@I.ir_module
class ExplicitAxes:
    @T.prim_func
    def mm_relu(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 12), "float32"),
                C: T.Buffer((16, 12), "float32")):
        T.func_attr({"tir.noalias": True})
        Y = T.alloc_buffer((16, 12), dtype="float32")
        for i in range(16):
            for j in range(12):
                for k in range(8):
                    with T.block("Y"):
                        vi = T.axis.spatial(16, i)
                        vj = T.axis.spatial(12, j)
                        vk = T.axis.reduce(8, k)
                        T.reads(A[vi, vk], B[vk, vj])
                        T.writes(Y[vi, vj])
                        with T.init():
                            Y[vi, vj] = T.float32(0)
                        Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i in range(16):
            for j in range(12):
                with T.block("C"):
                    vi = T.axis.spatial(16, i)
                    vj = T.axis.spatial(12, j)
                    T.reads(Y[vi, vj])
                    T.writes(C[vi, vj])
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@I.ir_module
class Concise:
    @T.prim_func
    def mm_relu(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 12), "float32"),
                C: T.Buffer((16, 12), "float32")):
        Y = T.alloc_buffer((16, 12), dtype="float32")
        for i, j, k in T.grid(16, 12, 8):
            with T.sblock("Y"):  # TVM's newer name for T.block
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(16, 12):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def _mm_relu_ref(a, b):
    return np.maximum(a @ b, 0)


@pytest.mark.parametrize("mod", [ExplicitAxes, Concise], ids=["explicit", "concise"])
def test_tir_module_builds_and_computes(mod):
    assert isinstance(mod, IRModule)
    a, b = _rand(16, 8), _rand(8, 12)
    _, _, c = _run_tir(mod, "mm_relu", a, b, np.zeros((16, 12), "float32"))
    np.testing.assert_allclose(c.numpy(), _mm_relu_ref(a, b), rtol=1e-5, atol=1e-5)


def test_concise_and_explicit_forms_are_the_same_ir():
    """Left-out T.reads/T.writes are the regions the body accesses; T.sblock is T.block."""
    explicit = ExplicitAxes["mm_relu"].replace(attrs=Concise["mm_relu"].attrs)
    assert wb.ir.structural_equal(Concise["mm_relu"], explicit)


M, N, K = 8, 6, 4
DTYPE = "float32"


@I.ir_module
class FromPython:
    """Shapes and dtype from Python variables of the enclosing scope."""

    @T.prim_func
    def mm_relu(A: T.Buffer((M, K), DTYPE), B: T.Buffer((K, N), DTYPE),
                C: T.Buffer((M, N), DTYPE)):
        Y = T.alloc_buffer((M, N), DTYPE)
        for i, j, k in T.grid(M, N, K):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.cast(T.float32(0), DTYPE)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(M, N):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.cast(T.float32(0), DTYPE))


@I.ir_module
class DynamicShape:
    @T.prim_func
    def mm_relu(a: T.handle, b: T.handle, c: T.handle):
        T.func_attr({"tir.noalias": True})
        M, N, K = T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, [M, K], DTYPE)
        B = T.match_buffer(b, [K, N], DTYPE)
        C = T.match_buffer(c, [M, N], DTYPE)
        Y = T.alloc_buffer((M, N), DTYPE)
        for i, j, k in T.grid(M, N, K):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.cast(T.float32(0), DTYPE)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(M, N):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.cast(T.float32(0), DTYPE))


def test_python_values_parameterise_the_script():
    a, b = _rand(M, K), _rand(K, N)
    _, _, c = _run_tir(FromPython, "mm_relu", a, b, np.zeros((M, N), "float32"))
    np.testing.assert_allclose(c.numpy(), _mm_relu_ref(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,n,k", [(4, 5, 3), (9, 2, 7)])
def test_dynamic_shapes_from_match_buffer_run_at_any_size(m, n, k):
    func = DynamicShape["mm_relu"]
    assert [str(p.dtype) for p in func.params] == ["handle"] * 3
    assert len(func.buffer_map) == 3
    a, b = _rand(m, k), _rand(k, n)
    _, _, c = _run_tir(DynamicShape, "mm_relu", a, b, np.zeros((m, n), "float32"))
    np.testing.assert_allclose(c.numpy(), _mm_relu_ref(a, b), rtol=1e-5, atol=1e-5)


def test_scheduling_a_parsed_function():
    """tir_transformation: schedule what the script built, as the tutorial does."""
    sch = tir.Schedule(Concise)
    block = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(j, factors=[None, 4])
    sch.reorder(i, io, k, ii)
    sch.reverse_compute_at(sch.get_block("C", func_name="mm_relu"), io)
    a, b = _rand(16, 8), _rand(8, 12)
    _, _, c = _run_tir(sch.mod, "mm_relu", a, b, np.zeros((16, 12), "float32"))
    np.testing.assert_allclose(c.numpy(), _mm_relu_ref(a, b), rtol=1e-5, atol=1e-5)


@T.prim_func
def tir_linear(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
    """A module-level prim_func, as relax_creation writes one."""
    M, N, K = T.int64(), T.int64(), T.int64()
    X = T.match_buffer(x, (M, K), "float32")
    W = T.match_buffer(w, (N, K), "float32")
    B = T.match_buffer(b, (N,), "float32")
    Z = T.match_buffer(z, (M, N), "float32")
    for i, j, k in T.grid(M, N, K):
        with T.block("linear"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Z[vi, vj] = T.float32(0)
            Z[vi, vj] = Z[vi, vj] + X[vi, vk] * W[vj, vk]
    for i, j in T.grid(M, N):
        with T.block("add"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = Z[vi, vj] + B[vj]


def test_module_level_prim_func():
    assert isinstance(tir_linear, tir.PrimFunc)
    assert tir_linear.attrs["global_symbol"] == "tir_linear"
    x, w, b = _rand(3, 5), _rand(4, 5), _rand(4)
    rt = wb.build(IRModule({"tir_linear": tir_linear}))
    z = wb.nd.array(np.zeros((3, 4), "float32"))
    rt["tir_linear"](wb.nd.array(x), wb.nd.array(w), wb.nd.array(b), z)
    np.testing.assert_allclose(z.numpy(), x @ w.T + b, rtol=1e-5, atol=1e-5)


# ---- Relax ---------------------------------------------------------------------------------


@I.ir_module
class RelaxMLP:
    @R.function
    def main(x: R.Tensor((1, 12), dtype="float32"), w1: R.Tensor((6, 12), dtype="float32"),
             b1: R.Tensor((6,), dtype="float32"), w2: R.Tensor((3, 6), dtype="float32"),
             b2: R.Tensor((3,), dtype="float32")) -> R.Tensor((1, 3), dtype="float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            permute_dims = R.permute_dims(w1, axes=None)
            matmul = R.matmul(x, permute_dims, out_dtype="void")
            add = R.add(matmul, b1)
            relu = R.nn.relu(add)
            permute_dims1 = R.permute_dims(w2, axes=None)
            matmul1 = R.matmul(relu, permute_dims1, out_dtype="void")
            add1 = R.add(matmul1, b2)
            gv = add1
            R.output(gv)
        return gv


@I.ir_module
class RelaxSymbolic:
    """String dims in annotations, nested calls and ``+`` on Relax values."""

    @R.function
    def forward(data: R.Tensor(("n", 12), dtype="float32"),
                w0: R.Tensor((6, 12), dtype="float32"), b0: R.Tensor((6,), dtype="float32"),
                w1: R.Tensor((3, 6), dtype="float32"), b1: R.Tensor((3,), dtype="float32")
                ) -> R.Tensor(("n", 3), dtype="float32"):
        with R.dataflow():
            lv0 = R.matmul(data, R.permute_dims(w0)) + b0
            lv1 = R.nn.relu(lv0)
            lv2 = R.matmul(lv1, R.permute_dims(w1)) + b1
            R.output(lv2)
        return lv2


@I.ir_module
class RelaxWithTIR:
    """A PrimFunc and a Relax function calling it with R.call_tir(cls.relu, ...)."""

    @T.prim_func
    def relu(x: T.handle, y: T.handle):
        n, m = T.int64(), T.int64()
        X = T.match_buffer(x, (n, m), "float32")
        Y = T.match_buffer(y, (n, m), "float32")
        for i, j in T.grid(n, m):
            with T.block("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def forward(data: R.Tensor(("n", 12), dtype="float32"),
                w0: R.Tensor((6, 12), dtype="float32"), b0: R.Tensor((6,), dtype="float32"),
                w1: R.Tensor((3, 6), dtype="float32"), b1: R.Tensor((3,), dtype="float32")
                ) -> R.Tensor(("n", 3), dtype="float32"):
        n = T.int64()
        cls = RelaxWithTIR
        with R.dataflow():
            lv0 = R.matmul(data, R.permute_dims(w0)) + b0
            lv1 = R.call_tir(cls.relu, lv0, R.Tensor((n, 6), dtype="float32"))
            lv2 = R.matmul(lv1, R.permute_dims(w1)) + b1
            R.output(lv2)
        return lv2


def _weights():
    return _rand(6, 12), _rand(6), _rand(3, 6), _rand(3)


def _mlp_ref(x, w0, b0, w1, b1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


def _run_relax(mod, name, *arrays):
    exe = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    return vm[name](*[wb.nd.array(a) for a in arrays]).numpy()


def test_relax_module_as_printed_by_tvm_builds_and_computes():
    x, *p = _rand(1, 12), *_weights()
    out = _run_relax(RelaxMLP, "main", x, *p)
    np.testing.assert_allclose(out, _mlp_ref(x, *p), rtol=1e-5, atol=1e-5)
    assert RelaxMLP["main"].attrs["num_input"] == 1


@pytest.mark.parametrize("mod", [RelaxSymbolic, RelaxWithTIR], ids=["ops", "call_tir"])
@pytest.mark.parametrize("batch", [1, 5])
def test_relax_symbolic_batch_builds_and_computes(mod, batch):
    x, *p = _rand(batch, 12), *_weights()
    out = _run_relax(mod, "forward", x, *p)
    np.testing.assert_allclose(out, _mlp_ref(x, *p), rtol=1e-5, atol=1e-5)


def test_string_dims_are_one_var_per_function():
    f = RelaxWithTIR["forward"]
    n_in = f.params[0].struct_info.values[0]
    n_out = f.ret_struct_info.values[0]
    assert isinstance(n_in, tir.Var) and n_in is n_out


def test_runtime_use_of_the_namespaces():
    """Outside any function, T.int64() is a symbolic var and R.Tensor a struct info
    (relax_creation builds relax.Vars with them)."""
    n = T.int64()
    x = relax.Var("x", R.Tensor((n, 784), "float32"))
    assert isinstance(x.struct_info, relax.TensorStructInfo)
    assert x.struct_info.values[0] is n and x.struct_info.dtype == "float32"


@I.ir_module
class PrivateAndImpure:
    @T.prim_func(private=True)
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] + T.float32(1)

    @R.function(pure=False, private=True)
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((4,), "float32"))
        z: R.Tensor((4,), "float32") = R.match_cast(y, R.Tensor((4,), "float32"))
        return z


def test_private_and_impure_flags():
    assert "global_symbol" not in PrivateAndImpure["add_one"].attrs
    helper = PrivateAndImpure["helper"]
    assert "global_symbol" not in helper.attrs and helper.is_pure is False
    assert PrivateAndImpure["main"].attrs["global_symbol"] == "main"
    x = _rand(4)
    np.testing.assert_allclose(_run_relax(PrivateAndImpure, "main", x), x + 1, rtol=1e-6)


RELAX_FORMS = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), s: R.Shape(["n", 4]), o: R.Object,
             c: R.Tensor((), "bool")) -> R.Tuple(R.Tensor(("n", 4), "float32"),
                                                 R.Tensor(ndim=2, dtype="float32")):
        n = T.int64()
        m = T.int64()
        y: R.Tensor((m, 4), "float32") = R.match_cast(x, R.Tensor((m, 4), "float32"))
        t = (x, y)
        a = t[0]
        if c:
            b1 = R.add(a, a)
            b = b1
        else:
            b = R.multiply(a, a)
        p = R.prim_value(T.int64(3))
        sh = R.shape([n, 4])
        return (b, y)
'''


def test_relax_struct_info_match_cast_tuples_and_if():
    mod = from_source(RELAX_FORMS)
    f = mod["main"]
    x, s, o, c = f.params
    n = x.struct_info.values[0]
    assert s.struct_info.values[0] is n                       # "n" is one var
    assert isinstance(o.struct_info, relax.ObjectStructInfo)
    bindings = f.body.blocks[0].bindings
    cast = bindings[0]
    assert isinstance(cast, relax.MatchCast)
    m = cast.struct_info.values[0]
    assert isinstance(m, tir.Var) and m is not n              # match_cast defines m
    assert isinstance(bindings[3].value, relax.If)
    assert isinstance(f.ret_struct_info, relax.TupleStructInfo)
    again = from_source(mod.script())
    assert wb.ir.structural_equal(mod, again)


def test_from_source_of_a_lone_function():
    func = from_source('''
@T.prim_func
def scale(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.vectorized(4):
        B[i] = A[i] * T.float32(2)
''')
    assert isinstance(func, tir.PrimFunc)
    a = _rand(4)
    rt = wb.build(IRModule({"scale": func}))
    b = wb.nd.array(np.zeros(4, "float32"))
    rt["scale"](wb.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a * 2)


@I.ir_module
class CallsBetweenFunctions:
    @R.function(private=True)
    def double(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.add(x, x)
        return y

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        a = cls.double(x)
        b: R.Tensor((3,), "float32") = cls.double(a)
        return b


def test_relax_functions_call_each_other_through_cls():
    main = CallsBetweenFunctions["main"]
    first = main.body.blocks[0].bindings[0]
    assert isinstance(first.value.op, wb.ir.GlobalVar) and first.value.op.name_hint == "double"
    assert first.var.struct_info.values[0].value == 3     # inferred from the callee
    x = _rand(3)
    np.testing.assert_allclose(_run_relax(CallsBetweenFunctions, "main", x), 4 * x, rtol=1e-6)
    assert wb.ir.structural_equal(CallsBetweenFunctions,
                                  from_source(CallsBetweenFunctions.script()))


NEWER_TVM_PRINTOUT = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer(("n", 6), "float32"), D: T.Buffer((n, 6), "float32")):
    n = T.int32()
    T.func_attr({"tir.noalias": True})
    # with T.sblock("root"):
    C = T.sblock_alloc_buffer((n, 6))
    for i, j in T.grid(n, 6):
        with T.sblock("C"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i, v_j])
            T.writes(C[v_i, v_j])
            C[v_i, v_j] = A[v_i, v_j] * T.float32(3.0)
    for i, j in T.grid(n, 6):
        with T.sblock("D"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            D[v_i, v_j] = T.max(C[v_i, v_j], T.float32(0.0))
'''


def test_newer_tvm_printout_spelling():
    """What TVM 0.2x prints: s_tir=True, a string dim in a buffer annotation that the body
    declares, T.sblock and T.sblock_alloc_buffer."""
    func = from_source(NEWER_TVM_PRINTOUT)
    a_buf, d_buf = (func.buffer_map[p] for p in func.params)
    assert a_buf.shape[0] is d_buf.shape[0]
    a = _rand(5, 6)
    d = wb.nd.array(np.zeros((5, 6), "float32"))
    wb.build(IRModule({"main": func}))["main"](wb.nd.array(a), d)
    np.testing.assert_allclose(d.numpy(), np.maximum(a * 3, 0), rtol=1e-6)


def test_ir_module_with_options():
    @I.ir_module(check_well_formed=False)
    class Mod:
        @T.prim_func
        def f(A: T.Buffer((2,), "float32")):
            A[0] = T.float32(1)
    assert isinstance(Mod, IRModule) and list(Mod) == ["f"]


def test_tvm_names_of_the_script_package():
    """import workbench as tvm: tvm.script.ir_module / from_source as TVM spells them."""
    assert wb.script.ir_module is I.ir_module
    func = wb.script.from_source('''
size = 3
@T.prim_func
def fill(A: T.Buffer((size,), "float32")):
    for i in range(size):
        A[i] = T.float32(7)
''')
    assert func.buffer_map[func.params[0]].shape[0].value == 3
