"""A real JupyterLab in a real (headless) Chromium, for the tests in this folder.

``jupyter_lab`` starts ``jupyter lab`` from this venv on a free port, with a fixed token, a
temporary notebook directory and temporary settings / workspaces / runtime directories (so
nothing of the user's own JupyterLab setup leaks in), and no network calls (news and update
checks off). ``browser`` is Chromium driven by Playwright; ``lab_page`` a fresh page whose
screenshot is kept when a test fails.

Missing Chromium or Playwright is a failure, not a skip: ``make test`` / ``make test-browser``
install both (Chromium through apt, Playwright through the ``dev`` extra).

Nothing outlives the test process: the server is started with
:func:`workbench.workers.launch_python` (its own session, SIGTERM when the test process dies,
even by ``kill -9``, and at interpreter exit); its kernels end with it (they watch their
parent), and their tuning workers with them (test_nothing_left_running.py checks the chain).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

TOKEN = "workbench-browser-tests"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
_CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_executable() -> str:
    """The browser binary: ``$WORKBENCH_CHROMIUM``, else a Chromium/Chrome on PATH."""
    chosen = os.environ.get("WORKBENCH_CHROMIUM")
    if chosen:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            pytest.fail(f"WORKBENCH_CHROMIUM={chosen!r} is not an executable file", pytrace=False)
        return chosen
    for name in _CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("the browser tests need Chromium and found none on PATH: run `make test` or "
                "`make test-browser` (they install it with `apt-get install -y "
                "--no-install-recommends chromium`), or set WORKBENCH_CHROMIUM=/path/to/chrome",
                pytrace=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab: its base URL, token and notebook directory."""
    url: str
    root: Path
    log: Path

    def api(self, method: str, path: str) -> object:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def notebook_url(self, name: str) -> str:
        # A workspace of its own, reset: no tab of an earlier test comes back (and starts a
        # kernel) when the page loads.
        workspace = Path(name).stem.replace("_", "-")
        return f"{self.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={TOKEN}"

    def write_notebook(self, name: str, cells: list) -> str:
        """Write ``cells`` (nbformat cells) as notebook ``name`` with a Python 3 kernelspec;
        return the URL that opens it."""
        import nbformat

        nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC})
        nbformat.validate(nb)
        nbformat.write(nb, self.root / name)
        return self.notebook_url(name)

    def shutdown_kernels(self) -> None:
        """End every session's kernel (and with it the processes the kernel started)."""
        for session in self.api("GET", "/api/sessions") or []:
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def _wait_until_answering(process: subprocess.Popen, lab: Lab, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"jupyter lab exited with {process.returncode}:\n{lab.log_tail()}",
                        pytrace=False)
        try:
            lab.api("GET", "/api/status")
            return
        except OSError:
            time.sleep(0.25)
    pytest.fail(f"jupyter lab did not answer within {timeout:.0f} s:\n{lab.log_tail()}",
                pytrace=False)


def _stop(process: subprocess.Popen) -> None:
    """End the server, its kernels and whatever they started. Kernels run in sessions of
    their own, so the process group alone would miss them: collect the descendants first."""
    import psutil

    from workbench.workers import stop_process

    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    # SIGTERM to the server's group (the server shuts its kernels down), SIGKILL after 15 s.
    stop_process(process, grace=15)
    _gone, alive = psutil.wait_procs(descendants, timeout=5)
    for leftover in alive:
        try:
            leftover.kill()
        except psutil.NoSuchProcess:
            pass


def _write_lab_settings(directory: Path) -> None:
    # No "get Jupyter news?" toast over the page and no update check (no network here).
    notification = directory / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(json.dumps(
        {"fetchNews": "false", "checkForUpdates": False}))


def start_jupyter_lab(args: list[str], *, env: dict, cwd: Path, log) -> subprocess.Popen:
    """``jupyter lab <args>`` of this venv, started so that it cannot outlive this process
    (see the module docstring). SIGINT is left alone: its kernels must stay interruptible."""
    from workbench.workers import launch_python

    return launch_python(module="jupyterlab", args=args, ignore_sigint=False,
                         exit_signal=signal.SIGTERM, exit_grace=15, new_session=True,
                         stop_grace=15, env=env, cwd=str(cwd), stdout=log,
                         stderr=subprocess.STDOUT)


