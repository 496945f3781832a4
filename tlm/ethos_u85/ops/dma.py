"""NPU_OP_DMA_START: the mem2mem copy (TRM 3.10.4), executed synchronously at issue.

A sequential model is exact for streams that order DMA against kernels with DMA_WAIT and
KERNEL_WAIT, as the TRM requires. The brace error in the TRM pseudocode (digest E-18) is
resolved as the STRIDE1 descriptions say: src/dst stride_1 and idx_skip_1 step once per
2D slice (per y), not per 1D line.
"""
from __future__ import annotations

import numpy as np

from ...core.errors import BudgetExceeded, Unpredictable
from .. import isa
from ..arith import LUT_BYTES as LUT_RAM_SIZE  # lookup_table_storage (TRM 2.6.2)
from ..config import Policy
from ..memory import ADDR_MASK, PAGE_BITS, Channel, DataPort

EXTERNAL, INTERNAL = isa.dma_region_mode.external, isa.dma_region_mode.internal
D1, D2, D3 = isa.dma_stride_mode.d1, isa.dma_stride_mode.d2, isa.dma_stride_mode.d3


def _s40(v: int) -> int:
    v &= ADDR_MASK
    return v - (1 << 40) if v >> 39 else v


def dma_start(rf, port: DataPort, lut: np.ndarray | None = None, policy: "Policy | None" = None) -> int:
    """Copy as NPU_OP_DMA_START does, from the NPU_SET_DMA0_* state in `rf`.

    Returns the number of bytes copied. Raises BusFault (AXI error), Unpredictable (a TRM
    assert fails) or BudgetExceeded. The budgets are the `policy` fields dma_max_bytes,
    dma_max_lines, dma_max_indexed_lines and dma_max_pages (Policy() defaults). They and
    every check that does not depend on index values are applied before anything moves (the
    written pages of a
    scatter are counted from the index array as memory holds it); a BusFault, or a
    scattered index that leaves the LUT RAM, stops mid-transfer.
    """
    pol = policy if policy is not None else Policy()
    max_bytes, max_lines = pol.dma_max_bytes, pol.dma_max_lines
    max_indexed_lines, max_pages = pol.dma_max_indexed_lines, pol.dma_max_pages
    f = rf.field
    src_region = f("NPU_SET_DMA0_SRC_REGION", "region")
    src_region_mode = f("NPU_SET_DMA0_SRC_REGION", "region_mode")
    stride_mode = f("NPU_SET_DMA0_SRC_REGION", "stride_mode")
    src_idx_mode = f("NPU_SET_DMA0_SRC_REGION", "idx_mode")
    dst_region = f("NPU_SET_DMA0_DST_REGION", "region")
    dst_region_mode = f("NPU_SET_DMA0_DST_REGION", "region_mode")
    dst_idx_mode = f("NPU_SET_DMA0_DST_REGION", "idx_mode")
    length = f("NPU_SET_DMA0_LEN", "addr") & ADDR_MASK
    width = f("NPU_SET_DMA0_SIZE0", "size")
    height = f("NPU_SET_DMA0_SIZE1", "size")
    src_p = f("NPU_SET_DMA0_SRC", "addr") & ADDR_MASK
    dst_p = f("NPU_SET_DMA0_DST", "addr") & ADDR_MASK
    idx_p = f("NPU_SET_DMA0_IDX", "addr") & ADDR_MASK
    idx_region = f("NPU_SET_DMA0_IDX_REGION", "region")
    idx_max = f("NPU_SET_DMA0_IDX_MAX", "idx_max")
    src_stride_0 = _s40(f("NPU_SET_DMA0_SRC_STRIDE0", "addr"))
    src_stride_1 = _s40(f("NPU_SET_DMA0_SRC_STRIDE1", "addr"))
    dst_stride_0 = _s40(f("NPU_SET_DMA0_DST_STRIDE0", "addr"))
    dst_stride_1 = _s40(f("NPU_SET_DMA0_DST_STRIDE1", "addr"))
    idx_skip_1 = _s40(f("NPU_SET_DMA0_IDX_SKIP1", "addr"))

    if src_region_mode != EXTERNAL:
        raise Unpredictable("NPU_OP_DMA_START: src_region_mode must be external")
    if src_idx_mode and dst_idx_mode:
        raise Unpredictable("NPU_OP_DMA_START: gather and scatter both enabled")
    if stride_mode not in (D1, D2, D3):
        raise Unpredictable(f"NPU_OP_DMA_START: reserved stride_mode {stride_mode}")
    internal = dst_region_mode == INTERNAL
    if stride_mode == D1:
        width = 1
    if stride_mode != D3:
        height = 1
    indexed = bool(src_idx_mode or dst_idx_mode)

    total = length * width * height
    lines_max = max_indexed_lines if indexed else max_lines
    if total > max_bytes or width * height > lines_max:
        raise BudgetExceeded(f"NPU_OP_DMA_START: {total} bytes in {width * height}{' indexed' if indexed else ''} "
                             f"lines exceeds the model's budget ({max_bytes} bytes, {lines_max} lines)")
    if internal:
        if lut is None:
            raise Unpredictable("NPU_OP_DMA_START: no internal memory to write")
        if dst_p & 15 or length & 15:
            raise Unpredictable("NPU_OP_DMA_START: internal destination needs 16-byte aligned address and length")

    src_route = port.route(src_region)
    dst_route = None if internal else port.route(dst_region)
    idx_route = port.route(idx_region) if indexed else None
    scatter_pages = None                  # pages written so far by a scatter (safety net below)
    if not internal and length:
        # Sparse-memory budget: the distinct pages the writes touch (writes allocate pages;
        # reads of unwritten memory do not), from the address pattern, before anything moves.
        y = np.arange(height, dtype=np.int64)[:, None]
        if dst_idx_mode:
            idx = _peek_indices(port.memory, idx_route.base, idx_p, width, height, idx_skip_1)
            ok = (idx >= 0) & (idx <= idx_max)
            dst_off = (dst_p + y * dst_stride_1 + np.where(ok, idx, 0) * dst_stride_0)[ok]
            scatter_pages = set()
        else:
            x = np.arange(width, dtype=np.int64)[None, :]
            dst_off = (dst_p + x * dst_stride_0 + y * dst_stride_1).ravel()
        pages = page_count((dst_route.base + dst_off) & ADDR_MASK, length)
        if pages > max_pages:
            raise BudgetExceeded(f"NPU_OP_DMA_START: writes touch {pages} memory pages of {1 << PAGE_BITS} bytes, "
                                 f"the model's budget is {max_pages}")
    if not internal and not indexed and length and width * height > 1:
        done = _copy_batched(port, src_route, dst_route, src_region, dst_region, length, width, height,
                             src_p, dst_p, src_stride_0, src_stride_1, dst_stride_0, dst_stride_1)
        if done is not None:
            return done
    copied = 0
    for _y in range(height):
        for x in range(width):
            src_idx = dst_idx = x
            if indexed:
                raw = port.read_abs(idx_route, (idx_route.base + idx_p) & ADDR_MASK, 4,
                                    Channel.rd_mem2mem_idx)
                idx = int(raw.view("<i4")[0])
                idx_p = (idx_p + 4) & ADDR_MASK
                if idx < 0 or idx > idx_max:
                    continue                      # copy_valid = false: skipped silently
                if src_idx_mode:
                    src_idx = idx
                else:
                    dst_idx = idx
            if length == 0:
                continue
            src_addr = (src_route.base + src_p + src_idx * src_stride_0) & ADDR_MASK
            data = port.read_abs(src_route, src_addr, length, Channel.rd_mem2mem)
            dst_off = (dst_p + dst_idx * dst_stride_0) & ADDR_MASK
            if internal:
                if dst_off + length > LUT_RAM_SIZE:
                    raise Unpredictable("NPU_OP_DMA_START: internal destination outside the 2048-byte LUT RAM")
                lut[dst_off:dst_off + length] = data
            else:
                dst_addr = (dst_route.base + dst_off) & ADDR_MASK
                if scatter_pages is not None:         # the peek misses indices this DMA overwrites
                    scatter_pages.update(range(dst_addr >> PAGE_BITS, ((dst_addr + length - 1) >> PAGE_BITS) + 1))
                    if len(scatter_pages) > max_pages:
                        raise BudgetExceeded(f"NPU_OP_DMA_START: scatter writes touch more than {max_pages} "
                                             f"memory pages (the model's budget)")
                port.write_abs(dst_route, dst_addr, data, Channel.wr_mem2mem)
            copied += length
        src_p = (src_p + src_stride_1) & ADDR_MASK
        dst_p = (dst_p + dst_stride_1) & ADDR_MASK
        if indexed:
            idx_p = (idx_p + idx_skip_1) & ADDR_MASK
    return copied


