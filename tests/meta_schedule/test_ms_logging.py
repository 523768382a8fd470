"""Tuning logs: TVM's file names under work_dir/logs and its line format."""
import logging
import os
import re

from workbench.meta_schedule.logging import (
    GLOBAL_LOGGER_NAME, get_logger, get_loggers_from_work_dir,
)

PREFIX = "workbench.meta_schedule.logging"


def test_file_names_padding_and_format(tmp_path, capsys):
    names = [f"fused_{i}" for i in range(11)]
    names[3] = "x" * 150
    loggers = get_loggers_from_work_dir(str(tmp_path), names)
    assert [lg.name for lg in loggers][:2] == [f"{PREFIX}.task_00_fused_0",
                                               f"{PREFIX}.task_01_fused_1"]
    assert loggers[3].name == f"{PREFIX}.task_03_" + "x" * 100
    loggers[1].info("Trial #0: GFLOPs: %.4f", 1.5)
    get_logger(GLOBAL_LOGGER_NAME).info("global line")
    for h in logging.getLogger(GLOBAL_LOGGER_NAME).handlers + loggers[1].handlers:
        h.flush()
    log_dir = tmp_path / "logs"
    task_log = (log_dir / f"{PREFIX}.task_01_fused_1.log").read_text()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[INFO\] Trial #0: GFLOPs: 1\.5000\n",
                        task_log)
    assert "global line" in (log_dir / f"{PREFIX}.task_scheduler.log").read_text()
    assert "global line" in capsys.readouterr().out  # the global logger echoes to stdout
    assert "Trial #0" not in (log_dir / f"{PREFIX}.task_scheduler.log").read_text()


def test_second_call_replaces_handlers(tmp_path):
    first = get_loggers_from_work_dir(str(tmp_path / "a"), ["main"])
    second = get_loggers_from_work_dir(str(tmp_path / "b"), ["main"])
    # Count only this module's handlers: pytest attaches its capture handlers to every
    # non-propagating logger that already exists (e.g. after an earlier tune_tir test).
    task_handlers = [h for h in second[0].handlers if getattr(h, "_workbench_ms_handler", False)]
    assert first[0] is second[0] and len(task_handlers) == 1
    ours = [h for h in logging.getLogger(GLOBAL_LOGGER_NAME).handlers
            if getattr(h, "_workbench_ms_handler", False)]
    assert len(ours) == 2  # console + this work dir's file (other test tools may add more)
    second[0].warning("to b")
    task_handlers[0].flush()
    assert f"{PREFIX}.task_0_main.log" in os.listdir(tmp_path / "b" / "logs")
    assert "to b" in (tmp_path / "b" / "logs" / f"{PREFIX}.task_0_main.log").read_text()
