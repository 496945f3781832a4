"""Kernel operations of the Ethos-U85 TLM.

``KERNEL_OPS`` maps the NPU_OP command name to ``fn(snapshot, dataport, device)``; the device
(tlm.ethos_u85.device) dispatches through it. The shared machinery is in :mod:`tlm.ethos_u85.ops.common`;
NPU_OP_DMA_START is in :mod:`tlm.ethos_u85.ops.dma`.
"""
from __future__ import annotations

from .conv import op_conv, op_depthwise
from .elementwise import op_elementwise
from .pool import op_pool
from .resize import op_resize

__all__ = ["KERNEL_OPS"]

KERNEL_OPS = {
    "NPU_OP_CONV": op_conv,
    "NPU_OP_DEPTHWISE": op_depthwise,
    "NPU_OP_POOL": op_pool,
    "NPU_OP_ELEMENTWISE": op_elementwise,
    "NPU_OP_RESIZE": op_resize,
}
