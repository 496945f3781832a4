"""Exceptions used inside the TLM. None of them escapes `Device.run()`: the device turns
each into the TRM's architectural response (STATUS bits and IRQ) or a StopReason."""


class Unpredictable(Exception):
    """A TRM pseudocode assert() failed: the behaviour is UNPREDICTABLE (TRM 3.5.4, 3.6.1).

    `what` names the check, e.g. 'NPU_OP_DMA_START: src_region_mode == external'."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


class BudgetExceeded(Exception):
    """A single operation would exceed the model's work budget (e.g. a DMA of terabytes)."""
