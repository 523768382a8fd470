"""The tuner reaches the dashboard by name (meta_schedule.dashboard_hook), never by importing
the widgets: ``import workbench`` leaves them unloaded, and the first ``dashboard=`` loads them
through the loaders the root package registers."""
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

_SCRIPT = """
import sys
import workbench
from workbench.meta_schedule import dashboard_hook as hook
assert "workbench.widgets" not in sys.modules, "importing the tuner loaded the widgets"
assert hook.as_dashboard(False) is None
with hook.attach_dashboard(["cb"], None, 8, 8) as callbacks:
    assert callbacks == ["cb"]
assert "workbench.widgets" not in sys.modules, "a false dashboard loaded the widgets"
board = hook.as_dashboard("text")
from workbench.widgets import TuningDashboard
assert isinstance(board, TuningDashboard) and board.mode == "text"
with hook.attach_dashboard([], board, 8, 8) as callbacks:
    assert callbacks == [board]
print("ok")
"""


def test_dashboard_loads_the_widgets_on_first_use():
    root = pathlib.Path(__file__).resolve().parents[2]   # this checkout's workbench first
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         timeout=300, cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_widgets_replace_the_loaders():
    import workbench.widgets  # noqa: F401
    from workbench.meta_schedule import dashboard_hook as hook
    from workbench.runtime.registry import get_global_func
    from workbench.widgets.tuning_dashboard import as_dashboard

    assert get_global_func(hook.AS_DASHBOARD)._call is as_dashboard
