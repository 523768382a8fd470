"""TVM's ``tvm.instrument`` / ``tvm.ir.instrument``: pass instruments (defined in
:mod:`workbench.ir.instrument`)."""
from workbench.ir.instrument import (
    PassInstrument, PassPrintingInstrument, PassTimingInstrument, PrintAfterAll, PrintBeforeAll,
    pass_instrument,
)

__all__ = ["PassInstrument", "PassPrintingInstrument", "PassTimingInstrument", "PrintAfterAll",
           "PrintBeforeAll", "pass_instrument"]
