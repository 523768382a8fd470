"""A real Dask cluster for the tests: ``dask scheduler`` and ``dask worker`` processes on
localhost, started the way a user starts them (the CLI), and never left running.

Each process starts in its own process group (so a stop kills the nanny, its worker and the
worker's children at once) with a parent-death signal (Linux ``PR_SET_PDEATHSIG``): if the
test process dies -- even by SIGKILL -- the kernel kills the scheduler and the nannies, the
nanny's worker exits when its parent's pipe closes, and the worker's children exit when they
see their parent gone (:mod:`workbench.rpc.child`).
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

BIN = os.path.dirname(sys.executable)
HERE = os.path.dirname(os.path.abspath(__file__))
KEY = "workbench-test"


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def start_process(args: list[str], log_path: str, env: dict | None = None) -> subprocess.Popen:
    """``args`` in a new process group that dies with this process; output to ``log_path``."""
    log = open(log_path, "ab")
    try:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent)
    finally:
        log.close()


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Kill ``proc``'s whole process group and reap it."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


def worker_env() -> dict:
    env = dict(os.environ)
    # Tests send functions defined in tests/ modules; the workers (and their children, which
    # get the worker's sys.path) must import them as the client does.
    paths = [HERE, os.path.join(os.path.dirname(HERE), "meta_schedule")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["DASK_DISTRIBUTED__WORKER__DAEMON"] = "False"
    env["PYTHONUNBUFFERED"] = "1"
    return env


class DaskCluster:
    """``dask scheduler`` + ``n`` ``dask worker`` processes (each ``--nthreads 1 --resources
    "<key>=1"``). ``tls`` = (ca, cert, key) PEM paths starts everything with TLS."""

    def __init__(self, workdir: str, n_workers: int = 2, key: str = KEY, nanny: bool = True,
                 tls: tuple[str, str, str] | None = None, port: int = 0) -> None:
        self.workdir = workdir
        self.key = key
        self.nanny = nanny
        self.tls = tls
        self.port = port
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.address = ""
        os.makedirs(workdir, exist_ok=True)
        self.start_scheduler()
        for _ in range(n_workers):
            self.add_worker()

    def _tls_args(self) -> list[str]:
        if self.tls is None:
            return []
        ca, cert, key = self.tls
        return ["--tls-ca-file", ca, "--tls-cert", cert, "--tls-key", key]

    def start_scheduler(self, timeout: float = 60.0) -> None:
        info = os.path.join(self.workdir, "scheduler.json")
        if os.path.exists(info):
            os.remove(info)
        protocol = ["--protocol", "tls"] if self.tls else []
        self.scheduler = start_process(
            [os.path.join(BIN, "dask"), "scheduler", "--host", "127.0.0.1", "--port",
             str(self.port), "--no-dashboard", "--scheduler-file", info, *protocol,
             *self._tls_args()],
            os.path.join(self.workdir, "scheduler.log"), env=worker_env())
        deadline = time.monotonic() + timeout
        while not os.path.exists(info):
            if self.scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dask scheduler did not start: {self.log('scheduler')}")
            time.sleep(0.1)
        time.sleep(0.1)  # the file is written in one go; let it land
        with open(info) as f:
            self.address = json.load(f)["address"]
        self.port = int(self.address.rsplit(":", 1)[1])

    def add_worker(self, name: str | None = None) -> subprocess.Popen:
        name = name or f"w{len(self.workers)}"
        args = [os.path.join(BIN, "dask"), "worker", self.address, "--nthreads", "1",
                "--no-dashboard", "--name", name, "--resources", f"{self.key}=1",
                "--local-directory", os.path.join(self.workdir, name), "--death-timeout", "60",
                "--nanny" if self.nanny else "--no-nanny", *self._tls_args()]
        proc = start_process(args, os.path.join(self.workdir, f"{name}.log"), env=worker_env())
        self.workers.append(proc)
        return proc

    def log(self, name: str) -> str:
        try:
            with open(os.path.join(self.workdir, f"{name}.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return "(no log)"

    def client(self, security: Any = None) -> Any:
        from workbench.rpc import get_cluster
        return get_cluster(self.address, security=security, timeout=60)

    def wait_for_workers(self, n: int, security: Any = None, timeout: float = 120.0) -> None:
        cluster = self.client(security)
        deadline = time.monotonic() + timeout
        while len(cluster.workers(self.key)) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(cluster.workers(self.key))} of {n} workers "
                                   f"arrived: {self.log('w0')}")
            time.sleep(0.2)

    def kill_scheduler(self) -> None:
        if self.scheduler is not None:
            stop_process(self.scheduler)

    def stop(self, timeout: float = 15.0) -> None:
        """Kill every process group of the cluster and wait until none of their processes
        is left (killed members die asynchronously)."""
        for proc in self.workers:
            stop_process(proc)
        self.kill_scheduler()
        deadline = time.monotonic() + timeout
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)

    def pids(self) -> list[int]:
        """Every live (not zombie) process of the cluster's process groups."""
        groups = {p.pid for p in [self.scheduler, *self.workers] if p is not None}
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            state, pgid = fields[0], int(fields[2])
            if pgid in groups and state != "Z":
                out.append(int(entry))
        return out
