"""Temporary directories that clean up after themselves: TVM's ``tvm.contrib.utils.tempdir``.

``tempdir()`` makes a fresh directory and returns a :class:`TempDirectory`; the directory is
removed by ``remove()``, at the end of a ``with`` block, when the object is collected, or at
interpreter exit, whichever comes first. ``keep_for_debug=True`` leaves it in place (under
``<tmp>/workbench-debug-tempdirs``) so a failing build's files can be read afterwards.
"""
from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import tempfile
import threading
from typing import Optional

__all__ = ["TempDirectory", "tempdir", "DirectoryCreatedPastAtExit"]


class DirectoryCreatedPastAtExit(Exception):
    """A TempDirectory was asked for after the exit hook had already removed the others."""


class TempDirectory:
    """A temporary directory owned by this object (see the module docstring)."""

    # Directories still to remove at exit; None once the exit hook has run (a directory made
    # later could never be cleaned up, so making one then is an error).
    _live: Optional[set] = set()
    _lock = threading.Lock()
    _debug_parent: Optional[str] = None
    _debug_count = 0

    def __init__(self, custom_path: str | os.PathLike | None = None,
                 keep_for_debug: bool | None = None) -> None:
        if TempDirectory._live is None:
            raise DirectoryCreatedPastAtExit(
                "TempDirectory: the interpreter is exiting; no new temporary directory")
        self._keep = bool(keep_for_debug)
        if custom_path:
            # As TVM: the directory must not exist yet (os.mkdir raises FileExistsError).
            os.mkdir(custom_path)
            self.temp_dir: Optional[str] = os.fspath(custom_path)
        elif self._keep:
            self.temp_dir = self._next_debug_dir()
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="workbench_")
        if not self._keep:
            with TempDirectory._lock:
                TempDirectory._live.add(self.temp_dir)

    @classmethod
    def _next_debug_dir(cls) -> str:
        with cls._lock:
            if cls._debug_parent is None:
                root = os.path.join(tempfile.gettempdir(), "workbench-debug-tempdirs")
                os.makedirs(root, exist_ok=True)
                cls._debug_parent = tempfile.mkdtemp(dir=root)
            path = os.path.join(cls._debug_parent, f"{cls._debug_count:05d}")
            cls._debug_count += 1
        os.mkdir(path)
        return path

    @classmethod
    def remove_tempdirs(cls) -> None:
        """Remove every directory not removed yet (the exit hook); later ones are refused."""
        with cls._lock:
            live, cls._live = cls._live, None
        for path in live or ():
            shutil.rmtree(path, ignore_errors=True)

    def remove(self) -> None:
        """Delete the directory and its contents (kept ones stay); safe to call twice."""
        path, self.temp_dir = self.temp_dir, None
        if path is None or self._keep:
            return
        shutil.rmtree(path, ignore_errors=True)
        with TempDirectory._lock:
            if TempDirectory._live is not None:
                TempDirectory._live.discard(path)

    def _require(self) -> str:
        if self.temp_dir is None:
            raise RuntimeError("TempDirectory: the directory was already removed")
        return self.temp_dir

    @property
    def path(self) -> pathlib.Path:
        """The directory as a :class:`pathlib.Path`."""
        return pathlib.Path(self._require())

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the directory (the file need not exist)."""
        return os.path.join(self._require(), name)

    def listdir(self) -> list[str]:
        """The names of the entries in the directory."""
        return os.listdir(self._require())

    def __truediv__(self, other: str | os.PathLike) -> pathlib.Path:
        if not isinstance(other, (str, os.PathLike)):
            raise TypeError(f"TempDirectory / other: other must be a str or a path, "
                            f"got {other!r}")
        return self.path / other

    def __enter__(self) -> "TempDirectory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __del__(self) -> None:
        # At interpreter exit the hook has already removed everything (and module globals
        # may be gone): nothing left to do then.
        if getattr(self, "temp_dir", None) is not None and TempDirectory._live is not None:
            self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


atexit.register(TempDirectory.remove_tempdirs)


def tempdir(custom_path: str | os.PathLike | None = None,
            keep_for_debug: bool | None = None) -> TempDirectory:
    """A new :class:`TempDirectory`: ``custom_path`` names the directory to create (it must
    not exist), ``keep_for_debug`` keeps it after the program ends."""
    return TempDirectory(custom_path=custom_path, keep_for_debug=keep_for_debug)
