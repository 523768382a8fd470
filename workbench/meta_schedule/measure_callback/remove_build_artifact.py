"""RemoveBuildArtifact: delete each built artifact's directory once it was measured."""
from __future__ import annotations

import os
import shutil
from typing import Any, Sequence

from workbench.meta_schedule.measure_callback.measure_callback import MeasureCallback
from workbench.meta_schedule.profiler import Profiler

__all__ = ["RemoveBuildArtifact"]


class RemoveBuildArtifact(MeasureCallback):
    """``shutil.rmtree(dirname(artifact_path))`` for every successful build (the builder put
    each artifact in a fresh temp dir of its own)."""

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Sequence[Any],
              builder_results: Sequence[Any], runner_results: Sequence[Any]) -> None:
        with Profiler.timeit("MeasureCallback/RemoveBuildArtifact"):
            for result in builder_results:
                path = getattr(result, "artifact_path", None)
                if not path:
                    continue
                directory = os.path.dirname(os.path.abspath(path))
                # Never remove the cwd, the filesystem root or the user's home by accident.
                if directory in (os.getcwd(), os.path.abspath(os.sep),
                                 os.path.expanduser("~")):
                    if os.path.isfile(path):
                        os.remove(path)
                    continue
                shutil.rmtree(directory, ignore_errors=True)