@pytest.fixture(scope="session")
def jupyter_lab(tmp_path_factory):
    """A headless ``jupyter lab`` of this venv, answering at ``Lab.url``; killed at the end."""
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.fail(f"no jupyterlab in {sys.executable}'s environment: install the project "
                    "(`make`)", pytrace=False)
    base = tmp_path_factory.mktemp("jupyterlab")
    root, home = base / "notebooks", base / "home"
    root.mkdir()
    home.mkdir()
    _write_lab_settings(home / "lab-settings")
    port = _free_port()
    lab = Lab(url=f"http://127.0.0.1:{port}", root=root, log=base / "jupyter-lab.log")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        # The user's own Jupyter config, settings and kernels must not change what we test.
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    lab_args = [
        "--no-browser", "--ServerApp.open_browser=False",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",  # no PyPI queries
        f"--LabApp.user_settings_dir={home / 'lab-settings'}",
        f"--LabApp.workspaces_dir={home / 'lab-workspaces'}",
        "--ServerApp.allow_root=True",
    ]
    with open(lab.log, "wb") as log:
        process = start_jupyter_lab(lab_args, env=env, cwd=root, log=log)
    try:
        _wait_until_answering(process, lab, timeout=90)
        yield lab
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium driven by Playwright (fails, never skips, when either is missing)."""
    executable = chromium_executable()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need the `playwright` package: `make test` installs "
                    "it (dev extra; `pip install -e '.[dev]'`)", pytrace=False)
    with sync_playwright() as playwright:
        try:
            # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
            chromium = playwright.chromium.launch(
                executable_path=executable, headless=True,
                args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        except Exception as err:  # noqa: BLE001 - say which binary failed and why
            pytest.fail(f"could not start {executable}: {err}", pytrace=False)
        try:
            yield chromium
        finally:
            chromium.close()


_OUTCOME = pytest.StashKey()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    # Keep the test's own outcome where the lab_page fixture can read it at teardown.
    report = yield
    if report.when == "call":
        item.stash[_OUTCOME] = report
    return report


@pytest.fixture
def lab_page(browser, jupyter_lab, request, tmp_path):
    """A fresh browser page (1400x1000); after the test its kernels are shut down, and on a
    failure a screenshot and the server log's tail are saved beside the test's tmp_path."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
    page.on("pageerror", lambda err: console.append(f"pageerror: {err}"))
    yield page
    outcome = request.node.stash.get(_OUTCOME, None)
    if outcome is not None and outcome.failed:
        shot = tmp_path / "failure.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
        except Exception:  # noqa: BLE001 - a screenshot is a courtesy
            pass
        (tmp_path / "console.log").write_text("\n".join(console))
        (tmp_path / "server.log").write_text(jupyter_lab.log_tail(200))
        print(f"browser test failed: screenshot, console and server log in {tmp_path}")
    context.close()
    try:
        jupyter_lab.shutdown_kernels()
    except OSError:
        pass


_NOTEBOOK_IN_VIEW = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"


class NotebookPage:
    """One notebook open in JupyterLab, driven the way a user drives it."""

    def __init__(self, page, lab: Lab) -> None:
        self.page, self.lab = page, lab

    def open(self, url: str, *, kernel: bool = True) -> None:
        """Load ``url`` and wait for the cells (and, with ``kernel``, for an idle kernel)."""
        self.page.goto(url)
        self.page.locator(_NOTEBOOK_IN_VIEW).locator(".jp-Cell").first.wait_for(
            timeout=60_000)
        if kernel:
            self.wait_for_idle_kernel(timeout_s=60)

    def wait_for_idle_kernel(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            sessions = self.lab.api("GET", "/api/sessions") or []
            if sessions and all(s["kernel"]["execution_state"] == "idle" for s in sessions) and \
                    self.page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]') \
                    .count():
                return
            time.sleep(0.25)
        raise AssertionError(f"the kernel was not idle within {timeout_s:.0f} s")

    def cell(self, index: int):
        return self.page.locator(_NOTEBOOK_IN_VIEW).locator(".jp-Cell").nth(index)

    def output(self, index: int):
        return self.cell(index).locator(".jp-OutputArea")

    def run_cell(self, index: int) -> None:
        """Select cell ``index`` (a click on its prompt: command mode) and press Shift+Enter."""
        self.cell(index).locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Shift+Enter")


@pytest.fixture
def notebook(lab_page, jupyter_lab) -> NotebookPage:
    return NotebookPage(lab_page, jupyter_lab)


# A real Report: three small compiled kernels profiled three times each. The same source
# runs in the test process (saved outputs) and in the notebook's kernel (live widgets).
REPORT_SOURCE = '''
import workbench as wb
from workbench import te
from workbench.runtime.profiling import Profiler, WallClockCollector


def make_report():
    """Profile matmul_64, exp_64 and add_one_16 (3 calls each) into a Report."""
    dev = wb.cpu()
    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 64), name="B")
    k = te.reduce_axis((0, 64), name="k")
    C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    E = te.compute((64, 64), lambda i, j: te.exp(A[i, j]), name="E")
    x = te.placeholder((16,), name="x")
    y = te.compute((16,), lambda i: x[i] + 1.0, name="y")
    kernels = {}
    for name, tensors in [("matmul_64", [A, B, C]), ("exp_64", [A, E]),
                          ("add_one_16", [x, y])]:
        func = wb.build(te.create_prim_func(tensors), name=name)[name]
        arrays = [wb.nd.empty(tuple(d.value for d in t.shape), "float32") for t in tensors]
        kernels[name] = (func, arrays)
    prof = Profiler([dev], collectors=[WallClockCollector()],
                    configuration={"Source": "browser test"})
    prof.start()
    for _ in range(3):
        for name, (func, arrays) in kernels.items():
            shapes = ", ".join(f"float32{list(a.shape)}" for a in arrays)
            prof.start_call(name, dev, {"Argument Shapes": shapes})
            func(*arrays)
            prof.stop_call()
    prof.stop()
    return prof.report()
'''


@pytest.fixture(scope="session")
def report_source() -> str:
    """Python source defining ``make_report()`` (see REPORT_SOURCE)."""
    return REPORT_SOURCE
