"""Schedule primitives as pure functions over PrimFuncs, one module per family."""
