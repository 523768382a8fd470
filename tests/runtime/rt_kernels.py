"""Hand-written LLVM IR kernels that follow the kernel ABI (docs/internals.md), for testing the
runtime without codegen. ``build(*kernels)`` compiles them at O2 to host object code (PIC, so
the object can also be linked into a shared library) and loads it as a runtime.Module.
"""
from __future__ import annotations

import json

import llvmlite.binding as llvm

from workbench.runtime import Module

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()

# C[i] = A[i] + B[i] for i < n.
ADD = ("""
define i32 @add(ptr %args) {
entry:
  %pa = load ptr, ptr %args
  %sb = getelementptr i64, ptr %args, i64 1
  %pb = load ptr, ptr %sb
  %sc = getelementptr i64, ptr %args, i64 2
  %pc = load ptr, ptr %sc
  %sn = getelementptr i64, ptr %args, i64 3
  %n = load i64, ptr %sn
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %ea = getelementptr float, ptr %pa, i64 %i
  %eb = getelementptr float, ptr %pb, i64 %i
  %ec = getelementptr float, ptr %pc, i64 %i
  %va = load float, ptr %ea
  %vb = load float, ptr %eb
  %s = fadd float %va, %vb
  store float %s, ptr %ec
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret i32 0
}
""", {"name": "add", "params": [
    {"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
    {"name": "B", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
    {"name": "C", "kind": "buffer", "dtype": "float32", "shape": ["n"]}],
    "shape_vars": ["n"]})

# B = A * alpha + k over a static 4x8 float32 buffer; alpha float32, k int32 scalars.
SCALE = ("""
define i32 @scale(ptr %args) {
entry:
  %pa = load ptr, ptr %args
  %sal = getelementptr i64, ptr %args, i64 1
  %alpha64 = load double, ptr %sal
  %alpha = fptrunc double %alpha64 to float
  %sk = getelementptr i64, ptr %args, i64 2
  %k64 = load i64, ptr %sk
  %kf = sitofp i64 %k64 to float
  %sb = getelementptr i64, ptr %args, i64 3
  %pb = load ptr, ptr %sb
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %ea = getelementptr float, ptr %pa, i64 %i
  %eb = getelementptr float, ptr %pb, i64 %i
  %va = load float, ptr %ea
  %m = fmul float %va, %alpha
  %r = fadd float %m, %kf
  store float %r, ptr %eb
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, 32
  br i1 %more, label %loop, label %done
done:
  ret i32 0
}
""", {"name": "scale", "params": [
    {"name": "A", "kind": "buffer", "dtype": "float32", "shape": [4, 8]},
    {"name": "alpha", "kind": "scalar", "dtype": "float32"},
    {"name": "k", "kind": "scalar", "dtype": "int32"},
    {"name": "B", "kind": "buffer", "dtype": "float32", "shape": [4, 8]}],
    "shape_vars": []})

# Returns 7 (a failed runtime check) when code < 0, else 0.
CHECK = ("""
define i32 @check(ptr %args) {
entry:
  %c = load i64, ptr %args
  %neg = icmp slt i64 %c, 0
  %r = select i1 %neg, i32 7, i32 0
  ret i32 %r
}
""", {"name": "check", "params": [{"name": "code", "kind": "scalar", "dtype": "int64"}],
      "shape_vars": []})

# out[0] = ++counter (a process-global call counter).
COUNT = ("""
@counter = internal global i64 0
define i32 @count(ptr %args) {
entry:
  %po = load ptr, ptr %args
  %c = load i64, ptr @counter
  %c1 = add i64 %c, 1
  store i64 %c1, ptr @counter
  store i64 %c1, ptr %po
  ret i32 0
}
""", {"name": "count", "params": [{"name": "out", "kind": "buffer", "dtype": "int64",
                                    "shape": [1]}], "shape_vars": []})

# Only the signature matters: C[n, m] = A[n, k] @ B[k, m] (body does nothing), for binding tests.
MATMUL_SIG = ("""
define i32 @mm(ptr %args) {
entry:
  ret i32 0
}
""", {"name": "mm", "params": [
    {"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n", "k"]},
    {"name": "B", "kind": "buffer", "dtype": "float32", "shape": ["k", "m"]},
    {"name": "C", "kind": "buffer", "dtype": "float32", "shape": ["n", "m"]}],
    "shape_vars": ["n", "k", "m"]})

# C[i] = A[i] + B[i] in parallel through GOMP_parallel(nthreads=0); thread 0 writes the team
# size to T[0]. Each thread takes a contiguous chunk.
PARALLEL_ADD = ("""
%ctx = type { ptr, ptr, ptr, i64 }
declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare i32 @omp_get_thread_num()
declare i32 @omp_get_num_threads()

define internal void @padd_body(ptr %data) {
entry:
  %tid32 = call i32 @omp_get_thread_num()
  %nt32 = call i32 @omp_get_num_threads()
  %tid = sext i32 %tid32 to i64
  %nt = sext i32 %nt32 to i64
  %f0 = getelementptr %ctx, ptr %data, i32 0, i32 0
  %pa = load ptr, ptr %f0
  %f1 = getelementptr %ctx, ptr %data, i32 0, i32 1
  %pb = load ptr, ptr %f1
  %f2 = getelementptr %ctx, ptr %data, i32 0, i32 2
  %pc = load ptr, ptr %f2
  %f3 = getelementptr %ctx, ptr %data, i32 0, i32 3
  %n = load i64, ptr %f3
  %n1 = add i64 %n, %nt
  %n2 = sub i64 %n1, 1
  %chunk = sdiv i64 %n2, %nt
  %lo = mul i64 %tid, %chunk
  %hi0 = add i64 %lo, %chunk
  %big = icmp sgt i64 %hi0, %n
  %hi = select i1 %big, i64 %n, i64 %hi0
  %none = icmp sge i64 %lo, %hi
  br i1 %none, label %done, label %loop
loop:
  %i = phi i64 [%lo, %entry], [%next, %loop]
  %ea = getelementptr float, ptr %pa, i64 %i
  %eb = getelementptr float, ptr %pb, i64 %i
  %ec = getelementptr float, ptr %pc, i64 %i
  %va = load float, ptr %ea
  %vb = load float, ptr %eb
  %s = fadd float %va, %vb
  store float %s, ptr %ec
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %hi
  br i1 %more, label %loop, label %done
done:
  ret void
}

define i32 @padd(ptr %args) {
entry:
  %c = alloca %ctx
  %pa = load ptr, ptr %args
  %sb = getelementptr i64, ptr %args, i64 1
  %pb = load ptr, ptr %sb
  %sc = getelementptr i64, ptr %args, i64 2
  %pc = load ptr, ptr %sc
  %st = getelementptr i64, ptr %args, i64 3
  %pt = load ptr, ptr %st
  %sn = getelementptr i64, ptr %args, i64 4
  %n = load i64, ptr %sn
  %f0 = getelementptr %ctx, ptr %c, i32 0, i32 0
  store ptr %pa, ptr %f0
  %f1 = getelementptr %ctx, ptr %c, i32 0, i32 1
  store ptr %pb, ptr %f1
  %f2 = getelementptr %ctx, ptr %c, i32 0, i32 2
  store ptr %pc, ptr %f2
  %f3 = getelementptr %ctx, ptr %c, i32 0, i32 3
  store i64 %n, ptr %f3
  call void @GOMP_parallel(ptr @padd_body, ptr %c, i32 0, i32 0)
  %nt = call i32 @omp_get_max_threads()
  store i32 %nt, ptr %pt
  ret i32 0
}
declare i32 @omp_get_max_threads()
""", {"name": "padd", "params": [
    {"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
    {"name": "B", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
    {"name": "C", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
    {"name": "T", "kind": "buffer", "dtype": "int32", "shape": [1]}],
    "shape_vars": ["n"]})


def _metadata_global(meta: dict) -> str:
    data = json.dumps(meta).encode("utf-8") + b"\0"
    body = "".join(f"\\{b:02X}" for b in data)
    return f'@__workbench_metadata = constant [{len(data)} x i8] c"{body}"\n'


def compile_kernels(*kernels: tuple[str, dict], entry: str | None = None,
                    meta: dict | None = None) -> tuple[bytes, dict[str, str]]:
    """Object code (O2, PIC, host CPU) and sources {"ll", "asm"} for the given kernels."""
    if meta is None:
        meta = {"version": 1, "entry": entry or kernels[0][1]["name"],
                "functions": [k[1] for k in kernels]}
    text = _metadata_global(meta) + "\n".join(k[0] for k in kernels)
    mod = llvm.parse_assembly(text)
    mod.triple = llvm.get_process_triple()
    mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=2, reloc="pic", codemodel="default")
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_object(mod), {"ll": str(mod), "asm": tm.emit_assembly(mod)}


def build(*kernels: tuple[str, dict], entry: str | None = None) -> Module:
    obj, sources = compile_kernels(*kernels, entry=entry)
    return Module.from_object(obj, sources)
