"""Memory and AXI-side model of the NPU's manager ports.

`Memory` is a sparse 40-bit byte store. Its back door (`read`, `write`) is for loading
networks and checking results; the front door (`access`) is what the NPU uses: every
front-door access is an AXI-level `Transaction` (port, channel, address, length,
AxPROT/AxCACHE/AxDOMAIN, response) that is logged, offered to listeners (PMU, bench
replay) and checked against injected faults. A faulting access has no effect.

`DataPort` turns the NPU's (region, offset) view into transactions: the device supplies
a `route(region)` callable that resolves BASEP[region], REGIONCFG -> MEM_ATTR -> AXI port
group, AxCACHE and AxDOMAIN (TRM 3.3.1.13-14, 3.6.3). Port selection inside a group uses
the CFG*HASH xor-reduce of addr[39:6] (TRM 2.3.3).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

ADDR_BITS = 40
ADDR_MASK = (1 << ADDR_BITS) - 1
PAGE_BITS = 16
PAGE_SIZE = 1 << PAGE_BITS


class Channel(enum.IntEnum):
    """TRM pmu_axi_channel: the DMA channel an access belongs to (STATUS.faulting_channel)."""
    rd_cmd = 0
    rd_ifm = 1
    rd_weights = 2
    rd_scale_bias = 3
    rd_mem2mem = 4
    rd_ifm_stream = 5
    rd_mem2mem_idx = 6
    wr_ofm = 8
    wr_mem2mem = 9

    @property
    def is_write(self) -> bool:
        return self >= Channel.wr_ofm


class Resp(enum.IntEnum):
    """AXI xRESP encoding."""
    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


class Interface(enum.IntEnum):
    """TRM axi_port / STATUS.faulting_interface: the port group."""
    sram = 0
    ext = 1


# MEM_ATTR.memtype -> (ARCACHE, AWCACHE), TRM 3.3.1.14 (axi_mem_encoding).
MEMTYPE_AXCACHE = {
    0x0: (0b0000, 0b0000), 0x1: (0b0001, 0b0001), 0x2: (0b0010, 0b0010), 0x3: (0b0011, 0b0011),
    0x4: (0b1010, 0b0110), 0x5: (0b1110, 0b0110), 0x6: (0b1010, 0b1110), 0x7: (0b1110, 0b1110),
    0x8: (0b1011, 0b0111), 0x9: (0b1111, 0b0111), 0xA: (0b1011, 0b1111), 0xB: (0b1111, 0b1111),
}


def axcache(memtype: int, write: bool) -> int:
    """AxCACHE for a MEM_ATTR.memtype value; reserved encodings (0xC-0xF) give 0."""
    rd, wr = MEMTYPE_AXCACHE.get(memtype & 0xF, (0, 0))
    return wr if write else rd


def hash_select(mask: int, addr: int) -> int:
    """One port-select bit: XOR-reduce of (CFG*HASH[39:6] & addr[39:6]) (TRM 2.3.3)."""
    return bin(mask & addr & ADDR_MASK & ~0x3F).count("1") & 1


@dataclass(frozen=True)
class Transaction:
    port: str            # 'SRAM0'..'SRAM3', 'EXT0', 'EXT1'
    channel: Channel
    write: bool
    addr: int
    length: int
    prot: int = 0        # AxPROT[2:0]: [0] privileged, [1] non-secure
    cache: int = 0       # AxCACHE
    domain: int = 0      # AxDOMAIN
    resp: Resp = Resp.OKAY

    @property
    def interface(self) -> Interface:
        return Interface.ext if self.port.startswith("EXT") else Interface.sram


@dataclass(frozen=True)
class Fault:
    lo: int
    hi: int              # exclusive
    resp: Resp
    kind: str            # 'r', 'w' or 'rw'

    def hits(self, addr: int, length: int, write: bool) -> bool:
        return ("w" if write else "r") in self.kind and addr < self.hi and addr + length > self.lo


class BusFault(Exception):
    """An AXI error response seen by the NPU; the device turns it into STATUS.bus_status."""

    def __init__(self, txn: Transaction):
        super().__init__(f"{txn.resp.name} on {txn.channel.name} {txn.port} "
                         f"{'write' if txn.write else 'read'} @0x{txn.addr:010x}+{txn.length}")
        self.txn = txn
        self.channel = txn.channel
        self.interface = txn.interface
        self.resp = txn.resp
        self.addr = txn.addr


class Memory:
    """Sparse byte-addressed 40-bit memory; unwritten bytes read as zero."""

    def __init__(self, log: bool = True):
        self._pages: dict[int, np.ndarray] = {}
        self.faults: list[Fault] = []
        self.log_enabled = log
        self.log: list[Transaction] = []
        self.listeners: list[Callable[[Transaction], None]] = []

    # ---- back door -----------------------------------------------------------------
    @staticmethod
    def _check(addr: int, length: int) -> None:
        if addr < 0 or length < 0 or addr + length > (1 << ADDR_BITS):
            raise ValueError(f"access 0x{addr:x}+{length} is outside the 40-bit address space")

    def _spans(self, addr: int, length: int) -> Iterable[tuple[int, int, int, int]]:
        """(page index, offset in page, offset in buffer, count) for a byte range."""
        done = 0
        while done < length:
            a = addr + done
            page, off = a >> PAGE_BITS, a & (PAGE_SIZE - 1)
            n = min(PAGE_SIZE - off, length - done)
            yield page, off, done, n
            done += n

    def read_array(self, addr: int, length: int) -> np.ndarray:
        self._check(addr, length)
        out = np.zeros(length, np.uint8)
        for page, off, pos, n in self._spans(addr, length):
            p = self._pages.get(page)
            if p is not None:
                out[pos:pos + n] = p[off:off + n]
        return out

    def read(self, addr: int, length: int) -> bytes:
        return self.read_array(addr, length).tobytes()

    def write(self, addr: int, data) -> None:
        buf = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) \
            else data.reshape(-1).view(np.uint8)
        self._check(addr, buf.size)
        for page, off, pos, n in self._spans(addr, buf.size):
            p = self._pages.get(page)
            if p is None:
                p = self._pages[page] = np.zeros(PAGE_SIZE, np.uint8)
            p[off:off + n] = buf[pos:pos + n]

    write_array = write

    def read_u32(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 4), "little")

    def write_u32(self, addr: int, value: int) -> None:
        self.write(addr, (value & 0xFFFFFFFF).to_bytes(4, "little"))

    # ---- fault injection -------------------------------------------------------------
    def inject_fault(self, lo: int, hi: int, resp: Resp | str = Resp.SLVERR, kind: str = "rw") -> Fault:
        """Make accesses overlapping [lo, hi) answer `resp` (SLVERR or DECERR)."""
        resp = Resp[resp] if isinstance(resp, str) else Resp(resp)
        if resp not in (Resp.SLVERR, Resp.DECERR):
            raise ValueError("an injected fault answers SLVERR or DECERR")
        if kind not in ("r", "w", "rw"):
            raise ValueError("fault kind is 'r', 'w' or 'rw'")
        f = Fault(lo, hi, resp, kind)
        self.faults.append(f)
        return f

    def clear_faults(self) -> None:
        self.faults.clear()

    # ---- front door ------------------------------------------------------------------
    def access(self, txn: Transaction, data=None):
        """Perform one transaction. Returns (logged transaction, data or None)."""
        for f in self.faults:
            if f.hits(txn.addr, txn.length, txn.write):
                txn = Transaction(txn.port, txn.channel, txn.write, txn.addr, txn.length,
                                  txn.prot, txn.cache, txn.domain, f.resp)
                break
        if txn.addr + txn.length > (1 << ADDR_BITS):
            txn = Transaction(txn.port, txn.channel, txn.write, txn.addr, txn.length,
                              txn.prot, txn.cache, txn.domain, Resp.DECERR)
        if self.log_enabled:
            self.log.append(txn)
        for cb in self.listeners:
            cb(txn)
        if txn.resp != Resp.OKAY:
            return txn, None
        if txn.write:
            self.write(txn.addr, data)
            return txn, None
        return txn, self.read_array(txn.addr, txn.length)


@dataclass(frozen=True)
class RegionRoute:
    """Where a region's accesses go: resolved from BASEP, REGIONCFG, MEM_ATTR and PROT."""
    base: int
    interface: Interface
    memtype: int
    domain: int
    prot: int
    hash0: int = 0       # CFGSRAMHASH0 or CFGEXTHASH0 for this interface
    hash1: int = 0       # CFGSRAMHASH1 (SRAM only)
    nports: int = 1      # ports present in this group

    def port_of(self, addr: int) -> str:
        sel = 0
        if self.nports > 1:
            sel = hash_select(self.hash0, addr)
            if self.nports > 2:
                sel |= hash_select(self.hash1, addr) << 1
        return ("EXT" if self.interface == Interface.ext else "SRAM") + str(sel)

    def granule(self) -> int:
        """Largest power-of-two span that cannot change port (64 B minimum)."""
        mask = self.hash0 | (self.hash1 if self.nports > 2 else 0)
        if self.nports == 1 or not mask & ADDR_MASK & ~0x3F:
            return 1 << ADDR_BITS
        return (mask & -mask) if mask & 0x3F == 0 else 64


