"""Winograd or direct, convolution by convolution, from measurements (TVM's op strategy with
``ApplyHistoryBest`` picking among a convolution's implementations, reference sections 2, 6).

``ConvertLayoutNCHWc`` makes a Winograd *candidate* (a 3x3 stride-1 convolution of enough
channels) a Winograd F(4x4, 3x3) convolution by a rule measured on one machine
(``WINOGRAD_TILES``). On another machine, or once both kernels are tuned, the rule can be
wrong either way. So the tuner offers both:

- :func:`implementation_variants` compiles a model up to its fused kernels twice, with every
  candidate as a Winograd convolution (``winograd="all"``) and with none (``False``); the two
  have the same call sites in the same order, and differ only where a candidate is;
- ``tune_relax`` tunes the kernels of both (:func:`workbench.meta_schedule.extract_tasks`
  with ``alternatives=True``), each candidate's two kernels competing for trials like any
  other tasks;
- :class:`WinogradFromRecords` (what ``relax.build(..., database=db)`` gives
  ``ConvertLayoutNCHWc`` as its ``choose``) pairs each candidate's Winograd kernel with its
  direct one and picks the one whose best record ran faster; a candidate with records for
  only one of them (a database from before, or a partial tuning run) follows the rule.
  ``table`` then shows each decision.

Both kernels of a candidate have the same fused epilogue (bias, activation, residual add), so
their records time the same work.
"""
from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from workbench.ir.module import IRModule
from workbench.meta_schedule.database.database import mean_run_secs
from workbench.meta_schedule.tir_integration import task_module
from workbench.target import Target
from workbench.tir.function import PrimFunc

__all__ = ["WinogradFromRecords", "implementation_variants", "candidate_kernels",
           "flipped_kernels"]

logger = logging.getLogger("workbench.meta_schedule")

#: The two ways to compile every candidate: as a Winograd convolution, as a direct one.
VARIANTS = ("all", False)


def _fusion_passes(target: Target) -> tuple[list, int]:
    """The default pipeline's passes up to and including FuseTIR, and the index of
    ConvertLayoutNCHWc among them."""
    from workbench.relax.pipeline import get_default_pipeline
    passes = []
    for p in get_default_pipeline(target).passes:
        passes.append(p)
        if p.info.name == "FuseTIR":
            break
    names = [p.info.name for p in passes]
    return passes, names.index("ConvertLayoutNCHWc") if "ConvertLayoutNCHWc" in names else -1


def implementation_variants(mod: IRModule, target: Target, *, from_layout: bool = False
                            ) -> dict[Any, tuple[IRModule, Any]]:
    """``mod`` compiled up to its fused kernels with every Winograd candidate as a Winograd
    convolution (key ``"all"``) and as a direct one (key False), each with the
    ``ConvertLayoutNCHWc`` pass that made it (its ``candidates``, ``candidate_tiles``);
    empty if the pipeline does not convert layouts. ``from_layout``: ``mod`` is the module as
    it enters ConvertLayoutNCHWc (the passes before it are not run again)."""
    from workbench.relax.transform.convert_layout_nchwc import ConvertLayoutNCHWc
    passes, at = _fusion_passes(target)
    if at < 0:
        return {}
    before, after = ([] if from_layout else passes[:at]), passes[at + 1:]
    for p in before:
        mod = p(mod)
    out = {}
    for mode in VARIANTS:
        layout = ConvertLayoutNCHWc(target, winograd=mode)
        fused = layout(mod)
        for p in after:
            fused = p(fused)
        out[mode] = (fused, layout)
    return out


def _sites(mod: IRModule) -> dict[str, list[str]]:
    """The PrimFunc each ``call_tir`` calls, in program order, per Relax function."""
    from workbench.meta_schedule.relax_integration import _call_sites
    out: dict[str, list[str]] = {}
    for fname, kernel, _ in _call_sites(mod):
        out.setdefault(fname, []).append(kernel)
    return out


def _is_winograd(func: Any) -> bool:
    """A kernel computing a Winograd convolution (its block, named by the topi compute)."""
    from workbench.tir.analysis import blocks_under
    return isinstance(func, PrimFunc) and \
        any("winograd" in b.name_hint for b in blocks_under(func.body))


def _out_shape(func: PrimFunc) -> tuple:
    from workbench.tir.analysis import const_int
    return tuple(const_int(d) for d in func.buffers[-1].shape)


#: One candidate's kernels: (Winograd kernel name, its PrimFunc, direct kernel name, its PrimFunc)
Pair = tuple[str, PrimFunc, str, PrimFunc]


