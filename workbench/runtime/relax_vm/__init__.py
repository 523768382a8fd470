"""The Relax virtual machine: bytecode, executables, the builder, builtins and the VM.

Floor 1: imports only the runtime, options and numpy. The relax compiler (floor 4) emits code
through :class:`ExecBuilder`; everything the VM needs at run time is in the
:class:`Executable` (bytecode, constants, kernel libraries), which can be saved to one file and
loaded in another process.

How compiled code calls things (the contract for code generators):

- A VM function receives its arguments in registers ``0..n-1`` and returns one register.
- Kernels (functions of an imported runtime Module) are called with NDArrays in
  destination-passing style: outputs are allocated first (``vm.builtin.alloc_storage`` then
  ``vm.builtin.alloc_tensor``) and passed as the last arguments; the call's dst is void.
- Any other callee is resolved by name: kernels first, then the global function registry
  (``vm.builtin.*``, or anything registered with ``register_func``). Resolution happens when
  the VM is created, so a missing function is reported at once.
- Inputs are checked by the code itself (``vm.builtin.check_tensor_info`` /
  ``match_shape`` with an error-context string naming the parameter); the VM checks only the
  argument count.
"""
from . import builtins
from .bytecode import Arg, ArgKind, Opcode
from .call_origin import CallOrigin
from .exec_builder import ExecBuilder
from .executable import Executable, VMExecutable, VMFuncInfo, VMFuncKind
from .objects import DataType, InternalError, ShapeTuple, Storage, VMClosure
from .vm import VirtualMachine, VMInstrumentReturnKind

__all__ = [
    "VirtualMachine", "VMInstrumentReturnKind", "Executable", "VMExecutable", "ExecBuilder",
    "VMFuncInfo", "VMFuncKind", "Arg", "ArgKind", "Opcode", "DataType", "ShapeTuple",
    "Storage", "VMClosure", "InternalError", "builtins", "CallOrigin",
]
