"""Static replay (relax_vm/replay.py): a fixed-shape VM function of kernels and memory builtins
is recorded on its first call and replayed after; results, errors, instruments, threads and
outputs kept by the caller behave exactly as when every call is interpreted."""
import threading

import numpy as np
import pytest

import workbench as wb
from workbench import options
from workbench.runtime.relax_vm import DataType, ExecBuilder, VirtualMachine
from workbench.runtime.relax_vm import replay as replay_mod
from vm_programs import D, N, mlp_inputs, mlp_program, mlp_reference

F32 = DataType("float32")


def _vm(lib, bias, profile=False, **opts):
    with options.override(**opts):
        return VirtualMachine(mlp_program(lib, bias), wb.cpu(), profile=profile)


def _args(x, w1, w2):
    return [wb.nd.array(a) for a in (x, w1, w2)]


def test_replay_matches_numpy_and_keeps_earlier_outputs(mlp_lib):
    x, w1, w2, bias = mlp_inputs(0)
    vm = _vm(mlp_lib, bias)
    assert vm.static_replay() == {"main": "capture pending"}
    outs, refs = [], []
    for seed in range(5):
        x, w1, w2, _ = mlp_inputs(seed)
        outs.append(vm["main"](*_args(x, w1, w2)))
        refs.append(mlp_reference(x, w1, w2, bias))
        assert vm.static_replay() == {"main": "replayed"}
    # every output is its own memory: later calls did not overwrite the earlier ones
    assert len({o._ptr for o in outs}) == len(outs)
    for out, ref in zip(outs, refs):
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_replay_runs_no_builtin_and_no_checker(mlp_lib, monkeypatch):
    """After the capture, a call allocates only the output's storage and calls each kernel's
    native entry point: the interpreter's builtins and the kernels' checkers are not run."""
    x, w1, w2, bias = mlp_inputs(1)
    vm = _vm(mlp_lib, bias)
    vm["main"](*_args(x, w1, w2))
    made = []
    real = replay_mod.Storage

    def counting(nbytes, device):
        made.append(nbytes)
        return real(nbytes, device)

    monkeypatch.setattr(replay_mod, "Storage", counting)
    out = vm["main"](*_args(x, w1, w2))
    assert made == [N * D * 4]         # storage A (holds the output); B is the plan's own
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)


def _error(call):
    try:
        call()
    except Exception as e:          # noqa: BLE001 - compared by the caller
        return type(e), str(e)
    raise AssertionError("no error")


def test_replay_refuses_a_wrong_input_with_the_interpreters_error(mlp_lib):
    x, w1, w2, bias = mlp_inputs(2)
    vm = _vm(mlp_lib, bias)
    plain = _vm(mlp_lib, bias, vm_static_replay=False)
    vm["main"](*_args(x, w1, w2))
    rest = _args(x, w1, w2)[1:]
    for bad in (wb.nd.array(np.zeros((N + 1, D), "float32")),
                wb.nd.array(np.zeros((N, D), "float64")), x):
        got = _error(lambda bad=bad: vm["main"](bad, *rest))
        assert got == _error(lambda bad=bad: plain["main"](bad, *rest))
        assert "param=x" in got[1] or "x" in got[1]
    # the plan is still there and still right
    out = vm["main"](*_args(x, w1, w2))
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)
    assert vm.static_replay() == {"main": "replayed"}


def test_a_failed_first_call_captures_on_the_next(mlp_lib):
    x, w1, w2, bias = mlp_inputs(3)
    vm = _vm(mlp_lib, bias)
    with pytest.raises(RuntimeError, match=r"param=w2"):
        vm["main"](*_args(x, w1, w2)[:2], wb.nd.array(np.zeros((D, D + 1), "float32")))
    assert vm.static_replay() == {"main": "capture pending"}
    out = vm["main"](*_args(x, w1, w2))
    assert vm.static_replay() == {"main": "replayed"}
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)


def test_instrument_and_profiler_see_every_call_after_capture(mlp_lib):
    x, w1, w2, bias = mlp_inputs(4)
    vm = _vm(mlp_lib, bias, profile=True)
    vm["main"](*_args(x, w1, w2))
    seen = []
    vm.set_instrument(lambda func, name, before, ret, *a: seen.append(name) if before else None)
    out = vm["main"](*_args(x, w1, w2))
    assert seen.count("matmul") == 2 and seen.count("relu") == 2
    assert "vm.builtin.alloc_tensor" in seen
    vm.set_instrument(None)
    report = vm.profile("main", *_args(x, w1, w2))
    assert sum(1 for c in report.calls if str(c.get("Name", "")) == "matmul") == 2
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)


