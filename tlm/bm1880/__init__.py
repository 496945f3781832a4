"""The Bitmain BM1880 TPU at the level of its BMKernel API (BMKernel 1880 guide, seed 003).

`from tlm.bm1880 import *` gives the guide's API (`bmk1880_register`, `bmk1880_tpu_conv`, ...,
`shape_t4`, `FMT_I8`, `CTRL_AL`), and `Bm1880`, the chip model that runs command buffers.
docs/devices/bm1880.md: coverage, parameters, choices, command-buffer and trace formats.
"""
from ..core.registry import DeviceInfo
from . import api
from .api import *  # noqa: F401,F403 - the guide's calls, parameter structures, BmkError
from .api import bmk1880_context_t, bmk1880_info_t, bmk1880_op_t
from .chip import (CHIP, CTRL_AL, CTRL_NULL, CTRL_RA, CTRL_RELU, CTRL_TP, FMT_I8, FMT_U8, bmk1880_chip_info,
                   bmk1880_chip_info_t, shape_t, shape_t2, shape_t4, stride_t, stride_t2, stride_t4)
from .device import Bm1880, RunResult
from .tensors import tensor_gmem, tensor_gmem_default, tensor_lmem

__all__ = api.__all__ + [
    "bmk1880_context_t", "bmk1880_info_t", "bmk1880_op_t", "CHIP", "CTRL_AL", "CTRL_NULL", "CTRL_RA", "CTRL_RELU",
    "CTRL_TP", "FMT_I8", "FMT_U8", "bmk1880_chip_info", "bmk1880_chip_info_t", "shape_t", "shape_t2", "shape_t4",
    "stride_t", "stride_t2", "stride_t4", "Bm1880", "RunResult", "tensor_gmem", "tensor_gmem_default",
    "tensor_lmem", "DEVICE"]

DEVICE = DeviceInfo(
    name="bm1880",
    title="Bitmain BM1880 TPU (BMKernel 1880 API; command buffers via a model register window)",
    configs=("bm1880",),
    default_config="bm1880",
    trace_target="tlm.bm1880.trace_target:Bm1880TraceTarget",
    registers="tlm.bm1880.regs:REGISTERS",
    disasm="tlm.bm1880.cli:DISASM",
)
