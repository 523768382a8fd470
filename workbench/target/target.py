"""Target: what to compile for. Only the CPU ("llvm") kind exists.

``Target("llvm")`` means the host CPU with all its features. The string form takes TVM's flags
(``-mcpu``, ``-mattr``, ``-mtriple``, ``-num-cores``, ``-fast-math``, ``-opt-level``) and the dict
form takes the same keys (``{"kind": "llvm", "mcpu": "skylake", "num-cores": 4}``).
"""
from __future__ import annotations

import os
import shlex
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

import llvmlite.binding as llvm

_KNOWN_KEYS = ("mcpu", "mattr", "mtriple", "num-cores", "fast-math", "opt-level", "keys",
               "tag", "host")


# Vector extensions of named CPUs (used when a target names ``-mcpu`` but no ``-mattr``).
_AVX512 = ("avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd")
CPU_FEATURES: dict[str, tuple[str, ...]] = {
    "haswell": ("avx2", "fma"), "broadwell": ("avx2", "fma"), "skylake": ("avx2", "fma"),
    "znver2": ("avx2", "fma", "sse4a"), "znver3": ("avx2", "fma", "sse4a"),
    "skylake-avx512": _AVX512,
    "cascadelake": _AVX512 + ("avx512vnni",),
    "cooperlake": _AVX512 + ("avx512vnni", "avx512bf16"),
    "icelake-server": _AVX512 + ("avx512vnni",),
    "sapphirerapids": _AVX512 + ("avx512vnni", "avx512bf16", "avxvnni", "amx-tile",
                                 "amx-int8", "amx-bf16"),
    "znver4": _AVX512 + ("avx512vnni", "avx512bf16", "sse4a"),
}
#: Every extension :data:`CPU_FEATURES` knows (what :meth:`Target.runs_on` compares).
_KNOWN_FEATURES = tuple(sorted({f for feats in CPU_FEATURES.values() for f in feats}))