class DataPort:
    """The NPU's data-side view: region-relative accesses become logged transactions.

    `route(region) -> RegionRoute`; region -1 is not routed here (internal LUT RAM).
    Reads and writes raise `BusFault` on an error response; a multi-port group splits an
    access where the striping hash changes port.
    """

    def __init__(self, memory: Memory, route: Callable[[int], RegionRoute]):
        self.memory = memory
        self.route = route

    def address(self, region: int, offset: int) -> int:
        return (self.route(region).base + offset) & ADDR_MASK

    def _pieces(self, r: RegionRoute, addr: int, length: int):
        g = r.granule()
        pos = 0
        while pos < length:
            a = (addr + pos) & ADDR_MASK
            n = min(length - pos, g - (a % g), (1 << ADDR_BITS) - a)
            yield a, pos, n
            pos += n

    def _txn(self, r: RegionRoute, channel: Channel, write: bool, addr: int, n: int) -> Transaction:
        return Transaction(r.port_of(addr), channel, write, addr, n, r.prot,
                           axcache(r.memtype, write), r.domain)

    def read_abs(self, r: RegionRoute, addr: int, length: int, channel: Channel) -> np.ndarray:
        out = np.empty(length, np.uint8)
        for a, pos, n in self._pieces(r, addr, length):
            txn, data = self.memory.access(self._txn(r, channel, False, a, n))
            if txn.resp != Resp.OKAY:
                raise BusFault(txn)
            out[pos:pos + n] = data
        return out

    def write_abs(self, r: RegionRoute, addr: int, data, channel: Channel) -> None:
        buf = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) \
            else data.reshape(-1).view(np.uint8)
        for a, pos, n in self._pieces(r, addr, buf.size):
            txn, _ = self.memory.access(self._txn(r, channel, True, a, n), buf[pos:pos + n])
            if txn.resp != Resp.OKAY:
                raise BusFault(txn)

    def read(self, region: int, offset: int, length: int, channel: Channel) -> np.ndarray:
        r = self.route(region)
        return self.read_abs(r, (r.base + offset) & ADDR_MASK, length, channel)

    def write(self, region: int, offset: int, data, channel: Channel) -> None:
        r = self.route(region)
        self.write_abs(r, (r.base + offset) & ADDR_MASK, data, channel)
