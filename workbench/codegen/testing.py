"""Helpers for testing code generation: LLVM IR that crashes LLVM on purpose.

Crash isolation (:mod:`workbench.codegen.isolation`) is only proven by a real crash, so this
module keeps one that is reliable: IR that parses and verifies, then aborts LLVM's x86
instruction selection (``LLVM ERROR: Do not know how to split the result of this operator!``,
then ``abort()``). It calls an AVX2 intrinsic on 256-bit vectors while the target CPU is the
baseline ``x86-64``, which has no 256-bit registers, so type legalisation must split a result
that it has no rule for.
"""
from __future__ import annotations

import platform

__all__ = ["LLVM_ABORT_TARGET", "llvm_abort_ir", "llvm_abort_available"]

LLVM_ABORT_TARGET = "llvm -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64"


def llvm_abort_available() -> bool:
    """Whether :func:`llvm_abort_ir` aborts LLVM here (the X86 back end is the host's)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def llvm_abort_ir(name: str = "crash_me") -> str:
    """A module defining ``name`` that aborts LLVM's code generation for
    :data:`LLVM_ABORT_TARGET` (it passes ``parse_assembly`` and ``verify``)."""
    return f"""declare <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16>, <16 x i16>)

define void @{name}(<16 x i16>* %a, <8 x i32>* %o) {{
entry:
  %v = load <16 x i16>, <16 x i16>* %a
  %r = call <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16> %v, <16 x i16> %v)
  store <8 x i32> %r, <8 x i32>* %o
  ret void
}}
"""
