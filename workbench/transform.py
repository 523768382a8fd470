"""TVM's ``tvm.transform``: the pass infrastructure (defined in :mod:`workbench.ir.transform`)."""
from workbench.ir.transform import (
    ApplyPassToFunction, ModulePass, Pass, PassContext, PassInfo, PrintIR, Sequential,
    module_pass, register_pass_config,
)

__all__ = ["ApplyPassToFunction", "ModulePass", "Pass", "PassContext", "PassInfo", "PrintIR",
           "Sequential", "module_pass", "register_pass_config"]