def page_count(starts: np.ndarray, length: int) -> int:
    """Distinct memory pages covered by the runs [s, s + length) (s absolute, >= 0)."""
    if not starts.size or length <= 0:
        return 0
    if starts.size == 1:                                   # one line (a 1D DMA)
        s = int(starts[0])
        return ((s + length - 1) >> PAGE_BITS) - (s >> PAGE_BITS) + 1
    ps = starts >> PAGE_BITS
    order = np.argsort(ps, kind="stable")
    ps = ps[order]
    pe = (starts[order] + (length - 1)) >> PAGE_BITS
    reach = np.maximum.accumulate(pe)                      # last page covered by runs 0..i
    prev = np.concatenate(([np.int64(-1)], reach[:-1]))
    return int(np.maximum(0, pe - np.maximum(ps, prev + 1) + 1).sum())


def _peek_indices(memory, base: int, idx_p: int, width: int, height: int, skip1: int) -> np.ndarray:
    """The [height, width] index words the DMA will read, as memory holds them now (backdoor,
    no transactions): only to size the page budget of a scatter."""
    rows = np.empty((height, width), "<i4")
    for y in range(height):
        a = (base + idx_p + y * (4 * width + skip1)) & ADDR_MASK
        n = 4 * width
        head = min(n, (1 << 40) - a)
        raw = memory.read_array(a, head)
        if head < n:                                       # the index array wraps at 2**40
            raw = np.concatenate((raw, memory.read_array(0, n - head)))
        rows[y] = raw.view("<i4")
    return rows.astype(np.int64)


