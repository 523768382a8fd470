"""The `workbench` command: help, the list of demo steps, and a quick demo run."""
from __future__ import annotations

import pytest

from workbench import cli, demo


def test_help_lists_the_demo_command(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    assert "demo" in capsys.readouterr().out


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 0
    assert "usage: workbench" in capsys.readouterr().out


def test_demo_list_names_every_step(capsys):
    assert cli.main(["demo", "--list"]) == 0
    out = capsys.readouterr().out
    assert [s.name for s in demo.DEMO_STEPS] == [line.split()[0] for line in out.splitlines()]
    assert {"add", "softmax", "matmul"} <= {s.name for s in demo.DEMO_STEPS}


def test_quick_demo_checks_against_numpy_and_prints_a_table(capsys):
    assert cli.main(["demo", "--quick"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("step"))
    assert header.split() == ["step", "shape", "check", "compile", "ms", "time", "us", "GFLOPS",
                              "numpy", "us", "vs", "numpy"]
    for name in ("add", "softmax", "matmul"):
        row = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert " ok " in row
    assert "all results match numpy" in out


def test_unknown_demo_step_is_an_error(capsys):
    assert cli.main(["demo", "nosuchstep"]) == 2
    assert "unknown demo step 'nosuchstep'" in capsys.readouterr().err