def _init_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@dataclass(frozen=True, init=False)
class Target:
    """A compilation target; build with ``Target("llvm -mcpu=... -num-cores=2")`` or a dict."""

    kind: str = "llvm"
    mcpu: str = ""
    mattr: tuple[str, ...] = ()
    mtriple: str = ""
    num_cores: int = 0
    fast_math: bool = False
    opt_level: int = 3
    tag: str = ""
    attrs: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __init__(self, target: Any = "llvm", host: Any = None) -> None:
        parsed = _parse(target)
        for key, value in parsed.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "attrs", {})

    # -- derived facts -------------------------------------------------------------------------
    @property
    def host_cpu(self) -> str:
        _init_llvm()
        return self.mcpu or llvm.get_host_cpu_name()

    @property
    def features(self) -> str:
        """The LLVM feature string: explicit ``-mattr`` or, for the host, all host features."""
        _init_llvm()
        if self.mattr:
            return ",".join(self.mattr)
        if self.mcpu and self.mcpu != llvm.get_host_cpu_name():
            return ""
        return llvm.get_host_cpu_features().flatten()

    @property
    def triple(self) -> str:
        _init_llvm()
        return self.mtriple or llvm.get_process_triple()

    @property
    def keys(self) -> tuple[str, ...]:
        return ("cpu",)

    @property
    def vector_width_bits(self) -> int:
        """The widest native SIMD register, used to pick vector lengths (from
        :meth:`has_feature`, so a named ``-mcpu`` other than the host's answers from its
        features, not the host's)."""
        if self.has_feature("avx512f"):
            return 512
        if self.has_feature("avx2") or self.has_feature("avx"):
            return 256
        return 128

    def has_feature(self, feature: str) -> bool:
        """Does the target have the LLVM CPU feature ``feature`` (``"avx512vnni"``,
        ``"avx512bf16"``, ``"avx512f"``, ...)? TVM's ``target_has_features``.

        The host (no ``-mcpu``, or the host's CPU name) answers from the host's feature list;
        ``-mattr`` answers from its ``+feature`` entries; a named ``-mcpu`` without ``-mattr``
        answers from :data:`CPU_FEATURES` (a few common x86 server CPUs; others have none of
        the listed extensions as far as this method knows).
        """
        feature = feature.lstrip("+")
        feats = self.features
        if feats:
            return f"+{feature}" in feats.split(",")
        return feature in CPU_FEATURES.get(self.mcpu, ())

    def runs_on(self, host: "Target | None" = None) -> bool:
        """Can code compiled for this target run on ``host`` (default: this machine)? True
        when both name the same CPU, else when every extension of :data:`CPU_FEATURES` this
        target has, the host has too: ``-mcpu=haswell`` code runs on a Sapphire Rapids,
        ``-mcpu=znver4`` code does not (AMD's SSE4a), nor AVX-512 code on a Zen 3. AMX code
        also needs the OS to grant the tile state, which loading the module asks for."""
        host = Target("llvm") if host is None else host
        if self.host_cpu == host.host_cpu and not self.mattr and not host.mattr:
            return True
        return all(host.has_feature(f) for f in _KNOWN_FEATURES if self.has_feature(f))

    def max_num_threads(self) -> int:
        return self.num_cores or (os.cpu_count() or 1)

    def export(self) -> dict[str, Any]:
        """TVM's dict form."""
        d: dict[str, Any] = {"kind": self.kind, "keys": list(self.keys)}
        if self.mcpu:
            d["mcpu"] = self.mcpu
        if self.mattr:
            d["mattr"] = list(self.mattr)
        if self.mtriple:
            d["mtriple"] = self.mtriple
        if self.num_cores:
            d["num-cores"] = self.num_cores
        if self.fast_math:
            d["fast-math"] = True
        if self.opt_level != 3:
            d["opt-level"] = self.opt_level
        return d

    def __str__(self) -> str:
        parts = [self.kind]
        if self.mtriple:
            parts.append(f"-mtriple={self.mtriple}")
        if self.mcpu:
            parts.append(f"-mcpu={self.mcpu}")
        if self.mattr:
            parts.append(f"-mattr={','.join(self.mattr)}")
        if self.num_cores:
            parts.append(f"-num-cores={self.num_cores}")
        if self.fast_math:
            parts.append("-fast-math")
        if self.opt_level != 3:
            parts.append(f"-opt-level={self.opt_level}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __hash__(self) -> int:
        return hash(str(self))

    # -- scope (TVM's ``with target:``) ----------------------------------------------------
    def __enter__(self) -> "Target":
        _scope().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _scope()
        if not stack or stack[-1] is not self:
            raise RuntimeError(f"{self!r}: exited out of order (not the innermost target)")
        stack.pop()

    @staticmethod
    def current(allow_none: bool = True) -> "Target | None":
        """The innermost ``with target:`` of this thread; without one, None (or a
        ``ValueError`` when ``allow_none`` is False), as in TVM."""
        stack = _scope()
        if stack:
            return stack[-1]
        if not allow_none:
            raise ValueError("Target.current(allow_none=False): no target is in scope; use "
                             "`with Target('llvm'):`")
        return None

    @staticmethod
    def from_device(device: Any) -> "Target":
        """The target that compiles for ``device`` (a Device, a device type number, or a name
        such as ``"cpu"`` / ``"llvm"``): the host CPU, the only kind Workbench has."""
        kind = getattr(device, "device_type", device)
        if kind in (1, "cpu", "llvm") or str(kind).startswith("cpu"):
            return Target("llvm")
        raise ValueError(f"Target.from_device: {device!r} is not a CPU device; Workbench "
                         "compiles for the CPU only (Target('llvm'))")


_local = threading.local()


def _scope() -> list[Target]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _parse(target: Any) -> dict[str, Any]:
    if isinstance(target, Target):
        return {k: getattr(target, k) for k in
                ("kind", "mcpu", "mattr", "mtriple", "num_cores", "fast_math", "opt_level", "tag")}
    if isinstance(target, Mapping):
        return _from_dict(target)
    if not isinstance(target, str):
        raise TypeError(f"Target takes a string, a dict or a Target, got {target!r}")
    words = shlex.split(target)
    if not words:
        raise ValueError("empty target string; use 'llvm'")
    kind, flags = words[0], words[1:]
    d: dict[str, Any] = {"kind": kind}
    # TVM's three spellings: -key=value, -key value (the next word does not start with a
    # dash), and a bare -flag (True); one or two leading dashes.
    i = 0
    while i < len(flags):
        flag = flags[i]
        if not flag.startswith("-"):
            raise ValueError(f"target {target!r}: expected a -flag, got {flag!r}")
        key, eq, value = flag.lstrip("-").partition("=")
        if eq and not (key and value):
            raise ValueError(f"target {target!r}: empty option key or value in {flag!r}")
        if not eq and i + 1 < len(flags) and not flags[i + 1].startswith("-"):
            value, i = flags[i + 1], i + 1
        if key in d:
            raise ValueError(f"target {target!r}: option {key!r} appears more than once")
        d[key] = True if value == "" else value
        i += 1
    return _from_dict(d)


def _from_dict(d: Mapping[str, Any]) -> dict[str, Any]:
    kind = d.get("kind", "llvm")
    if kind not in ("llvm", "c") and kind != "cpu":
        raise ValueError(f"unsupported target kind {kind!r}: Workbench compiles for the CPU "
                         "('llvm')")
    unknown = [k for k in d if k not in _KNOWN_KEYS and k != "kind"]
    if unknown:
        raise ValueError(f"unknown target option(s) {unknown}; known: {list(_KNOWN_KEYS)}")
    mattr = d.get("mattr", ())
    if isinstance(mattr, str):
        mattr = tuple(a for a in mattr.split(",") if a)
    try:
        num_cores = int(d.get("num-cores", 0))
        opt_level = int(d.get("opt-level", 3))
    except (TypeError, ValueError) as e:
        raise ValueError(f"target option num-cores/opt-level must be integers: {e}") from None
    if num_cores < 0:
        raise ValueError(f"target option num-cores must be >= 0, got {num_cores}")
    return {"kind": "llvm", "mcpu": str(d.get("mcpu", "")), "mattr": tuple(mattr),
            "mtriple": str(d.get("mtriple", "")), "num_cores": num_cores,
            "fast_math": bool(d.get("fast-math", False)), "opt_level": opt_level,
            "tag": str(d.get("tag", ""))}
