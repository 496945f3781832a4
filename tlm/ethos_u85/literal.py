"""The literal model: a Device on the TLM's literal pseudocode paths only, the reference the
fast path is checked against (the bench's random kernel tests on DUT=tlm, tests/ethos_u85).

``literal_device(...)`` is ``Device(...)`` with

* every kernel op's registered ``reference`` (tlm.ethos_u85.ops.registry: ``elementwise_ref``,
  ``pool_ref``, ``resize_ref``, ``conv_ref``, ``depthwise_ref``): an op without one is left
  out, so the device reports ``op_unimplemented`` for it (never the fast path silently);
* ``reference_paths=True``: the literal fmap gather/scatter; ``segments``, ``plans`` and
  ``traces`` off (the warm paths: tlm.ethos_u85.ops.plan, Device.run);
* NPU_OP_DMA_START on the pseudocode (``tlm.ethos_u85.dma_reference.dma_start``: every
  line of ``dma_lines``, one transaction per index, source read and destination write);
* a memory without batching (``Memory.batching = False``): no batched transactions, no
  segments.

Not literal (shared with the fast path, see each op's ``reference``): register decoding,
the TRM asserts, OpContext's tensor accessors and the scale/bias decoder.
"""
from __future__ import annotations

from . import dma_reference
from .device import Device
from .ops import KERNEL_OP_SPECS

__all__ = ["LITERAL_OPS", "MISSING", "literal_device"]

LITERAL_OPS = {name: op.reference for name, op in KERNEL_OP_SPECS.items() if op.reference is not None}
MISSING = tuple(name for name, op in KERNEL_OP_SPECS.items() if op.reference is None)


def literal_device(config="ethos-u85-256", memory=None, pins=None, policy=None, settle: bool = False,
                   **kw) -> Device:
    """A Device on the literal paths (module doc); the arguments are Device's."""
    fixed = {"kernel_ops", "reference_paths", "segments", "plans", "traces", "dma_op"}
    if fixed & kw.keys():
        raise TypeError(f"literal_device sets {', '.join(sorted(fixed))} itself")
    dev = Device(config, memory=memory, pins=pins, policy=policy, kernel_ops=LITERAL_OPS,
                 settle=settle, reference_paths=True, segments=False, plans=False, traces=False,
                 dma_op=dma_reference.dma_start, **kw)
    dev.memory.batching = False
    return dev
