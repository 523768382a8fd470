"""Helpers for VM tests (TVM's ``relax.testing.vm``): ``test.vm.*`` packed functions and
:func:`check_saved_func`.

Importing this module registers the functions (once) in the global registry:
``test.vm.move``, ``test.vm.add``, ``test.vm.mul`` (new arrays), ``test.vm.equal_zero``,
``test.vm.subtract_one``, ``test.vm.identity`` / ``test.vm.tile`` (write into the last
argument), ``test.vm.add_scalar`` (a + b on plain numbers), ``test.vm.get_device_id``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ndarray import NDArray, tensor
from ..packed_func import PackedFunc
from ..registry import get_global_func, register_func

__all__ = ["check_saved_func"]


def _np(x: NDArray) -> np.ndarray:
    return x.numpy(copy=False)


def _identity(src: NDArray, dst: NDArray) -> None:
    dst.copyfrom(src)


def _tile(src: NDArray, dst: NDArray) -> None:
    reps = tuple(d // s for d, s in zip(dst.shape, src.shape))
    dst.copyfrom(np.tile(_np(src), reps))


_FUNCS = {
    "test.vm.move": lambda x: x,
    "test.vm.add": lambda a, b: tensor(_np(a) + _np(b)),
    "test.vm.mul": lambda a, b: tensor(_np(a) * _np(b)),
    "test.vm.equal_zero": lambda a: tensor(np.all(_np(a) == 0)),
    "test.vm.subtract_one": lambda a: tensor(np.subtract(_np(a), 1)),
    "test.vm.identity": _identity,
    "test.vm.tile": _tile,
    "test.vm.add_scalar": lambda a, b: a + b,
    "test.vm.get_device_id": lambda dev: dev.device_id,
}

for _name, _fn in _FUNCS.items():
    if get_global_func(_name, allow_missing=True) is None:
        register_func(_name, PackedFunc(_fn, _name))


def check_saved_func(vm: Any, func_name: str, *inputs: Any) -> Any:
    """Run ``func_name`` directly and through ``save_function``; assert equal results and
    return the direct one."""
    res1 = vm[func_name](*inputs)
    vm.save_function(func_name, func_name + "_saved", *inputs)
    res2 = vm[func_name + "_saved"]()
    np.testing.assert_allclose(_as_numpy(res1), _as_numpy(res2))
    return res1


def _as_numpy(x: Any) -> Any:
    return x.numpy() if isinstance(x, NDArray) else x
