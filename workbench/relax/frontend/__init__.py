"""Model frontends (``relax.frontend.nn``)."""
from workbench.relax.frontend import nn

__all__ = ["nn"]
