"""Crash isolation of LLVM (workbench/codegen/isolation.py): an LLVM abort or segfault while
compiling raises LLVMCrashError naming the signal, the stage, the functions and the saved IR;
the caller lives on and the next compile works. Checked with IR that really aborts LLVM, by
killing the helper mid-compile, from threads, in scripts and in a real notebook kernel."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import llvmlite.binding as llvm
import numpy as np
import pytest

import workbench as wb
from workbench import options, te
from workbench.codegen import LLVMCompiler, LLVMCrashError, compile_to_object, isolation
from workbench.codegen.testing import LLVM_ABORT_TARGET, llvm_abort_available, llvm_abort_ir
from workbench.target import Target

build_module = sys.modules["workbench.codegen.build"]   # the package exports build(), the function
needs_x86 = pytest.mark.skipif(not llvm_abort_available(),
                               reason="the aborting IR targets the x86 back end")


@pytest.fixture
def cache(tmp_path):
    with options.override(cache_dir=str(tmp_path), compile_isolation=True):
        yield tmp_path


def _add_kernel(n: int = 64, scale: float = 2.0):
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * scale + 1.0, name="B")
    return te.create_prim_func([a, b])


def _check_add_kernel(rt, n: int = 64, scale: float = 2.0) -> None:
    x = np.random.default_rng(n).random(n, dtype="float32")
    out = wb.nd.empty((n,), "float32")
    rt["main"](wb.nd.array(x), out)
    np.testing.assert_allclose(out.numpy(), x * scale + 1.0, rtol=1e-6)


def _wait_dead(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:   # our own child: reap it so it does not linger as a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        if _is_zombie(pid):
            return True
        time.sleep(0.05)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def _big_ir(n_funcs: int) -> str:
    """Many small loops: enough work to keep LLVM's optimiser busy for a second or more."""
    body = []
    for k in range(n_funcs):
        body.append(f"""
define void @loop{k}(float* noalias %a, float* noalias %b, i32 %n) {{
entry:
  br label %loop
loop:
  %i = phi i32 [0, %entry], [%i1, %loop]
  %pa = getelementptr inbounds float, float* %a, i32 %i
  %pb = getelementptr inbounds float, float* %b, i32 %i
  %x = load float, float* %pa
  %y = fmul float %x, {float(k + 1):e}
  %z = call float @llvm.sqrt.f32(float %y)
  store float %z, float* %pb
  %i1 = add nsw i32 %i, 1
  %c = icmp slt i32 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}}""")
    return "declare float @llvm.sqrt.f32(float)\n" + "".join(body)


# ---- a real LLVM abort ---------------------------------------------------------------------------

