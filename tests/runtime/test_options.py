import json
import os
import subprocess
import sys
import textwrap

import pytest

from workbench import options


def test_defaults_and_env(monkeypatch):
    monkeypatch.delenv("WORKBENCH_NUM_THREADS", raising=False)
    monkeypatch.delenv("WORKBENCH_CACHE_DIR", raising=False)
    assert options.get("num_threads") == len(os.sched_getaffinity(0))
    assert options.get("cache_dir") == os.path.expanduser("~/.cache/workbench")
    monkeypatch.setenv("WORKBENCH_NUM_THREADS", "3")
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", "/tmp/x")
    assert options.get("num_threads") == 3
    assert options.get("cache_dir") == "/tmp/x"


def test_bad_env_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("WORKBENCH_NUM_THREADS", "lots")
    with pytest.raises(ValueError, match="WORKBENCH_NUM_THREADS.*num_threads.*integer"):
        options.get("num_threads")
    monkeypatch.setenv("WORKBENCH_NUM_THREADS", "0")
    with pytest.raises(ValueError, match=">= 1"):
        options.get("num_threads")


def test_override_nests_and_restores(monkeypatch):
    monkeypatch.setenv("WORKBENCH_NUM_THREADS", "2")
    gen = options.generation()
    with options.override(num_threads=5):
        assert options.get("num_threads") == 5
        assert options.generation() != gen
        with options.override(num_threads=7, cache_dir="/c"):
            assert options.get("num_threads") == 7
            assert options.get("cache_dir") == "/c"
        assert options.get("num_threads") == 5
    assert options.get("num_threads") == 2
    with pytest.raises(RuntimeError):
        with options.override(num_threads=4):
            raise RuntimeError("boom")
    assert options.get("num_threads") == 2


def test_set_beats_env_and_reset(monkeypatch):
    monkeypatch.setenv("WORKBENCH_NUM_THREADS", "2")
    try:
        options.set("num_threads", 6)
        assert options.get("num_threads") == 6
        with options.override(num_threads=1):
            assert options.get("num_threads") == 1
    finally:
        options.reset("num_threads")
    assert options.get("num_threads") == 2


def test_type_errors_name_the_option():
    with pytest.raises(ValueError, match="num_threads.*integer"):
        options.set("num_threads", "4x")
    with pytest.raises(TypeError, match="num_threads.*int"):
        options.set("num_threads", [4])
    with pytest.raises(TypeError, match="num_threads"):
        with options.override(num_threads=2.5):
            pass
    with pytest.raises(KeyError, match="unknown option 'nope'"):
        options.get("nope")


def test_register_and_describe(monkeypatch):
    opt = options.register("test_flag_rt", bool, False, env="WORKBENCH_TEST_FLAG_RT",
                           doc="a test flag")
    assert options.register("test_flag_rt", bool, False, env="WORKBENCH_TEST_FLAG_RT",
                            doc="a test flag") is opt
    with pytest.raises(ValueError, match="already registered"):
        options.register("test_flag_rt", int, 0)
    assert options.get("test_flag_rt") is False
    monkeypatch.setenv("WORKBENCH_TEST_FLAG_RT", "yes")
    assert options.get("test_flag_rt") is True
    monkeypatch.setenv("WORKBENCH_TEST_FLAG_RT", "maybe")
    with pytest.raises(ValueError, match="boolean"):
        options.get("test_flag_rt")
    monkeypatch.delenv("WORKBENCH_TEST_FLAG_RT")
    text = options.describe()
    assert "num_threads" in text and "WORKBENCH_CACHE_DIR" in text and "a test flag" in text
    assert [o.name for o in options.all_options()] == sorted(o.name
                                                             for o in options.all_options())


def _declaring_modules() -> set[str]:
    """The package's modules that call ``options.register(...)``, read from the source."""
    import ast
    import pathlib
    root = pathlib.Path(options.__file__).resolve().parent.parent
    out = set()
    for path in (root / "workbench").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "register" and isinstance(n.func.value, ast.Name)
               and n.func.value.id == "options" for n in ast.walk(tree)):
            parts = list(path.relative_to(root).with_suffix("").parts)
            out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_options_of_modules_not_imported_yet_are_found():
    """In a fresh interpreter the tuner is not imported with the package, yet its options
    can be overridden, read and listed: the modules that declare them are imported on
    demand. Every module that registers options is imported with the package or named
    for that in ``workbench/__init__``."""
    code = textwrap.dedent("""
        import json, sys
        import workbench
        from workbench import options
        before = sorted(sys.modules)
        declared = list(options._DECLARING)
        assert "workbench.meta_schedule" not in sys.modules
        with options.override(ms_pretrained_cost_model=False):
            off = options.get("ms_pretrained_cost_model")
        listed = "ms_confirm_rounds" in options.describe()
        print(json.dumps([before, declared, off, listed]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    before, declared, off, listed = json.loads(out.stdout.strip().splitlines()[-1])
    assert off is False and listed
    missing = _declaring_modules() - set(before) - set(declared)
    assert not missing, f"register options but are neither imported nor declared: {missing}"
