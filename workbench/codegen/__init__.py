"""Code generation: lowered TIR -> LLVM IR (renderer) -> object code (compiler) -> Module."""
from workbench.codegen.build import build, compile_to_object
from workbench.codegen.compiler import LLVMCompiler
from workbench.codegen.isolation import LLVMCrashError
from workbench.codegen.renderer import RenderError, render

__all__ = ["build", "compile_to_object", "LLVMCompiler", "LLVMCrashError", "RenderError",
           "render"]
