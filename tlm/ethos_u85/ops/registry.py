"""Kernel operations register themselves here with what the rest of the project needs.

Each op module calls ``register(KernelOp(...))`` for the NPU_OP commands it implements:
the device dispatches through ``fn``; ``mode_field``/``mode_enum`` (the op's own payload
field that selects its mode, e.g. ``pooling_mode``) drive the bench's coverage bins and the
random tests; ``reference`` is the literal pseudocode path the fast path is checked
against; ``fuzz_weight`` is how often the fuzzer's ISA generator emits the op. A new kernel
op is one module and one ``register`` call: the device, fuzzer, coverage model and random
tests take it from here.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Callable


@dataclass(frozen=True)
class KernelOp:
    name: str                                   # NPU_OP_* (TRM mnemonic)
    fn: Callable                                # fn(snapshot, dataport, device)
    mode_field: "str | None" = None             # the op command's mode field
    mode_enum: "type[IntEnum] | None" = None    # its enum (tlm.ethos_u85.isa)
    reference: "Callable | None" = None         # literal TRM pseudocode path, same signature
    fuzz_weight: float = 1.0                    # relative frequency in the fuzzer's streams

    @property
    def modes(self) -> tuple:
        """The op's modes (enum members), () when it has none."""
        return tuple(self.mode_enum) if self.mode_enum is not None else ()


SPECS: dict = {}


def register(op: KernelOp) -> KernelOp:
    if op.name in SPECS:
        raise ValueError(f"kernel op {op.name} registered twice")
    SPECS[op.name] = op
    return op