def candidate_kernels(variants: dict[Any, tuple[IRModule, Any]]) -> dict[str, list[Pair]]:
    """Per Relax function, each candidate's Winograd and direct kernels in candidate order,
    paired by call site. Raises ValueError when the two compilations do not line up
    (different call sites, or kernels of different output shapes paired)."""
    wino, direct = variants["all"][0], variants[False][0]
    sites_w, sites_d = _sites(wino), _sites(direct)
    out: dict[str, list[Pair]] = {}
    for fname, ws in sites_w.items():
        ds = sites_d.get(fname, [])
        if len(ws) != len(ds):
            raise ValueError(f"{fname}: {len(ws)} kernel calls with Winograd, {len(ds)} without")
        pairs = []
        for w_name, d_name in zip(ws, ds):
            fw, fd = wino[w_name], direct[d_name]
            if not _is_winograd(fw):
                continue
            if _out_shape(fw) != _out_shape(fd):
                raise ValueError(f"{fname}: Winograd kernel {w_name} paired with {d_name} of "
                                 f"another output shape")
            pairs.append((w_name, fw, d_name, fd))
        out[fname] = pairs
    count, candidates = sum(len(p) for p in out.values()), variants["all"][1].candidates
    if count != candidates:
        raise ValueError(f"{candidates} Winograd candidates but {count} Winograd kernel calls")
    return out


def flipped_kernels(fused_a: IRModule, fused_b: IRModule) -> dict[str, list[tuple[str, str]]]:
    """Two compilations of one model that differ only in some candidates' implementations:
    per Relax function, the kernel names ``(in a, in b)`` of the call sites where one is a
    Winograd convolution and the other is not, in program order (the candidates whose
    choice differs, in candidate order)."""
    sites_a, sites_b = _sites(fused_a), _sites(fused_b)
    out: dict[str, list[tuple[str, str]]] = {}
    for fname, sa in sites_a.items():
        sb = sites_b.get(fname, [])
        if len(sa) != len(sb):
            raise ValueError(f"{fname}: {len(sa)} kernel calls in one compilation, {len(sb)} "
                             "in the other")
        flips = [(a, b) for a, b in zip(sa, sb)
                 if _is_winograd(fused_a[a]) != _is_winograd(fused_b[b])]
        if flips:
            out[fname] = flips
    return out


class WinogradFromRecords:
    """``choose`` for ``ConvertLayoutNCHWc`` from a tuning database (module docstring):
    called with the module entering the pass, returns ``{function: {candidate: use
    Winograd}}`` for the candidates both of whose kernels have records (also kept as
    ``chosen``: another build given it as ``choose`` makes the same choices). ``table``
    (after a call) has one row per candidate: its two kernels, their best records' times
    (us), what the rule (``ConvertLayoutNCHWc``'s ``winograd=True``) would take and what was
    chosen ("rule" where a record is missing); ``rule`` holds the rule's decisions."""

    def __init__(self, database: Any, target: Any) -> None:
        self.database = database
        self.target = target if isinstance(target, Target) or target is None else Target(target)
        self.table = pd.DataFrame()
        self.chosen: dict[str, dict[int, bool]] = {}
        self.rule: dict[str, dict[int, bool]] = {}

    def _best_us(self, func: PrimFunc) -> float | None:
        record = self.database.query_tuning_record(task_module(func), self.target, "main")
        if record is None or not record.run_secs:
            return None
        return mean_run_secs(record.run_secs) * 1e6

    def __call__(self, mod: IRModule) -> dict[str, dict[int, bool]]:
        target = self.target if self.target is not None else Target.current() or Target("llvm")
        from workbench.relax.transform.convert_layout_nchwc import (
            block_for_target, winograd_rule,
        )
        variants = implementation_variants(mod, target, from_layout=True)
        block = block_for_target(target)
        self.rule = {f: {k: winograd_rule(t, block) for k, t in enumerate(tiles)}
                     for f, tiles in variants["all"][1].candidate_tiles.items()}
        try:
            pairs = candidate_kernels(variants)
        except ValueError as err:
            logger.warning("Winograd choice from records: %s; the rule decides", err)
            self.chosen = {}
            return {}
        chosen: dict[str, dict[int, bool]] = {}
        rows = []
        for fname, fpairs in pairs.items():
            for k, (w_name, fw, d_name, fd) in enumerate(fpairs):
                w_us, d_us = self._best_us(fw), self._best_us(fd)
                use = None if w_us is None or d_us is None else w_us < d_us
                if use is not None:
                    chosen.setdefault(fname, {})[k] = use
                rows.append({"Function": fname, "Candidate": k, "Direct": d_name,
                             "Winograd": w_name,
                             "Direct (us)": d_us, "Winograd (us)": w_us,
                             "Rule": "winograd" if self.rule.get(fname, {}).get(k) else
                             "direct",
                             "Chosen": "rule" if use is None else
                             ("winograd" if use else "direct")})
        self.table = pd.DataFrame(rows)
        self.chosen = chosen
        return chosen
