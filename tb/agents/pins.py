"""Reading a pin's value cheaply (device- and bus-neutral)."""
from __future__ import annotations

from cocotb.handle import LogicArrayObject, LogicObject, PackedObject

_BITS = (LogicObject, LogicArrayObject, PackedObject)     # handles whose value is 0/1/X/Z bits


def pin_int(handle, default=0):
    """Integer value of a pin, or *default* when it holds X/Z or is absent (None).

    Reads the simulator object's bit string when the handle has one (cocotb 2.1's
    ``LogicObject._handle``): the same value as ``int(handle.value)`` without building a
    ``LogicArray`` each time, which is most of the cost of the agents' per-cycle sampling."""
    if handle is None:
        return default
    try:
        if isinstance(handle, _BITS):
            return int(handle._handle.get_signal_val_binstr(), 2)
        return int(handle.value)
    except ValueError:                       # X, Z (any non-0/1 character)
        return default
