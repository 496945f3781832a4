"""Kernel operations of the Ethos-U85 TLM.

Every op module registers its operations (``ops.registry.register``, ``KernelOp``: function,
mode field and enum, literal reference, fuzz weight); ``KERNEL_OP_SPECS`` is that registry in
opcode order, ``KERNEL_OP_NAMES`` its names and ``KERNEL_OPS`` maps the NPU_OP command name
to ``fn(snapshot, dataport, device)``: the device (tlm/ethos_u85/device.py) dispatches
through it. The shared machinery is in ``ops/common.py``; NPU_OP_DMA_START in ``ops/dma.py``.
"""
from __future__ import annotations

from .. import isa
from . import conv, elementwise, pool, resize  # noqa: F401 - each registers its operations
from .registry import SPECS, KernelOp

__all__ = ["KERNEL_OPS", "KERNEL_OP_NAMES", "KERNEL_OP_SPECS", "KernelOp"]

KERNEL_OP_SPECS = {name: SPECS[name] for name in sorted(SPECS, key=lambda n: isa.BY_NAME[n].opcode)}
KERNEL_OP_NAMES = tuple(KERNEL_OP_SPECS)          # in opcode order
KERNEL_OPS = {name: op.fn for name, op in KERNEL_OP_SPECS.items()}
