"""The prebuilt JupyterLab renderer for Report (source in extension/, output committed in
workbench/labextension/): its files, its MIME type, its packaging, and JupyterLab seeing it.

No Node needed: these check the committed build and the installed environment.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from workbench.runtime.profiling import REPORT_MIME_TYPE

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "workbench" / "labextension"
SOURCE = ROOT / "extension"
NAME = "@workbench/report-renderer"


def built_package() -> dict:
    return json.loads((BUILT / "package.json").read_text())


def test_prebuilt_package_declares_a_mime_extension_and_its_files_exist():
    package = built_package()
    assert package["name"] == NAME
    lab = package["jupyterlab"]
    assert lab["mimeExtension"], "package.json must declare jupyterlab.mimeExtension"
    build = lab["_build"]  # written by the builder: what JupyterLab loads
    assert build["mimeExtension"] == "./mimeExtension"
    assert "extension" not in build, "a MIME renderer only, no regular plugin"
    assert (BUILT / build["load"]).is_file(), f"missing {build['load']}: run `make extension`"
    assert (BUILT / "static" / "style.js").is_file()


def test_prebuilt_output_matches_its_source_package():
    source = json.loads((SOURCE / "package.json").read_text())
    package = built_package()
    assert (package["name"], package["version"]) == (source["name"], source["version"])
    assert source["jupyterlab"]["outputDir"] == "../workbench/labextension"


def test_mime_type_is_the_one_python_emits():
    declared = re.findall(r"export const MIME_TYPE = '([^']+)'",
                          (SOURCE / "src" / "index.ts").read_text())
    assert declared == [REPORT_MIME_TYPE]
    bundle = "".join(p.read_text() for p in (BUILT / "static").glob("*.js"))
    assert set(re.findall(r"application/vnd\.workbench\.[\w.+-]+", bundle)) == {REPORT_MIME_TYPE}, \
        "the committed build is out of date with src/index.ts: run `make extension`"


def test_report_bundle_carries_the_mime_type():
    from workbench.runtime.profiling import Count, Duration, Report
    report = Report([{"Name": "k", "Duration (us)": Duration(1.0), "Count": Count(1)}], {}, {})
    bundle = report._repr_mimebundle_()
    assert bundle[REPORT_MIME_TYPE]["calls"][0]["Duration (us)"] == {"microseconds": 1.0}


def test_wheel_installs_the_build_where_jupyterlab_looks():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shared = config["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["workbench/labextension"] == f"share/jupyter/labextensions/{NAME}"
    install = {v: k for k, v in shared.items()}[f"share/jupyter/labextensions/{NAME}/install.json"]
    assert json.loads((ROOT / install).read_text())["packageName"] == "workbench"


def _jupyter() -> str | None:
    beside_python = Path(sys.executable).with_name("jupyter")
    return str(beside_python) if beside_python.exists() else shutil.which("jupyter")


@pytest.mark.slow  # `jupyter labextension list` takes seconds
def test_jupyterlab_lists_the_extension_enabled_and_ok():
    jupyter = _jupyter()
    if jupyter is None:
        pytest.skip("no `jupyter` command beside this Python or on PATH")
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run([jupyter, "labextension", "list"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, f"`jupyter labextension list` failed:\n{done.stderr}"
    listing = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    lines = [line for line in listing.splitlines() if NAME in line]
    assert lines, (f"{NAME} is not installed where JupyterLab looks; `pip install -e .` "
                   f"(or `make`) installs it. Listing:\n{listing}")
    assert "enabled" in lines[0] and "OK" in lines[0], lines[0]


def test_installed_copy_is_the_committed_build():
    # An editable install copies the build into <prefix>/share/jupyter; a rebuild without a
    # reinstall would leave JupyterLab loading the old files.
    jupyter_core_paths = pytest.importorskip("jupyter_core.paths")
    for base in jupyter_core_paths.jupyter_path("labextensions"):
        installed = Path(base) / NAME / "package.json"
        if installed.is_file():
            break
    else:
        pytest.skip(f"{NAME} is not installed in any Jupyter data directory")
    assert (json.loads(installed.read_text())["jupyterlab"]["_build"]["load"]
            == built_package()["jupyterlab"]["_build"]["load"]), \
        f"{installed} is stale: reinstall with `pip install -e .` (`make extension` does it)"
