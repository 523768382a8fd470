"""contrib.utils.tempdir: TVM's temporary directory helper (checked against the file system)."""
import os
import pathlib

import pytest

from workbench.contrib import utils


def test_tempdir_relpath_listdir_remove():
    temp = utils.tempdir()
    path = temp.temp_dir
    assert os.path.isdir(path)
    assert temp.relpath("lib.so") == os.path.join(path, "lib.so")
    assert temp.listdir() == []
    with open(temp.relpath("a.txt"), "w") as f:
        f.write("x")
    os.mkdir(temp.relpath("sub"))
    assert sorted(temp.listdir()) == sorted(os.listdir(path)) == ["a.txt", "sub"]
    assert temp / "a.txt" == pathlib.Path(path) / "a.txt"
    assert temp.path == pathlib.Path(path)
    temp.remove()
    assert not os.path.exists(path)
    temp.remove()  # twice is harmless
    with pytest.raises(RuntimeError, match="already removed"):
        temp.relpath("a")


def test_tempdir_context_manager_removes():
    with utils.tempdir() as temp:
        path = temp.temp_dir
        open(temp.relpath("f"), "w").close()
        assert os.path.isfile(os.path.join(path, "f"))
    assert not os.path.exists(path)


def test_tempdir_custom_path_and_keep(tmp_path):
    custom = tmp_path / "mine"
    temp = utils.tempdir(custom_path=str(custom))
    assert custom.is_dir() and temp.temp_dir == str(custom)
    temp.remove()
    assert not custom.exists()
    with pytest.raises(FileExistsError):  # as TVM: the custom directory must be new
        utils.tempdir(custom_path=str(tmp_path))
    kept = utils.tempdir(keep_for_debug=True)
    path = kept.temp_dir
    kept.remove()
    assert os.path.isdir(path)  # kept for debugging
    os.rmdir(path)


def test_tempdir_div_rejects_non_paths():
    with utils.tempdir() as temp:
        with pytest.raises(TypeError, match="str or a path"):
            temp / 3


def test_tempdir_removed_when_collected():
    temp = utils.tempdir()
    path = temp.temp_dir
    del temp
    import gc
    gc.collect()
    assert not os.path.exists(path)
