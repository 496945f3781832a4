"""Synthetic Vela models shared by the CLI tests (tests/ethos_u85/test_run_cli.py,
tests/ethos_u85/test_cli_robustness.py): a DMA-only network that copies its input to its output."""
from __future__ import annotations

import numpy as np

from tests.ethos_u85.support.vela_files import cop1, write_npz
from tlm.ethos_u85 import isa

# write_npz's default input: int8 [1, 8, 8, 16] in region 1 at offset 1024
IN_SHAPE, IN_OFFSET = (1, 8, 8, 16), 1024


def dma_copy_stream(src_region, src, dst_region, dst, length):
    return (isa.encode("NPU_SET_DMA0_SRC_REGION", region=src_region)
            + isa.encode("NPU_SET_DMA0_DST_REGION", region=dst_region)
            + isa.encode("NPU_SET_DMA0_SRC", addr=src) + isa.encode("NPU_SET_DMA0_DST", addr=dst)
            + isa.encode("NPU_SET_DMA0_LEN", addr=length)
            + isa.encode("NPU_OP_DMA_START") + isa.encode("NPU_OP_DMA_WAIT")
            + isa.encode("NPU_OP_STOP", mask=0xFFFF))


# the input (scratch + 1024) copied to the output (scratch + 0)
COPY_STREAM = dma_copy_stream(1, IN_OFFSET, 1, 0, int(np.prod(IN_SHAPE)))


def copy_model(path, stream=None, **override):
    """Synthetic Vela .npz: int8 input [1,8,8,16] at scratch+1024, output of the same shape at
    scratch+0; the stream (default COPY_STREAM) copies the input to the output with the DMA.
    *override*: other write_npz arrays (output_shape=..., scratch_size=...)."""
    kw = dict(output_shape=np.array([[1, 1, *IN_SHAPE]]), output_elem_size=np.array([1]))
    kw.update(override)
    return write_npz(path, cop1(COPY_STREAM if stream is None else stream), **kw)
