"""``PerStoreFeature``: TVM's full per-store feature extractor (164 columns, 172 with the
workload embedding), with the tuner's ``FeatureExtractor`` interface.

``extract_features(mod)`` gives the ``(rows, 164)`` matrix of one scheduled module:
it lowers a copy for feature extraction (:mod:`.preprocess`), walks it (:mod:`.collector`) and
exports, per stored buffer, groups 1 (computation, 57), 2 (buffer access, 5 x 18),
3 (arithmetic intensity, 10), 4 (allocation, 4) and 5 (loop nest, 3); with
``extract_workload=True`` the 8 workload columns (group 6) are appended to every row. Column
names are in :data:`FEATURE_NAMES`.

Results are cached by structural hash and settings, so scoring the same schedule again (the
evolutionary search does, every generation) costs one hash. Processes that replay candidates
for the search (its replay pool) compute the rows of what they replay, in parallel, and the
search seeds this cache with them (:func:`rows_for_shipping`, :func:`adopt_shipped_rows`):
scoring then costs the hash alone (a 512^3 matmul candidate: ~35 ms of lowering and walking
saved in the tuning process).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.structural import structural_hash
from workbench.meta_schedule.feature_extractor.feature_extractor import FeatureExtractor
from workbench.tir.function import PrimFunc

from workbench.meta_schedule.feature_extractor.per_store.collector import (
    FeatureConfig, RowInfo, collect_rows,
)
from workbench.meta_schedule.feature_extractor.per_store.names import feature_names
from workbench.meta_schedule.feature_extractor.per_store.preprocess import (
    _LRU, lower_for_features,
)
from workbench.meta_schedule.feature_extractor.per_store.workload import workload_embedding

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext

_FEATURES = _LRU(8192)


def _as_module(mod: IRModule | PrimFunc) -> IRModule:
    if isinstance(mod, PrimFunc):
        return IRModule.from_expr(mod)
    if not isinstance(mod, IRModule):
        raise TypeError(f"extract_features expects an IRModule or PrimFunc, got "
                        f"{type(mod).__name__}")
    return mod


def _rows_and_info(mod: IRModule, config: FeatureConfig) -> tuple[np.ndarray, list[RowInfo]]:
    """Groups 1-5 of ``mod`` as a read-only float64 array (and row info), through the cache."""
    h = structural_hash(mod)
    key = (h, config)
    got = _FEATURES.get(key)
    if got is None:
        rows, info = collect_rows(lower_for_features(mod, key=h), config)
        arr = np.asarray(rows, dtype="float64").reshape(len(rows), config.length)
        arr.setflags(write=False)
        got = (arr, info)
        _FEATURES.put(key, got)
    return got


def _rows(mod: IRModule, config: FeatureConfig) -> np.ndarray:
    return _rows_and_info(mod, config)[0]


def rows_for_shipping(mod: IRModule, config: FeatureConfig) -> tuple:
    """Worker side: ``(structural hash, rows, row info)`` of ``mod`` under ``config``, for
    :func:`adopt_shipped_rows` in another process (the hash is the same there: BLAKE2b)."""
    arr, info = _rows_and_info(mod, config)
    return structural_hash(mod), arr, info


def uncached(mods: Sequence[IRModule], config: FeatureConfig) -> list[int]:
    """Positions of ``mods`` whose rows under ``config`` are not in the feature cache."""
    return [i for i, mod in enumerate(mods)
            if _FEATURES.get((structural_hash(mod), config)) is None]


def adopt_shipped_rows(config: FeatureConfig, shipped: tuple) -> None:
    """Parent side: put rows computed by :func:`rows_for_shipping` into the feature cache."""
    h, arr, info = shipped
    arr = np.asarray(arr, dtype="float64")
    arr.setflags(write=False)
    _FEATURES.put((h, config), (arr, info))


def extract_features(mod: IRModule | PrimFunc, *, buffers_per_store: int = 5,
                     arith_intensity_curve_num_samples: int = 10, cache_line_bytes: int = 64,
                     extract_workload: bool = False, is_gpu: bool = False,
                     workload_mod: IRModule | PrimFunc | None = None,
                     dtype: str = "float32") -> np.ndarray:
    """The per-store feature matrix of a (scheduled, block-form) module.

    Shape ``(n_stored_buffers, 164)`` with the defaults, ``(n, 172)`` with
    ``extract_workload`` (the workload columns come from ``workload_mod``, default ``mod``:
    TVM takes them from the task's module). Deterministic; ``mod`` is not modified.
    """
    mod = _as_module(mod)
    config = FeatureConfig(buffers_per_store, arith_intensity_curve_num_samples,
                           cache_line_bytes, is_gpu)
    rows = _rows(mod, config)
    if extract_workload:
        emb = np.asarray(workload_embedding(workload_mod if workload_mod is not None else mod))
        rows = np.hstack([rows, np.broadcast_to(emb, (rows.shape[0], emb.size))])
    return rows.astype(dtype)


def describe_rows(mod: IRModule | PrimFunc, *, buffers_per_store: int = 5) -> list[RowInfo]:
    """For each row of ``extract_features(mod)``: the stored buffer's name and the names of
    the buffers in columns ``B0.*``, ``B1.*``, ... (for debugging and DataFrames)."""
    return list(_rows_and_info(_as_module(mod), FeatureConfig(buffers_per_store))[1])


def _is_gpu(context: Any) -> bool:
    target = getattr(context, "target", None)
    keys = getattr(target, "keys", ()) if target is not None else ()
    return "gpu" in tuple(keys or ())


class PerStoreFeature(FeatureExtractor):
    """TVM's ``PerStoreFeature`` (reference section 8.4): see the module docstring.

    Arguments mirror TVM's: ``buffers_per_store`` buffers of 18 features per row, an
    arithmetic-intensity curve of ``arith_intensity_curve_num_samples`` points,
    ``cache_line_bytes`` for line counts, ``extract_workload`` for the 8 workload columns.
    """

    def __init__(self, buffers_per_store: int = 5, arith_intensity_curve_num_samples: int = 10,
                 cache_line_bytes: int = 64, extract_workload: bool = False) -> None:
        for name, value in (("buffers_per_store", buffers_per_store),
                            ("arith_intensity_curve_num_samples",
                             arith_intensity_curve_num_samples),
                            ("cache_line_bytes", cache_line_bytes)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"PerStoreFeature: {name} must be a positive int, got "
                                 f"{value!r}")
        self.buffers_per_store = buffers_per_store
        self.arith_intensity_curve_num_samples = arith_intensity_curve_num_samples
        self.cache_line_bytes = cache_line_bytes
        self.extract_workload = bool(extract_workload)

    @property
    def feature_vector_length(self) -> int:
        """Columns per row: 164 by default, 172 with ``extract_workload``."""
        n = FeatureConfig(self.buffers_per_store,
                          self.arith_intensity_curve_num_samples).length
        return n + (8 if self.extract_workload else 0)

    @property
    def feature_names(self) -> list[str]:
        return feature_names(self.buffers_per_store, self.arith_intensity_curve_num_samples,
                             self.extract_workload)

    def shipping_config(self, context: "TuneContext") -> FeatureConfig:
        """The settings rows are cached under for ``context``: what a replay worker needs to
        compute them ahead (:func:`rows_for_shipping`)."""
        return FeatureConfig(self.buffers_per_store, self.arith_intensity_curve_num_samples,
                             self.cache_line_bytes, _is_gpu(context))

    def extract_from(self, context: "TuneContext",
                     candidates: Sequence["MeasureCandidate"]) -> list[np.ndarray]:
        """One float32 ``(rows, feature_vector_length)`` array per candidate, computed on
        ``candidates[i].sch.mod``; workload columns come from ``context.mod``."""
        config = self.shipping_config(context)
        emb = None
        if self.extract_workload:
            task_mod = getattr(context, "mod", None)
            if task_mod is None and candidates:
                task_mod = candidates[0].sch.mod
            emb = np.asarray(workload_embedding(task_mod) if task_mod is not None
                             else [0.0] * 8)
        out = []
        for cand in candidates:
            rows = _rows(_as_module(cand.sch.mod), config)
            if emb is not None:
                rows = np.hstack([rows, np.broadcast_to(emb, (rows.shape[0], emb.size))])
            out.append(rows.astype("float32"))
        return out

    def __str__(self) -> str:
        return "PerStoreFeature"


__all__ = ["PerStoreFeature", "RowInfo", "adopt_shipped_rows", "describe_rows",
           "extract_features", "rows_for_shipping", "uncached"]