def _may_fault(memory, starts: np.ndarray, length: int) -> bool:
    """Could any of these absolute runs meet an injected fault or the top of the address space?"""
    if starts.size and int(starts.max()) + length > (1 << 40):
        return True
    return any(bool(((starts < f.hi) & (starts + length > f.lo)).any()) for f in memory.faults)


def _copy_batched(port, src_route, dst_route, src_region, dst_region, length, width, height,
                  src_p, dst_p, src_stride_0, src_stride_1, dst_stride_0, dst_stride_1):
    """The 2D/3D copy as two batches of the same transactions: all line reads, then all line
    writes. Used only when that equals the line-by-line loop: no injected fault can answer (so
    nothing stops half-way) and source and destination bytes do not overlap. Returns bytes
    copied, or None to use the loop."""
    mask = ADDR_MASK
    y = np.arange(height, dtype=np.int64)[:, None]
    x = np.arange(width, dtype=np.int64)[None, :]
    src_off = ((src_p + x * src_stride_0 + y * src_stride_1) & mask).ravel()
    dst_off = ((dst_p + x * dst_stride_0 + y * dst_stride_1) & mask).ravel()
    src_abs = (src_route.base + src_off) & mask
    dst_abs = (dst_route.base + dst_off) & mask
    memory = port.memory
    if _may_fault(memory, src_abs, length) or _may_fault(memory, dst_abs, length):
        return None
    if int(src_abs.min()) < int(dst_abs.max()) + length and int(dst_abs.min()) < int(src_abs.max()) + length:
        return None                      # source and destination may overlap: keep the order
    lens = np.full(src_off.size, length)
    data = port.read_runs(src_region, src_off, lens, Channel.rd_mem2mem)
    port.write_runs(dst_region, dst_off, lens, data, Channel.wr_mem2mem)
    return int(src_off.size) * length
