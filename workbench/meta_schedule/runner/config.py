"""EvaluatorConfig: how the runner times a kernel; RPCConfig: where the "rpc" runner measures
(TVM's ``runner.config``; RPCConfig lives in :mod:`workbench.rpc.config`)."""
from __future__ import annotations

from typing import NamedTuple

from workbench.rpc.config import RPCConfig

__all__ = ["EvaluatorConfig", "RPCConfig"]


class EvaluatorConfig(NamedTuple):
    """``time_evaluator`` settings: ``number`` calls per measurement, ``repeat``
    measurements, each grown to last at least ``min_repeat_ms``; with
    ``enable_cpu_cache_flush`` the caches are flushed before each measurement."""

    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 100
    enable_cpu_cache_flush: bool = False

    @staticmethod
    def _normalized(config: "EvaluatorConfig | None") -> "EvaluatorConfig":
        """``None`` fields take the defaults; values are checked."""
        config = config if config is not None else EvaluatorConfig()
        d = EvaluatorConfig()
        cfg = EvaluatorConfig(
            number=d.number if config.number is None else int(config.number),
            repeat=d.repeat if config.repeat is None else int(config.repeat),
            min_repeat_ms=d.min_repeat_ms if config.min_repeat_ms is None
            else config.min_repeat_ms,
            enable_cpu_cache_flush=bool(config.enable_cpu_cache_flush),
        )
        if cfg.number < 1 or cfg.repeat < 1 or cfg.min_repeat_ms < 0:
            raise ValueError(f"EvaluatorConfig: number and repeat must be >= 1 and "
                             f"min_repeat_ms >= 0, got {cfg}")
        return cfg