def test_threads_each_get_their_own_results(mlp_lib):
    """Concurrent calls: one replays, the others find the plan busy and are interpreted; every
    result belongs to its own inputs."""
    _, _, _, bias = mlp_inputs(0)
    vm = _vm(mlp_lib, bias)
    vm["main"](*_args(*mlp_inputs(0)[:3]))
    errors = []

    def worker(seed):
        try:
            for k in range(40):
                x, w1, w2, _ = mlp_inputs(seed * 100 + k % 3)
                out = vm["main"](*_args(x, w1, w2))
                np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias),
                                           rtol=1e-5, atol=1e-5)
        except Exception as e:      # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_option_off_interprets(mlp_lib):
    x, w1, w2, bias = mlp_inputs(5)
    vm = _vm(mlp_lib, bias, vm_static_replay=False)
    out = vm["main"](*_args(x, w1, w2))
    assert vm.static_replay() == {"main": "interpreted"}
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)


def _program(lib, body):
    ib = ExecBuilder()
    with ib.function("main", num_inputs=1, param_names=["x"]):
        body(ib)
    exe = ib.get()
    exe.import_module(lib)
    return VirtualMachine(exe, wb.cpu())


def test_what_is_not_replayed(mlp_lib):
    """Control flow and other callees are never replayed; a function returning its input (an
    output it did not allocate) is found out at capture and stays interpreted."""
    def jumps(ib):
        ib.emit_goto(1)
        ib.emit_ret(ib.r(0))

    def returns_input(ib):
        ib.emit_call("vm.builtin.alloc_storage", args=[
            ib.vm_state(), (N * D * 4,), ib.imm(0), DataType("uint8"),
            ib.convert_constant("global")], dst=ib.r(1))
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(1), ib.imm(0), (N, D), F32],
                     dst=ib.r(2))
        ib.emit_call("relu", args=[ib.r(0), ib.r(2)])
        ib.emit_ret(ib.r(0))

    def relu_tuple(ib):
        ib.emit_call("vm.builtin.alloc_storage", args=[
            ib.vm_state(), (2 * N * D * 4,), ib.imm(0), DataType("uint8"),
            ib.convert_constant("global")], dst=ib.r(1))
        for reg, off in ((2, 0), (3, N * D * 4)):
            ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(1), ib.imm(off), (N, D), F32],
                         dst=ib.r(reg))
        ib.emit_call("relu", args=[ib.r(0), ib.r(2)])
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(2)], dst=ib.r(5))
        ib.emit_call("vm.builtin.tuple_getitem", args=[ib.r(5), ib.imm(0)], dst=ib.r(6))
        ib.emit_call("relu", args=[ib.r(6), ib.r(3)])
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(3), ib.r(2)], dst=ib.r(4))
        ib.emit_ret(ib.r(4))

    x = np.random.default_rng(0).standard_normal((N, D)).astype("float32")
    vm = _program(mlp_lib, jumps)
    assert vm.static_replay() == {"main": "interpreted"}
    vm = _program(mlp_lib, returns_input)
    for _ in range(2):
        arg = wb.nd.array(x)
        assert vm["main"](arg) is arg
    assert vm.static_replay() == {"main": "interpreted"}
    vm = _program(mlp_lib, relu_tuple)
    results = [vm["main"](wb.nd.array(x * s)) for s in (1.0, -2.0, 3.0)]
    assert vm.static_replay() == {"main": "replayed"}
    for s, (a, b) in zip((1.0, -2.0, 3.0), results):
        np.testing.assert_array_equal(a.numpy(), np.maximum(x * s, 0))
        np.testing.assert_array_equal(b.numpy(), np.maximum(x * s, 0))


def test_replayable_needs_only_kernels_and_memory_builtins(mlp_lib):
    def python_call(ib):
        ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))

    vm = _program(mlp_lib, python_call)
    assert vm.static_replay() == {"main": "interpreted"}


def test_a_dropped_vm_is_freed_at_once_and_its_functions_keep_it_alive(mlp_lib):
    """What a VM owns refers to it weakly, so dropping the last reference frees it (and its
    replay plans' intermediates) without the cyclic collector; a function or saved closure
    taken from it keeps it alive and working, as ``f = VirtualMachine(exe, dev)["main"]``
    does in TVM."""
    import gc
    import weakref

    x, w1, w2, bias = mlp_inputs(0)
    want = mlp_reference(x, w1, w2, bias)
    gc.collect()
    gc.disable()
    try:
        vm = _vm(mlp_lib, bias, profile=True)
        vm["main"](*_args(x, w1, w2))                     # captured: plans hold buffers
        vm.save_function("main", "saved", *_args(x, w1, w2))
        vm["profile"]("main", *_args(x, w1, w2))          # built-in methods too
        dead = weakref.ref(vm)
        del vm
        assert dead() is None                             # no cycle kept it

        f = _vm(mlp_lib, bias)["main"]                    # only the function is held
        for _ in range(3):                                # interpreted, captured, replayed
            np.testing.assert_allclose(f(*_args(x, w1, w2)).numpy(), want, rtol=1e-5,
                                       atol=1e-5)
        vm = _vm(mlp_lib, bias)
        vm.save_function("main", "saved", *_args(x, w1, w2))
        saved, alive = vm["saved"], weakref.ref(vm)
        del vm
        assert alive() is not None
        np.testing.assert_allclose(saved().numpy(), want, rtol=1e-5, atol=1e-5)
        del saved
        assert alive() is None
    finally:
        gc.enable()
