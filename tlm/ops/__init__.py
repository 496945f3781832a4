"""Kernel operations of the Ethos-U85 TLM.

``KERNEL_OPS`` maps the NPU_OP command name to ``fn(snapshot, dataport, device)``; the device
(tlm.device) dispatches through it.  The shared machinery is in :mod:`tlm.ops.common`.
CONV/DEPTHWISE (tlm.ops.conv) are imported on first use, and only registered when the module
exists, so the device reports them as unimplemented rather than failing otherwise.
"""
from __future__ import annotations

import importlib
import importlib.util

from .elementwise import op_elementwise
from .pool import op_pool
from .resize import op_resize

__all__ = ["KERNEL_OPS", "op_pool", "op_elementwise", "op_resize"]


def _lazy(module: str, attr: str):
    def call(snapshot, dataport, device):
        fn = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
        return fn(snapshot, dataport, device)

    call.__name__ = attr
    call.__qualname__ = attr
    return call


KERNEL_OPS = {
    "NPU_OP_POOL": op_pool,
    "NPU_OP_ELEMENTWISE": op_elementwise,
    "NPU_OP_RESIZE": op_resize,
}

if importlib.util.find_spec(f"{__name__}.conv") is not None:
    KERNEL_OPS["NPU_OP_CONV"] = _lazy("conv", "op_conv")
    KERNEL_OPS["NPU_OP_DEPTHWISE"] = _lazy("conv", "op_depthwise")