@needs_x86
def test_the_aborting_ir_verifies_and_really_kills_an_unisolated_process(tmp_path):
    """The premise of the other tests: this IR passes verify() and aborts LLVM in-process."""
    mod = llvm.parse_assembly(llvm_abort_ir())
    mod.verify()
    script = tmp_path / "inproc.py"
    script.write_text(textwrap.dedent("""
        from workbench import options
        from workbench.codegen import LLVMCompiler
        from workbench.codegen.testing import LLVM_ABORT_TARGET, llvm_abort_ir
        from workbench.target import Target
        options.set("compile_isolation", False)
        LLVMCompiler(Target(LLVM_ABORT_TARGET), use_cache=False).compile(llvm_abort_ir())
        print("survived")
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "WORKBENCH_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stderr[-2000:])
    assert "survived" not in proc.stdout
    assert "LLVM ERROR" in proc.stderr


@needs_x86
def test_llvm_abort_is_an_exception_with_the_saved_ir_and_the_next_compile_works(cache):
    before = isolation.stats()
    compiler = LLVMCompiler(Target(LLVM_ABORT_TARGET))
    with pytest.raises(LLVMCrashError) as info:
        compiler.compile(llvm_abort_ir("my_kernel"))
    err = info.value
    assert (err.reason, err.signal, err.stage) == ("crashed", "SIGABRT", "codegen")
    assert err.exitcode == -signal.SIGABRT
    assert err.functions == ["my_kernel"]
    text = str(err)
    for part in ("SIGABRT", "stage 'codegen'", "my_kernel", "Do not know how to split",
                 err.ir_path, "This process is unaffected"):
        assert part in text, (part, text)
    # The saved file is the module, loadable as it is (the header lines are IR comments).
    assert err.ir_path.startswith(str(cache / "crashes"))
    saved = open(err.ir_path).read()
    assert llvm_abort_ir("my_kernel") in saved and "SIGABRT" in saved
    llvm.parse_assembly(saved).verify()
    assert isolation.stats()["crashes"] == before["crashes"] + 1
    # A crash is not cached, and a second attempt crashes the same way (in a new helper).
    assert not list((cache / "objects").rglob("*.o"))
    with pytest.raises(LLVMCrashError, match="SIGABRT"):
        compiler.compile(llvm_abort_ir("my_kernel"))
    # The next compile, through the whole build, works.
    _check_add_kernel(wb.build(_add_kernel()))
    assert isolation.stats()["started"] >= before["started"] + 2


@needs_x86
def test_build_and_compile_raise_llvm_crash_error(cache, monkeypatch):
    """workbench.build / workbench.compile (a PrimFunc and a Relax graph): kernels whose LLVM IR
    aborts LLVM (the renderer is made to append the aborting function) raise, and the same
    session builds on."""
    real_render = build_module.render

    def render_with_crash(mod, target):
        ll, info = real_render(mod, target)
        return ll + "\n" + llvm_abort_ir("appended_crash").split("\n", 1)[1], info

    monkeypatch.setattr(build_module, "render", render_with_crash)
    for entry, mod in ((wb.build, _add_kernel()), (wb.compile, _add_kernel()),
                       (wb.compile, _relax_double())):
        with pytest.raises(LLVMCrashError) as info:
            entry(mod, target=LLVM_ABORT_TARGET)
        assert "appended_crash" in info.value.functions and len(info.value.functions) > 1
        assert os.path.isfile(info.value.ir_path)
    monkeypatch.setattr(build_module, "render", real_render)
    _check_add_kernel(wb.compile(_add_kernel(n=32), target="llvm"), n=32)
    vm = wb.relax.VirtualMachine(wb.compile(_relax_double(), target="llvm"), wb.cpu())
    x = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(vm["main"](wb.nd.array(x)).numpy(), x + x)


def _relax_double():
    """A Relax graph (x + x): wb.compile goes through relax.build and the VM."""
    from workbench import relax
    x = relax.Var("x", relax.TensorStructInfo((8,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(relax.op.add(x, x)))
        bb.emit_func_output(gv)
    return bb.get()


@needs_x86
def test_parse_errors_stay_ordinary_errors_and_keep_the_helper(cache):
    compiler = LLVMCompiler(Target("llvm"), use_cache=False)
    compiler.compile("define void @ok() {\n  ret void\n}\n")
    pids = {h["pid"] for h in isolation.helpers()}
    with pytest.raises(RuntimeError, match="expected top-level entity") as info:
        compiler.compile("this is not LLVM IR")
    assert not isinstance(info.value, LLVMCrashError)
    with pytest.raises(RuntimeError, match="Cannot select|verif|Invalid|error"):
        # a type error LLVM's parser reports (not a crash)
        compiler.compile("define i32 @bad() {\n  ret float 1.0\n}\n")
    assert pids & {h["pid"] for h in isolation.helpers()}   # the same helper served them


# ---- killed helpers ------------------------------------------------------------------------------

def test_helper_killed_mid_compile_raises_and_is_replaced(cache):
    """A segfault in the middle of optimisation (SIGSEGV sent to the busy helper)."""
    compiler = LLVMCompiler(Target("llvm"), use_cache=False)
    compiler.compile("define void @warm() {\n  ret void\n}\n")   # a helper is up
    result: dict = {}

    def work() -> None:
        try:
            result["value"] = compiler.compile(_big_ir(150))
        except BaseException as err:  # noqa: BLE001 - inspected below
            result["error"] = err

    for _ in range(3):   # the compile takes seconds; retried if it ever won the race
        result.clear()
        thread = threading.Thread(target=work)
        thread.start()
        victim = None
        while thread.is_alive() and victim is None:
            busy = [h for h in isolation.helpers() if h["busy"] and
                    h["stage"] in ("optimize", "codegen")]
            victim = busy[0] if busy else None
            time.sleep(0.002)
        if victim is not None:
            os.kill(victim["pid"], signal.SIGSEGV)
        thread.join(120)
        if "error" in result:
            break
    err = result["error"]
    assert isinstance(err, LLVMCrashError), err
    assert err.signal == "SIGSEGV" and err.stage == victim["stage"]
    assert f"stage '{victim['stage']}'" in str(err) and "loop0" in str(err)
    assert len(err.functions) == 150 and os.path.isfile(err.ir_path)
    assert victim["pid"] not in {h["pid"] for h in isolation.helpers()}
    _check_add_kernel(wb.build(_add_kernel(n=48)), n=48)


def test_helper_killed_while_idle_is_replaced_without_an_error(cache):
    compiler = LLVMCompiler(Target("llvm"), use_cache=False)
    compiler.compile("define void @a() {\n  ret void\n}\n")
    idle = [h["pid"] for h in isolation.helpers() if not h["busy"]]
    for pid in idle:
        os.kill(pid, signal.SIGKILL)
    for pid in idle:
        assert _wait_dead(pid)
    started = isolation.stats()["started"]
    crashes = isolation.stats()["crashes"]
    assert compiler.compile("define void @b() {\n  ret void\n}\n").obj
    assert isolation.stats()["crashes"] == crashes
    assert isolation.stats()["started"] > started


def test_compile_timeout_kills_a_hung_helper(cache):
    compiler = LLVMCompiler(Target("llvm"), use_cache=False)
    compiler.compile("define void @a() {\n  ret void\n}\n")
    (helper,) = [h for h in isolation.helpers() if not h["busy"]][:1] or [None]
    with options.override(compile_helpers=1):
        os.kill(helper["pid"], signal.SIGSTOP)   # hangs like an endless LLVM loop would
        try:
            with options.override(compile_timeout=1.0), \
                    pytest.raises(LLVMCrashError, match="within the compile_timeout of 1 s") \
                    as info:
                compiler.compile("define void @hangs() {\n  ret void\n}\n")
        finally:
            try:
                os.kill(helper["pid"], signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert info.value.reason == "timeout" and info.value.signal == "SIGKILL"
    assert os.path.isfile(info.value.ir_path)
    assert _wait_dead(helper["pid"])
    assert compiler.compile("define void @after() {\n  ret void\n}\n").obj


# ---- the cached path, options, threads -----------------------------------------------------------

def test_cache_hit_sends_nothing_to_a_helper(cache):
    wb.build(_add_kernel(n=40))
    requests = isolation.stats()["requests"]
    _check_add_kernel(wb.build(_add_kernel(n=40)), n=40)
    assert compile_to_object(_add_kernel(n=40)).cache_hit
    assert isolation.stats()["requests"] == requests


def test_an_interpreter_that_cannot_start_a_helper_compiles_in_process(tmp_path):
    """Where no Python process can be started (an embedded interpreter, a sandbox), a cache
    miss compiles in-process after one line saying so, instead of failing every build."""
    script = tmp_path / "no_helper.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import workbench as wb
        from workbench import te
        sys.executable = "/nonexistent/python3"
        for scale in (2.0, 3.0):   # two cache misses: one warning
            a = te.placeholder((64,), name="A")
            b = te.compute((64,), lambda i: a[i] * scale, name="B")
            x = np.arange(64, dtype="float32")
            out = wb.nd.empty((64,), "float32")
            wb.build(te.create_prim_func([a, b]))["main"](wb.nd.array(x), out)
            np.testing.assert_allclose(out.numpy(), x * scale)
        print("BUILT")
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "WORKBENCH_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "BUILT" in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "LLVM compile helper: cannot start a Python process (FileNotFoundError"), lines
    assert "compiling in this process from now on" in lines[0]


def test_isolation_off_compiles_in_process(cache):
    requests = isolation.stats()["requests"]
    with options.override(compile_isolation=False):
        _check_add_kernel(wb.build(_add_kernel(n=24)), n=24)
        assert "main" in wb.build(_add_kernel(n=256)).get_source("asm")
    assert isolation.stats()["requests"] == requests
    described = options.describe()
    for name in ("compile_isolation", "compile_helpers", "compile_timeout"):
        assert name in described


def test_isolated_and_in_process_objects_are_identical(cache):
    ll = _big_ir(3)
    compiler = LLVMCompiler(Target("llvm"), use_cache=False)
    isolated = compiler.compile(ll).obj
    with options.override(compile_isolation=False):
        assert compiler.compile(ll).obj == isolated
        asm = compiler.assembly(ll)
    assert compiler.assembly(ll) == asm and "loop2" in asm


@pytest.mark.slow
def test_threads_share_helpers_and_a_crash_in_one_thread_spares_the_others(cache):
    errors: list = []
    built: dict = {}
    crashes: list = []

    def build(n: int) -> None:
        try:
            built[n] = wb.build(_add_kernel(n=n, scale=float(n)))
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    def crash() -> None:
        try:
            LLVMCompiler(Target(LLVM_ABORT_TARGET)).compile(llvm_abort_ir())
        except LLVMCrashError as err:
            crashes.append(err)

    sizes = [8, 16, 24, 32, 40, 48, 56, 64]
    with options.override(compile_helpers=2):
        threads = [threading.Thread(target=build, args=(n,)) for n in sizes]
        if llvm_abort_available():
            threads.insert(3, threading.Thread(target=crash))
        for t in threads:
            t.start()
        live = 0
        while any(t.is_alive() for t in threads):
            live = max(live, len(isolation.helpers()))
            time.sleep(0.005)
        for t in threads:
            t.join()
    assert not errors, errors
    assert live <= 2
    if llvm_abort_available():
        assert len(crashes) == 1 and crashes[0].signal == "SIGABRT"
    for n in sizes:
        _check_add_kernel(built[n], n=n, scale=float(n))


# ---- processes: no __main__ import, no leftovers -------------------------------------------------

def test_helper_never_imports_main_and_dies_with_a_killed_parent(tmp_path):
    """The script below counts its own imports as __main__ (spawned children would import it
    again as __mp_main__), prints its helper's pid, forks a child (which must not keep the
    helper alive) and waits to be killed."""
    marker = tmp_path / "imports.txt"
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, time
        with open({str(marker)!r}, "a") as f:
            f.write(f"{{__name__}} {{os.getpid()}}\\n")
        if __name__ == "__main__":
            import workbench as wb
            from workbench import te
            from workbench.codegen import isolation
            a = te.placeholder((16,), name="A")
            b = te.compute((16,), lambda i: a[i] + 1.0, name="B")
            wb.build(te.create_prim_func([a, b]))
            (helper,) = isolation.helpers()
            cmd = open(f"/proc/{{helper['pid']}}/cmdline").read().split("\\0")
            print(helper["pid"], " ".join(cmd), flush=True)
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            time.sleep(60)
    """))
    env = {**os.environ, "WORKBENCH_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        line = proc.stdout.readline().split()
        pid, cmd = int(line[0]), line[1:]
        assert cmd[1] == "-P" and cmd[2].endswith("llvm_stages.py")
        assert _pid_alive(pid)
        proc.kill()
        proc.wait(30)
        assert _wait_dead(pid, 15), "the helper outlived its killed parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = marker.read_text().split()
    assert lines[0::2] == ["__main__"], lines   # only the script itself ran it
    # the forked child (still sleeping) is ours to clean up
    _kill_sleepers(script)


def test_helper_exits_when_its_parent_dies_even_if_its_stdin_stays_open(tmp_path):
    """Another process keeps the write end of the helper's stdin open (as a stray fork could),
    so no end of file arrives: the helper's parent-pid watchdog must still end it."""
    script = tmp_path / "holder.py"
    script.write_text(textwrap.dedent("""
        import os, subprocess, time
        from workbench.codegen import LLVMCompiler, isolation
        from workbench.target import Target
        LLVMCompiler(Target("llvm"), use_cache=False).compile("define void @f() {\\n ret void\\n}\\n")
        pool = isolation._pool()
        (helper,) = pool.idle
        keep = os.dup(helper.proc.stdin.fileno())
        holder = subprocess.Popen(["sleep", "120"], pass_fds=[keep])
        print(helper.pid, holder.pid, flush=True)
        time.sleep(120)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "WORKBENCH_CACHE_DIR": str(tmp_path)})
    holder = None
    try:
        helper, holder = (int(x) for x in proc.stdout.readline().split())
        assert _pid_alive(helper) and _pid_alive(holder)
        proc.kill()
        proc.wait(30)
        assert _wait_dead(helper, 30), "the helper outlived its parent"
        assert _pid_alive(holder)   # the pipe really was still open
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if holder is not None:
            try:
                os.kill(holder, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not _is_zombie(pid)


def _kill_sleepers(script) -> None:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline") as f:
                if str(script) in f.read():
                    os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass


@needs_x86
@pytest.mark.slow
@pytest.mark.notebook
def test_notebook_kernel_survives_an_llvm_abort_and_restart_leaves_no_helper(tmp_path):
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, "WORKBENCH_CACHE_DIR": str(tmp_path)}
    km, kc = start_new_kernel(kernel_name="python3", env=env)

    def run(code: str) -> str:
        out: list[str] = []

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        reply = kc.execute_interactive(code, timeout=300, output_hook=hook)
        assert reply["content"]["status"] == "ok", "".join(out)
        return "".join(out)

    try:
        kernel_pid = int(run("import os; print(os.getpid())"))
        crashed = run(textwrap.dedent("""
            import workbench as wb
            from workbench.codegen import LLVMCompiler, LLVMCrashError
            from workbench.codegen.testing import LLVM_ABORT_TARGET, llvm_abort_ir
            from workbench.target import Target
            try:
                LLVMCompiler(Target(LLVM_ABORT_TARGET)).compile(llvm_abort_ir("cell_kernel"))
            except LLVMCrashError as err:
                print("CAUGHT", err.signal, err.stage, err.ir_path)
        """))
        assert crashed.startswith("CAUGHT SIGABRT codegen "), crashed
        assert os.path.isfile(crashed.split()[-1])
        checked = run(textwrap.dedent("""
            import numpy as np
            from workbench import te
            from workbench.codegen import isolation
            a = te.placeholder((10,), name="A")
            b = te.compute((10,), lambda i: a[i] * 3.0, name="B")
            rt = wb.build(te.create_prim_func([a, b]))
            x = np.arange(10, dtype="float32"); y = wb.nd.empty((10,), "float32")
            rt["main"](wb.nd.array(x), y)
            print(np.array_equal(y.numpy(), x * 3), os.getpid(),
                  [h["pid"] for h in isolation.helpers()])
        """))
        ok, pid, helper_pids = checked.split(maxsplit=2)
        assert ok == "True" and int(pid) == kernel_pid   # the same kernel process lives on
        helper_pids = [int(p) for p in helper_pids.strip("[]\n").split(",")]
        assert helper_pids
        km.restart_kernel(now=True)
        kc.wait_for_ready(timeout=120)
        for p in helper_pids:
            assert _wait_dead(p, 15), "a helper outlived the kernel it served"
        assert int(run("import os; print(os.getpid())")) != kernel_pid
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
