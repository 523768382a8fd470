"""``relax.VirtualMachine(remote_module, session.cpu())``: the Relax VM over RPC.

The VM runs in the session process, on the uploaded Executable; this proxy has the VM's
Python contract (TVM's, :mod:`workbench.runtime.relax_vm.vm`):

- ``set_input(name, *args, **kwargs)`` then ``invoke_stateful(name)`` then
  ``get_outputs(name)``: TVM's way to run a remote VM. Arguments may be arrays of the session
  (by reference, no copy) or local values (numpy arrays, local NDArrays, numbers, tuples:
  copied to the session with each call and converted there as ``set_input`` does).
- ``vm["main"](*args)`` calls a VM function directly (works here too: the remote VM is a full
  one); ``save_function`` binds arguments under a new name, ``vm[saved]()`` runs it.
- Results that are arrays stay in the session (:class:`~workbench.rpc.objects.RemoteNDArray`,
  ``.numpy()`` fetches); a function returning a tuple gives a (nested) Python tuple of them --
  tuple returns work over RPC, unlike TVM's caveat.
- ``time_evaluator(name, dev, ...)`` times on the worker (e.g.
  ``vm.time_evaluator("invoke_stateful", dev, number=10)("main")`` after ``set_input``);
  ``profile(name, *args)`` (with ``profile=True``) returns the worker's
  :class:`~workbench.runtime.profiling.Report`.
- ``set_instrument`` is refused: its callback would have to run on this machine for every
  instruction.
"""
from __future__ import annotations

from typing import Any, Mapping

from workbench.rpc.objects import (
    RemoteDevice, RemoteFunction, RemoteModule, RemoteObject, RemoteTimeEvaluator,
)

__all__ = ["RemoteVirtualMachine"]


class RemoteVirtualMachine:
    """A VM in a remote session (module docstring); made by
    ``relax.VirtualMachine(remote_module, session.cpu())``."""

    def __init__(self, module: RemoteModule, device: Any, memory_cfg: Any = None,
                 profile: bool = False) -> None:
        if module.kind != "executable":
            raise ValueError(f"VirtualMachine: expect the rt_mod to be an Executable; the "
                             f"remote module {module.path!r} holds kernels (upload an "
                             "Executable saved with export_library, e.g. 'model.vmexe')")
        session = module.session
        devices = list(device) if isinstance(device, (list, tuple)) else [device]
        if not devices or not all(isinstance(d, RemoteDevice) and d.session is session
                                  for d in devices):
            raise TypeError(f"VirtualMachine: over RPC the device must be a device of the "
                            f"module's session ({session}.cpu(0)), got {device!r}")
        refs = [d._ref(session) for d in devices]
        if isinstance(memory_cfg, Mapping):
            memory_cfg = tuple((d._ref(session), kind) for d, kind in memory_cfg.items())
        self._session = session
        self._module = module
        self.devices = devices
        self._profile_enabled = bool(profile)
        self._obj: RemoteObject = session._call("vm_create", module._handle, refs,
                                                memory_cfg, bool(profile))

    @property
    def session(self) -> Any:
        return self._session

    @property
    def module(self) -> "RemoteVirtualMachine":
        return self

    def _method(self, method: str, *args: Any, **kwargs: Any) -> Any:
        session = self._session
        return session._call("vm_call", self._obj._handle, method, session._encode(args),
                             {k: session._encode(v) for k, v in kwargs.items()})

    # -- TVM's stateful API --------------------------------------------------------------------
    def set_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Store inputs for :meth:`invoke_stateful` in the remote VM."""
        self._method("set_input", func_name, *args, **kwargs)

    def invoke_stateful(self, func_name: str) -> None:
        """Run ``func_name`` remotely on the inputs given to :meth:`set_input`."""
        self._method("invoke_stateful", func_name)

    def get_outputs(self, func_name: str) -> Any:
        """The last result of ``func_name``: a RemoteNDArray, or nested tuples of them."""
        return self._method("get_outputs", func_name)

    def save_function(self, func_name: str, saved_name: str, *args: Any,
                      include_return: bool = True, **kwargs: Any) -> None:
        """Bind ``args`` to ``func_name`` under ``saved_name`` in the remote VM."""
        self._method("save_function", func_name, saved_name, *args,
                     include_return=include_return, **kwargs)

    # -- functions -----------------------------------------------------------------------------
    def __getitem__(self, name: str) -> RemoteFunction:
        if not isinstance(name, str):
            raise TypeError(f"VirtualMachine[...] takes a function name, got {name!r}")
        return RemoteFunction(self._session, ("vm", self._obj._handle, name), name, self._obj)

    get_function = __getitem__

    def time_evaluator(self, func_name: str, dev: RemoteDevice, number: int = 10,
                       repeat: int = 1, min_repeat_ms: float = 0,
                       cooldown_interval_ms: float = 0, repeats_to_cooldown: int = 1,
                       f_preproc: str = "") -> RemoteTimeEvaluator:
        """An evaluator timing ``vm[func_name]`` on the worker (see the runtime VM's)."""
        return RemoteTimeEvaluator(
            self._session, ("vm", self._obj._handle, func_name), dev, self._obj,
            number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown, f_preproc=f_preproc)

    def profile(self, func_name: str, *args: Any) -> Any:
        """Profile one run on the worker (after a warm-up); the worker's Report."""
        from workbench.runtime.profiling.report import Report

        if not self._profile_enabled:
            raise AttributeError("Module has no function 'profile': create the VM with "
                                 "VirtualMachine(mod, dev, profile=True) to profile")
        out = self._method("profile", func_name, *args)
        return Report.from_json(out["report_json"])

    def set_instrument(self, instrument: Any) -> None:
        raise NotImplementedError("set_instrument is not available over RPC: the callback "
                                  "would run on this machine for every instruction. Profile "
                                  "remotely with VirtualMachine(..., profile=True).profile()")

    def __repr__(self) -> str:
        return (f"<RemoteVirtualMachine functions={self._module.function_names} "
                f"devices={self.devices}>")
