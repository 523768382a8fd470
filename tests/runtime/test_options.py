import os

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
