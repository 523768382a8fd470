"""Input specs for ``Module.export_tvm`` (TVM's ``nn.spec``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class Tensor:
    """A tensor input: ``shape`` entries are ints or names of symbolic dims (``("n", 8)``);
    the same name within one exported method is the same dim."""

    shape: Sequence[int | str]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        for d in self.shape:
            if not isinstance(d, (int, str)) or isinstance(d, bool):
                raise TypeError(f"nn.spec.Tensor: a dim must be an int or a name, got {d!r}")
        object.__setattr__(self, "shape", tuple(self.shape))


def as_spec(v: Any) -> Tensor:
    if isinstance(v, Tensor):
        return v
    raise TypeError(f"export_tvm: an input spec must be nn.spec.Tensor(shape, dtype), got {v!r}")


__all__ = ["Tensor"]
