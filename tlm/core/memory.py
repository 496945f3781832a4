"""Sparse byte memory and bus transactions, shared by every device.

Transitional: the implementation still lives in `tlm/memory.py` with the Ethos-U85's
routing; the layout change moves the device-neutral part (Memory, Transaction, Resp,
Fault, BusFault, TxnBatch) here. Device packages import these names from here."""
from ..ethos_u85.memory import BusFault, Fault, Memory, Resp, Transaction, TxnBatch  # noqa: F401
