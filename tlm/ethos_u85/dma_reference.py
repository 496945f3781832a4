"""The one literal reference of NPU_OP_DMA_START (TRM 3.10.4 pseudocode), independent of the
TLM's vectorised implementation (tlm/ops/dma.py): the bench's and unit tests' oracles and the
fuzzer's address checks all use it.

The pseudocode, as the digest (4.7) states it with erratum E-18 resolved per 2D slice:
STRIDE1 (and IDX_SKIP1) step once per slice; in indexed mode every line first reads one
signed 32-bit index (a value outside [0, IDX_MAX] skips the line) that replaces the line
number on the source (gather) or destination (scatter) side. Addresses are modulo 2**40.

* `DmaParams`: the registers of one transfer; `from_snapshot(snap)` reads them from an NPU_SET
  register snapshot (None when the transfer is UNPREDICTABLE: nothing may move),
  `of(...)` builds them from keyword arguments (tests);
* `dma_lines(p, bases, idx_at)` yields every line as (src address, dst address or None for
  a LUT destination, length, index address or None), in the order of the pseudocode;
* `dma_copy(mem, p, bases)` performs the transfer byte-exactly on any `read(addr, n)` /
  `write(addr, data)` memory, index values read from it;
* `dma_start(rf, port, lut, policy)` is the literal model's NPU_OP_DMA_START device op
  (tlm.ethos_u85.literal): the lines of `dma_lines`, one transaction per index, source read
  and destination write, in pseudocode order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

from . import isa

ADDR_BITS = 40
ADDR_MASK = (1 << ADDR_BITS) - 1
STRIDE_MODES = {"1d": 0, "2d": 1, "3d": 2}


def s40(v: int) -> int:
    """A 40-bit register value as a signed stride."""
    v &= ADDR_MASK
    return v - (1 << ADDR_BITS) if v >> (ADDR_BITS - 1) else v


@dataclass(frozen=True)
class DmaParams:
    src_region: int
    dst_region: int
    src: int                  # NPU_SET_DMA0_SRC (region offset)
    dst: int
    length: int               # bytes a line
    width: int = 1            # lines a 2D slice (SIZE0; 1 in 1D mode)
    height: int = 1           # slices (SIZE1; 1 unless 3D)
    src_stride0: int = 0      # signed
    src_stride1: int = 0
    dst_stride0: int = 0
    dst_stride1: int = 0
    src_idx: bool = False     # gather: the index replaces the source line number
    dst_idx: bool = False     # scatter
    idx_region: int = 0
    idx: int = 0
    idx_max: int = 0
    idx_skip1: int = 0
    internal: bool = False    # LUT destination (DST_REGION.region_mode internal): no AXI write

    @classmethod
    def of(cls, src_region: int, src: int, dst_region: int, dst: int, length: int,
           mode: "str | int" = "1d", size0: int = 1, size1: int = 1, **kw) -> "DmaParams":
        """From the NPU_SET_DMA0_* values (stride mode '1d'/'2d'/'3d' or 0/1/2: SIZE0/SIZE1
        count only in the modes that use them); other fields by keyword."""
        m = STRIDE_MODES[mode] if isinstance(mode, str) else mode
        return cls(src_region, dst_region, src, dst, length, size0 if m >= 1 else 1,
                   size1 if m == 2 else 1, **kw)

    @staticmethod
    def unpredictable(snap, lut_alignment: bool = True) -> "str | None":
        """Why the transfer `snap` describes is UNPREDICTABLE (the TRM asserts, in the order
        tlm.ethos_u85.ops.dma checks them; the LUT alignment last, if asked), or None."""
        F = snap.field
        dst_mode = F("NPU_SET_DMA0_DST_REGION", "region_mode")
        if F("NPU_SET_DMA0_SRC_REGION", "region_mode") != isa.dma_region_mode.external:
            return "src_region_mode must be external"
        if F("NPU_SET_DMA0_SRC_REGION", "idx_mode") and F("NPU_SET_DMA0_DST_REGION", "idx_mode"):
            return "gather and scatter both enabled"
        if F("NPU_SET_DMA0_SRC_REGION", "stride_mode") not in STRIDE_MODES.values():
            return f"reserved stride_mode {F('NPU_SET_DMA0_SRC_REGION', 'stride_mode')}"
        if lut_alignment and dst_mode == isa.dma_region_mode.internal and (F("NPU_SET_DMA0_DST", "addr") & 15
                                                         or F("NPU_SET_DMA0_LEN", "addr") & 15):
            return "internal destination needs 16-byte aligned address and length"
        return None

    @classmethod
    def from_snapshot(cls, snap) -> "DmaParams | None":
        """The transfer the NPU_SET state `snap` (`snap.field(command, field)`) describes;
        None when it is UNPREDICTABLE (`unpredictable`: a reserved stride mode or source region
        mode, gather and scatter at once, a LUT destination not 16-byte aligned)."""
        return None if cls.unpredictable(snap) else cls.registers(snap)

    @classmethod
    def registers(cls, snap) -> "DmaParams":
        """The transfer as the registers state it, asserts not applied."""
        F = snap.field
        src_idx = bool(F("NPU_SET_DMA0_SRC_REGION", "idx_mode"))
        dst_idx = bool(F("NPU_SET_DMA0_DST_REGION", "idx_mode"))
        internal = F("NPU_SET_DMA0_DST_REGION", "region_mode") == isa.dma_region_mode.internal
        length = F("NPU_SET_DMA0_LEN", "addr") & ADDR_MASK
        dst = F("NPU_SET_DMA0_DST", "addr") & ADDR_MASK
        stride_mode = F("NPU_SET_DMA0_SRC_REGION", "stride_mode")
        return cls.of(F("NPU_SET_DMA0_SRC_REGION", "region"), F("NPU_SET_DMA0_SRC", "addr") & ADDR_MASK,
                      F("NPU_SET_DMA0_DST_REGION", "region"), dst, length, stride_mode,
                      F("NPU_SET_DMA0_SIZE0", "size"), F("NPU_SET_DMA0_SIZE1", "size"),
                      src_stride0=s40(F("NPU_SET_DMA0_SRC_STRIDE0", "addr")),
                      src_stride1=s40(F("NPU_SET_DMA0_SRC_STRIDE1", "addr")),
                      dst_stride0=s40(F("NPU_SET_DMA0_DST_STRIDE0", "addr")),
                      dst_stride1=s40(F("NPU_SET_DMA0_DST_STRIDE1", "addr")),
                      src_idx=src_idx, dst_idx=dst_idx, internal=internal,
                      idx_region=F("NPU_SET_DMA0_IDX_REGION", "region"),
                      idx=F("NPU_SET_DMA0_IDX", "addr") & ADDR_MASK,
                      idx_max=F("NPU_SET_DMA0_IDX_MAX", "idx_max"),
                      idx_skip1=s40(F("NPU_SET_DMA0_IDX_SKIP1", "addr")))

    @property
    def lines(self) -> int:
        return self.width * self.height

    def write_box(self, bases) -> "tuple[int, int] | None":
        """[lo, hi) (lo < 2**40, hi unwrapped) bounding every destination byte; None for a
        LUT destination (no AXI write)."""
        if self.internal:
            return None
        xs = max(self.width - 1, self.idx_max if self.dst_idx else 0) * self.dst_stride0
        ys = (self.height - 1) * self.dst_stride1
        lo = (bases[self.dst_region] + self.dst + min(0, xs) + min(0, ys)) & ADDR_MASK
        return lo, lo + abs(xs) + abs(ys) + self.length


class Line(NamedTuple):
    src: "int | None"         # None: the line was skipped (index outside [0, IDX_MAX])
    dst: "int | None"         # None: skipped, or a LUT destination
    length: int
    idx: "int | None"         # address of the line's index (indexed mode)
    lut: "int | None" = None  # a LUT destination: the offset in the LUT RAM


def dma_lines(p: DmaParams, bases, idx_at: "Callable[[int], int | None] | None" = None) -> Iterator[Line]:
    """Every line of the transfer in pseudocode order. `bases[r]` is the base address of
    region r; `idx_at(addr)` the signed 32-bit index at an absolute address (None: unknown,
    the generator stops there). Lines of length 0 move nothing but still consume an index."""
    indexed = p.src_idx or p.dst_idx
    sb, db = bases[p.src_region], bases[p.dst_region]
    ib = bases[p.idx_region] if indexed else 0
    sp, dp, ip = p.src, p.dst, p.idx
    for _y in range(p.height):
        for x in range(p.width):
            si = di = x
            ia = None
            if indexed:
                ia = (ib + ip) & ADDR_MASK
                ip += 4
                v = idx_at(ia) if idx_at is not None else None
                if v is None:
                    yield Line(None, None, 0, ia)
                    return
                if v < 0 or v > p.idx_max:
                    yield Line(None, None, 0, ia)
                    continue
                if p.src_idx:
                    si = v
                else:
                    di = v
            yield Line((sb + sp + si * p.src_stride0) & ADDR_MASK,
                       None if p.internal else (db + dp + di * p.dst_stride0) & ADDR_MASK, p.length, ia,
                       (dp + di * p.dst_stride0) & ADDR_MASK if p.internal else None)
        sp += p.src_stride1
        dp += p.dst_stride1
        if indexed:
            ip += p.idx_skip1


def dma_copy(mem, p: DmaParams, bases) -> None:
    """The transfer on `mem` (`read(addr, n) -> bytes`, `write(addr, data)`), line by line
    (a later line reads what an earlier one wrote, as the pseudocode says)."""
    def idx_at(a: int) -> int:
        return int.from_bytes(mem.read(a, 4), "little", signed=True)
    for ln in dma_lines(p, bases, idx_at):
        if ln.src is not None and ln.dst is not None and ln.length:
            mem.write(ln.dst, mem.read(ln.src, ln.length))


class DictMemory:
    """A byte dict (address -> value, absent = 0) with `read`/`write`, for `dma_copy`."""

    def __init__(self, data: "dict | None" = None):
        self.data = {} if data is None else data

    def read(self, addr: int, n: int) -> bytes:
        return bytes(self.data.get(addr + i, 0) for i in range(n))

    def write(self, addr: int, data) -> None:
        for i, v in enumerate(bytes(data)):
            self.data[addr + i] = v


def dma_start(rf, port, lut=None, policy=None) -> int:
    """NPU_OP_DMA_START on the pseudocode: the literal model's DMA (tlm.ethos_u85.literal), the
    device-op signature of tlm.ethos_u85.ops.dma.dma_start. `DmaParams.unpredictable` and the
    policy's budgets are applied in that op's order and before anything moves (the written
    pages counted from the lines themselves, a scatter's indices peeked through the back
    door); then every line of `dma_lines`: its index read (rd_mem2mem_idx), its source read
    (rd_mem2mem) and its destination write (wr_mem2mem, or the LUT RAM), one transaction
    each. Returns the bytes copied; raises BusFault, Unpredictable or BudgetExceeded."""
    from ..core.errors import BudgetExceeded, Unpredictable
    from .arith import LUT_BYTES
    from .config import Policy
    from .memory import PAGE_BITS, Channel
    pol = policy if policy is not None else Policy()
    why = DmaParams.unpredictable(rf, lut_alignment=False)
    if why is not None:
        raise Unpredictable(f"NPU_OP_DMA_START: {why}")
    p = DmaParams.registers(rf)
    indexed = p.src_idx or p.dst_idx
    lines_max = pol.dma_max_indexed_lines if indexed else pol.dma_max_lines
    if p.length * p.lines > pol.dma_max_bytes or p.lines > lines_max:
        raise BudgetExceeded(f"NPU_OP_DMA_START: {p.length * p.lines} bytes in {p.lines} lines exceeds the "
                             f"model's budget ({pol.dma_max_bytes} bytes, {lines_max} lines)")
    if p.internal and lut is None:
        raise Unpredictable("NPU_OP_DMA_START: no internal memory to write")
    why = DmaParams.unpredictable(rf)
    if why is not None:
        raise Unpredictable(f"NPU_OP_DMA_START: {why}")
    routes = {p.src_region: port.route(p.src_region)}
    if not p.internal:
        routes[p.dst_region] = port.route(p.dst_region)
    if indexed:
        routes[p.idx_region] = port.route(p.idx_region)
    bases = {r: routes[r].base if r in routes else 0 for r in (p.src_region, p.dst_region, p.idx_region)}

    def pages(ln: Line) -> range:
        return range(ln.dst >> PAGE_BITS, ((ln.dst + ln.length - 1) >> PAGE_BITS) + 1)

    def peek(a: int) -> int:
        return int.from_bytes(port.memory.read(a, 4), "little", signed=True)
    written: set = set()
    if not p.internal and p.length:
        for ln in dma_lines(p, bases, peek if indexed else None):
            if ln.dst is not None:
                written.update(pages(ln))
        if len(written) > pol.dma_max_pages:
            raise BudgetExceeded(f"NPU_OP_DMA_START: writes touch {len(written)} memory pages of "
                                 f"{1 << PAGE_BITS} bytes, the model's budget is {pol.dma_max_pages}")
    written.clear()

    def index(a: int) -> int:
        raw = port.read_abs(routes[p.idx_region], a, 4, Channel.rd_mem2mem_idx)
        return int.from_bytes(bytes(raw), "little", signed=True)
    copied = 0
    for ln in dma_lines(p, bases, index if indexed else None):
        if ln.src is None or not ln.length:
            continue
        data = port.read_abs(routes[p.src_region], ln.src, ln.length, Channel.rd_mem2mem)
        if p.internal:
            if ln.lut + ln.length > LUT_BYTES:
                raise Unpredictable("NPU_OP_DMA_START: internal destination outside the 2048-byte LUT RAM")
            lut[ln.lut:ln.lut + ln.length] = data
        else:
            if p.dst_idx:                     # a scatter may overwrite the indices it peeked
                written.update(pages(ln))
                if len(written) > pol.dma_max_pages:
                    raise BudgetExceeded(f"NPU_OP_DMA_START: scatter writes touch more than {pol.dma_max_pages} "
                                         "memory pages (the model's budget)")
            port.write_abs(routes[p.dst_region], ln.dst, data, Channel.wr_mem2mem)
        copied += ln.length
    return copied
