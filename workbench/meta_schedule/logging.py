"""Tuning logs in TVM's layout (reference meta_schedule.md section 1.4).

``get_loggers_from_work_dir(work_dir, task_names)`` makes ``work_dir/logs/`` with

- ``workbench.meta_schedule.logging.task_scheduler.log``: the file of the global logger
  ``workbench.meta_schedule`` (which also echoes to stdout);
- ``workbench.meta_schedule.logging.task_<i>_<name>.log``: one file per task, written by the
  logger of the same name (no propagation, so task lines stay out of the console).

The task index is zero-padded to the digits of ``len(task_names) - 1`` and the name cut to 100
characters. Lines read ``%(asctime)s [%(levelname)s] %(message)s`` with ``%Y-%m-%d %H:%M:%S``.
These names replace TVM's ``tvm.s_tir.meta_schedule...``.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Sequence

__all__ = ["get_logger", "get_loggers_from_work_dir", "GLOBAL_LOGGER_NAME", "FORMAT",
           "DATEFMT"]

GLOBAL_LOGGER_NAME = "workbench.meta_schedule"
FORMAT = "%(asctime)s [%(levelname)s] %(message)s"
DATEFMT = "%Y-%m-%d %H:%M:%S"
_MODULE = __name__  # "workbench.meta_schedule.logging": the prefix of every file/logger name
# Handlers this module installed are tagged, so a second call replaces them instead of
# stacking duplicates (a notebook re-running a tuning cell).
_TAG = "_workbench_ms_handler"


def get_logger(name: str) -> logging.Logger:
    """The standard-library logger ``name`` (as TVM's ``get_logger``)."""
    return logging.getLogger(name)


def _formatter() -> logging.Formatter:
    return logging.Formatter(FORMAT, datefmt=DATEFMT)


def _replace_handlers(logger: logging.Logger, handlers: list[logging.Handler]) -> None:
    for h in list(logger.handlers):
        if getattr(h, _TAG, False):
            logger.removeHandler(h)
            h.close()
    for h in handlers:
        setattr(h, _TAG, True)
        h.setFormatter(_formatter())
        logger.addHandler(h)


def _configure_global(log_dir: str) -> logging.Logger:
    glob = logging.getLogger(GLOBAL_LOGGER_NAME)
    if glob.level == logging.NOTSET:
        glob.setLevel(logging.DEBUG)
    console = logging.StreamHandler(sys.stdout)
    console.setLevel(glob.level)
    file = logging.FileHandler(os.path.join(log_dir, f"{_MODULE}.task_scheduler.log"),
                               mode="a", delay=True)
    file.setLevel(logging.DEBUG)
    _replace_handlers(glob, [console, file])
    glob.propagate = False
    return glob


def get_loggers_from_work_dir(work_dir: str, task_names: Sequence[str]) -> list[logging.Logger]:
    """Create ``work_dir/logs`` and one file logger per task (see the module docstring);
    also (re)points the global logger's file at this work dir. Returns the task loggers."""
    log_dir = os.path.join(os.fspath(work_dir), "logs")
    os.makedirs(log_dir, exist_ok=True)
    _configure_global(log_dir)
    width = len(str(len(task_names) - 1)) if task_names else 1
    loggers = []
    for i, name in enumerate(task_names):
        logger_name = f"{_MODULE}.task_{i:0{width}d}_{str(name)[:100]}"
        logger = logging.getLogger(logger_name)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        file = logging.FileHandler(os.path.join(log_dir, f"{logger_name}.log"), mode="a",
                                   delay=True)
        file.setLevel(logging.DEBUG)
        _replace_handlers(logger, [file])
        loggers.append(logger)
    return loggers
